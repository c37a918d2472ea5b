package vaultseed

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// SetupWithManager registers the reconciler with a manager whose cache has
// the indexes of IndexFields. Only spec changes and deletions trigger a
// reconcile (status and annotation updates do not); writes to a path
// trigger the objects that reference it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if r.Timeout == 0 {
		r.Timeout = 2 * time.Minute
	}
	r.backoff = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](backoffBase, backoffMax)
	r.dependents = make(chan event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed], 1024)
	deleting := predicate.NewPredicateFuncs(func(o client.Object) bool { return !o.GetDeletionTimestamp().IsZero() })
	return ctrl.NewControllerManagedBy(mgr).
		Named("vaultseed").
		For(&ohmlabv1alpha1.VaultSeed{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting))).
		WatchesRawSource(source.Channel(r.dependents, &handler.TypedEnqueueRequestForObject[*ohmlabv1alpha1.VaultSeed]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RecoverPanic: new(true)}).
		Complete(r)
}

// notifyDependents enqueues the objects that reference path, so a RefPending
// object goes Ready as soon as its source is written and a rotated source
// reaches its copies without waiting for the resync.
func (r *Reconciler) notifyDependents(ctx context.Context, path string) {
	var list ohmlabv1alpha1.VaultSeedList
	if err := r.Client.List(ctx, &list, client.MatchingFields{seeds.IndexRefPaths: path}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the objects that reference a path", "path", path)
		return
	}
	for i := range list.Items {
		select {
		case r.dependents <- event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed]{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}

// cycle returns the message of a reference cycle through the object's path,
// or "". It analyses only the objects reachable from the object through
// references (seeds.Related), not the whole cache.
func (r *Reconciler) cycle(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, obj templating.Object) (string, error) {
	related, err := seeds.Related(ctx, r.Client, seed)
	if err != nil || len(related) == 0 {
		return "", err
	}
	objs := []templating.Object{obj}
	for _, o := range related {
		other, _ := seeds.Object(o)
		objs = append(objs, other)
	}
	return ringThrough(templating.AnalyseSet(objs), seeds.Owner(seed)), nil
}

// ringThrough returns the message of the reference cycle through the object
// owner ("<namespace>/<name>") among the problems of templating.AnalyseSet,
// or "".
func ringThrough(set []templating.Problem, owner string) string {
	for _, p := range set {
		if p.Reason == templating.ReasonRefCycle && p.Object == owner {
			return p.Message
		}
	}
	return ""
}
