package main

import (
	"log/slog"
	"math"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// memoryLimitRatio is the share of the container's memory limit given to the
// Go runtime as its soft limit; the rest is for memory the Go heap does not
// count (the binary, stacks, the kernel's buffers).
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// memoryLimitRatio of the container's memory limit, read from its cgroup, so
// that near the limit the garbage collector runs more often instead of the
// kernel ending the pod. Prometheus does the same (--auto-gomemlimit). A
// GOMEMLIMIT in the environment wins; AUTOMEMLIMIT=off turns it off, and
// AUTOMEMLIMIT=0.8 sets another ratio. Without a limit (outside a container,
// or a pod without resources.limits.memory) nothing changes. It returns the
// limit in bytes, math.MaxInt64 for none.
func setMemoryLimit(log logr.Logger) int64 {
	limit, err := memlimit.Set(
		memlimit.WithRatio(memoryLimitRatio),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(slog.New(logr.ToSlogHandler(log.V(1)))),
	)
	switch {
	case err != nil:
		log.Error(err, "reading the container's memory limit; the Go memory limit stays as it was")
	case limit == math.MaxInt64:
		log.Info("no container memory limit: the Go runtime has no memory limit")
	default:
		log.Info("Go memory limit set", "GOMEMLIMIT", limit, "ratio", memoryLimitRatio)
	}
	return limit
}
