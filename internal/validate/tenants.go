package validate

import (
	"slices"

	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
)

// Scope returns the problems of seed's scope in a tenant namespace of
// tenants (tenancy.Check at admission: no adoption is known yet), with
// reason OutOfScope; nil in any other namespace.
func Scope(tenants tenancy.Config, analysed seeds.Analysed) []Problem {
	seed := analysed.Seed
	if !tenants.IsTenant(seed.Namespace) {
		return nil
	}
	v := tenancy.Check(tenants, seed.Namespace, tenancy.ObjectOf(seed.Spec.Path, string(seed.Spec.DeletionPolicy), analysed.Analysis))
	out := make([]Problem, len(v.Problems))
	for i, p := range v.Problems {
		out[i] = Problem{Reason: tenancy.ReasonOutOfScope, Key: p.Key, Message: p.Message}
	}
	return out
}

// WithScope is verdict v on seed with seed's Scope problems added.
func WithScope(v Verdict, tenants tenancy.Config, seed seeds.Analysed) Verdict {
	scope := Scope(tenants, seed)
	if len(scope) == 0 {
		return v
	}
	v.Problems = sortProblems(slices.Concat(v.Problems, scope))
	return v
}
