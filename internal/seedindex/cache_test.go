package seedindex_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestIndexFieldsKeysEachValueOnce: on a real cache, the lookups across
// namespaces find the objects of every namespace by path and by reference,
// and the indexes hold one key per value, not controller-runtime's two
// (docs/maintainers/performance.md, memory).
func TestIndexFieldsKeysEachValueOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	const src, dep = "ohmlab/platforms/test/index/src", "ohmlab/platforms/test/index/dep"
	objs := []*ohmlabv1alpha1.VaultSeed{
		seed("src", src, `{"password": "<random:16>"}`),
		seed("dep", dep, `{"copy": "<ref:`+src+`#password>"}`),
	}
	objs[1].Namespace = "other"
	for _, o := range objs {
		g.Expect(cp.EnsureNamespace(ctx, o.Namespace)).To(Succeed())
		g.Expect(cp.Client.Create(ctx, o)).To(Succeed())
	}

	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: cp.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seedindex.IndexFields(ctx, mgr)).To(Succeed())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		g.Expect(<-done).To(Succeed())
	})
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	names := func(field, value string) []string {
		var list ohmlabv1alpha1.VaultSeedList
		g.Expect(mgr.GetCache().List(ctx, &list, client.MatchingFields{field: value})).To(Succeed())
		var out []string
		for _, o := range list.Items {
			out = append(out, o.Namespace+"/"+o.Name)
		}
		slices.Sort(out)
		return out
	}
	g.Eventually(func() []string { return names(seedindex.IndexPath, src) }, 10*time.Second).To(Equal([]string{"vo/src"}))
	g.Expect(names(seedindex.IndexPath, dep)).To(Equal([]string{"other/dep"}))
	g.Expect(names(seedindex.IndexRefPaths, src)).To(Equal([]string{"other/dep"}), "the dependent in another namespace")

	informer, err := mgr.GetCache().GetInformer(ctx, &ohmlabv1alpha1.VaultSeed{})
	g.Expect(err).NotTo(HaveOccurred())
	indexer := informer.(toolscache.SharedIndexInformer).GetIndexer()
	for field, want := range map[string]int{seedindex.IndexPath: 2, seedindex.IndexRefPaths: 1} {
		g.Expect(indexer.ListIndexFuncValues("field:"+field)).To(HaveLen(want), "keys of %s", field)
	}
}
