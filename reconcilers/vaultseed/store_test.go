package vaultseed

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestStoreFacts(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	var k store
	steps := []struct {
		name string
		do   func() bool
		want bool
	}{
		{"an empty set has nothing", func() bool { return k.has(a, factSeen) }, false},
		{"a first add was not recorded before", func() bool { return k.add(a, factSeen) }, false},
		{"a second add was", func() bool { return k.add(a, factSeen) }, true},
		{"facts are recorded apart", func() bool { return k.has(a, factAttempted) }, false},
		{"objects are recorded apart", func() bool { return k.has(b, factSeen) }, false},
		{"another fact of the same object", func() bool { return k.add(a, factAttempted) }, false},
		{"the first fact stays", func() bool { return k.has(a, factSeen) }, true},
		{"forget drops every fact", func() bool { k.forget(a); return k.has(a, factSeen) || k.has(a, factAttempted) }, false},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Errorf("%s: got %t, want %t", s.name, got, s.want)
		}
	}
}
