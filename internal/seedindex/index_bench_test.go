package seedindex

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// BenchmarkIndexMemory is the live heap of the indexes of 10,000 objects,
// every second one referencing the previous one's path, beside the store
// of the objects: the keys across namespaces that IndexFields adds, and the
// same with controller-runtime's IndexField's key per namespace too.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 10000
	objs := make([]*ohmlabv1alpha1.VaultSeed, n)
	for i := range objs {
		data := fmt.Sprintf(`{"password": "<random:24>", "previous": "<ref:ohmlab/platforms/bench/objects/%05d#password>"}`, i-1)
		if i%2 == 0 {
			data = `{"password": "<random:24>"}`
		}
		objs[i] = &ohmlabv1alpha1.VaultSeed{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("bench-%05d", i)},
			Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: fmt.Sprintf("ohmlab/platforms/bench/objects/%05d", i), Data: &apiextensionsv1.JSON{Raw: []byte(data)}},
		}
	}
	// What IndexField indexes: each key across namespaces and in the
	// object's namespace (controller-runtime's KeyToNamespacedKey).
	perNamespaceToo := toolscache.Indexers{}
	for name, f := range cacheIndexers() {
		perNamespaceToo[name] = func(obj any) ([]string, error) {
			keys, err := f(obj)
			ns := obj.(*ohmlabv1alpha1.VaultSeed).Namespace
			for _, k := range slices.Clone(keys) {
				keys = append(keys, ns+k[len("__all_namespaces"):])
			}
			return keys, err
		}
	}
	for _, tt := range []struct {
		name     string
		indexers toolscache.Indexers
	}{{"keys=across-namespaces", cacheIndexers()}, {"keys=per-namespace-too", perNamespaceToo}} {
		b.Run(tt.name, func(b *testing.B) {
			var before, after runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, tt.indexers)
				for _, o := range objs {
					if err := store.Add(o); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/object")
				runtime.KeepAlive(store)
			}
		})
	}
}
