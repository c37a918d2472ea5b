package planner

import (
	"context"
	"testing"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/google/go-cmp/cmp"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
			analysed := analyseAll(tt.objs)
			var got []string
			for _, i := range dependencyOrder(analysed) {
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
		previews, err := PreviewSeeds(context.Background(), refusingReader{fake.New(), "ohmlab/b", forbidden}, analyseAll(objs), PreviewOptions{})
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
		previews, err := PreviewSeeds(context.Background(), refusingReader{fake.New(), "ohmlab/b", down}, analyseAll(objs), PreviewOptions{})
		if err == nil || err.Error() != "ns/b ohmlab/b: vaultkv: read ohmlab/b: unavailable: connect: connection refused" {
			t.Errorf("error %v, want the first failed read", err)
		}
		if len(previews) != 1 || previews[0].Name != "a" {
			t.Errorf("previews %+v, want a's only", previews)
		}
	})
}

func analyseAll(objs []*ohmlabv1alpha1.VaultSeed) []seeds.Analysed {
	out := make([]seeds.Analysed, len(objs))
	for i, o := range objs {
		out[i] = seeds.Analyse(o)
	}
	return out
}
