package vaultseed

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

func TestLastWritesServeTheLastWriteToOlderCopies(t *testing.T) {
	at := func(rv string, uid string, managed ...string) *ohmlabv1alpha1.VaultSeed {
		s := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: types.UID(uid), ResourceVersion: rv}}
		for _, k := range managed {
			s.Status.ManagedKeys = append(s.Status.ManagedKeys, ohmlabv1alpha1.ManagedKey{Key: k, Version: 1})
		}
		return s
	}
	// Two writes in a row (a finalizer, then status): 10 -> 11 -> 12.
	var w lastWrites
	finalizer := at("11", "u", "a")
	finalizer.Finalizers = []string{ohmlabv1alpha1.Finalizer}
	w.wrote("10", finalizer)
	written := at("12", "u", "a", "b")
	written.Finalizers = []string{ohmlabv1alpha1.Finalizer}
	w.wrote("11", written)

	for _, tc := range []struct {
		name   string
		cached *ohmlabv1alpha1.VaultSeed
		want   *ohmlabv1alpha1.VaultSeed
	}{
		{"a copy before both writes gets the last one", at("10", "u", "a"), written},
		{"a copy between them gets the last one", finalizer, written},
		{"the copy of the last write is kept as it is", at("12", "u", "a", "b"), at("12", "u", "a", "b")},
		{"a newer copy (another writer) is kept as it is", at("13", "u"), at("13", "u")},
		{"an object created anew under the name is kept as it is", at("10", "other"), at("10", "other")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := lastWrites{objects: maps.Clone(w.objects)}
			got := tc.cached.DeepCopy()
			w.latest(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("latest (-want +got):\n%s", diff)
			}
		})
	}
}
