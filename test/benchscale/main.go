// Command benchscale measures the controller at scale (issue 13) through
// the built binary on the e2e environment (a real kube-apiserver, etcd and
// Vault dev server on loopback, the controller at its default settings). It
// is `make bench-scale N=1000`. It prints, from one run: the bcrypt floors
// (N hashes at the default cost, measured in the same run, on GOMAXPROCS
// goroutines and one after another), the time until all N objects are
// Ready, the Vault requests by operation and per new path (counted by a
// proxy in front of Vault) and the Kubernetes writes it took, the same
// figures with the controller's
// CPU-seconds for the first resync after creation and for a later quiet
// one, the RSS high-water mark, the latency of a dependent created before
// its source, and the admission latency of one more object.
//
// Each object is a <random:24> password and its <bcrypt:> hash; every
// second object also copies the previous object's password with <ref:>
// (-workload random: one <random:24> key, no hash, no reference). With
// -baseline, another build is then measured the same way on fresh servers
// and both columns are printed. Timings depend on the machine; the figures
// to compare are ratios measured side by side in one run, and counts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/e2e"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

type config struct {
	n           int
	resync      time.Duration
	controller  string
	admissions  int
	pairs       int
	workers     int
	logDir      string
	restart     bool
	cpuProfile  string
	heapProfile string
	// scrapeInterval is how often /metrics is scraped during the run.
	scrapeInterval time.Duration
	floorMax       int
	// workload is workloadBcrypt or workloadRandom.
	workload string
	// baseline is another build, measured after this one on fresh servers.
	baseline string
	// creationOnly stops the run once all N objects are Ready.
	creationOnly bool
	// creationProfile is the prefix of CPU profiles from creation to Ready.
	creationProfile string
	// baselineValues are chart values (YAML) of the baseline's run: its
	// build's defaults where today's chart changed them.
	baselineValues string
	// thisValues are chart values (YAML) of this build's run (-values).
	thisValues string
	// values are the chart values of this run, over the benchmark's own.
	values map[string]any
	// tenants runs the tenant figures (tenants.go) instead.
	tenants bool
}

// check refuses flags the run could not honour, before anything starts:
// a profile that cannot be written is otherwise found only at its end.
func (c config) check() error {
	switch {
	case c.controller == "":
		return errors.New("-controller is required")
	case c.n < 2:
		return fmt.Errorf("-n %d: at least 2", c.n)
	case c.workload != workloadBcrypt && c.workload != workloadRandom:
		return fmt.Errorf("-workload %q: %s or %s", c.workload, workloadBcrypt, workloadRandom)
	case c.workload == workloadBcrypt && c.floorMax < runtime.GOMAXPROCS(0):
		return fmt.Errorf("-floor-max %d: at least GOMAXPROCS (%d), or the parallel floor leaves a core idle", c.floorMax, runtime.GOMAXPROCS(0))
	case c.admissions < 0:
		return fmt.Errorf("-admissions %d: cannot be negative", c.admissions)
	case c.pairs < 0:
		return fmt.Errorf("-pairs %d: cannot be negative", c.pairs)
	case c.workers < 1:
		return fmt.Errorf("-workers %d: at least 1", c.workers)
	case c.resync < time.Second:
		return fmt.Errorf("-resync %s: at least 1s, the controller's minimum", c.resync)
	case c.scrapeInterval < 0:
		return fmt.Errorf("-scrape-interval %s: cannot be negative (0: never)", c.scrapeInterval)
	}
	for _, b := range []struct{ flag, path string }{{"-controller", c.controller}, {"-baseline", c.baseline}} {
		if b.path == "" {
			continue
		}
		if st, err := os.Stat(b.path); err != nil {
			return fmt.Errorf("%s: %w", b.flag, err)
		} else if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s %s: not an executable file", b.flag, b.path)
		}
	}
	for _, p := range []struct{ flag, path string }{
		{"-cpuprofile", c.cpuProfile},
		{"-cpuprofile-creation", c.creationProfile},
		{"-heapprofile-prefix", c.heapProfile},
	} {
		if p.path == "" {
			continue // not asked for
		}
		dir := filepath.Dir(p.path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: %w", p.flag, err)
		}
		f, err := os.CreateTemp(dir, ".benchscale-probe-*")
		if err != nil {
			return fmt.Errorf("%s: %w", p.flag, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 1000, "Number of objects.")
	flag.DurationVar(&cfg.resync, "resync", 10*time.Minute, "The controller's resync period (its default is 10m); the benchmark watches two of them after all objects are Ready.")
	flag.StringVar(&cfg.controller, "controller", "", "The ohmlab-controller binary to measure. Required.")
	flag.IntVar(&cfg.admissions, "admissions", 100, "Objects created one at a time for the admission latency, while the N are reconciled (none once all are Ready) and after the quiet periods; 0: none, creation of the N alone.")
	flag.IntVar(&cfg.pairs, "pairs", 5, "Dependents created before their source, for the dependent-after-source latency.")
	flag.IntVar(&cfg.workers, "workers", 16, "Concurrent creations of the N objects.")
	flag.BoolVar(&cfg.restart, "restart", false, "Then restart the controller and watch its first resync period (one period more).")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "Write a CPU profile of the controller over the first resync after creation to this file (go tool pprof); the controller must have --pprof-bind-address.")
	flag.DurationVar(&cfg.scrapeInterval, "scrape-interval", 30*time.Second, "Scrape the controller's /metrics this often, as the chart's PodMonitor (podMonitor.interval) has Prometheus do; 0: never.")
	flag.StringVar(&cfg.heapProfile, "heapprofile-prefix", "", "Write heap profiles of the controller (go tool pprof) when all objects are Ready and at the end of the quiet resync period, to PREFIX-ready.pprof and PREFIX-quiet.pprof.")
	flag.IntVar(&cfg.floorMax, "floor-max", 2000, "At most this many hashes are timed for the bcrypt floor; for a larger N the floor is scaled from them (a hash costs the same each time).")
	flag.StringVar(&cfg.workload, "workload", workloadBcrypt, "The objects: bcrypt (a <random:24> password, its <bcrypt:> hash and, every second object, a <ref:> to the previous one's password) or random (one <random:24> key).")
	flag.StringVar(&cfg.baseline, "baseline", "", "Another ohmlab-controller binary (an older build) measured the same way after this one, on fresh servers; both columns are printed.")
	flag.StringVar(&cfg.baselineValues, "baseline-values", "", "Chart values (YAML) for the baseline's run only, where its build's defaults differ from today's chart, e.g. '{targets: {vault: {concurrency: 4, backend: {qps: 100, burst: 200}}}}' for a build before issue 25.")
	flag.StringVar(&cfg.thisValues, "values", "", "Chart values (YAML) for this build's run, over today's chart, e.g. '{gogc: 30}' to measure another default.")
	flag.BoolVar(&cfg.creationOnly, "creation-only", false, "Stop once all N objects are Ready: creation's figures only.")
	flag.StringVar(&cfg.creationProfile, "cpuprofile-creation", "", "Write CPU profiles of the controller from the creation of the N objects until all are Ready to PREFIX-1.pprof, PREFIX-2.pprof... (10 s each; go tool pprof PREFIX-[0-9]*.pprof merges them), and the kube-apiserver's to PREFIX-apiserver-1.pprof...")
	flag.BoolVar(&cfg.tenants, "tenants", false, "Instead: N objects in N/10 platform namespaces then in N/10 tenant namespaces (creation time, memory, logins), then one tenant creating N objects while a platform object and another tenant's object are created every 500ms (their creation to Ready).")
	flag.StringVar(&cfg.logDir, "dir", "", "Directory for the environment's files and controller.log (default: a new temporary directory, kept).")
	flag.Parse()
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.thisValues != "" {
		if err := yaml.Unmarshal([]byte(cfg.thisValues), &cfg.values); err != nil {
			fmt.Fprintln(os.Stderr, "benchscale: -values:", err)
			os.Exit(2)
		}
	}
	err := func() error {
		if cfg.tenants {
			return runTenants(ctx, cfg, os.Stdout)
		}
		if cfg.baseline != "" {
			return runBoth(ctx, cfg, os.Stdout)
		}
		r, err := run(ctx, cfg)
		if err == nil {
			r.print(os.Stdout)
		}
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) (report, error) {
	r := report{n: cfg.n, resync: cfg.resync, scrapeInterval: cfg.scrapeInterval, probes: cfg.admissions,
		workload: cfg.workload, creationOnly: cfg.creationOnly}
	err := r.measure(ctx, cfg)
	return r, err
}

// runLog is the run's directory (cfg.logDir, or a new one named after
// prefix) and the controller's log file in it.
func runLog(cfg config, prefix string) (string, *os.File, error) {
	dir := cfg.logDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return "", nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	return dir, logFile, err
}

// measure runs the benchmark and fills the report.
func (r *report) measure(ctx context.Context, cfg config) error {
	dir, logFile, err := runLog(cfg, "ohmlab-bench-scale-")
	if err != nil {
		return err
	}
	defer logFile.Close()
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "--> %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}

	load := startLoad(ctx)
	var args []string
	pprofAddr := ""
	if cfg.cpuProfile != "" || cfg.heapProfile != "" || cfg.creationProfile != "" {
		port, err := harness.FreePort()
		if err != nil {
			return err
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	// The controller reaches Vault through a proxy that counts its KV
	// requests (what a new path costs Vault, whatever the build calls an
	// operation); the connections stay open, as they would to Vault.
	vault, err := harness.StartVault()
	if err != nil {
		return err
	}
	proxy, err := harness.StartMeteringProxy(vault.Addr, harness.VaultMount)
	if err != nil {
		vault.Stop()
		return err
	}
	defer proxy.Close()
	// The chart's lease duration (15 s), not the tests' quick 4 s: a
	// loaded machine must not make the controller lose its Lease.
	env, err := e2e.Start(ctx, e2e.Options{Dir: dir, Resync: cfg.resync, ControllerBin: cfg.controller, Log: os.Stderr, ControllerLog: logFile, ControllerArgs: args, Vault: vault,
		Values: mergeValues(map[string]any{"targets": map[string]any{"vault": map[string]any{"leaderElection": map[string]any{"leaseDuration": "15s"}, "backend": map[string]any{"address": proxy.URL}}}}, cfg.values)})
	if err != nil {
		return err
	}
	defer env.Stop()
	ctrl, dropped, err := startAccepted(ctx, env)
	if err != nil {
		return err
	}
	defer ctrl.Stop()
	r.dropped = dropped
	// A controller that exits ends the run.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	exited := func(c *e2e.Controller) (stop func()) {
		done := make(chan struct{})
		go func() {
			select {
			case <-c.Done():
				cancel(fmt.Errorf("the controller exited (see %s)", logFile.Name()))
			case <-done:
			}
		}()
		return func() { close(done) }
	}
	stopWatching := exited(ctrl)
	rss := startRSS(ctx, ctrl.PID(), "creation")
	scraped := startScrapes(ctx, "http://"+ctrl.MetricsAddr+"/metrics", cfg.scrapeInterval)
	progress("controller log: %s", logFile.Name())

	// The benchmark's own client is not rate limited, so that creating
	// the objects is never what is measured.
	rc := rest.CopyConfig(env.CP.Config)
	rc.QPS, rc.Burst = -1, 0
	cl, err := client.New(rc, client.Options{Scheme: env.CP.Scheme})
	if err != nil {
		return err
	}
	w, err := startWatch(ctx, rc, env)
	if err != nil {
		return err
	}

	if cfg.workload == workloadBcrypt {
		if r.floors, err = bcryptFloors(cfg.n, min(cfg.n, cfg.floorMax), progress); err != nil {
			return err
		}
	}

	before, err := sample(ctx, ctrl, w)
	if err != nil {
		return err
	}
	seenBefore := len(proxy.Seen())
	apiBefore, err := apiRequestsNow(ctx, rc)
	if err != nil {
		return err
	}
	eventsBefore := w.eventsByReason()
	cpuBefore, err := processCPU(ctrl.PID())
	if err != nil {
		return err
	}
	profiled := make(chan struct{})
	var profilers []profiler
	if cfg.creationProfile != "" {
		apiserver, err := rest.HTTPClientFor(rc)
		if err != nil {
			return err
		}
		// The controller's and the API server's, whose CPU is the next
		// largest share of creation's.
		profilers = []profiler{
			{"the controller", "http://" + pprofAddr, cfg.creationProfile, http.DefaultClient},
			{"kube-apiserver", strings.TrimSuffix(rc.Host, "/"), cfg.creationProfile + "-apiserver", apiserver},
		}
	}
	profiles := make(chan error, len(profilers))
	for _, p := range profilers {
		go func() {
			n, err := creationProfiles(ctx, p, profiled)
			if err == nil {
				progress("CPU profiles of creation, %s: %s-1.pprof to %s-%d.pprof", p.name, p.prefix, p.prefix, n)
			}
			profiles <- err
		}()
	}
	progress("creating %d objects (%d at a time, workload %s)", cfg.n, cfg.workers, cfg.workload)
	start := time.Now()
	if err := createAll(ctx, cl, cfg.n, cfg.workers, cfg.workload); err != nil {
		return err
	}
	progress("created in %s; waiting for all Ready, creating up to %d more one at a time meanwhile", time.Since(start).Round(time.Second), cfg.admissions)
	// Admission while the controller is busiest, every worker generating
	// hashes, and only then: none starts once all are Ready.
	type probed struct {
		a   admissions
		err error
	}
	busy := make(chan probed, 1)
	allReady := make(chan struct{})
	go func() {
		a, err := admission(ctx, cl, ctrl, "busy-", cfg.admissions, false, allReady)
		busy <- probed{a, err}
	}()
	if err := w.waitReady(ctx, "bench-", cfg.n, progress); err != nil {
		return err
	}
	r.toReady = time.Since(start)
	close(allReady)
	ready, err := sample(ctx, ctrl, w)
	if err != nil {
		return err
	}
	r.creation = ready.sub(before)
	r.pathRequests, r.newPaths = countRequests(proxy.Seen(), seenBefore)
	if err := writeRequestsByPath(filepath.Join(dir, "vault-requests-to-ready.tsv"), proxy.Seen()[seenBefore:]); err != nil {
		return err
	}
	cpuReady, err := processCPU(ctrl.PID())
	if err != nil {
		return err
	}
	r.creationCPU = cpuReady.sub(cpuBefore)
	apiReady, err := apiRequestsNow(ctx, rc)
	if err != nil {
		return err
	}
	r.creationAPI = apiReady.sub(apiBefore)
	r.creationEvents = w.eventsByReason().sub(eventsBefore)
	progress("all Ready after %s", r.toReady.Round(time.Second))
	close(profiled)
	probes := <-busy
	if probes.err != nil {
		return probes.err
	}
	r.admissionBusy = probes.a
	for range profilers {
		if err := <-profiles; err != nil {
			return err
		}
	}
	// The end of the run: the load it saw, and the floor timed again on
	// the machine as it is now, once the controller has hashed what it
	// was given (the admission probes of a full run have hashes).
	end := func() error {
		r.load = load()
		if cfg.workload != workloadBcrypt {
			return nil
		}
		if !cfg.creationOnly {
			if err := w.waitReady(ctx, "adm-", cfg.admissions, nil); err != nil {
				return err
			}
		}
		return r.floors.timeAgain(progress)
	}
	if cfg.creationOnly {
		if r.hwm, r.rss, err = memoryNow(ctrl.PID()); err != nil {
			return err
		}
		r.rssPeaks = rss.stop()
		r.scrapes = scraped.stop()
		return end()
	}
	if cfg.heapProfile != "" {
		if err := heapProfile(ctx, pprofAddr, cfg.heapProfile+"-ready.pprof"); err != nil {
			return err
		}
	}

	progress("dependent after source: %d dependents created before their source", cfg.pairs)
	if r.depLatency, err = dependentAfterSource(ctx, cl, env, w, cfg.pairs); err != nil {
		return err
	}

	// Each object resyncs once per period at a fixed phase: the period
	// after all are Ready holds the first resync of each.
	progress("watching the first resync after creation (%s)", cfg.resync)
	rss.enter("first resync")
	profile := make(chan error, 1)
	if cfg.cpuProfile != "" {
		go func() { profile <- cpuProfile(ctx, pprofAddr, cfg.resync, cfg.cpuProfile) }()
	}
	if r.firstResync, err = window(ctx, ctrl, w, cfg.resync); err != nil {
		return err
	}
	if cfg.cpuProfile != "" {
		if err := <-profile; err != nil {
			return err
		}
		progress("CPU profile of the first resync: %s", cfg.cpuProfile)
	}
	progress("watching a later quiet resync period (%s)", cfg.resync)
	rss.enter("quiet resync")
	if r.quietResync, err = window(ctx, ctrl, w, cfg.resync); err != nil {
		return err
	}
	if r.stale, r.never, r.oldest, err = staleness(ctx, ctrl, "bench-", cfg.n, cfg.resync); err != nil {
		return err
	}

	if cfg.heapProfile != "" {
		if err := heapProfile(ctx, pprofAddr, cfg.heapProfile+"-quiet.pprof"); err != nil {
			return err
		}
		progress("heap profile at the end of the quiet resync: %s-quiet.pprof", cfg.heapProfile)
	}
	progress("admission: %d objects created one at a time", cfg.admissions)
	rss.enter("admission")
	if r.admission, err = admission(ctx, cl, ctrl, "adm-", cfg.admissions, true, nil); err != nil {
		return err
	}
	if r.hwm, r.rss, err = memoryNow(ctrl.PID()); err != nil {
		return err
	}
	r.rssPeaks = rss.stop()
	r.scrapes = scraped.stop()
	if r.goHeap, err = goHeap(ctx, ctrl); err != nil {
		return err
	}
	if cfg.restart {
		// The period after the restart measures a restart, not the
		// creation of objects admitted just before it.
		if err := w.waitReady(ctx, "adm-", cfg.admissions, nil); err != nil {
			return err
		}
		progress("restarting the controller; watching its first resync period (%s)", cfg.resync)
		stopWatching()
		ctrl.Stop()
		if ctrl, _, err = startAccepted(ctx, env); err != nil {
			return err
		}
		defer ctrl.Stop()
		exited(ctrl)
		// Minute by minute: a burst shows as most of the period's CPU
		// in its first minute.
		for left := cfg.resync; left > 0; left -= time.Minute {
			f, err := window(ctx, ctrl, w, min(left, time.Minute))
			if err != nil {
				return err
			}
			r.restartMinutes = append(r.restartMinutes, f)
			r.restartPeriod = r.restartPeriod.add(f)
		}
		r.restarted = true
	}
	return end()
}

// memoryNow is the process's high-water mark and resident set.
func memoryNow(pid int) (hwm, rss uint64, err error) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, err
	}
	status, err := proc.NewStatus()
	if err != nil {
		return 0, 0, err
	}
	return status.VmHWM, status.VmRSS, nil
}

// seed returns benchmark object i: a password, its hash and, for every
// second object, a copy of the previous object's password.
func seed(name, path, ref string) *ohmlabv1alpha1.VaultSeed {
	data := map[string]any{"password": "<random:24>", "hash": "<bcrypt:password>"}
	if ref != "" {
		data["previous"] = "<ref:" + ref + "#password>"
	}
	raw, _ := json.Marshal(data)
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2e.SeedNamespace},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: raw}},
	}
}

// plainSeed is seed without the hash.
func plainSeed(name, path, ref string) *ohmlabv1alpha1.VaultSeed {
	s := seed(name, path, ref)
	s.Spec.Data.Raw, _ = json.Marshal(map[string]any{"password": "<random:24>", "previous": "<ref:" + ref + "#password>"})
	return s
}

func benchPath(i int) string { return fmt.Sprintf("ohmlab/platforms/bench/objects/%05d", i) }

func createAll(ctx context.Context, cl client.Client, n, workers int, workload string) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := cl.Create(ctx, benchSeed(workload, i)); err != nil {
					errs <- fmt.Errorf("creating object %d: %w", i, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// dependentAfterSource creates pairs of objects, the dependent first; once
// every dependent waits (RefPending, retrying with backoff) for a few
// seconds, it creates the sources, and returns, for each pair, the time
// from the source's KV write (Vault's created_time of version 1) to the
// dependent being seen Ready.
func dependentAfterSource(ctx context.Context, cl client.Client, env *e2e.Env, w *watch, pairs int) ([]time.Duration, error) {
	for k := range pairs {
		if err := cl.Create(ctx, seed(fmt.Sprintf("dep-%d", k), fmt.Sprintf("ohmlab/platforms/bench/dep/%d", k), fmt.Sprintf("ohmlab/platforms/bench/src/%d", k))); err != nil {
			return nil, err
		}
	}
	if err := w.waitReason(ctx, "dep-", pairs, ohmlabv1alpha1.ReasonRefPending); err != nil {
		return nil, err
	}
	// Past the first retry (5 s), so that a dependent that is not told
	// about its source would wait for its next backoff (10 s).
	select {
	case <-time.After(6 * time.Second):
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	for k := range pairs {
		if err := cl.Create(ctx, seed(fmt.Sprintf("src-%d", k), fmt.Sprintf("ohmlab/platforms/bench/src/%d", k), "")); err != nil {
			return nil, err
		}
	}
	if err := w.waitReady(ctx, "dep-", pairs, nil); err != nil {
		return nil, err
	}
	var out []time.Duration
	for k := range pairs {
		md, err := env.Vault.Client.KVv2("ohmlab").GetMetadata(ctx, fmt.Sprintf("platforms/bench/src/%d", k))
		if err != nil {
			return nil, err
		}
		v1, ok := md.Versions["1"]
		if !ok {
			return nil, fmt.Errorf("ohmlab/platforms/bench/src/%d has no version 1", k)
		}
		out = append(out, w.readyAt(fmt.Sprintf("dep-%d", k)).Sub(v1.CreatedTime))
	}
	return out, nil
}

// admissions are the latencies of creations through the API server.
type admissions struct {
	// seeds are VaultSeed creations (through the validating webhook),
	// dryRun the same creations dry-run first (the webhook is called, the
	// object is not stored), configMaps ConfigMap creations made between
	// them (no webhook): what the API server and etcd take alone.
	seeds, dryRun, configMaps []time.Duration
	// webhook is what the controller's webhook server measured of its own
	// handling of the same requests.
	webhook string
}

// admission creates n objects one after another through the API server
// (and so through the validating webhook), each after a dry-run of itself
// and a ConfigMap, until until is closed (nil: all n), and returns each
// creation's latency. Objects withHash are like the benchmark's; the
// others have no <bcrypt:>, so that admissions made while the N objects are
// reconciled add no hash to the work measured against the bcrypt floor.
func admission(ctx context.Context, cl client.Client, c *e2e.Controller, prefix string, n int, withHash bool, until <-chan struct{}) (admissions, error) {
	var out admissions
	before, err := webhookLatency(ctx, c)
	if err != nil {
		return out, err
	}
	timed := func(into *[]time.Duration, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return err
		}
		*into = append(*into, time.Since(start))
		return nil
	}
probes:
	for k := range n {
		select {
		case <-until:
			break probes
		default:
		}
		name := fmt.Sprintf("%s%d", prefix, k)
		path := fmt.Sprintf("ohmlab/platforms/bench/%s/%d", strings.TrimSuffix(prefix, "-"), k)
		s := func() *ohmlabv1alpha1.VaultSeed {
			if !withHash {
				return plainSeed(name, path, benchPath(0))
			}
			return seed(name, path, benchPath(0))
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2e.SeedNamespace}, Data: map[string]string{"path": path}}
		if err := timed(&out.dryRun, func() error { return cl.Create(ctx, s(), client.DryRunAll) }); err != nil {
			return out, err
		}
		if err := timed(&out.configMaps, func() error { return cl.Create(ctx, cm) }); err != nil {
			return out, err
		}
		if err := timed(&out.seeds, func() error { return cl.Create(ctx, s()) }); err != nil {
			return out, err
		}
	}
	after, err := webhookLatency(ctx, c)
	if err != nil {
		return out, err
	}
	out.webhook = after.sub(before).String()
	return out, nil
}

// watch follows the VaultSeeds and Events of the seed namespace, as any
// client would: when each object was first seen Ready, and how many writes
// the controller made to Kubernetes (status and finalizer updates of
// VaultSeeds, Events created or updated).
type watch struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	ready   map[string]time.Time
	reason  map[string]string
	readyBy map[string]int // objects seen Ready, by name prefix ("bench-")
	writes  int
	// events counts the Events created, by reason, and their updates
	// (a repeat folded into a series) under seriesUpdate.
	events map[string]int
}

// seriesUpdate is the key of watch.events that counts Event updates.
const seriesUpdate = "(series updates)"

func startWatch(ctx context.Context, rc *rest.Config, env *e2e.Env) (*watch, error) {
	c, err := cache.New(rc, cache.Options{Scheme: env.CP.Scheme, DefaultNamespaces: map[string]cache.Config{e2e.SeedNamespace: {}}})
	if err != nil {
		return nil, err
	}
	w := &watch{changed: make(chan struct{}), ready: map[string]time.Time{}, reason: map[string]string{}, readyBy: map[string]int{}, events: map[string]int{}}
	seeds, err := c.GetInformer(ctx, &ohmlabv1alpha1.VaultSeed{})
	if err != nil {
		return nil, err
	}
	if _, err := seeds.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.seed(o, false) },
		UpdateFunc: func(old, o any) { w.seed(o, changed(old, o)) },
	}); err != nil {
		return nil, err
	}
	events, err := c.GetInformer(ctx, &eventsv1.Event{})
	if err != nil {
		return nil, err
	}
	if _, err := events.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			reason := "(unknown)"
			if e, ok := o.(*eventsv1.Event); ok {
				reason = e.Type + " " + e.Reason
			}
			w.write(reason)
		},
		UpdateFunc: func(old, o any) {
			if changed(old, o) {
				w.write(seriesUpdate)
			}
		},
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the benchmark's cache did not sync")
	}
	return w, nil
}

// changed says whether an update is a write: a relist of the informer also
// calls the update handler, with the same resourceVersion.
func changed(old, o any) bool {
	a, okA := old.(client.Object)
	b, okB := o.(client.Object)
	return okA && okB && a.GetResourceVersion() != b.GetResourceVersion()
}

func (w *watch) seed(o any, update bool) {
	s, ok := o.(*ohmlabv1alpha1.VaultSeed)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if update {
		w.writes++
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, ohmlabv1alpha1.ConditionReady); c != nil {
		w.reason[s.Name] = c.Reason
		if _, seen := w.ready[s.Name]; !seen && c.Status == metav1.ConditionTrue {
			w.ready[s.Name] = now
			if i := strings.IndexByte(s.Name, '-'); i >= 0 {
				w.readyBy[s.Name[:i+1]]++
			}
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *watch) write(event string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	w.events[event]++
}

// eventCounts are Events seen, by "type reason" and seriesUpdate.
type eventCounts map[string]int

func (w *watch) eventsByReason() eventCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(eventCounts(w.events))
}

func (e eventCounts) sub(before eventCounts) eventCounts { return since(e, before) }

func (e eventCounts) String() string {
	keys := slices.Sorted(maps.Keys(e))
	if len(keys) == 0 {
		return "none"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, e[k])
	}
	return strings.Join(parts, ", ")
}

func (w *watch) readyAt(name string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready[name]
}

// until waits until cond, called under the lock on every change, holds.
func (w *watch) until(ctx context.Context, cond func() bool, tick func()) error {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		w.mu.Lock()
		ok, changed := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			if tick != nil {
				tick()
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (w *watch) countLocked(prefix string, match func(name string) bool) int {
	n := 0
	for name := range w.reason {
		if strings.HasPrefix(name, prefix) && match(name) {
			n++
		}
	}
	return n
}

// waitReady waits until n objects named prefix... ("bench-") were seen
// Ready.
func (w *watch) waitReady(ctx context.Context, prefix string, n int, progress func(string, ...any)) error {
	var tick func()
	if progress != nil {
		tick = func() {
			w.mu.Lock()
			got := w.readyBy[prefix]
			w.mu.Unlock()
			progress("%d/%d Ready", got, n)
		}
	}
	return w.until(ctx, func() bool { return w.readyBy[prefix] >= n }, tick)
}

func (w *watch) waitReason(ctx context.Context, prefix string, n int, reason string) error {
	return w.until(ctx, func() bool {
		return w.countLocked(prefix, func(name string) bool { return w.reason[name] == reason }) >= n
	}, nil)
}

// figures are counters of the controller and of the watch at one time.
type figures struct {
	at         time.Time
	cpu        float64            // controller CPU-seconds (user + system)
	requests   map[string]float64 // ohmlab_backend_requests_total by operation
	reconciles float64            // controller_runtime_reconcile_total{controller="vaultseed"}
	busy       float64            // controller_runtime_reconcile_time_seconds' sum: worker-seconds
	kubeWrites int
}

func (f figures) sub(o figures) figures {
	d := figures{at: f.at, cpu: f.cpu - o.cpu, reconciles: f.reconciles - o.reconciles, busy: f.busy - o.busy, kubeWrites: f.kubeWrites - o.kubeWrites, requests: map[string]float64{}}
	for op, v := range f.requests {
		d.requests[op] = v - o.requests[op]
	}
	d.at = time.Time{}.Add(f.at.Sub(o.at))
	return d
}

// add sums two windows' increases.
func (f figures) add(o figures) figures {
	d := figures{at: f.at.Add(o.duration()), cpu: f.cpu + o.cpu, reconciles: f.reconciles + o.reconciles, busy: f.busy + o.busy, kubeWrites: f.kubeWrites + o.kubeWrites, requests: map[string]float64{}}
	for op, v := range f.requests {
		d.requests[op] += v
	}
	for op, v := range o.requests {
		d.requests[op] += v
	}
	return d
}

func (f figures) duration() time.Duration { return f.at.Sub(time.Time{}) }

func sample(ctx context.Context, c *e2e.Controller, w *watch) (figures, error) {
	f := figures{at: time.Now(), requests: map[string]float64{}}
	var err error
	if f.cpu, err = cpuSeconds(c.PID()); err != nil {
		return f, err
	}
	families, err := scrape(ctx, "http://"+c.MetricsAddr+"/metrics")
	if err != nil {
		return f, err
	}
	if mf := families["ohmlab_backend_requests_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			if label(m, "target") == "vault" {
				f.requests[label(m, "operation")] += m.GetCounter().GetValue()
			}
		}
	}
	if mf := families["controller_runtime_reconcile_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			if label(m, "controller") == "vaultseed" {
				f.reconciles += m.GetCounter().GetValue()
			}
		}
	}
	if mf := families["controller_runtime_reconcile_time_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			if label(m, "controller") == "vaultseed" {
				f.busy += m.GetHistogram().GetSampleSum()
			}
		}
	}
	w.mu.Lock()
	f.kubeWrites = w.writes
	w.mu.Unlock()
	return f, nil
}

// window returns the counters' increase over d.
func window(ctx context.Context, c *e2e.Controller, w *watch, d time.Duration) (figures, error) {
	start, err := sample(ctx, c, w)
	if err != nil {
		return figures{}, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return figures{}, context.Cause(ctx)
	}
	end, err := sample(ctx, c, w)
	if err != nil {
		return figures{}, err
	}
	return end.sub(start), nil
}

// defaultWorkers is the controller's default concurrency (the chart's
// targets.vault.concurrency).
const defaultWorkers = 16

type report struct {
	n                        int
	resync                   time.Duration
	workload                 string
	floors                   floors
	toReady                  time.Duration
	creation                 figures
	firstResync, quietResync figures
	depLatency               []time.Duration
	// admission is measured after the quiet periods, admissionBusy while
	// the N objects are being reconciled.
	admission, admissionBusy admissions
	// probes is -admissions: 0, no admission rows.
	probes         int
	hwm, rss       uint64
	rssPeaks       string // the largest resident set of each phase
	goHeap         string // the Go runtime's memory at the end
	scrapes        string // the periodic scrapes of /metrics
	scrapeInterval time.Duration

	stale         int           // objects last reconciled more than a period before the quiet period's end
	never         int           // objects never reconciled
	oldest        time.Duration // the oldest last reconcile at its end
	restarted     bool
	restartPeriod figures
	// restartMinutes are the first period after the restart, minute by
	// minute.
	restartMinutes []figures
	load           loadFigures
	// newPaths are the paths written to Ready (the N and those of the
	// objects admitted meanwhile); pathRequests the KV requests the proxy
	// saw then.
	newPaths     int
	pathRequests pathRequests
	// creationCPU is the CPU-seconds to Ready of each process of the run.
	creationCPU processSeconds
	// creationAPI are the API server's requests to Ready, every client's;
	// creationEvents the Events seen meanwhile.
	creationAPI    apiRequests
	creationEvents eventCounts
	// dropped are the configuration keys this build refused (startAccepted).
	dropped      []string
	creationOnly bool
}

// print writes the report as a table.
func (r report) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	r.write(tw)
	_ = tw.Flush()
}

// write writes the report's rows, "figure\tvalue" each.
func (r report) write(tw io.Writer) {
	fmt.Fprintf(tw, "figure (N=%d, resync %s, workload %s)\tvalue\n", r.n, r.resync, r.workload)
	fmt.Fprintf(tw, "machine load average (1 min), during the run\t%s on %d CPUs\n", r.load, runtime.NumCPU())
	dropped := "none"
	if len(r.dropped) > 0 {
		dropped = strings.Join(r.dropped, ", ")
	}
	fmt.Fprintf(tw, "configuration keys this build refused, dropped\t%s\n", dropped)
	if r.workload == workloadBcrypt {
		scaled := ""
		if r.floors.timed < r.n {
			scaled = fmt.Sprintf(" (%d hashes timed, scaled to %d)", r.floors.timed, r.n)
		}
		mean, meanCPU := r.floors.parallelMean()
		fmt.Fprintf(tw, "bcrypt floor, parallel (%d hashes, cost %d, on GOMAXPROCS=%d goroutines)\t%s, %.1f CPU-s%s\n", r.n, bcrypt.DefaultCost, r.floors.procs, secs(r.floors.parallel), r.floors.parallelCPU, scaled)
		fmt.Fprintf(tw, "  timed again at the end of the run\t%s, %.1f CPU-s; their mean %s, %.1f CPU-s\n", secs(r.floors.parallelAgain), r.floors.parallelAgainCPU, secs(mean), meanCPU)
		fmt.Fprintf(tw, "bcrypt floor, sequential (the same, one after another)\t%s%s\n", secs(r.floors.sequential), scaled)
		fmt.Fprintf(tw, "all Ready after creation\t%s, %.2fx the parallel floor (%.2fx the mean of both timings), %.2fx the sequential floor\n", secs(r.toReady),
			r.toReady.Seconds()/r.floors.parallel.Seconds(), r.toReady.Seconds()/mean.Seconds(), r.toReady.Seconds()/r.floors.sequential.Seconds())
	} else {
		fmt.Fprintf(tw, "all Ready after creation\t%s (no bcrypt in this workload)\n", secs(r.toReady))
	}
	total := 0.0
	for _, v := range r.creation.requests {
		total += v
	}
	fmt.Fprintf(tw, "requests to Ready (the controller's operations)\t%s: %.0f at %.1f/s; %d Kubernetes writes; %.1f CPU-s\n",
		ops(r.creation.requests, 1), total, total/r.toReady.Seconds(), r.creation.kubeWrites, r.creation.cpu)
	fmt.Fprintf(tw, "  per new path, by operation\t%s (%d new paths)\n", opsPerPath(r.creation.requests, r.newPaths), r.newPaths)
	fmt.Fprintf(tw, "Vault KV requests per new path to Ready (HTTP, counted by a proxy)\t%s\n", r.pathRequests.perPath(r.newPaths))
	fmt.Fprintf(tw, "CPU-s to Ready by process (this machine's)\t%s\n", r.creationCPU)
	if r.workload == workloadBcrypt {
		b := r.readyBound()
		mean, _ := r.floors.parallelMean()
		fmt.Fprintf(tw, "  the machine's bound, estimated: the floor's CPU-s (their mean) and every other process's to Ready, over %d CPUs\t%s, %.2fx the mean floor; all Ready at %.2fx that\n",
			r.cpus(), secs(b), b.Seconds()/mean.Seconds(), r.toReady.Seconds()/b.Seconds())
	}
	fmt.Fprintf(tw, "API server writes to Ready, every client's (apiserver_request_total)\t%s\n", r.creationAPI.format(true))
	fmt.Fprintf(tw, "  its other requests\t%s\n", r.creationAPI.format(false))
	fmt.Fprintf(tw, "  Events seen to Ready, by type and reason\t%s\n", r.creationEvents)
	if r.creationOnly {
		fmt.Fprintf(tw, "memory\t%s high-water mark (VmHWM), %s resident at Ready\n", mib(r.hwm), mib(r.rss))
		if r.probes > 0 {
			writeAdmissions(tw, busyAdmissions, r.admissionBusy)
		}
		return
	}
	for _, row := range []struct {
		name string
		f    figures
	}{{"first resync after creation", r.firstResync}, {"later quiet resync", r.quietResync}} {
		// Per resync: the window's figures scaled to one reconcile of
		// each of the N objects.
		scale := 0.0
		if row.f.reconciles > 0 {
			scale = float64(r.n) / row.f.reconciles
		}
		fmt.Fprintf(tw, "%s\t%.0f reconciles in %s; per resync of %d objects: Vault %s (%.2f reads per object), %.0f Kubernetes writes, %.2f CPU-s, %.1f s of reconciling (%.1f%% of the period at %d workers)\n",
			row.name, row.f.reconciles, secs(row.f.duration()), r.n, ops(row.f.requests, scale), row.f.requests["read"]*scale/float64(r.n),
			float64(row.f.kubeWrites)*scale, row.f.cpu*scale, row.f.busy*scale, 100*row.f.busy*scale/defaultWorkers/r.resync.Seconds(), defaultWorkers)
	}
	fmt.Fprintf(tw, "at the end of the quiet period: objects never reconciled; last reconciled more than a period before\t%d; %d of %d (the oldest last reconcile %s before)\n", r.never, r.stale, r.n, secs(r.oldest))
	if r.restarted {
		var minutes []string
		for _, m := range r.restartMinutes {
			minutes = append(minutes, fmt.Sprintf("%.1f", m.cpu))
		}
		fmt.Fprintf(tw, "first resync period after a restart\t%.0f reconciles, Vault %s, %.2f CPU-s; CPU-s minute by minute: %s\n",
			r.restartPeriod.reconciles, ops(r.restartPeriod.requests, 1), r.restartPeriod.cpu, strings.Join(minutes, ", "))
	}
	fmt.Fprintf(tw, "memory\t%s high-water mark (VmHWM), %s resident at the end\n", mib(r.hwm), mib(r.rss))
	fmt.Fprintf(tw, "  resident set, the largest 1-s sample of each phase\t%s\n", r.rssPeaks)
	fmt.Fprintf(tw, "  the Go runtime at the end (go_memstats_*)\t%s\n", r.goHeap)
	fmt.Fprintf(tw, "  /metrics scraped every %s meanwhile, as the PodMonitor does\t%s\n", r.scrapeInterval, r.scrapes)
	fmt.Fprintf(tw, "dependent Ready after its source's write\t%s\n", durations(r.depLatency, "max", 100))
	if r.probes > 0 {
		writeAdmissions(tw, "after the quiet periods", r.admission)
		writeAdmissions(tw, busyAdmissions, r.admissionBusy)
	}
}

const busyAdmissions = "while the N objects are being reconciled, until all are Ready"

// writeAdmissions writes the admission rows of the objects created when.
func writeAdmissions(tw io.Writer, when string, a admissions) {
	fmt.Fprintf(tw, "admission of one more object, %s\t%d objects: %s\n", when, len(a.seeds), durations(a.seeds, "p50", 50, "p90", 90, "p99", 99))
	fmt.Fprintf(tw, "  the same creations dry-run (no storage write)\t%s\n", durations(a.dryRun, "p50", 50, "p90", 90, "p99", 99))
	fmt.Fprintf(tw, "  a ConfigMap created between them (no webhook)\t%s\n", durations(a.configMaps, "p50", 50, "p90", 90, "p99", 99))
	fmt.Fprintf(tw, "  the webhook's own time (controller_runtime_webhook_latency_seconds)\t%s\n", a.webhook)
}

// readyBound estimates the time to Ready of a controller that did nothing
// but the N hashes, at the CPU-seconds the parallel floor's took (the mean
// of its two timings), beside the CPU-seconds the other processes of the
// run (the API server, etcd, Vault, the benchmark) spent to Ready, all
// spread over the machine's CPUs: creation is CPU-bound, and the parallel
// floor alone does not count what the servers take of the same cores. An
// estimate: the hashes' CPU-seconds move by a few percent with the machine.
func (r report) readyBound() time.Duration {
	_, hashes := r.floors.parallelMean()
	others := r.creationCPU.total() - r.creationCPU["controller"]
	return time.Duration((hashes + others) / float64(r.cpus()) * float64(time.Second))
}

// cpus are the CPUs the run's processes share: the floor's goroutines, at
// most one a CPU (GOMAXPROCS follows a cgroup's CPU quota, NumCPU does not).
func (r report) cpus() int {
	return min(r.floors.procs, runtime.NumCPU())
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// ops lists the requests by operation, scaled.
func ops(m map[string]float64, scale float64) string {
	names := make([]string, 0, len(m))
	for op := range m {
		names = append(names, op)
	}
	sort.Strings(names)
	parts := []string{}
	for _, op := range names {
		if v := m[op] * scale; v >= 0.5 {
			parts = append(parts, fmt.Sprintf("%.0f %ss", v, op))
		}
	}
	if len(parts) == 0 {
		return "0 requests"
	}
	return strings.Join(parts, ", ")
}

// durations formats percentiles (nearest rank) of ds: name, percent pairs.
func durations(ds []time.Duration, pairs ...any) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		p := pairs[i+1].(int)
		rank := (p*len(s) + 99) / 100
		parts = append(parts, fmt.Sprintf("%s %s", pairs[i], s[max(rank, 1)-1].Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}
