package vaultseed

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
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

// TestStatusIsNeverRebuiltFromAStaleCopy: a reconcile that starts on a copy
// older than the controller's last status write (a dependent's wake-up or a
// requeue before the informer has seen it) plans with what that write
// recorded: no managed key drops out, and no key the controller rotated
// since is reported changed by someone (issue 23, item 3).
func TestStatusIsNeverRebuiltFromAStaleCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stale := &staleClient{}
	f := startController(t, controllerOptions{client: func(c client.Client) client.Client {
		stale.Client = c
		return stale
	}})
	path := f.path("app")
	obj := f.seed("app", path, `{"b": "<random:8>", "c": "<random:8>"}`)
	obj.Spec.Prune = true
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"b"}}
	f.create(obj)
	f.waitReady("app")

	// b rotated and d added: the object as that reconcile reads it (the
	// new spec, the status before its write) is the stale copy.
	old := f.get("app")
	old.Spec.Rotate.Token = "t2"
	old.Spec.Data.Raw = []byte(`{"b": "<random:8>", "c": "<random:8>", "d": "<random:8>"}`)
	g.Expect(cp.Client.Update(ctx, old)).To(Succeed())
	obj = f.waitReady("app")
	g.Expect(managedNames(obj)).To(Equal([]string{"b", "c", "d"}))

	// A reconcile on the stale copy, with something to write: c deleted
	// by hand.
	stale.serve(client.ObjectKeyFromObject(obj), old)
	cur := readPath(t, path)
	delete(cur.Data, "c")
	handWrite(t, path, cur.Data)
	_, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	g.Expect(err).NotTo(HaveOccurred())
	stale.serve(client.ObjectKeyFromObject(obj), nil)
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
