package vaultseed

// Real-server tests of the record of provenance: a prune removes a key only
// when the controller saw its own write of that value on the same life of
// the path, by the same object (DESIGN.md, "Provenance").

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/planner/plantest"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// stamped returns the managed keys without their createdTime, once it is
// checked to be a created_time as Vault writes it.
func stamped(t testing.TB, keys []ohmlabv1alpha1.ManagedKey) []ohmlabv1alpha1.ManagedKey {
	t.Helper()
	out := make([]ohmlabv1alpha1.ManagedKey, len(keys))
	for i, k := range keys {
		if _, err := time.Parse(time.RFC3339Nano, k.CreatedTime); err != nil {
			t.Errorf("managed key %s: createdTime %q: %v", k.Key, k.CreatedTime, err)
		}
		k.CreatedTime = ""
		out[i] = k
	}
	return out
}

// pruning is obj with prune: true.
func pruning(obj *ohmlabv1alpha1.VaultSeed) *ohmlabv1alpha1.VaultSeed {
	obj.Spec.Prune = true
	return obj
}

// createReady creates obj and waits until it is Ready.
func (f *fixture) createReady(obj *ohmlabv1alpha1.VaultSeed) *ohmlabv1alpha1.VaultSeed {
	f.t.Helper()
	f.create(obj)
	return f.waitReady(obj.Name)
}

// TestPruneSparesAPathPutAgainByHand: the path is deleted with its metadata
// and put again by hand (what the PathDeleted message suggests, or a
// migration): its version 1 is a person's, not the controller's version 1,
// so dropping a declared key with prune: true keeps the person's value.
func TestPruneSparesAPathPutAgainByHand(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := f.path("app")
	f.createReady(pruning(f.seed("app", path, `{"a": "<random:8>", "b": "<random:8>"}`)))

	g.Expect(rootKV(t).Delete(context.Background(), path)).To(Succeed())
	typed := map[string]any{"a": "typed-a", "b": "typed-b"}
	g.Expect(handWrite(t, path, typed)).To(Equal(1))

	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"a": "<random:8>"}`) })
	got := f.waitReady("app")
	after := readPath(t, path)
	g.Expect(after.Data).To(Equal(typed), "the person's values of the path's new life are kept")
	g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, f.ns+"/app"), "adopted")
	g.Expect(got.Status.ManagedKeys).To(BeEmpty(), "nothing of the new life was written by the controller")
	assertNoValueEmitted(t, f, after.Data)
}

// TestAPersonsWriteMatchingAFailedWriteIsNotTheControllers: the controller's
// data write is refused (its policy does not cover data writes) after its
// record was written; a person then writes exactly the keys of that record.
// A successor must not take the person's version for the controller's
// write: no event, and a later prune keeps the person's value.
func TestAPersonsWriteMatchingAFailedWriteIsNotTheControllers(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	ctx := context.Background()
	first := startController(t, controllerOptions{})
	path := first.path("app")
	first.createReady(pruning(first.seed("app", path, `{"a": "<random:8>"}`)))
	first.cancel()

	policy := "ohmlab-no-data-write-" + fmt.Sprint(time.Now().UnixNano())
	g.Expect(vault.Client.Sys().PutPolicyWithContext(ctx, policy, `
path "ohmlab/data/*" { capabilities = ["read"] }
path "ohmlab/metadata/*" { capabilities = ["read", "create", "update", "patch"] }
`)).To(Succeed())
	tok, err := vault.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{policy}, TTL: "1h"})
	g.Expect(err).NotTo(HaveOccurred())
	refused, err := vaultkv.New(vaultkv.Config{Address: vault.Addr, Timeout: 2 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: tok.Auth.ClientToken}})
	g.Expect(err).NotTo(HaveOccurred())
	second := startController(t, controllerOptions{kv: refused, namespace: first.ns})
	second.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"a": "<random:8>", "b": "<random:8>"}`) })
	refusedAt := second.waitReason("app", ohmlabv1alpha1.ReasonForbidden, 10*time.Second)
	g.Expect(refusedAt.Status.Version).To(Equal(int64(1)), "a refused write leaves status at the version read, not 0")
	second.cancel()

	// A person fills b in by hand: exactly the key the refused write named.
	cur := readPath(t, path)
	cur.Data["b"] = "typed-b"
	g.Expect(handWrite(t, path, cur.Data)).To(Equal(2))

	third := startController(t, controllerOptions{namespace: first.ns})
	third.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"a": "<random:8>"}`) })
	got := third.waitReady("app")
	after := readPath(t, path)
	g.Expect(after.Data).To(HaveKeyWithValue("b", "typed-b"), "the person's value is kept")
	g.Expect(managedNames(got)).To(Equal([]string{"a"}))
	for _, e := range third.events("app") {
		g.Expect(e).NotTo(ContainSubstring("KV version 2"), "the person's version is not reported as the controller's write")
	}
	assertNoValueEmitted(t, third, after.Data)
}

// TestAnObjectThatLostItsStatusPrunesNothing: an object created again
// after a delete (Retain), and an object whose status was cleared, start
// without status; the record of the last write on the path must not give
// them managed keys, so dropping keys with prune: true keeps them (product
// document, "Pruning": an object that lost its status prunes nothing).
func TestAnObjectThatLostItsStatusPrunesNothing(t *testing.T) {
	tests := []struct {
		name string
		lose func(f *fixture, obj *ohmlabv1alpha1.VaultSeed)
	}{
		{
			name: "deleted and created again",
			lose: func(f *fixture, obj *ohmlabv1alpha1.VaultSeed) {
				g := NewWithT(f.t)
				g.Expect(cp.Client.Delete(context.Background(), f.get("app"))).To(Succeed())
				g.Eventually(func() bool {
					return cp.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &ohmlabv1alpha1.VaultSeed{}) != nil
				}).Should(BeTrue())
				again := f.seed("app", obj.Spec.Path, `{"a": "<random:8>"}`)
				again.Spec.Prune = true
				f.create(again)
			},
		},
		{
			name: "status cleared",
			lose: func(f *fixture, _ *ohmlabv1alpha1.VaultSeed) {
				g := NewWithT(f.t)
				cur := f.get("app")
				g.Expect(cp.Client.Status().Patch(context.Background(), cur, client.RawPatch("application/merge-patch+json", []byte(`{"status":null}`)))).To(Succeed())
				g.Eventually(func() []ohmlabv1alpha1.ManagedKey { return f.get("app").Status.ManagedKeys }).Should(BeEmpty())
				f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"a": "<random:8>"}`) })
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{})
			path := f.path("app")
			obj := f.createReady(pruning(f.seed("app", path, `{"a": "<random:8>", "b": "<random:8>"}`)))
			f.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
				o.Spec.Data.Raw = []byte(`{"a": "<random:8>", "b": "<random:8>", "c": "<random:8>"}`)
			})
			g.Eventually(func() int { return readPath(t, path).Version }).Should(Equal(2))
			f.waitReady("app")
			before := readPath(t, path)
			writes := f.value("ohmlab_data_writes_total", map[string]string{"name": "app"})

			tt.lose(f, obj)
			got := f.waitReady("app")
			after := readPath(t, path)
			g.Expect(after.Data).To(Equal(before.Data), "nothing pruned, nothing written")
			// ohmlab plan, given the object as it is, agrees.
			previews, err := planner.PreviewSeeds(context.Background(), rootKV(t), []seeds.Analysed{seeds.Analyse(got)}, planner.PreviewOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(previews[0].Actions).To(BeEmpty(), "ohmlab plan: %s", previews[0].Writes)
			g.Expect(after.Version).To(Equal(before.Version))
			g.Expect(got.Status.ManagedKeys).To(BeEmpty(), "the keys of a write this object did not see are not its own")
			g.Consistently(func() int { return f.emissions("app", "Normal", "Updated") }).WithTimeout(2*time.Second).Should(Equal(1),
				"the last write is reported once, not again for an object without status")
			g.Expect(f.value("ohmlab_data_writes_total", map[string]string{"name": "app"})).To(BeNumerically("<=", writes),
				"no write counted again")
			g.Expect(got.Status.Version).To(Equal(int64(before.Version)))
			assertNoValueEmitted(t, f, after.Data)
		})
	}
}

// TestARotationTooLongToListItsKeysIsMadeOnce: a rotation of more keys than
// the record of a write can name (it keeps their digest) lands, and its
// process stops before recording the token; the successor finds the write
// and records the token without rotating again.
func TestARotationTooLongToListItsKeysIsMadeOnce(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	tree := map[string]any{}
	for _, k := range plantest.ManyKeys(120) {
		templating.SetPath(tree, k, "<random:8>")
	}
	data, err := json.Marshal(tree)
	g.Expect(err).NotTo(HaveOccurred())
	first := startController(t, controllerOptions{})
	path := first.path("app")
	first.create(first.seed("app", path, string(data)))
	first.waitReady("app")
	first.cancel()

	rotateThenDie(t, first.ns, "t1")
	rotated := readPath(t, path)
	g.Expect(rotated.Version).To(Equal(2))
	g.Expect(rotated.Metadata).NotTo(HaveKey(ohmlabv1alpha1.RotationTokenMetadataKey), "stopped before recording the token")
	record, ok := planner.RecordOn(stringMetadata(rotated.Metadata))
	g.Expect(ok).To(BeTrue())
	g.Expect(record.Unlisted).To(BeTrue(), "the record is too long to name the keys")

	successor := startController(t, controllerOptions{namespace: first.ns})
	successor.waitReady("app")
	after := readPath(t, path)
	g.Expect(after.Version).To(Equal(2), "rotated once")
	g.Expect(after.Data).To(Equal(rotated.Data))
	g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t1"))
	assertNoValueEmitted(t, successor, after.Data)
}

// stringMetadata is custom_metadata as vaultkv reads it.
func stringMetadata(md map[string]any) map[string]string {
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[k], _ = v.(string)
	}
	return out
}

// rotateThenDie runs a process on ns that rotates "app" for token and is
// killed right after the rotation's data write, before its token record.
func rotateThenDie(t *testing.T, ns, token string) {
	t.Helper()
	killed := &killedAfterWrite{KV: rootKV(t), written: make(chan struct{})}
	rotating := startController(t, controllerOptions{kv: killed, namespace: ns})
	rotating.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: token} })
	select {
	case <-killed.written:
	case <-time.After(20 * time.Second):
		t.Fatal("the rotation was never written")
	}
	rotating.cancel()
}

// killedAfterWrite is a process killed right after its first data write
// lands: nothing it sends afterwards reaches Vault.
type killedAfterWrite struct {
	vaultkv.KV
	mu      sync.Mutex
	killed  bool
	written chan struct{}
}

func (k *killedAfterWrite) alive() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		return errKilled
	}
	return nil
}

func (k *killedAfterWrite) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if err := k.alive(); err != nil {
		return nil, err
	}
	return k.KV.Read(ctx, path)
}

func (k *killedAfterWrite) Mark(ctx context.Context, path string, md map[string]string) error {
	if err := k.alive(); err != nil {
		return err
	}
	return k.KV.Mark(ctx, path, md)
}

func (k *killedAfterWrite) Write(ctx context.Context, path string, data map[string]any, cas int) (vaultkv.Written, error) {
	if err := k.alive(); err != nil {
		return vaultkv.Written{}, err
	}
	w, err := k.KV.Write(ctx, path, data, cas)
	k.mu.Lock()
	k.killed = true
	k.mu.Unlock()
	close(k.written)
	return w, err
}

// TestUnreportedKeysAreTheObjectsOwn: what a failed status write left in
// memory is the object's by UID: an object deleted and created again under
// the same name does not inherit it.
func TestUnreportedKeysAreTheObjectsOwn(t *testing.T) {
	r := &Reconciler{}
	seed := &ohmlabv1alpha1.VaultSeed{}
	seed.Namespace, seed.Name, seed.UID = "ns", "app", "u1"
	kept := []ohmlabv1alpha1.ManagedKey{{Key: "a", Version: 1, CreatedTime: "2026-12-06T05:00:00Z"}}
	r.store.setUnreported(seed, kept, true)
	g := NewWithT(t)
	managed, pending := r.store.managed(seed)
	g.Expect(managed).To(Equal(kept))
	g.Expect(pending).To(BeTrue())
	again := seed.DeepCopy()
	again.UID = "u2"
	managed, pending = r.store.managed(again)
	g.Expect(managed).To(BeEmpty(), "created again under the same name")
	g.Expect(pending).To(BeFalse())
}

// TestARotationThatCannotBeCheckedIsNotMadeAgain: a rotation lands and its
// process dies before recording the token; a person then types the rotated
// key, and the path keeps one version only (max_versions 1), so the
// rotation's version can no longer be read. Not knowing whether the
// rotation landed, the successor records the token and regenerates nothing:
// the person's value stays.
func TestARotationThatCannotBeCheckedIsNotMadeAgain(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	first := startController(t, controllerOptions{})
	path := first.path("app")
	mount, rest, _ := strings.Cut(path, "/")
	g.Expect(vault.Client.KVv2(mount).PutMetadata(context.Background(), rest, vaultapi.KVMetadataPutInput{MaxVersions: 1})).To(Succeed())
	first.createReady(first.seed("app", path, `{"k0": "<random:8>"}`))
	first.cancel()

	rotateThenDie(t, first.ns, "t1")
	g.Expect(handWrite(t, path, map[string]any{"k0": "typed-by-a-person"})).To(Equal(3))

	successor := startController(t, controllerOptions{namespace: first.ns})
	successor.waitReady("app")
	after := readPath(t, path)
	g.Expect(after.Data).To(Equal(map[string]any{"k0": "typed-by-a-person"}), "not rotated a second time")
	g.Expect(after.Version).To(Equal(3))
	g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t1"))
}
