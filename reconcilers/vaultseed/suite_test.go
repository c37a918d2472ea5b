package vaultseed

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/zapr"
	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// The control plane and Vault are shared by the tests of this package and
// started by the first test that needs them (the planner's tests do not);
// each test runs its own controller on its own namespace and paths.
var (
	cp        *harness.ControlPlane
	vault     *harness.Vault
	serversUp sync.Once
	serversOK bool
)

func TestMain(m *testing.M) {
	code := m.Run()
	if vault != nil {
		vault.Stop()
	}
	if cp != nil {
		_ = cp.Stop()
	}
	os.Exit(code)
}

// startServers starts the shared control plane and Vault once, and fails
// the test when they cannot start.
func startServers(t testing.TB) {
	t.Helper()
	serversUp.Do(func() {
		var err error
		if cp, err = harness.StartControlPlane(harness.Options{}); err != nil {
			t.Log(err)
			return
		}
		if vault, err = harness.StartVault(); err != nil {
			t.Log(err)
			return
		}
		serversOK = true
	})
	if !serversOK {
		t.Fatal("the control plane or Vault did not start (see the first failing test)")
	}
}

// controllerOptions change the controller a test runs.
type controllerOptions struct {
	observeOnly bool
	allowDelete bool
	resync      time.Duration   // default 1 h: tests that want a resync say so
	timeout     time.Duration   // of one reconcile; default 2 min
	kv          vaultkv.KV      // default: a root-token client over the test Vault
	selector    labels.Selector // the shard's; default: every object
	namespace   string          // another fixture's, to run a second process on it; default: a new one
	// client wraps the manager's client the reconciler reads and writes
	// through; default: the manager's.
	client func(client.Client) client.Client
	// cache wraps the manager's cache (its informers' notifications);
	// default: the manager's.
	cache func(cache.Cache) cache.Cache
	// concurrency is the number of workers; default 2.
	concurrency int
	// bcryptCost is the generator's; default 4, the least, for fast tests.
	bcryptCost int
	// more are namespaces the controller watches besides the fixture's.
	more []string
	// tenants, tenantKV and skipScopeCheck are the reconciler's.
	tenants        tenancy.Config
	tenantKV       KVSource
	skipScopeCheck bool
	// clock is the planner's (Reconciler.Clock); default time.Now.
	clock func() time.Time
	// brake is the target's brake on vanished paths; default: its defaults.
	brake Brake
}

// fixture is one test's controller and namespace.
type fixture struct {
	t       testing.TB
	ns      string
	kv      *spyKV
	metrics prometheus.Gatherer
	logs    *syncBuffer
	r       *Reconciler
	// cancel stops the manager without waiting, as a killed process stops.
	cancel context.CancelFunc
	// done is closed once the manager has stopped.
	done chan struct{}
}

// startController creates a namespace for the test and runs a manager with
// the VaultSeed reconciler on it until the test ends.
func startController(t testing.TB, opts controllerOptions) *fixture {
	t.Helper()
	startServers(t)
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	ns := opts.namespace
	if ns == "" {
		ns = uniqueNamespace(t)
	}
	g.Expect(cp.EnsureNamespace(ctx, ns)).To(Succeed())
	if opts.resync == 0 {
		opts.resync = time.Hour
	}
	if opts.kv == nil {
		opts.kv = rootKV(t)
	}
	f := &fixture{t: t, ns: ns, kv: &spyKV{KV: opts.kv}, logs: &syncBuffer{}, cancel: cancel}
	logger := zapr.NewLogger(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(f.logs), zap.DebugLevel)))
	newCache := cache.New
	if opts.cache != nil {
		newCache = func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
			c, err := cache.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return opts.cache(c), nil
		}
	}
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		NewCache:               newCache,
		Scheme:                 cp.Scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: cacheNamespaces(t, ns, opts.more)},
		Controller:             config.Controller{SkipNameValidation: new(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seedindex.IndexFields(ctx, mgr)).To(Succeed())
	c := mgr.GetClient()
	if opts.client != nil {
		c = opts.client(c)
	}
	if opts.bcryptCost == 0 {
		opts.bcryptCost = 4
	}
	gen := templating.Generator{BcryptCost: opts.bcryptCost, Cache: templating.NewHashCache(rand.Reader)}
	if kv, ok := opts.kv.(*vaultkv.Client); ok {
		// As reconcilers/vault.go wires it: the password policies of the
		// Vault the controller writes to, with its identity.
		gen.VaultPassword = kv.GeneratePassword
	}
	r := &Reconciler{
		Client:       c,
		KV:           f.kv,
		Generator:    gen,
		Recorder:     mgr.GetEventRecorder("ohmlab-controller"),
		Metrics:      NewMetrics(prometheus.NewRegistry()),
		Target:       "vault",
		ObserveOnly:  opts.observeOnly,
		AllowDelete:  opts.allowDelete,
		ResyncPeriod: opts.resync,
		Timeout:      opts.timeout,
		Selector:     opts.selector,
		Tenants:      opts.tenants,
		TenantKV:     opts.tenantKV,
		Clock:        opts.clock,
		Brake:        opts.brake,
	}
	r.skipScopeCheck = opts.skipScopeCheck
	g.Expect(r.SetupWithManager(mgr, cmp.Or(opts.concurrency, 2))).To(Succeed())
	f.r, f.metrics = r, r.Metrics
	done := make(chan struct{})
	f.done = done
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

// cacheNamespaces are the namespaces a test's controller watches: its own
// and more, which it creates.
func cacheNamespaces(t testing.TB, ns string, more []string) map[string]cache.Config {
	out := map[string]cache.Config{ns: {}}
	for _, m := range more {
		NewWithT(t).Expect(cp.EnsureNamespace(context.Background(), m)).To(Succeed())
		out[m] = cache.Config{}
	}
	return out
}

// uniqueNamespace is a namespace name unique to the test.
func uniqueNamespace(t testing.TB) string {
	name := strings.ToLower(t.Name())
	name = strings.NewReplacer("/", "-", "_", "-").Replace(name)
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%d", strings.Trim(name, "-"), time.Now().UnixNano()%100000)
}

// path returns a KV path unique to the test, under platforms/+/+/ of the
// ohmlab mount.
func (f *fixture) path(name string) string {
	return "ohmlab/platforms/" + f.ns + "/core/" + name
}

func rootKV(t testing.TB) *vaultkv.Client {
	t.Helper()
	c, err := vaultkv.New(vaultkv.Config{Address: vault.Addr, Timeout: 2 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seed builds a VaultSeed in the fixture's namespace from a JSON data tree.
func (f *fixture) seed(name, path, data string) *ohmlabv1alpha1.VaultSeed {
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: []byte(data)}},
	}
}

func (f *fixture) create(obj *ohmlabv1alpha1.VaultSeed) {
	f.t.Helper()
	NewWithT(f.t).Expect(cp.Client.Create(context.Background(), obj)).To(Succeed())
}

func (f *fixture) get(name string) *ohmlabv1alpha1.VaultSeed {
	f.t.Helper()
	obj := &ohmlabv1alpha1.VaultSeed{}
	NewWithT(f.t).Expect(cp.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, obj)).To(Succeed())
	return obj
}

// update applies change to the object, retrying on conflicts.
func (f *fixture) update(name string, change func(*ohmlabv1alpha1.VaultSeed)) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func() error {
		obj := f.get(name)
		change(obj)
		return cp.Client.Update(context.Background(), obj)
	}).Should(Succeed())
}

// waitReason waits until the object's Ready condition has the reason, for
// its current generation, and returns the object.
func (f *fixture) waitReason(name, reason string, timeout time.Duration) *ohmlabv1alpha1.VaultSeed {
	f.t.Helper()
	var obj *ohmlabv1alpha1.VaultSeed
	NewWithT(f.t).Eventually(func(g Gomega) {
		obj = f.get(name)
		c := apimeta.FindStatusCondition(obj.Status.Conditions, ohmlabv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil(), "no Ready condition yet")
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(obj.Generation))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return obj
}

func (f *fixture) waitReady(name string) *ohmlabv1alpha1.VaultSeed {
	f.t.Helper()
	return f.waitReason(name, ohmlabv1alpha1.ReasonReconciled, 20*time.Second)
}

// kvPath is one path as Vault holds it, read with the root token.
type kvPath struct {
	Data     map[string]any
	Version  int
	Metadata map[string]any
}

func readPath(t testing.TB, path string) kvPath {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	s, err := vault.Client.KVv2(mount).Get(context.Background(), rest)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return kvPath{Data: s.Data, Version: s.VersionMetadata.Version, Metadata: s.CustomMetadata}
}

// handWrite writes a path as a person would, with the root token.
func handWrite(t testing.TB, path string, data map[string]any) int {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	s, err := vault.Client.KVv2(mount).Put(context.Background(), rest, data)
	if err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return s.VersionMetadata.Version
}

// handMark merges custom_metadata into a path as a person would.
func handMark(t testing.TB, path string, md map[string]any) {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	err := vault.Client.KVv2(mount).PatchMetadata(context.Background(), rest, vaultapi.KVMetadataPatchInput{CustomMetadata: md})
	if err != nil {
		t.Fatalf("marking %s: %v", path, err)
	}
}

// events returns the events regarding one object, as "type reason: note".
func (f *fixture) events(name string) []string {
	f.t.Helper()
	var list eventsv1.EventList
	NewWithT(f.t).Expect(cp.Client.List(context.Background(), &list, client.InNamespace(f.ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

// emitted returns everything the controller emitted for the test: logs,
// events, objects with status, and metrics.
func (f *fixture) emitted() string {
	f.t.Helper()
	var b strings.Builder
	b.WriteString(f.logs.String())
	var events eventsv1.EventList
	_ = cp.Client.List(context.Background(), &events, client.InNamespace(f.ns))
	var seeds ohmlabv1alpha1.VaultSeedList
	_ = cp.Client.List(context.Background(), &seeds, client.InNamespace(f.ns))
	for _, v := range []any{events, seeds} {
		j, _ := json.Marshal(v)
		b.Write(j)
	}
	mfs, _ := f.metrics.Gather()
	for _, mf := range mfs {
		b.WriteString(mf.String())
	}
	return b.String()
}

// spyKV counts the operations of a KV and can run a hook before each and
// one after each.
type spyKV struct {
	vaultkv.KV
	mu            sync.Mutex
	counts        map[string]int
	before, after func(op, path string)
}

// count counts op and runs the before hook; the function it returns runs
// the after hook, once the operation has returned.
func (s *spyKV) count(op, path string) func() {
	s.mu.Lock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[op]++
	before, after := s.before, s.after
	s.mu.Unlock()
	if before != nil {
		before(op, path)
	}
	return func() {
		if after != nil {
			after(op, path)
		}
	}
}

func (s *spyKV) setAfter(hook func(op, path string)) {
	s.mu.Lock()
	s.after = hook
	s.mu.Unlock()
}

func (s *spyKV) setBefore(hook func(op, path string)) {
	s.mu.Lock()
	s.before = hook
	s.mu.Unlock()
}

// Counts returns a copy of the operation counts.
func (s *spyKV) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

func (s *spyKV) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	defer s.count("read", path)()
	return s.KV.Read(ctx, path)
}

// ReadNew counts as a read: for a new path it is one request, as Read.
func (s *spyKV) ReadNew(ctx context.Context, path string) (*vaultkv.Secret, error) {
	defer s.count("read", path)()
	return s.KV.ReadNew(ctx, path)
}

func (s *spyKV) ReadVersion(ctx context.Context, path string, version int) (*vaultkv.Secret, error) {
	defer s.count("read-version", path)()
	return s.KV.ReadVersion(ctx, path, version)
}

func (s *spyKV) Write(ctx context.Context, path string, data map[string]any, cas int) (vaultkv.Written, error) {
	defer s.count("write", path)()
	return s.KV.Write(ctx, path, data, cas)
}

func (s *spyKV) Mark(ctx context.Context, path string, md map[string]string) error {
	defer s.count("mark", path)()
	return s.KV.Mark(ctx, path, md)
}

func (s *spyKV) MarkNew(ctx context.Context, path string, md map[string]string) error {
	defer s.count("mark", path)()
	return s.KV.MarkNew(ctx, path, md)
}

func (s *spyKV) Delete(ctx context.Context, path string) error {
	defer s.count("delete", path)()
	return s.KV.Delete(ctx, path)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
