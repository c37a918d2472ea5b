package vaultseed

import (
	"context"
	"fmt"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
)

// rewriteFirstReleaseStatus writes status.managedKeys of an object stored
// by the first release, a list of names, in today's shape, each key with an
// unknown version (docs/users/upgrading.md). A status patch computed from the decoded
// object would leave the list as stored: the decoded names equal their
// rewritten form. This patch carries the whole list, locked on the
// resourceVersion read so that a stale copy never replaces a newer list.
func (r *Reconciler) rewriteFirstReleaseStatus(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	if !slices.ContainsFunc(seed.Status.ManagedKeys, func(m ohmlabv1alpha1.ManagedKey) bool { return m.StoredAsName }) {
		return nil
	}
	base := seed.DeepCopy()
	base.Status.ManagedKeys = nil
	if err := r.Client.Status().Patch(ctx, seed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("rewriting status.managedKeys of %s, stored by the first release as names: %w", seeds.Owner(seed), err)
	}
	r.recordWrite(ctx, base.ResourceVersion, seed)
	ctrl.LoggerFrom(ctx).Info("rewrote status.managedKeys, stored by the first release as names: their versions are unknown, so a prune keeps them", "keys", len(seed.Status.ManagedKeys))
	return nil
}
