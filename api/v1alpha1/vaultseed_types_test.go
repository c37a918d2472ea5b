package v1alpha1_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestManagedKeysDecodeBothShapes decodes status.managedKeys as the
// informer does (the scheme's universal deserializer): the first release
// stored names, today's release {key, version} (issue 23).
func TestManagedKeysDecodeBothShapes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := ohmlabv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	tests := []struct {
		name        string
		managedKeys string
		want        []ohmlabv1alpha1.ManagedKey
		// rewritten is the list as the next status write sends it.
		rewritten string
		wantErr   bool
	}{
		{
			name:        "first release: names, version unknown",
			managedKeys: `["a", "db.password"]`,
			want:        []ohmlabv1alpha1.ManagedKey{{Key: "a", StoredAsName: true}, {Key: "db.password", StoredAsName: true}},
			rewritten:   `[{"key":"a"},{"key":"db.password"}]`,
		},
		{
			name:        "today: key and version",
			managedKeys: `[{"key": "a", "version": 3}]`,
			want:        []ohmlabv1alpha1.ManagedKey{{Key: "a", Version: 3}},
			rewritten:   `[{"key":"a","version":3}]`,
		},
		{
			name:        "today: a key whose version is unknown",
			managedKeys: `[{"key": "a"}]`,
			want:        []ohmlabv1alpha1.ManagedKey{{Key: "a"}},
			rewritten:   `[{"key":"a"}]`,
		},
		{name: "a number is neither shape", managedKeys: `[3]`, wantErr: true},
		{name: "a malformed name", managedKeys: `["a\x"]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := `{"apiVersion":"ohmlab.fr/v1alpha1","kind":"VaultSeed","metadata":{"name":"s","namespace":"n"},` +
				`"spec":{"path":"ohmlab/a"},"status":{"managedKeys":` + tt.managedKeys + `}}`
			obj, _, err := decoder.Decode([]byte(raw), nil, nil)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("decoded %s", tt.managedKeys)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			seed := obj.(*ohmlabv1alpha1.VaultSeed)
			if diff := cmp.Diff(tt.want, seed.DeepCopy().Status.ManagedKeys); diff != "" {
				t.Errorf("decoded managed keys (-want +got):\n%s", diff)
			}
			out, err := json.Marshal(seed.Status.ManagedKeys)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.rewritten {
				t.Errorf("written back as %s, want %s", out, tt.rewritten)
			}
			// The reconciler compares statuses with equality.Semantic: a
			// status stored in the first release's shape differs from
			// its rewritten form, so that the rewrite is written.
			var again ohmlabv1alpha1.VaultSeedStatus
			if err := json.Unmarshal([]byte(`{"managedKeys":`+string(out)+`}`), &again); err != nil {
				t.Fatal(err)
			}
			storedAsName := len(tt.want) > 0 && tt.want[0].StoredAsName
			if equal := equality.Semantic.DeepEqual(seed.Status, again); equal == storedAsName {
				t.Errorf("equality.Semantic.DeepEqual(decoded, rewritten) = %v", equal)
			}
		})
	}
}
