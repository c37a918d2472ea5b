package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/crypto/bcrypt"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/e2e"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// The workloads of -workload (issue 25).
const (
	// workloadBcrypt: each object a <random:24> password and its
	// <bcrypt:> hash, every second one also copying the previous one's
	// password (<ref:>): creation is bounded by bcrypt.
	workloadBcrypt = "bcrypt"
	// workloadRandom: each object one <random:24> key, no hash and no
	// reference: creation is bounded by the requests it takes.
	workloadRandom = "random"
)

// benchSeed returns benchmark object i of the workload.
func benchSeed(workload string, i int) *ohmlabv1alpha1.VaultSeed {
	name, path := fmt.Sprintf("bench-%05d", i), benchPath(i)
	if workload == workloadRandom {
		raw, _ := json.Marshal(map[string]any{"password": "<random:24>"})
		return &ohmlabv1alpha1.VaultSeed{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2e.SeedNamespace},
			Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: raw}},
		}
	}
	ref := ""
	if i%2 == 1 {
		ref = benchPath(i - 1)
	}
	return seed(name, path, ref)
}

// floors are the bcrypt floors of the N objects' hashes, measured in the
// run: parallel, on GOMAXPROCS goroutines (the machine's limit: the
// controller runs one bcrypt per core), and sequential, one after another
// (one core's limit, the figure of issue 13). Each is timed over timed
// hashes and scaled to n.
type floors struct {
	parallel, sequential time.Duration
	// parallelCPU is the CPU-seconds the parallel floor's hashes took.
	parallelCPU float64
	// parallelAgain and parallelAgainCPU are the parallel floor timed
	// again at the end of the run: the machine's speed drifts by a few
	// percent within a run, so creation is compared with the mean of the
	// two.
	parallelAgain    time.Duration
	parallelAgainCPU float64
	procs            int
	n, timed         int
}

// parallelMean is the mean of the parallel floor's two timings, and of
// their CPU-seconds.
func (f floors) parallelMean() (time.Duration, float64) {
	return (f.parallel + f.parallelAgain) / 2, (f.parallelCPU + f.parallelAgainCPU) / 2
}

// bcryptFloors measures both floors over timed hashes and scales them to
// n.
func bcryptFloors(n, timed int, progress func(string, ...any)) (floors, error) {
	f := floors{procs: runtime.GOMAXPROCS(0), n: n, timed: timed}
	progress("bcrypt floor, parallel: %d hashes at the default cost (%d) on %d goroutines", timed, bcrypt.DefaultCost, f.procs)
	var err error
	if f.parallel, f.parallelCPU, err = f.hashes(f.procs); err != nil {
		return f, err
	}
	progress("bcrypt floor, sequential: %d hashes, one after another", timed)
	if f.sequential, _, err = f.hashes(1); err != nil {
		return f, err
	}
	progress("bcrypt floors: parallel %s, sequential %s", f.parallel.Round(10*time.Millisecond), f.sequential.Round(10*time.Millisecond))
	return f, nil
}

// timeAgain times the parallel floor again.
func (f *floors) timeAgain(progress func(string, ...any)) error {
	progress("bcrypt floor, parallel, again: %d hashes on %d goroutines", f.timed, f.procs)
	var err error
	f.parallelAgain, f.parallelAgainCPU, err = f.hashes(f.procs)
	return err
}

// hashes hashes f.timed random 24-character passwords at the default cost
// on workers goroutines and returns the time and the CPU-seconds it took,
// scaled to f.n.
func (f floors) hashes(workers int) (time.Duration, float64, error) {
	next := make(chan struct{}, f.timed)
	for range f.timed {
		next <- struct{}{}
	}
	close(next)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	cpu0, err := cpuSeconds(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range next {
				if _, err := bcrypt.GenerateFromPassword([]byte(rand.Text()[:24]), bcrypt.DefaultCost); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	cpu1, err := cpuSeconds(os.Getpid())
	k := float64(f.n) / float64(f.timed)
	return time.Duration(float64(took) * k), (cpu1 - cpu0) * k, err
}

// cpuSeconds is process pid's CPU-seconds (user + system).
func cpuSeconds(pid int) (float64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.CPUTime(), nil
}

// pathRequests are the KV v2 HTTP requests the metering proxy saw, by
// kind: what a path costs Vault, whatever the controller's own metrics
// call an operation (a build's mark may be one request or two).
type pathRequests map[string]int

// requestKind names a request: "data read", "version read", "metadata
// read", "metadata PATCH", "metadata POST", "data write", or the method and
// kind.
func requestKind(r harness.KVRequest) string {
	switch {
	case r.Kind == harness.KVData && r.Method == http.MethodGet && r.Version > 0:
		return "version read"
	case r.Kind == harness.KVData && r.Method == http.MethodGet:
		return "data read"
	case r.Kind == harness.KVData && r.Write():
		return "data write"
	case r.Kind == harness.KVMetadata && r.Method == http.MethodGet:
		return "metadata read"
	case r.Kind == harness.KVMetadata && r.Method == http.MethodPatch:
		return "metadata PATCH"
	case r.Kind == harness.KVMetadata && r.Write():
		return "metadata POST"
	}
	return r.Method + " " + string(r.Kind)
}

// countRequests counts the requests of seen from index from on, and the
// paths they wrote data to: the new paths of creation.
func countRequests(seen []harness.KVRequest, from int) (pathRequests, int) {
	c := pathRequests{}
	written := map[string]bool{}
	for _, r := range seen[from:] {
		c[requestKind(r)]++
		if r.Kind == harness.KVData && r.Write() {
			written[r.Path] = true
		}
	}
	return c, max(len(written), 1)
}

// perPath formats the counts divided by paths, the usual kinds first.
func (c pathRequests) perPath(paths int) string {
	order := []string{"data read", "version read", "metadata read", "metadata PATCH", "metadata POST", "data write"}
	var rest []string
	for k := range c {
		if !slices.Contains(order, k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	total := 0
	var parts []string
	for _, k := range append(order, rest...) {
		total += c[k]
		parts = append(parts, fmt.Sprintf("%.2f %ss", float64(c[k])/float64(paths), k))
	}
	return fmt.Sprintf("%.2f in all: %s (%d requests, %d new paths)", float64(total)/float64(paths), strings.Join(parts, ", "), total, paths)
}

// opsPerPath lists the controller's operations divided by paths.
func opsPerPath(m map[string]float64, paths int) string {
	names := make([]string, 0, len(m))
	for op, v := range m {
		if v > 0 {
			names = append(names, op)
		}
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, op := range names {
		parts = append(parts, fmt.Sprintf("%.2f %ss", m[op]/float64(paths), op))
	}
	if len(parts) == 0 {
		return "0 requests"
	}
	return strings.Join(parts, ", ")
}

// processSeconds are CPU-seconds (user + system) by process name.
type processSeconds map[string]float64

// processCPU returns the CPU-seconds of this process ("benchscale"), of the
// controller (pid, "controller") and of each other descendant
// (kube-apiserver, etcd, Vault) by command name, so that the cost of
// creation can be put down to the servers that share the machine.
func processCPU(controller int) (processSeconds, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, err
	}
	parent := map[int]int{}
	stats := map[int]procfs.ProcStat{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // gone meanwhile
		}
		parent[p.PID], stats[p.PID] = st.PPID, st
	}
	self := os.Getpid()
	out := processSeconds{}
	for pid, st := range stats {
		for a := pid; a > 1; a = parent[a] {
			if a == self {
				name := st.Comm
				switch pid {
				case self:
					name = "benchscale"
				case controller:
					name = "controller"
				}
				out[name] += st.CPUTime()
				break
			}
		}
	}
	return out, nil
}

// sub is the CPU-seconds spent since before.
func (p processSeconds) sub(before processSeconds) processSeconds {
	d := processSeconds{}
	for name, v := range p {
		d[name] = v - before[name]
	}
	return d
}

// total is the sum over the processes.
func (p processSeconds) total() float64 {
	t := 0.0
	for _, v := range p {
		t += v
	}
	return t
}

// String is the total, then each process of at least 0.05 CPU-s, the
// largest first.
func (p processSeconds) String() string {
	names := slices.Collect(maps.Keys(p))
	sort.Slice(names, func(i, j int) bool { return p[names[i]] > p[names[j]] })
	parts := []string{fmt.Sprintf("%.1f in all", p.total())}
	for _, name := range names {
		if p[name] >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, p[name]))
		}
	}
	return strings.Join(parts, ", ")
}

// writeRequestsByPath writes, for each path, its requests by kind (a line
// "path<TAB>kind=count..."), the paths with the most requests first: where
// a second read comes from.
func writeRequestsByPath(file string, seen []harness.KVRequest) error {
	by := map[string]pathRequests{}
	total := map[string]int{}
	for _, r := range seen {
		if by[r.Path] == nil {
			by[r.Path] = pathRequests{}
		}
		by[r.Path][requestKind(r)]++
		total[r.Path]++
	}
	paths := make([]string, 0, len(by))
	for p := range by {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool {
		if total[paths[i]] != total[paths[j]] {
			return total[paths[i]] > total[paths[j]]
		}
		return paths[i] < paths[j]
	})
	var b strings.Builder
	for _, p := range paths {
		kinds := make([]string, 0, len(by[p]))
		for k, n := range by[p] {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, "%s\t%s\n", p, strings.Join(kinds, " "))
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}
