package vaultseed

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

func TestReconcileRequested(t *testing.T) {
	obj := func(annotations map[string]string) *ohmlabv1alpha1.VaultSeed {
		return &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Annotations: annotations}}
	}
	asked := func(v string) map[string]string {
		return map[string]string{ohmlabv1alpha1.ReconcileRequestAnnotation: v}
	}
	tests := []struct {
		name     string
		old, new map[string]string
		want     bool
	}{
		{name: "set", old: nil, new: asked("1"), want: true},
		{name: "set to an empty value", old: nil, new: asked(""), want: true},
		{name: "a new value", old: asked("1"), new: asked("2"), want: true},
		{name: "the same value", old: asked("1"), new: asked("1")},
		{name: "removed", old: asked("1"), new: nil},
		{name: "another annotation changed", old: map[string]string{"a": "1"}, new: map[string]string{"a": "2"}},
		{name: "another annotation changed beside the same value",
			old: map[string]string{"a": "1", ohmlabv1alpha1.ReconcileRequestAnnotation: "1"},
			new: map[string]string{"a": "2", ohmlabv1alpha1.ReconcileRequestAnnotation: "1"}},
		{name: "Flux's annotation", old: nil, new: map[string]string{"reconcile.fluxcd.io/requestedAt": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reconcileRequested.Update(event.UpdateEvent{ObjectOld: obj(tt.old), ObjectNew: obj(tt.new)}); got != tt.want {
				t.Errorf("reconcileRequested.Update() = %v, want %v", got, tt.want)
			}
		})
	}
	// Creates, deletes and generic events pass by the other predicates.
	if reconcileRequested.Create(event.CreateEvent{Object: obj(asked("1"))}) ||
		reconcileRequested.Delete(event.DeleteEvent{Object: obj(asked("1"))}) ||
		reconcileRequested.Generic(event.GenericEvent{Object: obj(asked("1"))}) {
		t.Error("reconcileRequested passes an event other than an update")
	}
}

func TestReconcileAsked(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		handled     string
		want        bool
	}{
		{name: "no annotation"},
		{name: "no annotation, one handled before", handled: "1"},
		{name: "a value never handled", annotations: map[string]string{ohmlabv1alpha1.ReconcileRequestAnnotation: "1"}, want: true},
		{name: "a new value", annotations: map[string]string{ohmlabv1alpha1.ReconcileRequestAnnotation: "2"}, handled: "1", want: true},
		{name: "the value handled", annotations: map[string]string{ohmlabv1alpha1.ReconcileRequestAnnotation: "1"}, handled: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seed := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			seed.Status.LastHandledReconcileAt = tt.handled
			if got := reconcileAsked(seed); got != tt.want {
				t.Errorf("reconcileAsked() = %v, want %v", got, tt.want)
			}
		})
	}
}
