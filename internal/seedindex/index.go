// Package seedindex indexes VaultSeed objects in a controller-runtime
// cache (by spec.path and by the paths their references read) and finds the
// objects related to one through them: what the webhook and the reconciler
// look up, and the CLI does not need.
package seedindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
)

// Cache indexes of VaultSeed objects.
const (
	// IndexPath indexes objects by spec.path.
	IndexPath = "spec.path"
	// IndexRefPaths indexes objects by the paths their references read.
	IndexRefPaths = "spec.refPaths"
)

// Indexes are the index functions of IndexPath and IndexRefPaths, by
// field, for VaultSeed objects (a fake client takes them with WithIndex).
var Indexes = map[string]client.IndexerFunc{
	IndexPath: func(o client.Object) []string {
		return []string{o.(*ohmlabv1alpha1.VaultSeed).Spec.Path}
	},
	// An object whose spec.data cannot be decoded reads no path here;
	// Related reports it.
	IndexRefPaths: func(o client.Object) []string {
		return seeds.Analyse(o.(*ohmlabv1alpha1.VaultSeed)).Analysis.RefPaths
	},
}

// IndexFields registers Indexes in a manager's cache. Call it once per
// manager, before the manager starts.
//
// Every lookup is across namespaces (a Vault path is one for the cluster),
// so each value is indexed only under the key controller-runtime's cache
// reads for a List without a namespace: its IndexField also keys every
// value by the object's namespace, which nothing here asks for, and a key
// costs a set of its own (docs/maintainers/performance.md, memory). A List of these fields in one namespace finds nothing.
func IndexFields(ctx context.Context, mgr ctrl.Manager) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &ohmlabv1alpha1.VaultSeed{})
	if err != nil {
		return fmt.Errorf("indexing the VaultSeeds: %w", err)
	}
	return informer.AddIndexers(cacheIndexers())
}

// cacheIndexers are Indexes as controller-runtime's cache names and keys
// them (its internal FieldIndexName and KeyToNamespacedKey for all
// namespaces), each value once.
func cacheIndexers() toolscache.Indexers {
	indexers := toolscache.Indexers{}
	for field, fn := range Indexes {
		indexers["field:"+field] = func(obj any) ([]string, error) {
			o, ok := obj.(client.Object)
			if !ok {
				return nil, fmt.Errorf("indexing %s: %T is not an object", field, obj)
			}
			values := fn(o)
			keys := make([]string, len(values))
			for i, v := range values {
				keys[i] = "__all_namespaces/" + v
			}
			return keys, nil
		}
	}
	return indexers
}

// Related returns the other objects that can take part in seed's verdict,
// analysed: those on its path (a duplicate) and those on every path
// reachable from it through references (a cycle through its path lies
// among them). It lists them path by path with the IndexPath index of
// reader (the manager's cache), not the whole cache, and leaves out any
// copy of seed itself (the cached version of an update). The objects may
// be the cache's own: the caller must not change them.
//
// An object among them whose spec.data cannot be decoded (the API server's
// schema makes it an object, so only a cache fed otherwise holds one) is an
// error naming it: its references are unknown, and a verdict without them
// could miss a cycle.
func Related(ctx context.Context, reader client.Reader, seed seeds.Analysed) ([]seeds.Analysed, error) {
	queue := append([]string{seed.Seed.Spec.Path}, seed.Analysis.RefPaths...)
	seen := map[string]bool{}
	var out []seeds.Analysed
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		// Only read: the cache's own objects, not copies, which were most
		// of what a quiet reconcile allocated.
		var list ohmlabv1alpha1.VaultSeedList
		if err := reader.List(ctx, &list, client.MatchingFields{IndexPath: p}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the VaultSeeds on %s: %w", p, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if o.Namespace == seed.Seed.Namespace && o.Name == seed.Seed.Name {
				continue
			}
			if _, err := seeds.Object(o); err != nil {
				return nil, fmt.Errorf("analysing the VaultSeeds related to %s: %w", seeds.Owner(seed.Seed), err)
			}
			a := seeds.Analyse(o)
			out = append(out, a)
			queue = append(queue, a.Analysis.RefPaths...)
		}
	}
	return out, nil
}
