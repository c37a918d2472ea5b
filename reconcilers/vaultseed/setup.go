package vaultseed

import (
	"context"
	"hash/fnv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
)

// SetupWithManager registers the reconciler with a manager whose cache has
// the indexes of IndexFields. Only spec changes, deletions, a label
// change that moves the object in or out of the shard (see
// shardPredicates) and a new value of the annotation
// ohmlab.fr/reconcile-requested-at (reconcileRequested) trigger a reconcile
// (status and other annotation updates do not), and only for objects of
// the shard; writes to a path trigger the shard's objects that reference
// it. Every update also tells the store the copy the cache now holds.
//
// The work queue is controller-runtime's priority queue, so that no object
// waits behind resyncs. A created or changed object, and a
// dependent whose source was written, are queued at the default priority;
// the objects of the initial list (a start or a restart) and every resync
// (see resync) at handler.LowPriority, so new work is reconciled before any
// resync that is merely due. Within one priority the queue is first in,
// first out, so a resync waits at most for the work queued before it.
// The namespaces with new work take turns at the workers (fairQueue), so
// one namespace's burst does not hold back the objects of the others.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.init()
	deleting := predicate.NewPredicateFuncs(func(o client.Object) bool { return !o.GetDeletionTimestamp().IsZero() })
	mine, moved := r.shardPredicates()
	return ctrl.NewControllerManagedBy(mgr).
		Named("vaultseed").
		For(&ohmlabv1alpha1.VaultSeed{}, builder.WithPredicates(mine, predicate.Or(predicate.GenerationChangedPredicate{}, deleting, moved, reconcileRequested))).
		WatchesRawSource(source.Channel(r.dependents, &handler.TypedEnqueueRequestForObject[*ohmlabv1alpha1.VaultSeed]{})).
		// Enqueues nothing: tells lastWrites which copy the cache holds,
		// so a write is forgotten once the cache shows it.
		Watches(&ohmlabv1alpha1.VaultSeed{}, handler.Funcs{
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.store.cached(e.ObjectNew)
			},
		}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RecoverPanic: new(true), UsePriorityQueue: new(true),
			NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
				return newFairQueue(name, rl, mgr.GetLogger(), 1)
			}}).
		Complete(r)
}

// init makes what the reconciler keeps while it runs: its defaults, backoff,
// the dependents' channel and the reference sources.
func (r *Reconciler) init() {
	if r.Timeout == 0 {
		r.Timeout = 2 * time.Minute
	}
	r.backoff = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](backoffBase, backoffMax)
	r.dependents = make(chan event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed], 1024)
	r.sources = newSources(r.ResyncPeriod, time.Now, r.keeps)
	r.vanished = newVanishedPaths(r.Brake, r.ResyncPeriod, time.Now, func(n int, holds bool) { r.Metrics.setVanished(r.Target, n, holds) })
	r.Metrics.setVanished(r.Target, 0, false)
}

// resync is the result of a reconcile that finished: come back when the
// object's next resync is due, at low priority. Each object's resyncs fall
// at a fixed phase of the period, drawn from its name, rather than one
// period after its last reconcile: the resyncs of objects created or
// restarted together spread evenly over the period instead of coming back
// as one burst every period (the bcrypt compares after a restart are
// spread over the first resync), and no object waits more than one period.
func (r *Reconciler) resync(key types.NamespacedName, now time.Time) ctrl.Result {
	return ctrl.Result{RequeueAfter: untilPhase(key, r.ResyncPeriod, now), Priority: new(handler.LowPriority)}
}

// resyncSlots is how many instants of the period the phases fall on. The
// objects of one slot come due together and are reconciled back to back,
// so the work queue, the scheduler and the processor's caches wake once per
// slot rather than once per object (such wake-ups, not the reconciles,
// are most of a quiet resync's CPU); 60 slots keep the period spread: a
// sixtieth of the objects at a time, 10 s apart at the default 10 min,
// within the Vault client's burst (docs/maintainers/performance.md).
const resyncSlots = 60

// untilPhase returns the time from now to the next instant whose offset in
// the period (from the Unix epoch) is key's phase, one of resyncSlots
// instants spread evenly over the period: in (0, period].
func untilPhase(key types.NamespacedName, period time.Duration, now time.Time) time.Duration {
	if period <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key.String()))
	phase := int64(h.Sum64()%resyncSlots) * int64(period) / resyncSlots
	elapsed := (now.UnixNano() - phase) % int64(period)
	if elapsed < 0 {
		elapsed += int64(period)
	}
	return period - time.Duration(elapsed)
}

// referenced reports whether an object of this process references path,
// from the cache's index (no copy of the objects). When the cache cannot
// answer, it says yes: an entry too many costs memory, one too few nothing
// but a read.
func (r *Reconciler) referenced(ctx context.Context, path string) bool {
	found, err := r.indexed(ctx, seedindex.IndexRefPaths, path)
	return found || err != nil
}

// keeps reports whether path is the own path of an object of this process
// (sources: its resyncs keep the entry fresh). When the cache cannot
// answer, it says no: the source is then read from Vault.
func (r *Reconciler) keeps(ctx context.Context, path string) bool {
	found, err := r.indexed(ctx, seedindex.IndexPath, path)
	return found && err == nil
}

// indexed reports whether an object of this process has value in the
// cache's index field.
func (r *Reconciler) indexed(ctx context.Context, field, value string) (bool, error) {
	var list ohmlabv1alpha1.VaultSeedList
	opts := []client.ListOption{client.MatchingFields{field: value}, client.Limit(1), client.UnsafeDisableDeepCopy}
	if r.Selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: r.Selector})
	}
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return false, err
	}
	return len(list.Items) > 0, nil
}

// notifyDependents enqueues the objects that reference path, so a RefPending
// object goes Ready as soon as its source is written and a rotated source
// reaches its copies without waiting for the resync.
func (r *Reconciler) notifyDependents(ctx context.Context, path string) {
	r.notifyDependentsBut(ctx, path, types.NamespacedName{})
}

// notifyDependentsBut is notifyDependents but for except, the dependent
// whose own read of path found the change.
func (r *Reconciler) notifyDependentsBut(ctx context.Context, path string, except types.NamespacedName) {
	var list ohmlabv1alpha1.VaultSeedList
	opts := []client.ListOption{client.MatchingFields{seedindex.IndexRefPaths: path}}
	if r.Selector != nil {
		// Only this shard's: another shard's dependents read the path at
		// their own retry or resync.
		opts = append(opts, client.MatchingLabelsSelector{Selector: r.Selector})
	}
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the objects that reference a path", "path", path)
		return
	}
	for i := range list.Items {
		key := client.ObjectKeyFromObject(&list.Items[i])
		if key == except {
			continue
		}
		if r.sources.expecting(path, key.String()) {
			// Reconciling now and about to read the path (or waiting
			// for this write): the write serves it.
			continue
		}
		// Asked for: not deferred to its phase after a start.
		r.store.add(key, factSeen)
		select {
		case r.dependents <- event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed]{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}

// deferAfterStart reports whether the first reconcile of seed in this
// process waits for the object's resync phase instead of running now: when
// the object was Ready at its current generation before the process
// started (its status says so) and nothing asked for it since (a
// dependent's source written, a reconcile request not handled yet). After
// a restart, the objects of the initial list are then reconciled, and
// their hashes compared once each, spread over the first resync period
// rather than in one burst. A created or changed object, one
// that was not Ready, and every later reconcile run at once. Its Ready metric is set from the status meanwhile.
func (r *Reconciler) deferAfterStart(seed *ohmlabv1alpha1.VaultSeed) bool {
	if r.store.add(client.ObjectKeyFromObject(seed), factSeen) {
		return false
	}
	ready := findCondition(seed, ohmlabv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != seed.Generation || seed.Status.ObservedGeneration != seed.Generation ||
		reconcileAsked(seed) {
		return false
	}
	r.Metrics.setReady(r.Target, seed.Namespace, seed.Name, ready.Reason, true)
	return true
}

// forgetObject drops everything the process remembers of a deleted object:
// its metrics, hash cache entries, backoff and per-object state.
func (r *Reconciler) forgetObject(key types.NamespacedName) {
	r.Metrics.forget(r.Target, key.Namespace, key.Name)
	r.Generator.Cache.Forget(key.String())
	r.backoff.Forget(key)
	r.store.forget(key)
}
