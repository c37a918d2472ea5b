package vaultseed

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	var w store
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
			w := store{objects: maps.Clone(w.objects)}
			got := tc.cached.DeepCopy()
			w.latest(got, w.lastWrite(client.ObjectKeyFromObject(got)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("latest (-want +got):\n%s", diff)
			}
		})
	}
}

// len is how many objects' writes are remembered.
func (w *store) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.objects {
		if e.last != nil {
			n++
		}
	}
	return n
}

func TestLastWritesAreForgottenOnceTheCacheHoldsTheWrite(t *testing.T) {
	at := func(rv, uid string) *ohmlabv1alpha1.VaultSeed {
		return &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: types.UID(uid), ResourceVersion: rv}}
	}
	// Two writes in a row: 10 -> 11 -> 12.
	var w store
	w.wrote("10", at("11", "u"))
	w.wrote("11", at("12", "u"))

	for _, tc := range []struct {
		name   string
		cached *ohmlabv1alpha1.VaultSeed
		kept   bool
	}{
		{"the copy before both writes: kept", at("10", "u"), true},
		{"the copy between them: kept", at("11", "u"), true},
		{"the last write: forgotten", at("12", "u"), false},
		{"a newer copy (another writer): forgotten", at("13", "u"), false},
		{"another object under the name (a late event of one deleted since): kept", at("13", "other"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := store{objects: maps.Clone(w.objects)}
			w.cached(tc.cached)
			if kept := w.len() == 1; kept != tc.kept {
				t.Errorf("kept: %v, want %v", kept, tc.kept)
			}
		})
	}
}

// TestLastWritesServeACopyReadBeforeTheWatchForgotTheWrite: the watch may
// forget the write between a reconcile's read of an older copy and its call
// to latest; what the reconcile took before the read still serves it.
func TestLastWritesServeACopyReadBeforeTheWatchForgotTheWrite(t *testing.T) {
	written := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "u", ResourceVersion: "11"}}
	written.Status.ManagedKeys = []ohmlabv1alpha1.ManagedKey{{Key: "a", Version: 1}}
	var w store
	w.wrote("10", written)

	last := w.lastWrite(client.ObjectKeyFromObject(written))
	older := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "u", ResourceVersion: "10"}}
	w.cached(written) // the watch, meanwhile
	w.latest(older, last)
	if diff := cmp.Diff(written, older); diff != "" {
		t.Errorf("latest (-want +got):\n%s", diff)
	}
	if w.len() != 0 {
		t.Errorf("%d writes remembered after the cache held them, want 0", w.len())
	}
}

// TestNoWriteIsRememberedOnceTheObjectsAreQuiet: once the cache holds the
// controller's writes (status; the finalizer of a path deleted with its
// object), the reconciler remembers none of them, without waiting for the
// objects' resyncs (issue 25, item 4: 4.1 MiB at 10,000 objects).
func TestNoWriteIsRememberedOnceTheObjectsAreQuiet(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{allowDelete: true})
	const n = 12
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		obj := f.seed(name, f.path(name), `{"password": "<random:16>"}`)
		if i%2 == 0 {
			obj.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
		}
		f.create(obj)
	}
	for i := range n {
		f.waitReady(fmt.Sprintf("app-%d", i))
	}
	g.Expect(f.get("app-0").Finalizers).To(ConsistOf(ohmlabv1alpha1.Finalizer), "a finalizer write too")
	g.Eventually(f.r.store.len).WithTimeout(5*time.Second).Should(BeZero(), "writes remembered after the objects went Ready")
}
