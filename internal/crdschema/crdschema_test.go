package crdschema

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidate runs the embedded CRD's validators on objects as decoded
// JSON; cmd/ohmlab's TestSchemaIsCheckedAsTheAPIServerDoes compares them
// with a real kube-apiserver.
func TestValidate(t *testing.T) {
	seed := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed",
			"metadata": map[string]any{"name": "a", "namespace": "vo"}, "spec": spec}
	}
	tests := []struct {
		name string
		obj  map[string]any
		want []string // "<field>: <message>"
	}{
		{name: "valid", obj: seed(map[string]any{"path": "ohmlab/a", "rotate": map[string]any{"token": "t1", "keys": []any{"k"}}})},
		{name: "unknown fields are pruned, status is dropped", obj: func() map[string]any {
			o := seed(map[string]any{"path": "ohmlab/a", "dta": "x"})
			o["status"] = map[string]any{"version": "not a number"}
			return o
		}()},
		{name: "a token of 300 characters blocks the rules", obj: seed(map[string]any{"path": "ohmlab", "rotate": map[string]any{"token": strings.Repeat("x", 300)}}),
			want: []string{
				"spec.rotate.token: Too long: may not be more than 256 bytes",
				"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
			}},
		{name: "a key twice in a set", obj: seed(map[string]any{"path": "ohmlab/a", "rotate": map[string]any{"token": "t", "keys": []any{"k", "k"}}}),
			want: []string{`spec.rotate.keys[1]: Duplicate value: "k"`}},
		{name: "a tab in a token", obj: seed(map[string]any{"path": "ohmlab/a", "rotate": map[string]any{"token": "a\tb"}}),
			want: []string{`spec.rotate.token: Invalid value: "a\tb": must be printable: letters, marks, digits, punctuation, symbols and the ASCII space only, no tab, newline, other space or invisible character (Vault refuses them in custom_metadata, where the token is recorded)`}},
		{name: "a null deletionPolicy takes the default", obj: seed(map[string]any{"path": "ohmlab/a", "deletionPolicy": nil})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cmp.Diff(nil, tt.obj)
			errs, err := Validate(context.Background(), "v1alpha1", tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if cmp.Diff(nil, tt.obj) != before {
				t.Error("Validate changed the object it was given")
			}
		})
	}
	if _, err := Validate(context.Background(), "v1", seed(nil)); err == nil {
		t.Error("a version the CRD does not serve: no error")
	}
}
