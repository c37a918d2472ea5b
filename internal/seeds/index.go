package seeds

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// Cache indexes of VaultSeed objects.
const (
	// IndexPath indexes objects by spec.path.
	IndexPath = "spec.path"
	// IndexRefPaths indexes objects by the paths their references read.
	IndexRefPaths = "spec.refPaths"
)

// IndexFields registers the cache indexes the reconciler and the webhook
// use. Call it once per manager, before the manager starts.
func IndexFields(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &ohmlabv1alpha1.VaultSeed{}, IndexPath, func(o client.Object) []string {
		return []string{o.(*ohmlabv1alpha1.VaultSeed).Spec.Path}
	}); err != nil {
		return fmt.Errorf("indexing %s: %w", IndexPath, err)
	}
	if err := idx.IndexField(ctx, &ohmlabv1alpha1.VaultSeed{}, IndexRefPaths, func(o client.Object) []string {
		_, a := Analyse(o.(*ohmlabv1alpha1.VaultSeed))
		return a.RefPaths
	}); err != nil {
		return fmt.Errorf("indexing %s: %w", IndexRefPaths, err)
	}
	return nil
}

