package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestUpgradeFromTheFirstRelease stores objects under the first release's
// CRD (status.managedKeys a list of names, testdata/first-release), then
// applies today's CRD and starts today's controller (issue 23, item 1):
//
//  1. Under today's schema the API server refuses any write of an object
//     that leaves the old shape stored, the finalizer patch and a status
//     patch of the conditions alike: CRD validation ratcheting does not
//     cover a type change. So the controller rewrites the list first.
//  2. Today's process syncs its cache and becomes ready while the first
//     release's process still holds the Lease, as in a rolling upgrade,
//     and its webhook answers.
//  3. Once it holds the Lease, status.managedKeys is rewritten in today's
//     shape with unknown versions, the finalizer patch and the status
//     patches go through, and the objects go Ready.
//  4. A spec update is admitted; the key it no longer declares, recorded
//     without a version, is kept by the prune, never removed on a guess.
func TestUpgradeFromTheFirstRelease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: 2 * time.Second, ControllerBin: controllerBin,
		Values: map[string]any{"targets": map[string]any{"vault": map[string]any{"allowDelete": true}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)
	kv := env.Vault.Client.KVv2("ohmlab")
	values := map[string]any{"a": "first-release-value-a", "b": "first-release-value-b"}
	const pruned, deleted = "first-release-prune", "first-release-delete"
	path := func(name string) string { return "ohmlab/platforms/production/core/" + name }
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: SeedNamespace, Name: name} }

	// The first release's objects, as it stored them. Its webhook admitted
	// them; this test does not run it.
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Name: env.Chart.WebhookConfiguration}, webhook)).To(Succeed())
	g.Expect(env.CP.Client.Delete(ctx, webhook)).To(Succeed())
	setCRD(t, env, firstReleaseCRD(t))
	for _, name := range []string{pruned, deleted} {
		seed := &ohmlabv1alpha1.VaultSeed{
			ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: name},
			Spec: ohmlabv1alpha1.VaultSeedSpec{
				Path: path(name), Prune: name == pruned,
				Data: &apiextensionsv1.JSON{Raw: []byte(`{"a":"<random:24>","b":"<random:24>"}`)},
			},
		}
		if name == deleted {
			seed.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
		}
		g.Expect(env.CP.Client.Create(ctx, seed)).To(Succeed())
		rest := strings.TrimPrefix(path(name), "ohmlab/")
		_, err := kv.Put(ctx, rest, values)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kv.PatchMetadata(ctx, rest, vaultMetadata(map[string]any{ohmlabv1alpha1.OwnerMetadataKey: SeedNamespace + "/" + name}))).To(Succeed())
		// Stored while Vault did not answer: Ready=True is today's.
		status := `{"status":{"observedGeneration":1,"version":1,"managedKeys":["a","b"],"conditions":[` +
			`{"type":"Ready","status":"False","reason":"BackendUnavailable","message":"Vault does not answer","lastTransitionTime":"2026-11-01T00:00:00Z","observedGeneration":1}]}}`
		// The API server serves the first release's schema once it has
		// taken the CRD in.
		g.Eventually(func() error {
			return env.CP.Client.Status().Patch(ctx, storedSeed(name), client.RawPatch(types.MergePatchType, []byte(status)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	stored := func(name string) []any {
		t.Helper()
		u := storedSeed(name)
		g.Expect(env.CP.Client.Get(ctx, key(name), u)).To(Succeed())
		keys, _, _ := unstructured.NestedSlice(u.Object, "status", "managedKeys")
		return keys
	}
	names := []any{"a", "b"}
	g.Expect(stored(pruned)).To(Equal(names))

	// Today's CRD, as the chart installs it.
	setCRD(t, env, todaysCRD(t, env))
	g.Eventually(func() error {
		// Accepted only under today's schema.
		probe := storedSeed(pruned)
		return env.CP.Client.Status().Patch(ctx, probe, client.RawPatch(types.MergePatchType, []byte(`{"status":{"managedKeys":[{"key":"a","version":1}]}}`)), client.DryRunAll)
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// 1. What the API server answers a write that keeps the old shape: the
	// controller's finalizer patch and a status patch of the conditions,
	// both locked on the resourceVersion read.
	u := storedSeed(deleted)
	g.Expect(env.CP.Client.Get(ctx, key(deleted), u)).To(Succeed())
	before := u.DeepCopy()
	u.SetFinalizers([]string{ohmlabv1alpha1.Finalizer})
	err = env.CP.Client.Patch(ctx, u, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the finalizer patch: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("status.managedKeys[0]"))
	g.Expect(env.CP.Client.Get(ctx, key(deleted), u)).To(Succeed())
	before = u.DeepCopy()
	g.Expect(unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": ohmlabv1alpha1.ConditionReady, "status": "True",
		"reason": ohmlabv1alpha1.ReasonReconciled, "message": "written under today's schema",
		"lastTransitionTime": "2026-12-01T00:00:00Z", "observedGeneration": int64(1)}}, "status", "conditions")).To(Succeed())
	err = env.CP.Client.Status().Patch(ctx, u, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the status patch: %v", err)
	g.Expect(stored(deleted)).To(Equal(names))

	// 2. The first release's process holds the Lease: today's process
	// starts beside it (ready: its cache synced) and answers admissions.
	webhook.ResourceVersion, webhook.UID, webhook.ManagedFields = "", "", nil
	g.Expect(env.CP.Client.Create(ctx, webhook)).To(Succeed())
	first := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ControllerNamespace, Name: LeaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("first-release-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	g.Expect(env.CP.Client.Create(ctx, first)).To(Succeed())
	c := startController(t, env)
	out, err := env.Apply(ctx, Broken)
	g.Expect(err).To(HaveOccurred(), "the webhook must refuse a dotted key")
	g.Expect(out).To(ContainSubstring(BrokenRefusal))
	g.Expect(stored(pruned)).To(Equal(names), "written before today's process held the Lease")

	// 3. Today's process takes the Lease over.
	g.Expect(env.CP.Client.Delete(ctx, first)).To(Succeed())
	rewritten := []any{map[string]any{"key": "a"}, map[string]any{"key": "b"}}
	ready := func(name string) {
		t.Helper()
		g.Eventually(func() bool {
			s := &ohmlabv1alpha1.VaultSeed{}
			g.Expect(env.CP.Client.Get(ctx, key(name), s)).To(Succeed())
			return hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled)(s)
		}).WithTimeout(60*time.Second).Should(BeTrue(), "%s Ready", name)
	}
	for _, name := range []string{pruned, deleted} {
		g.Eventually(func() []any { return stored(name) }).WithTimeout(60*time.Second).Should(Equal(rewritten), name)
		ready(name)
	}
	seed := &ohmlabv1alpha1.VaultSeed{}
	g.Expect(env.CP.Client.Get(ctx, key(deleted), seed)).To(Succeed())
	g.Expect(seed.Finalizers).To(ConsistOf(ohmlabv1alpha1.Finalizer))

	// 4. The object no longer declares b: admitted, and b is kept.
	g.Expect(env.CP.Client.Get(ctx, key(pruned), seed)).To(Succeed())
	seed.Spec.Data = &apiextensionsv1.JSON{Raw: []byte(`{"a":"<random:24>"}`)}
	g.Expect(env.CP.Client.Update(ctx, seed)).To(Succeed(), "a spec update through the webhook")
	g.Eventually(func() []any { return stored(pruned) }).WithTimeout(60*time.Second).
		Should(Equal([]any{map[string]any{"key": "a"}}), "b was kept, so it is no longer managed")
	ready(pruned)
	g.Eventually(func() []string { return eventsOf(t, env, pruned) }).WithTimeout(30 * time.Second).
		Should(ContainElement(MatchRegexp(`^Kept: .*\bb\b`)))
	for _, name := range []string{pruned, deleted} {
		st := readState(t, env, path(name))
		g.Expect(st.Data).To(Equal(values), "%s: nothing pruned, nothing rewritten", name)
		g.Expect(st.Version).To(Equal(1), name)
	}
	// Two quiet resyncs of the rewritten objects.
	time.Sleep(2 * 2 * time.Second)
	g.Expect(c.Logs()).To(ContainSubstring("rewrote status.managedKeys"))
	g.Expect(c.Logs()).NotTo(ContainSubstring("panic"))
	for _, v := range values {
		g.Expect(c.Logs()).NotTo(ContainSubstring(v.(string)), "no value in the logs")
	}
}

// storedSeed is a VaultSeed as the API server stores it, whatever the shape
// of its status.
func storedSeed(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ohmlabv1alpha1.GroupVersion.WithKind("VaultSeed"))
	u.SetNamespace(SeedNamespace)
	u.SetName(name)
	return u
}

// firstReleaseCRD is the first release's VaultSeed CRD, kept as test data.
func firstReleaseCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "test", "e2e", "testdata", "first-release", "ohmlab.fr_vaultseeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// todaysCRD is the VaultSeed CRD the chart renders.
func todaysCRD(t *testing.T, env *Env) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	for _, o := range charttest.Filter(env.Objects, "CustomResourceDefinition") {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatal(err)
		}
		if crd.Name == "vaultseeds.ohmlab.fr" {
			return crd
		}
	}
	t.Fatal("the chart renders no VaultSeed CRD")
	return nil
}

// setCRD replaces the live VaultSeed CRD's versions with those of crd.
func setCRD(t *testing.T, env *Env, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	live := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.CP.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Versions = crd.Spec.Versions
	if err := env.CP.Client.Update(ctx, live); err != nil {
		t.Fatalf("installing a CRD: %v", err)
	}
}

// eventsOf returns "<reason>: <note>" of the object's events.
func eventsOf(t *testing.T, env *Env, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := env.CP.Client.List(context.Background(), &list, client.InNamespace(SeedNamespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}
