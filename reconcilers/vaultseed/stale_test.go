package vaultseed

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// staleClient is the manager's client, except that Get serves the copy it
// is given of an object, as a cache that has not seen the writes since
// would.
type staleClient struct {
	client.Client
	mu    sync.Mutex
	stale map[client.ObjectKey]*ohmlabv1alpha1.VaultSeed
}

// serve makes Get return obj for its key; nil stops it.
func (c *staleClient) serve(key client.ObjectKey, obj *ohmlabv1alpha1.VaultSeed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale == nil {
		c.stale = map[client.ObjectKey]*ohmlabv1alpha1.VaultSeed{}
	}
	if obj == nil {
		delete(c.stale, key)
		return
	}
	c.stale[key] = obj.DeepCopy()
}

func (c *staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	stale, ok := c.stale[key]
	c.mu.Unlock()
	if seed, isSeed := obj.(*ohmlabv1alpha1.VaultSeed); ok && isSeed {
		stale.DeepCopyInto(seed)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// heldEvents is the manager's cache, except that the notifications of its
// VaultSeed informer (the controller's watches, lastWrites' among them) are
// held while hold is on and delivered in order at release, as from an
// informer that has not seen the writes since: a cache whose copies are
// stale (staleClient) has not told the watch of the newer ones either.
type heldEvents struct {
	cache.Cache
	mu      sync.Mutex
	holding bool
	held    []func()
}

func (c *heldEvents) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if _, seed := obj.(*ohmlabv1alpha1.VaultSeed); !seed || err != nil {
		return i, err
	}
	return heldInformer{Informer: i, c: c}, nil
}

func (c *heldEvents) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = true
}

func (c *heldEvents) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, deliver := range c.held {
		deliver()
	}
	c.holding, c.held = false, nil
}

// notify delivers now, or at release while holding; under the lock, so
// that nothing overtakes what was held.
func (c *heldEvents) notify(deliver func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.held = append(c.held, deliver)
		return
	}
	deliver()
}

type heldInformer struct {
	cache.Informer
	c *heldEvents
}

func (i heldInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(heldHandler{h, i.c})
}

func (i heldInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, period time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(heldHandler{h, i.c}, period)
}

func (i heldInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(heldHandler{h, i.c}, o)
}

type heldHandler struct {
	h toolscache.ResourceEventHandler
	c *heldEvents
}

func (h heldHandler) OnAdd(obj any, initial bool) { h.c.notify(func() { h.h.OnAdd(obj, initial) }) }
func (h heldHandler) OnUpdate(old, obj any)       { h.c.notify(func() { h.h.OnUpdate(old, obj) }) }
func (h heldHandler) OnDelete(obj any)            { h.c.notify(func() { h.h.OnDelete(obj) }) }

// startStaleController starts a controller whose client serves the copies
// stale is given and whose cache holds its notifications while held holds.
func startStaleController(t *testing.T) (*fixture, *staleClient, *heldEvents) {
	stale := &staleClient{}
	held := &heldEvents{}
	f := startController(t, controllerOptions{
		client: func(c client.Client) client.Client {
			stale.Client = c
			return stale
		},
		cache: func(c cache.Cache) cache.Cache {
			held.Cache = c
			return held
		},
	})
	return f, stale, held
}

// TestStatusIsNeverRebuiltFromAStaleCopy: a reconcile that starts on a copy
// older than the controller's last status write (a dependent's wake-up or a
// requeue before the informer has seen it) plans with what that write
// recorded: no managed key drops out, and no key the controller rotated
// since is reported changed by someone (issue 23, item 3).
func TestStatusIsNeverRebuiltFromAStaleCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, stale, held := startStaleController(t)
	path := f.path("app")
	obj := f.seed("app", path, `{"b": "<random:8>", "c": "<random:8>"}`)
	obj.Spec.Prune = true
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"b"}}
	f.create(obj)
	f.waitReady("app")

	// From here the informer tells nobody of the changes, as one that
	// has not seen them yet; the test reconciles itself.
	held.hold()
	// b rotated and d added: the object as that reconcile reads it (the
	// new spec, the status before its write) is the stale copy.
	old := f.get("app")
	old.Spec.Rotate.Token = "t2"
	old.Spec.Data.Raw = []byte(`{"b": "<random:8>", "c": "<random:8>", "d": "<random:8>"}`)
	g.Expect(cp.Client.Update(ctx, old)).To(Succeed())
	key := client.ObjectKeyFromObject(old)
	stale.serve(key, old)
	_, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	obj = f.get("app")
	g.Expect(managedNames(obj)).To(Equal([]string{"b", "c", "d"}))
	g.Expect(obj.ResourceVersion).NotTo(Equal(old.ResourceVersion), "status written")

	// A reconcile on the stale copy, with something to write: c deleted
	// by hand.
	cur := readPath(t, path)
	delete(cur.Data, "c")
	handWrite(t, path, cur.Data)
	_, err = f.r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	stale.serve(key, nil)
	held.release()
	g.Expect(keyNames(readPath(t, path).Data)).To(ContainElement("c"), "c is seeded again")
	g.Expect(managedNames(f.get("app"))).To(Equal([]string{"b", "c", "d"}), "no managed key drops out")

	// b and d go: the controller wrote both and nobody changed them.
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"c": "<random:8>"}`)
		o.Spec.Rotate = nil
	})
	obj = f.waitReady("app")
	got := readPath(t, path)
	g.Expect(keyNames(got.Data)).NotTo(ContainElement("b"), "pruned")
	g.Expect(keyNames(got.Data)).NotTo(ContainElement("d"), "pruned")
	g.Expect(managedNames(obj)).To(Equal([]string{"c"}))
	g.Expect(f.events("app")).NotTo(ContainElement(HavePrefix("Normal Kept")), "no false Kept")
	assertNoValueEmitted(t, f, got.Data)
}

// TestAFirstReleaseStatusIsRewrittenOnce: a reconcile that starts on the
// copy from before the controller rewrote a first-release
// status.managedKeys (issue 23; the informer has not seen the rewrite yet)
// plans with the rewrite, instead of rewriting it again locked on a stale
// resourceVersion, which the API server refuses with a conflict.
func TestAFirstReleaseStatusIsRewrittenOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, stale, held := startStaleController(t)
	f.create(f.seed("app", f.path("app"), `{"a": "<random:8>", "b": "<random:8>"}`))
	obj := f.waitReady("app")

	held.hold()
	// The copy as the first release's status decodes: its keys names.
	first := obj.DeepCopy()
	for i, m := range first.Status.ManagedKeys {
		first.Status.ManagedKeys[i] = ohmlabv1alpha1.ManagedKey{Key: m.Key, StoredAsName: true}
	}
	key := client.ObjectKeyFromObject(first)
	stale.serve(key, first)
	for i := range 2 {
		_, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred(), "reconcile %d on the copy from before the rewrite", i+1)
	}
	stale.serve(key, nil)
	held.release()
	g.Expect(managedNames(f.get("app"))).To(Equal([]string{"a", "b"}))
}
