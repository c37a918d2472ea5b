package vaultseed

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

// TestPreviewAgreesWithDrifted reconciles objects in observe-only mode and
// previews the same objects (as read back from the API server, status
// included) against the same Vault: every object's Drifted condition
// (status, reason, message) is the one PreviewSeeds says, also for objects
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
	}
	objs[3].Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t2", Keys: []string{"password"}}
	objs[10].Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	for _, o := range objs {
		f.create(o)
	}
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
	previews, err := PreviewSeeds(context.Background(), rootKV(t), seeds, PreviewOptions{})
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
	}
	for _, d := range want {
		if m, ok := partial[d.Name]; ok {
			g.Expect(d).To(Equal(drift{d.Name, "True", ohmlabv1alpha1.ReasonObserveOnly, m}))
		}
	}
	// The objects cover every outcome, so the agreement is not vacuous.
	for _, r := range []string{ohmlabv1alpha1.ReasonObserveOnly, ohmlabv1alpha1.ReasonInSync, ohmlabv1alpha1.ReasonOwnedByAnother,
		ohmlabv1alpha1.ReasonPathDeleted, ohmlabv1alpha1.ReasonRefPending, ohmlabv1alpha1.ReasonInvalidSpec, ohmlabv1alpha1.ReasonForbidden} {
		g.Expect(reasons).To(HaveKey(r))
	}
}

// TestDependencyOrder: sources come before the objects that copy them,
// ties keep the input order, and objects on a ring come last.
func TestDependencyOrder(t *testing.T) {
	obj := func(name, data string) *ohmlabv1alpha1.VaultSeed {
		return &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/" + name, Data: &apiextensionsv1.JSON{Raw: []byte(data)}}}
	}
	tests := []struct {
		name string
		objs []*ohmlabv1alpha1.VaultSeed
		want []string
	}{
		{"no references: input order", []*ohmlabv1alpha1.VaultSeed{obj("b", `{}`), obj("a", `{}`)}, []string{"b", "a"}},
		{"a chain given backwards", []*ohmlabv1alpha1.VaultSeed{
			obj("c", `{"k":"<ref:ohmlab/b#k>"}`), obj("b", `{"k":"<ref:ohmlab/a#k>"}`), obj("a", `{"k":"<random:4>"}`)},
			[]string{"a", "b", "c"}},
		{"a source of two, and a path outside the input", []*ohmlabv1alpha1.VaultSeed{
			obj("x", `{"k":"<ref:ohmlab/s#k>","l":"<ref:ohmlab/elsewhere#k>"}`), obj("y", `{"k":"<ref:ohmlab/s#k>"}`), obj("s", `{"k":"<random:4>"}`)},
			[]string{"s", "x", "y"}},
		{"a ring comes last", []*ohmlabv1alpha1.VaultSeed{
			obj("p", `{"k":"<ref:ohmlab/q#k>"}`), obj("q", `{"k":"<ref:ohmlab/p#k>"}`), obj("r", `{}`)},
			[]string{"r", "p", "q"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			analyses := make([]templating.Analysis, len(tt.objs))
			for i, o := range tt.objs {
				_, analyses[i] = seeds.Analyse(o)
			}
			var got []string
			for _, i := range dependencyOrder(tt.objs, analyses) {
				got = append(got, tt.objs[i].Name)
			}
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}

// refusingReader fails every read of one path with err.
type refusingReader struct {
	KVReader
	path string
	err  error
}

func (r refusingReader) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if path == r.path {
		return nil, r.err
	}
	return r.KVReader.Read(ctx, path)
}

// TestPreviewGoesOnPastAnUnreadablePath: a path Vault refuses to read (or
// answers with an error) makes its object, and the objects that copy it,
// unreadable with the reason a reconcile reports, and the others are still
// planned; a Vault that does not answer stops the preview (no other read
// could succeed).
func TestPreviewGoesOnPastAnUnreadablePath(t *testing.T) {
	obj := func(name, data string) *ohmlabv1alpha1.VaultSeed {
		return &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/" + name, Data: &apiextensionsv1.JSON{Raw: []byte(data)}}}
	}
	objs := []*ohmlabv1alpha1.VaultSeed{obj("a", `{"k":"<random:4>"}`), obj("b", `{"k":"<random:4>"}`), obj("c", `{"k":"<ref:ohmlab/b#k>"}`)}
	forbidden := &vaultkv.Error{Op: vaultkv.OpRead, Path: "ohmlab/b", Class: vaultkv.ClassForbidden, Status: 403, Reason: "permission denied"}
	type row struct {
		Name       string
		Unreadable bool
		Status     metav1.ConditionStatus
		Reason     string
		Message    string
	}
	t.Run("refused: reported, the others planned", func(t *testing.T) {
		previews, err := PreviewSeeds(context.Background(), refusingReader{fake.New(), "ohmlab/b", forbidden}, objs, PreviewOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []row
		for _, p := range previews {
			got = append(got, row{p.Name, p.Unreadable, p.Drifted.Status, p.Drifted.Reason, p.Drifted.Message})
		}
		want := []row{
			{"a", false, metav1.ConditionTrue, ohmlabv1alpha1.ReasonObserveOnly, "1 create, 1 create-field (k)"},
			{"b", true, metav1.ConditionUnknown, ohmlabv1alpha1.ReasonForbidden, "vaultkv: read ohmlab/b: forbidden (403): permission denied"},
			{"c", true, metav1.ConditionUnknown, ohmlabv1alpha1.ReasonForbidden, "vaultkv: read ohmlab/b: forbidden (403): permission denied"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("previews (-want +got):\n%s", diff)
		}
	})
	t.Run("Vault does not answer: stops", func(t *testing.T) {
		down := &vaultkv.Error{Op: vaultkv.OpRead, Path: "ohmlab/b", Class: vaultkv.ClassUnavailable, Reason: "connect: connection refused"}
		previews, err := PreviewSeeds(context.Background(), refusingReader{fake.New(), "ohmlab/b", down}, objs, PreviewOptions{})
		if err == nil || err.Error() != "ns/b ohmlab/b: vaultkv: read ohmlab/b: unavailable: connect: connection refused" {
			t.Errorf("error %v, want the first failed read", err)
		}
		if len(previews) != 1 || previews[0].Name != "a" {
			t.Errorf("previews %+v, want a's only", previews)
		}
	})
}
