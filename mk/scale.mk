##@ Scale (issue 13)
# `make bench-scale N=1000` measures the controller at scale through the
# built binary on the e2e environment and prints the figures of
# docs/performance.md. BENCH_CONTROLLER measures another build (a binary
# of main, to compare); RESYNC_SCALE is the controller's resync period (its
# default, 10m; the run watches two periods after all objects are Ready);
# BENCH_FLAGS adds flags of test/benchscale (-restart: the first period
# after a restart too; -cpuprofile FILE: a CPU profile of the controller
# over the first resync, through its --pprof-bind-address).
N                ?= 1000
RESYNC_SCALE     ?= 10m
BENCH_DIR        ?= $(CURDIR)/.bench
BENCH_CONTROLLER ?= $(BENCH_DIR)/ohmlab-controller
BENCH_FLAGS      ?=
.PHONY: bench-scale
bench-scale: tools ## Measure N objects (default 1000) through the built controller (RESYNC_SCALE=10m).
	@mkdir -p $(BENCH_DIR)
	@if [ "$(BENCH_CONTROLLER)" = "$(BENCH_DIR)/ohmlab-controller" ]; then go build -ldflags "$(LDFLAGS)" -o $(BENCH_CONTROLLER) ./cmd/ohmlab-controller; fi
	go run ./test/benchscale -n $(N) -resync $(RESYNC_SCALE) -controller $(BENCH_CONTROLLER) $(BENCH_FLAGS)
