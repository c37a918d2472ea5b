package planner

import (
	"crypto/rand"
	"encoding/json"
	"testing"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchSeed is the object of `make bench-scale`: a password, its hash at
// the default cost and a copy of another object's password.
func benchSeed(b *testing.B) *ohmlabv1alpha1.VaultSeed {
	b.Helper()
	raw, err := json.Marshal(m{"password": "<random:24>", "hash": "<bcrypt:password>", "previous": "<ref:ohmlab/bench/00000#password>"})
	if err != nil {
		b.Fatal(err)
	}
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "bench-00001"},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/bench/00001", Data: &apiextensionsv1.JSON{Raw: raw}},
	}
}

// unchanged returns what a quiet resync of seed sees: the path as the
// controller wrote it, and its source. The hash cache g uses knows the
// pair, as it does after the process wrote or verified it.
func unchanged(b *testing.B, seed *ohmlabv1alpha1.VaultSeed, g templating.Generator) (Desired, Observed) {
	b.Helper()
	d := Desired{Owner: seeds.Owner(seed), Analysis: seeds.Analyse(seed).Analysis, ManagedKeys: []string{"hash", "password", "previous"}}
	src := &vaultkv.Secret{Exists: true, Version: 1, Data: m{"password": "the-source-password-24ch"}}
	o := Observed{Path: &vaultkv.Secret{Exists: true, Version: 1, CustomMetadata: map[string]string{ownerKey: d.Owner}}, Refs: map[string]*vaultkv.Secret{"ohmlab/bench/00000": src}}
	p, err := decide(b.Context(), d, Observed{Path: &vaultkv.Secret{}, Refs: o.Refs}, g)
	if err != nil {
		b.Fatal(err)
	}
	o.Path.Data = p.Data
	return d, o
}

// BenchmarkPlanUnchanged is the plan of a quiet resync: nothing to do. With
// the hash known to the cache it costs no bcrypt; uncached is what each
// resync paid when the cache did not hold the pair (a bcrypt compare at
// the default cost).
func BenchmarkPlanUnchanged(b *testing.B) {
	seed := benchSeed(b)
	b.Run("cached", func(b *testing.B) {
		g := templating.Generator{Rand: rand.Reader, Cache: templating.NewHashCache(rand.Reader)}
		d, o := unchanged(b, seed, g)
		for b.Loop() {
			p, err := decide(b.Context(), d, o, g)
			if err != nil || !p.Empty() {
				b.Fatalf("plan = %v, %v; want an empty plan", p.Actions, err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		g := templating.Generator{Rand: rand.Reader}
		d, o := unchanged(b, seed, g)
		for b.Loop() {
			if _, err := decide(b.Context(), d, o, g); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAnalyseSeed is the analysis every reconcile makes of its object.
func BenchmarkAnalyseSeed(b *testing.B) {
	seed := benchSeed(b)
	for b.Loop() {
		seeds.Analyse(seed)
	}
}
