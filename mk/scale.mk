##@ Scale (issue 13)
# `make bench-scale N=1000` measures the controller at scale through the
# built binary on the e2e environment and prints the figures of
# docs/maintainers/performance.md. BENCH_CONTROLLER is a baseline build (a binary of an
# older commit) measured in the same run after this one, on fresh servers,
# both columns printed; RESYNC_SCALE is the controller's resync period (its
# default, 10m; the run watches two periods after all objects are Ready);
# BENCH_FLAGS adds flags of test/benchscale (-workload random: one
# <random:24> key per object, no bcrypt; -creation-only: stop once all are
# Ready; -restart: the first period after a restart too;
# -cpuprofile-creation PREFIX, -cpuprofile FILE: CPU profiles of creation
# (the controller's, through its --pprof-bind-address, and kube-apiserver's,
# through its /debug/pprof) and of the first resync; -admissions 0:
# creation of the N alone, without the admission probes; -tenants: the
# tenant figures instead, N objects in platform then in tenant namespaces of
# 10, then one tenant's N objects beside probes of a platform namespace and
# of another tenant).
N                ?= 1000
RESYNC_SCALE     ?= 10m
BENCH_DIR        ?= $(CURDIR)/.bench
BENCH_CONTROLLER ?=
BENCH_FLAGS      ?=
# The baseline's own defaults where this build's chart changed them (issue 25: a build before it).
BENCH_BASELINE_VALUES ?= {targets: {vault: {concurrency: 4, backend: {qps: 100, burst: 200}}}}
.PHONY: bench-scale
bench-scale: tools ## Measure N objects (default 1000) through the built controller (RESYNC_SCALE=10m; BENCH_CONTROLLER=old binary: both).
	@mkdir -p $(BENCH_DIR)
	go build -ldflags "$(LDFLAGS)" -o $(BENCH_DIR)/ohmlab-controller ./cmd/ohmlab-controller
	go run ./test/benchscale -n $(N) -resync $(RESYNC_SCALE) -controller $(BENCH_DIR)/ohmlab-controller $(if $(BENCH_CONTROLLER),-baseline $(BENCH_CONTROLLER) -baseline-values '$(BENCH_BASELINE_VALUES)') $(BENCH_FLAGS)
