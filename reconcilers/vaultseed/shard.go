package vaultseed

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// owns says whether the object belongs to this process's shard
// (docs/users/sharding.md). A nil Selector owns every object.
func (r *Reconciler) owns(o client.Object) bool {
	return r.Selector == nil || r.Selector.Matches(labels.Set(o.GetLabels()))
}

// shardPredicates are the predicates of the watch of the process's own
// objects: an event passes when the object belongs to the shard before or
// after it (an object that leaves the shard is reconciled once more, to be
// forgotten), and a label change that moves an object in or out of the
// shard passes even when the generation does not change. With a cache
// filtered by the shard's selector, the API server already turns an object
// leaving the shard into a delete event and one joining it into a create.
// An update in which the process the object left marks it ShardChanged
// passes too: whatever the order of that write and of this process's
// first reconcile, this process writes the status last.
func (r *Reconciler) shardPredicates() (mine, moved predicate.Predicate) {
	mine = predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return r.owns(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return r.owns(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return r.owns(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return r.owns(e.ObjectOld) || r.owns(e.ObjectNew) },
	}
	moved = predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return r.owns(e.ObjectOld) != r.owns(e.ObjectNew) ||
				r.owns(e.ObjectNew) && handedOver(e.ObjectNew) && !handedOver(e.ObjectOld)
		},
	}
	return mine, moved
}

// handedOver says whether the object's Ready condition is the one the
// process it left writes (ShardChanged).
func handedOver(o client.Object) bool {
	seed, ok := o.(*ohmlabv1alpha1.VaultSeed)
	if !ok {
		return false
	}
	ready := findCondition(seed, ohmlabv1alpha1.ConditionReady)
	return ready != nil && ready.Reason == ohmlabv1alpha1.ReasonShardChanged
}

// leave handles an object that is no longer this process's: deleted, or
// moved to another shard by its label. cached is the object as the cache
// holds it, nil when the cache no longer does (a label-filtered cache drops
// an object that leaves the shard as if it were deleted; the live object
// tells the two apart). The process forgets the object; if it had
// reconciled it and the object moved, it first marks the status
// ShardChanged (markShardChanged), so that a move to a shard no process
// runs does not leave Ready=True behind, kept by nobody.
func (r *Reconciler) leave(ctx context.Context, key types.NamespacedName, cached *ohmlabv1alpha1.VaultSeed) error {
	if !r.store.has(key, factAttempted) {
		r.forgetObject(key)
		return nil
	}
	seed := cached
	if seed == nil {
		// A list by name rather than a get: the chart's Role grants
		// list and watch on VaultSeeds (what the cache needs), not get.
		var live ohmlabv1alpha1.VaultSeedList
		if err := r.APIReader.List(ctx, &live, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name}); err != nil {
			return fmt.Errorf("reading the object that left the cache: %w", err)
		}
		if len(live.Items) == 0 {
			r.forgetObject(key)
			return nil
		}
		seed = &live.Items[0]
		if r.owns(seed) {
			// Still this shard's (labelled back): the cache's create
			// event brings it back.
			return nil
		}
	}
	if seed.DeletionTimestamp.IsZero() {
		if err := r.markShardChanged(ctx, seed); err != nil {
			return err
		}
	}
	r.forgetObject(key)
	return nil
}

// markShardChanged writes, once, that the object's status is no longer kept
// by this process: Ready=Unknown and Reconciling=True, reason ShardChanged,
// naming the shard it moved to. It changes nothing else (not Vault, the
// finalizer or managedKeys). The patch is locked on the resourceVersion
// read: a conflict means the object changed since, most likely the new
// shard's process wrote its own status, which this write must not replace,
// so it is dropped. The new process reconciles the object when it sees this
// write (shardPredicates), so it is never the final word of a running shard.
func (r *Reconciler) markShardChanged(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	log := ctrl.LoggerFrom(ctx)
	shard, labelled := seed.Labels[ohmlabv1alpha1.ShardLabel]
	message := shardChangedMessage(shard, labelled)
	updated := seed.DeepCopy()
	set := func(typ string, status metav1.ConditionStatus) {
		meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: ohmlabv1alpha1.ReasonShardChanged, Message: message, ObservedGeneration: seed.Generation,
		})
	}
	set(ohmlabv1alpha1.ConditionReady, metav1.ConditionUnknown)
	set(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue)
	meta.RemoveStatusCondition(&updated.Status.Conditions, ohmlabv1alpha1.ConditionStalled)
	if meta.FindStatusCondition(updated.Status.Conditions, ohmlabv1alpha1.ConditionDrifted) != nil {
		// What the last plan found no longer holds once nobody here plans.
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionUnknown)
	}
	err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(seed, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		log.V(1).Info("the object changed after it left the shard: its status is left to its new process", "shard", shard)
		return nil
	case err != nil:
		return fmt.Errorf("marking the status %s: %w", ohmlabv1alpha1.ReasonShardChanged, err)
	}
	log.Info("the object left the shard: its status says so until the process of its shard reconciles it", "shard", shard, "labelled", labelled)
	return nil
}

// shardChangedMessage is the message of ShardChanged: the process the
// object now belongs to, from its ohmlab.fr/shard label.
func shardChangedMessage(shard string, labelled bool) string {
	const stale = "until it does, this status is not kept up to date"
	switch {
	case !labelled:
		return "no longer labelled " + ohmlabv1alpha1.ShardLabel + ": the process without a shard reconciles it now; " + stale
	case shard == "":
		return "labelled " + ohmlabv1alpha1.ShardLabel + " with an empty value: no process reconciles it (remove the label or name a shard of targets.vault.shards); this status is not kept up to date"
	default:
		return fmt.Sprintf("labelled %s=%s: the process of shard %s reconciles it now; %s", ohmlabv1alpha1.ShardLabel, shard, shard, stale)
	}
}
