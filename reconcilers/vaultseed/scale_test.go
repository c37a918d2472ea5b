package vaultseed

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// A source referenced by several objects is read from Vault once per
// resync period, by its own object's resync (issue 13): its dependents'
// resyncs use that read, and nothing is written.
func TestOneReadOfASourcePerResyncPeriod(t *testing.T) {
	g := NewWithT(t)
	const period = 2 * time.Second
	f := startController(t, controllerOptions{resync: period})
	src := f.path("src")
	f.create(f.seed("src", src, `{"password": "<random:16>"}`))
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		f.create(f.seed(n, f.path(n), `{"copy": "<ref:`+src+`#password>"}`))
	}
	for _, n := range append(names, "src") {
		f.waitReady(n)
	}
	var mu sync.Mutex
	reads := 0
	f.kv.setBefore(func(op, path string) {
		if op == "read" && path == src {
			mu.Lock()
			reads++
			mu.Unlock()
		}
	})
	writes := f.kv.Counts()["write"]
	const periods = 4
	time.Sleep(periods * period)
	f.kv.setBefore(nil)
	mu.Lock()
	defer mu.Unlock()
	// Each object resyncs once per period; a period boundary inside the
	// window may add one.
	g.Expect(reads).To(BeNumerically("<=", periods+1), "reads of the source: its own resyncs only, not one per dependent")
	g.Expect(reads).To(BeNumerically(">=", 1), "the source's own resync reads it")
	g.Expect(f.kv.Counts()["write"]).To(Equal(writes), "quiet resyncs write nothing")
}

// While every worker is busy and resyncs that are due fill the queue, an
// object created then is reconciled before all of them (issue 13: no object
// waits behind resyncs): after the workers are released, at most one
// resync per other worker starts before it.
func TestNewObjectGoesBeforeDueResyncs(t *testing.T) {
	g := NewWithT(t)
	const period, n, workers = 3 * time.Second, 30, 2 // workers: startController's concurrency
	f := startController(t, controllerOptions{resync: period})
	paths := map[string]bool{}
	for i := range n {
		name := fmt.Sprintf("o%02d", i)
		paths[f.path(name)] = true
		f.create(f.seed(name, f.path(name), `{"password": "<random:16>"}`))
	}
	for i := range n {
		f.waitReady(fmt.Sprintf("o%02d", i))
	}
	queuedBefore := queueDepth(t)

	// Every Vault read waits at the gate: the workers take the first due
	// resyncs and block there, the others queue up as their phases pass.
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	var mu sync.Mutex
	var order []string // the paths read after the gate opened
	blocked := 0
	f.kv.setBefore(func(op, path string) {
		if op != "read" {
			return
		}
		select {
		case <-gate:
		default:
			mu.Lock()
			blocked++
			mu.Unlock()
			<-gate
			return
		}
		mu.Lock()
		order = append(order, path)
		mu.Unlock()
	})
	t.Cleanup(func() {
		release()
		f.kv.setBefore(nil)
	})
	// Every resync is due within one period; all but the workers' wait in
	// the queue.
	g.Eventually(func() float64 { return queueDepth(t) - queuedBefore }).
		WithTimeout(period+30*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically("==", n-workers), "due resyncs queued")
	mu.Lock()
	g.Expect(blocked).To(Equal(workers), "each worker holds a resync")
	mu.Unlock()

	newPath := f.path("new")
	f.create(f.seed("new", newPath, `{"password": "<random:16>"}`))
	g.Eventually(func() float64 { return queueDepth(t) - queuedBefore }).
		WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically("==", n-workers+1), "the new object is queued")
	release()
	f.waitReady("new")

	mu.Lock()
	defer mu.Unlock()
	resyncsFirst := slices.Index(order, newPath)
	g.Expect(resyncsFirst).To(BeNumerically(">=", 0), "the new object's path was read")
	g.Expect(order[:resyncsFirst]).To(Or(BeEmpty(), HaveEach(BeKeyOf(paths))), "reads before it are resyncs")
	g.Expect(resyncsFirst).To(BeNumerically("<=", workers-1),
		"resyncs started between the new object's creation and its reconcile, with %d due resyncs queued", n-workers)
}

// queueDepth is the VaultSeed work queue's depth, all priorities
// (controller-runtime's workqueue_depth): items ready and waiting for a
// worker. The tests' controllers share the series, so tests compare it
// with its value before.
func queueDepth(t testing.TB) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	depth := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "vaultseed" {
					depth += m.GetGauge().GetValue()
				}
			}
		}
	}
	return depth
}
