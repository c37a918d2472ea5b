package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/e2e"
)

// The tenant run (-tenants): N objects with a bcrypt hash, first in N/10
// platform namespaces of 10, then in N/10 tenant namespaces of 10 (each
// logging in as its own ServiceAccount), each case on a fresh controller
// process; then, on a third, one tenant creates N objects while a
// platform object and another tenant's object are created every
// probeEvery, and the time from each probe's creation to its Ready is
// recorded.
const (
	noisyTenant = "t-noisy"
	quietTenant = "t-quiet"
	probeEvery  = 500 * time.Millisecond
)

// tenantCase is the figures of one case of the tenant run.
type tenantCase struct {
	name   string
	ready  time.Duration // from the first creation to the last object Ready
	hwm    uint64        // the controller's RSS high-water mark
	logins float64       // ohmlab_backend_requests_total{operation="login"}
}

type tenantReport struct {
	n              int
	cases          []tenantCase
	platformProbes []time.Duration
	tenantProbes   []time.Duration
}

func groups(n int) int { return max(n/10, 1) }

func platformNS(i int) string { return fmt.Sprintf("p-%03d", i) }
func tenantNS(i int) string   { return fmt.Sprintf("t-%03d", i) }

// runTenants is the tenant run.
func runTenants(ctx context.Context, cfg config, out io.Writer) error {
	dir, logFile, err := runLog(cfg, "ohmlab-bench-tenants-")
	if err != nil {
		return err
	}
	defer logFile.Close()
	var platforms []any
	var tenants []string
	for i := range groups(cfg.n) {
		platforms, tenants = append(platforms, platformNS(i)), append(tenants, tenantNS(i))
	}
	platforms = append(platforms, e2e.SeedNamespace)
	tenants = append(tenants, noisyTenant, quietTenant)
	env, err := e2e.Start(ctx, e2e.Options{Dir: dir, Resync: cfg.resync, ControllerBin: cfg.controller, Log: os.Stderr, ControllerLog: logFile,
		Values: mergeValues(map[string]any{"targets": map[string]any{"vault": map[string]any{
			"namespaces": platforms, "leaderElection": map[string]any{"leaseDuration": "15s"},
			"tenants": map[string]any{"enabled": true, "namespaces": toAny(tenants), "maxObjectsPerNamespace": cfg.n + 10},
		}}}, cfg.values)})
	if err != nil {
		return err
	}
	defer env.Stop()
	if err := env.SetUpTenants(ctx, tenants); err != nil {
		return err
	}
	w, err := startReadyWatch(ctx, env)
	if err != nil {
		return err
	}
	r := tenantReport{n: cfg.n}
	for _, c := range []struct {
		name string
		ns   func(int) string
		path func(ns string, j int) string
	}{
		{"platform namespaces", platformNS, func(ns string, j int) string { return fmt.Sprintf("ohmlab/platforms/%s/bench/o%d", ns, j) }},
		{"tenant namespaces", tenantNS, func(ns string, j int) string { return fmt.Sprintf("ohmlab/tenants/%s/o%d", ns, j) }},
	} {
		tc, err := groupCase(ctx, env, w, cfg, c.name, c.ns, c.path)
		if err != nil {
			return err
		}
		r.cases = append(r.cases, tc)
	}
	if err := r.noisy(ctx, env, w, cfg); err != nil {
		return err
	}
	r.print(out)
	return nil
}

// hashSeed is an object of the tenant run: a password and its bcrypt hash.
func hashSeed(ns, name, path string) *ohmlabv1alpha1.VaultSeed {
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ohmlabv1alpha1.VaultSeedSpec{Path: path,
			Data: &apiextensionsv1.JSON{Raw: []byte(`{"password":"<random:24>","hash":"<bcrypt:password>"}`)}},
	}
}

// groupCase creates N objects in groups(N) namespaces of 10 on a fresh
// controller, waits until all are Ready, takes the figures, then stops the
// controller and deletes the objects (their paths stay).
func groupCase(ctx context.Context, env *e2e.Env, w *readyWatch, cfg config, name string, ns func(int) string, path func(string, int) string) (tenantCase, error) {
	c, err := env.StartController(ctx)
	if err != nil {
		return tenantCase{}, err
	}
	defer c.Stop()
	var objs []*ohmlabv1alpha1.VaultSeed
	for i := range groups(cfg.n) {
		for j := range 10 {
			objs = append(objs, hashSeed(ns(i), fmt.Sprintf("o%d", j), path(ns(i), j)))
		}
	}
	fmt.Fprintf(os.Stderr, "--> %s %s: creating %d objects\n", time.Now().Format("15:04:05"), name, len(objs))
	start := time.Now()
	if err := createObjects(ctx, env.CP.Client, objs, cfg.workers); err != nil {
		return tenantCase{}, err
	}
	if err := w.waitAll(ctx, objs); err != nil {
		return tenantCase{}, err
	}
	tc := tenantCase{name: name, ready: w.last(objs).Sub(start)}
	if tc.hwm, _, err = memoryNow(c.PID()); err != nil {
		return tc, err
	}
	if tc.logins, err = logins(ctx, c); err != nil {
		return tc, err
	}
	c.Stop()
	for i := range groups(cfg.n) {
		if err := env.CP.Client.DeleteAllOf(ctx, &ohmlabv1alpha1.VaultSeed{}, client.InNamespace(ns(i))); err != nil {
			return tc, err
		}
	}
	return tc, nil
}

// logins is the controller's Vault logins so far, its own and the
// tenants'.
func logins(ctx context.Context, c *e2e.Controller) (float64, error) {
	families, err := scrape(ctx, "http://"+c.MetricsAddr+"/metrics")
	if err != nil {
		return 0, err
	}
	n := 0.0
	for _, m := range families["ohmlab_backend_requests_total"].GetMetric() {
		if label(m, "operation") == "login" && label(m, "code") == "ok" {
			n += m.GetCounter().GetValue()
		}
	}
	return n, nil
}

func createObjects(ctx context.Context, cl client.Client, objs []*ohmlabv1alpha1.VaultSeed, workers int) error {
	next := make(chan *ohmlabv1alpha1.VaultSeed)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Go(func() {
			for o := range next {
				if err := cl.Create(ctx, o); err != nil {
					mu.Lock()
					first = cmp.Or(first, fmt.Errorf("creating %s/%s: %w", o.Namespace, o.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		next <- o
	}
	close(next)
	wg.Wait()
	return first
}

// noisy creates N objects in one tenant namespace on a fresh controller
// and, until they are all Ready, a probe in a platform namespace and one in
// another tenant namespace every probeEvery, each timed from its
// creation to its Ready.
func (r *tenantReport) noisy(ctx context.Context, env *e2e.Env, w *readyWatch, cfg config) error {
	c, err := env.StartController(ctx)
	if err != nil {
		return err
	}
	defer c.Stop()
	var objs []*ohmlabv1alpha1.VaultSeed
	for i := range cfg.n {
		objs = append(objs, hashSeed(noisyTenant, fmt.Sprintf("o%d", i), fmt.Sprintf("ohmlab/tenants/%s/o%d", noisyTenant, i)))
	}
	fmt.Fprintf(os.Stderr, "--> %s one tenant creates %d objects, probes every %s\n", time.Now().Format("15:04:05"), len(objs), probeEvery)
	created := make(chan error, 1)
	go func() { created <- createObjects(ctx, env.CP.Client, objs, cfg.workers) }()
	var probes []*ohmlabv1alpha1.VaultSeed
	at := map[string]time.Time{}
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for k := 0; !w.allReady(objs); k++ {
		for _, p := range []*ohmlabv1alpha1.VaultSeed{
			hashSeed(e2e.SeedNamespace, fmt.Sprintf("probe-%d", k), fmt.Sprintf("ohmlab/platforms/probe/core/p%d", k)),
			hashSeed(quietTenant, fmt.Sprintf("probe-%d", k), fmt.Sprintf("ohmlab/tenants/%s/p%d", quietTenant, k)),
		} {
			if err := env.CP.Client.Create(ctx, p); err != nil {
				return err
			}
			at[p.Namespace+"/"+p.Name] = time.Now()
			probes = append(probes, p)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := <-created; err != nil {
		return err
	}
	if err := w.waitAll(ctx, probes); err != nil {
		return err
	}
	for _, p := range probes {
		d := w.readyAt(p).Sub(at[p.Namespace+"/"+p.Name])
		if p.Namespace == e2e.SeedNamespace {
			r.platformProbes = append(r.platformProbes, d)
		} else {
			r.tenantProbes = append(r.tenantProbes, d)
		}
	}
	return nil
}

func (r tenantReport) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%d objects with a bcrypt hash, %d namespaces of 10\tcreation to all Ready\tRSS high-water\tVault logins\n", r.n, groups(r.n))
	for _, c := range r.cases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\n", c.name, secs(c.ready), mib(c.hwm), c.logins)
	}
	if len(r.cases) == 2 && r.cases[0].ready > 0 {
		fmt.Fprintf(tw, "tenant / platform creation time\t%.2fx\t\t\n", r.cases[1].ready.Seconds()/r.cases[0].ready.Seconds())
	}
	fmt.Fprintf(tw, "\nwhile %s creates %d objects: creation to Ready of\t\t\t\n", noisyTenant, r.n)
	fmt.Fprintf(tw, "a platform object (%d)\t%s\t\t\n", len(r.platformProbes), durations(r.platformProbes, "p50", 50, "p99", 99, "max", 100))
	fmt.Fprintf(tw, "another tenant's object (%d)\t%s\t\t\n", len(r.tenantProbes), durations(r.tenantProbes, "p50", 50, "p99", 99, "max", 100))
	_ = tw.Flush()
}

// readyWatch records when each object, in any namespace, was first seen
// Ready.
type readyWatch struct {
	mu      sync.Mutex
	ready   map[string]time.Time
	changed chan struct{}
}

func startReadyWatch(ctx context.Context, env *e2e.Env) (*readyWatch, error) {
	c, err := cache.New(env.CP.Config, cache.Options{Scheme: env.CP.Scheme})
	if err != nil {
		return nil, err
	}
	w := &readyWatch{ready: map[string]time.Time{}, changed: make(chan struct{})}
	inf, err := c.GetInformer(ctx, &ohmlabv1alpha1.VaultSeed{})
	if err != nil {
		return nil, err
	}
	see := func(o any) {
		s, ok := o.(*ohmlabv1alpha1.VaultSeed)
		if !ok || !meta.IsStatusConditionTrue(s.Status.Conditions, ohmlabv1alpha1.ConditionReady) {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		key := s.Namespace + "/" + s.Name
		if _, seen := w.ready[key]; !seen {
			w.ready[key] = time.Now()
			close(w.changed)
			w.changed = make(chan struct{})
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the benchmark's cache did not sync")
	}
	return w, nil
}

func (w *readyWatch) readyAt(o *ohmlabv1alpha1.VaultSeed) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready[o.Namespace+"/"+o.Name]
}

func (w *readyWatch) allReady(objs []*ohmlabv1alpha1.VaultSeed) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range objs {
		if _, ok := w.ready[o.Namespace+"/"+o.Name]; !ok {
			return false
		}
	}
	return true
}

// last is when the last of objs was seen Ready.
func (w *readyWatch) last(objs []*ohmlabv1alpha1.VaultSeed) time.Time {
	var t time.Time
	for _, o := range objs {
		if at := w.readyAt(o); at.After(t) {
			t = at
		}
	}
	return t
}

func (w *readyWatch) waitAll(ctx context.Context, objs []*ohmlabv1alpha1.VaultSeed) error {
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		if w.allReady(objs) {
			return nil
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			w.mu.Lock()
			n := len(w.ready)
			w.mu.Unlock()
			fmt.Fprintf(os.Stderr, "--> %s %d objects Ready so far\n", time.Now().Format("15:04:05"), n)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
