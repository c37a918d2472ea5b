package reconcilers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the RESTMapping questions that reach it.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

func TestRememberingMapper(t *testing.T) {
	seeds := schema.GroupVersionKind{Group: "ohmlab.fr", Version: "v1alpha1", Kind: "VaultSeed"}
	known := meta.NewDefaultRESTMapper([]schema.GroupVersion{seeds.GroupVersion()})
	known.Add(seeds, meta.RESTScopeNamespace)
	inner := &countingMapper{RESTMapper: known}
	m := &rememberingMapper{RESTMapper: inner, mappings: map[string]meta.RESTMapping{}}

	for i := range 3 {
		got, err := m.RESTMapping(seeds.GroupKind(), seeds.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got.Scope.Name() != meta.RESTScopeNameNamespace || got.Resource.Resource != "vaultseeds" {
			t.Fatalf("question %d: mapping %+v, want the namespaced vaultseeds", i, got)
		}
		got.Resource.Resource = "changed by the caller"
	}
	if inner.asked != 1 {
		t.Errorf("three questions at a version reached the mapper %d times, want once", inner.asked)
	}

	unknown := schema.GroupKind{Group: "ohmlab.fr", Kind: "Unknown"}
	for range 2 {
		if _, err := m.RESTMapping(unknown, "v1alpha1"); !meta.IsNoMatchError(err) {
			t.Fatalf("an unknown kind: %v, want a no-match error", err)
		}
	}
	if inner.asked != 3 {
		t.Errorf("an unknown kind asked twice reached the mapper %d times in all, want 1+2: errors are not remembered", inner.asked)
	}
	for range 2 {
		if _, err := m.RESTMapping(seeds.GroupKind()); err != nil {
			t.Fatal(err)
		}
	}
	if inner.asked != 5 {
		t.Errorf("the preferred version asked twice reached the mapper %d times in all, want 3+2: it is not remembered", inner.asked)
	}
}
