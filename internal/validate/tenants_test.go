package validate_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/internal/validate"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// TestWithScope: a tenant's object gets tenancy.Check's problems, with
// reason OutOfScope, beside its other problems; any other object gets none.
func TestWithScope(t *testing.T) {
	tenants := tenancy.DefaultConfig()
	tenants.Enabled, tenants.Namespaces = true, []string{"team-a"}
	refMessage := "<ref:> must read a path under ohmlab/tenants/team-a/ (this namespace's prefix); a tenant's object cannot read elsewhere"
	out := seed("out", "ohmlab/platforms/p/core/x", `{"k":"<ref:ohmlab/tenants/team-b/x#k>","a.b":"`+secret+`"}`)
	tests := []struct {
		name      string
		namespace string
		want      []validate.Problem
	}{
		{name: "in a tenant namespace", namespace: "team-a", want: []validate.Problem{
			{Reason: "InvalidSpec", Key: "a.b", Message: `key name "a.b" contains a dot: nest maps instead`},
			{Reason: "OutOfScope", Key: "k", Message: refMessage},
			{Reason: "OutOfScope", Key: "spec.path", Message: "must be a path under ohmlab/tenants/team-a/, this namespace's prefix (" + templating.PathRule + "); a tenant's object cannot choose another"},
		}},
		{name: "in a platform namespace", namespace: "vo", want: []validate.Problem{
			{Reason: "InvalidSpec", Key: "a.b", Message: `key name "a.b" contains a dot: nest maps instead`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := out.DeepCopy()
			s.Namespace = tt.namespace
			a := seeds.Analyse(s)
			got := validate.WithScope(validate.Seed(a, nil, nil), tenants, a).Problems
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
