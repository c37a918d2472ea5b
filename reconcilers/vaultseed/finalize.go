package vaultseed

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/planner"
)

// syncFinalizer adds the finalizer to an object whose path must be deleted
// with it, and removes it from any other.
func (r *Reconciler) syncFinalizer(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	want := seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && r.allowDelete(seed.Namespace) && !r.ObserveOnly
	if controllerutil.ContainsFinalizer(seed, ohmlabv1alpha1.Finalizer) == want {
		return nil
	}
	before := seed.DeepCopy()
	if want {
		controllerutil.AddFinalizer(seed, ohmlabv1alpha1.Finalizer)
	} else {
		controllerutil.RemoveFinalizer(seed, ohmlabv1alpha1.Finalizer)
	}
	// The optimistic lock makes a patch computed from a stale copy fail
	// instead of dropping a finalizer someone else added meanwhile.
	if err := r.Client.Patch(ctx, seed, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the finalizer of %s: %w", seeds.Owner(seed), err)
	}
	r.recordWrite(ctx, before.ResourceVersion, seed)
	return nil
}

// finalize removes the path of a deleted object that carries the finalizer,
// when the path carries this object's owner marker, then the finalizer.
func (r *Reconciler) finalize(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(seed, ohmlabv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(seed)
	if seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && r.allowDelete(seed.Namespace) && !r.ObserveOnly && r.inScope(seed) {
		if err := r.deletePath(ctx, seed); err != nil {
			out := backendOutcome(err)
			if rerr := r.report(ctx, seed, out); rerr != nil {
				return ctrl.Result{}, rerr
			}
			return ctrl.Result{RequeueAfter: r.backoff.When(key)}, nil
		}
	}
	before := seed.DeepCopy()
	controllerutil.RemoveFinalizer(seed, ohmlabv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, seed, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer of %s: %w", seeds.Owner(seed), err)
	}
	r.backoff.Forget(key)
	return ctrl.Result{}, nil
}

// deletePath deletes the object's path, with the object's Vault identity,
// when it carries the object's owner marker.
func (r *Reconciler) deletePath(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	kv, err := r.kvFor(seed.Namespace)
	if err != nil {
		return err
	}
	s, err := kv.Read(ctx, seed.Spec.Path)
	if err != nil {
		return err
	}
	if owner := s.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey]; owner != seeds.Owner(seed) {
		ctrl.LoggerFrom(ctx).Info("not deleting a path this object does not own", "path", seed.Spec.Path, "owner", owner)
		return nil
	}
	if err := kv.Delete(ctx, seed.Spec.Path); err != nil {
		return err
	}
	r.sources.forget(seed.Spec.Path)
	r.event(seed, corev1.EventTypeNormal, ohmlabv1alpha1.EventReasonDeleted, "Delete", planner.Text("deleted the path and all its versions"))
	ctrl.LoggerFrom(ctx).Info("deleted the path", "path", seed.Spec.Path)
	return nil
}
