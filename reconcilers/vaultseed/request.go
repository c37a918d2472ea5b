package vaultseed

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// reconcileRequested passes an update that sets the annotation
// ohmlab.fr/reconcile-requested-at or changes its value, as Flux's
// ReconcileRequestedPredicate does for reconcile.fluxcd.io/requestedAt: a
// person asks for a reconcile now, after a change Kubernetes cannot see (a
// version undeleted, a source filled by hand). Removing the annotation asks
// for nothing.
var reconcileRequested = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		v, ok := requestedAt(e.ObjectNew)
		old, had := requestedAt(e.ObjectOld)
		return ok && (!had || v != old)
	},
}

// requestedAt is the value of the object's annotation
// ohmlab.fr/reconcile-requested-at, and whether it has one.
func requestedAt(o client.Object) (string, bool) {
	v, ok := o.GetAnnotations()[ohmlabv1alpha1.ReconcileRequestAnnotation]
	return v, ok
}

// reconcileAsked says whether the object carries a reconcile request that
// no reconcile has handled yet: its annotation's value is not
// status.lastHandledReconcileAt. Such a reconcile reads every reference
// source from Vault, past what sources remembers: the person asking may
// have just changed one by hand.
func reconcileAsked(seed *ohmlabv1alpha1.VaultSeed) bool {
	v, ok := requestedAt(seed)
	return ok && v != seed.Status.LastHandledReconcileAt
}
