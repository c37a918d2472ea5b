package vaultseed

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
) // TestPreviewAgreesWithDrifted reconciles objects in observe-only mode and
// previews the same objects (as read back from the API server, status
// included) against the same Vault: every object's Drifted condition
// (status, reason, message) is the one planner.PreviewSeeds says, also for objects
// that hold a key back while a real run writes the others (issue 23, item
// 5).
func TestPreviewAgreesWithDrifted(t *testing.T) {
	f := startController(t, controllerOptions{observeOnly: true})
	g := NewWithT(t)
	owner := func(name string) map[string]any {
		return map[string]any{ohmlabv1alpha1.OwnerMetadataKey: f.ns + "/" + name}
	}
	handWrite(t, f.path("adopt"), map[string]any{"user": "typed", "webhook": "typed"})
	handWrite(t, f.path("update"), map[string]any{"password": "typed", "hash": "not-a-hash"})
	handMark(t, f.path("update"), owner("update"))
	handWrite(t, f.path("rotate"), map[string]any{"password": "typed"})
	handMark(t, f.path("rotate"), map[string]any{ohmlabv1alpha1.OwnerMetadataKey: f.ns + "/rotate", ohmlabv1alpha1.RotationTokenMetadataKey: "t1"})
	handWrite(t, f.path("owned"), map[string]any{"a": "typed"})
	handMark(t, f.path("owned"), map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "elsewhere/other"})
	handWrite(t, f.path("deleted"), map[string]any{"a": "typed"})
	g.Expect(vault.Client.KVv2("ohmlab").Delete(context.Background(), strings.TrimPrefix(f.path("deleted"), "ohmlab/"))).To(Succeed())
	handWrite(t, f.path("insync"), map[string]any{"a": "typed"})
	handMark(t, f.path("insync"), owner("insync"))
	handWrite(t, f.path("waiting"), map[string]any{"copy": "typed"})
	handMark(t, f.path("waiting"), owner("waiting"))
	handWrite(t, f.path("prune"), map[string]any{"keep": "typed", "old": "written"})
	handMark(t, f.path("prune"), owner("prune"))
	// rotate.every on paths the object owns: one without a time recorded
	// (the period starts), one whose period has passed (the keys rotate).
	handWrite(t, f.path("period"), map[string]any{"password": "typed"})
	handMark(t, f.path("period"), owner("period"))
	handWrite(t, f.path("due"), map[string]any{"password": "typed"})
	handMark(t, f.path("due"), map[string]any{ohmlabv1alpha1.OwnerMetadataKey: f.ns + "/due", ohmlabv1alpha1.RotatedAtMetadataKey: "2020-01-01T00:00:00Z"})

	objs := []*ohmlabv1alpha1.VaultSeed{
		f.seed("create", f.path("create"), `{"password":"<random:16>"}`),
		f.seed("adopt", f.path("adopt"), `{"user":"admin","webhook":"","token":"<random:8>"}`),
		f.seed("update", f.path("update"), `{"password":"","hash":"<bcrypt:password>"}`),
		f.seed("rotate", f.path("rotate"), `{"password":"<random:12>"}`),
		f.seed("owned", f.path("owned"), `{"a":""}`),
		f.seed("deleted", f.path("deleted"), `{"a":""}`),
		f.seed("pending", f.path("pending"), `{"copy":"<ref:`+f.path("nowhere")+`#k>"}`),
		f.seed("copier", f.path("copier"), `{"copy":"<ref:`+f.path("insync")+`#a>"}`),
		f.seed("insync", f.path("insync"), `{"a":""}`),
		f.seed("invalid", f.path("invalid"), `{"a.b":"x"}`),
		f.seed("delete", f.path("delete"), `{"a":"<random:4>"}`),
		// A hash of an empty placeholder stalls while the path is created.
		f.seed("held", f.path("held"), `{"x":"","xHash":"<bcrypt:x>","other":"<random:10>"}`),
		// A copy exists while its source is missing: another key is created.
		f.seed("waiting", f.path("waiting"), `{"copy":"<ref:`+f.path("nowhere")+`#k>","extra":"<random:6>"}`),
		// A managed key no longer declared is pruned.
		f.seed("prune", f.path("prune"), `{"keep":""}`),
		f.seed("period", f.path("period"), `{"password":"<random:12>"}`),
		f.seed("due", f.path("due"), `{"password":"<random:12>"}`),
	}
	objs[len(objs)-2].Spec.Rotate = &ohmlabv1alpha1.Rotation{Every: "90d"}
	objs[len(objs)-1].Spec.Rotate = &ohmlabv1alpha1.Rotation{Every: "90d"}
	objs[13].Spec.Prune = true
	objs[3].Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t2", Keys: []string{"password"}}
	objs[10].Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	for _, o := range objs {
		f.create(o)
	}
	f.recordWrite("prune", f.path("prune"), "old")
	var live ohmlabv1alpha1.VaultSeedList
	g.Eventually(func(g Gomega) {
		g.Expect(cp.Client.List(context.Background(), &live, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(live.Items).To(HaveLen(len(objs)))
		for _, o := range live.Items {
			c := apimeta.FindStatusCondition(o.Status.Conditions, ohmlabv1alpha1.ConditionDrifted)
			g.Expect(c).NotTo(BeNil(), "%s has no Drifted condition yet", o.Name)
			g.Expect(c.ObservedGeneration).To(Equal(o.Generation))
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())

	seeds := make([]*ohmlabv1alpha1.VaultSeed, len(live.Items))
	for i := range live.Items {
		seeds[i] = &live.Items[i]
	}
	previews, err := planner.PreviewSeeds(context.Background(), rootKV(t), analyseAll(seeds), planner.PreviewOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	type drift struct{ Name, Status, Reason, Message string }
	var want, got []drift
	reasons := map[string]bool{}
	for i, o := range seeds {
		c := apimeta.FindStatusCondition(o.Status.Conditions, ohmlabv1alpha1.ConditionDrifted)
		want = append(want, drift{o.Name, string(c.Status), c.Reason, c.Message})
		p := previews[i]
		got = append(got, drift{p.Name, string(p.Drifted.Status), p.Drifted.Reason, p.Drifted.Message})
		reasons[c.Reason] = true
	}
	g.Expect(got).To(Equal(want))
	partial := map[string]string{
		"held":    "1 create, 2 create-field (other, x); the rest stalls: InvalidSpec: xHash: cannot be computed while x is empty; fill it in (vault kv patch " + f.path("held") + " x=...)",
		"waiting": "1 create-field (extra); the rest waits: RefPending: waiting for " + f.path("nowhere") + "#k (path missing)",
		"period":  "1 record-rotation",
		"due":     "1 rotate (password)",
	}
	for _, d := range want {
		if m, ok := partial[d.Name]; ok {
			g.Expect(d).To(Equal(drift{d.Name, "True", ohmlabv1alpha1.ReasonObserveOnly, m}))
		}
	}
	// The objects cover every action a plan makes and every outcome, so
	// the agreement is not vacuous.
	actions := map[string]bool{}
	for _, p := range previews {
		for _, a := range p.Actions {
			actions[a.Name] = true
		}
	}
	for _, a := range planner.ActionOrder() {
		if a != planner.ActionDelete { // deletion is the finalizer's, never planned
			g.Expect(actions).To(HaveKey(a))
		}
	}
	for _, r := range []string{ohmlabv1alpha1.ReasonObserveOnly, ohmlabv1alpha1.ReasonInSync, ohmlabv1alpha1.ReasonOwnedByAnother,
		ohmlabv1alpha1.ReasonPathDeleted, ohmlabv1alpha1.ReasonRefPending, ohmlabv1alpha1.ReasonInvalidSpec, ohmlabv1alpha1.ReasonForbidden} {
		g.Expect(reasons).To(HaveKey(r))
	}
}

// recordWrite gives the object the status a write of key at the path's
// current version would have left (status.managedKeys, status.version),
// then has it reconciled with that status.
func (f *fixture) recordWrite(name, path, key string) {
	f.t.Helper()
	g := NewWithT(f.t)
	s, err := rootKV(f.t).Read(context.Background(), path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		o := f.get(name)
		o.Status.Version = int64(s.Version)
		o.Status.ManagedKeys = []ohmlabv1alpha1.ManagedKey{{Key: key, Version: int64(s.Version), CreatedTime: planner.CreatedTime(s.Created)}}
		return cp.Client.Status().Update(context.Background(), o)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	f.requestReconcile(name, "recorded")
	f.waitHandled(name, "recorded")
}
