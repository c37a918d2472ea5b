package vaultseed

import (
	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/planner/plantest"
)

// The planner's fixtures, under the names the tests of both packages use.
type m = plantest.M

const testNamespace = plantest.Namespace

var (
	keycloak = plantest.Keycloak
	seeded   = plantest.Seeded
	md       = plantest.MD
)

func analyseAll(objs []*ohmlabv1alpha1.VaultSeed) []seeds.Analysed {
	out := make([]seeds.Analysed, len(objs))
	for i, o := range objs {
		out[i] = seeds.Analyse(o)
	}
	return out
}
