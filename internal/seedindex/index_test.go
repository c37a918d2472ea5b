package seedindex_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
)

func seed(name, path, data string) *ohmlabv1alpha1.VaultSeed {
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vo", Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: []byte(data)}},
	}
}

// reader is a fake cache holding objs with seeds' indexes.
func reader(t *testing.T, objs ...*ohmlabv1alpha1.VaultSeed) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := ohmlabv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for _, o := range objs {
		b.WithObjects(o.DeepCopy())
	}
	for field, fn := range seedindex.Indexes {
		b.WithIndex(&ohmlabv1alpha1.VaultSeed{}, field, fn)
	}
	return b.Build()
}

func TestRelated(t *testing.T) {
	a := seed("a", "ohmlab/a", `{"k":"<ref:ohmlab/b#k>"}`)
	tests := []struct {
		name    string
		cached  []*ohmlabv1alpha1.VaultSeed
		want    []string // names, sorted
		wantErr string
	}{
		{
			name: "the objects on its path and on every path its references reach, not itself",
			cached: []*ohmlabv1alpha1.VaultSeed{a,
				seed("twin", "ohmlab/a", `{}`),
				seed("b", "ohmlab/b", `{"k":"<ref:ohmlab/c#k>"}`),
				seed("c", "ohmlab/c", `{"k":"x"}`),
				seed("unrelated", "ohmlab/z", `{"k":"<ref:ohmlab/a#k>"}`),
			},
			want: []string{"b", "c", "twin"},
		},
		{
			name: "an undecodable object on a reached path is an error naming it",
			cached: []*ohmlabv1alpha1.VaultSeed{a,
				seed("b", "ohmlab/b", `{"k":"<ref:ohmlab/c#k>"}`),
				seed("c", "ohmlab/c", `["<ref:ohmlab/a#k>"]`),
			},
			wantErr: "analysing the VaultSeeds related to vo/a: vo/c: spec.data is not a JSON object",
		},
		{
			name: "an undecodable object elsewhere is not related",
			cached: []*ohmlabv1alpha1.VaultSeed{a,
				seed("b", "ohmlab/b", `{"k":"x"}`),
				seed("broken", "ohmlab/z", `"text"`),
			},
			want: []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := seedindex.Related(context.Background(), reader(t, tt.cached...), seeds.Analyse(a))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Related = %d objects, %v; want the error %q", len(got), err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range got {
				names = append(names, o.Seed.Name)
			}
			slices.Sort(names)
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("related (-want +got):\n%s", diff)
			}
		})
	}
}
