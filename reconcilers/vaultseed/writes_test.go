package vaultseed

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// A dependent reconciled just before its source's object, both new, costs
// the Kubernetes API what any new object costs: one status write (Ready)
// and one event (Created), counted on the API server by a watch. Its wait
// for a source that is about to be written is not reported as RefPending
// (issue 25: a fifth of the dependents created beside their sources wrote
// a RefPending status and Warning event first, then Ready).
func TestADependentReconciledBeforeItsNewSourceWritesStatusOnce(t *testing.T) {
	g := NewWithT(t)
	// One worker: the source's object waits in the queue while the
	// dependent is reconciled.
	f := startController(t, controllerOptions{concurrency: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := watchUpdates(t, ctx, f.ns)

	src, dep := f.path("src"), f.path("dep")
	reading, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.kv.setBefore(func(op, path string) {
		if op == "read" && path == dep {
			once.Do(func() { close(reading); <-release })
		}
	})
	f.create(f.seed("dep", dep, `{"copy": "<ref:`+src+`#password>"}`))
	<-reading
	// The source's object in the controller's cache, queued behind the
	// dependent's reconcile.
	f.create(f.seed("src", src, `{"password": "<random:24>"}`))
	g.Eventually(func() error {
		return f.r.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "src"}, &ohmlabv1alpha1.VaultSeed{})
	}).Should(Succeed())
	close(release)

	f.waitReady("src")
	f.waitReady("dep")
	// Time for a stray write (a late status, a retry) to show.
	time.Sleep(2 * time.Second)
	g.Expect(updates()).To(Equal(map[string]int{"src": 1, "dep": 1}), "status writes by object, as the API server's watch shows them")
	g.Expect(f.events("dep")).To(ConsistOf(HavePrefix("Normal Created:")))
	g.Expect(f.events("src")).To(ConsistOf(HavePrefix("Normal Created:")))
	g.Expect(readPath(t, dep).Data["copy"]).To(Equal(readPath(t, src).Data["password"]))
}

// watchUpdates watches the VaultSeeds of namespace ns on the API server and
// returns a function giving the updates (writes after creation) seen so
// far, by object name.
func watchUpdates(t *testing.T, ctx context.Context, ns string) func() map[string]int {
	t.Helper()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &ohmlabv1alpha1.VaultSeedList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			if s, ok := e.Object.(*ohmlabv1alpha1.VaultSeed); ok && e.Type == watch.Modified {
				mu.Lock()
				counts[s.Name]++
				mu.Unlock()
			}
		}
	}()
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range counts {
			out[k] = v
		}
		return out
	}
}
