package vaultseed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// A source that no object manages (written only through the Vault API)
// reaches its copy at the dependent's first reconcile after the change
// (product document, "What the controller does with a path": a reference
// is kept equal to its source at every resync; issue 23, item 4), whether
// it is edited or deleted and re-created.
func TestCopyFollowsAHandManagedSourceAtTheNextResync(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, src string)
	}{
		{name: "edited by hand", change: func(t *testing.T, src string) {
			handWrite(t, src, map[string]any{"password": "two"})
		}},
		{name: "deleted and re-created", change: func(t *testing.T, src string) {
			handDelete(t, src)
			handWrite(t, src, map[string]any{"password": "two"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			const period = 4 * time.Second
			f := startController(t, controllerOptions{resync: period})
			src := f.path("by-hand")
			handWrite(t, src, map[string]any{"password": "one"})
			handWrite(t, src, map[string]any{"password": "one", "note": "a second version"})
			name := laterPhase(f.ns, period)
			dst := f.path(name)
			f.create(f.seed(name, dst, `{"copy": "<ref:`+src+`#password>"}`))
			f.waitReady(name)
			g.Expect(readPath(t, dst).Data["copy"]).To(Equal("one"))

			tt.change(t, src)
			ops := recordOps(f, dst)
			g.Eventually(func() bool { _, over := firstReconcile(ops()); return over }).
				WithTimeout(3*period+30*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "a resync of the dependent after the change")
			first, _ := firstReconcile(ops())
			g.Expect(first).To(ContainElement("write"), "the dependent's first resync after the change writes the copy")
			g.Expect(readPath(t, dst).Data["copy"]).To(Equal("two"))
		})
	}
}

// An object waiting for a key of a hand-managed source goes Ready at its
// first retry after the key is filled (issue 23, item 4), not once a
// remembered copy of the source ages out.
func TestRefPendingOnAHandManagedSourceGoesReadyAtItsNextRetry(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{}) // resync 1 h: only the backoff retries
	src, dst := f.path("by-hand"), f.path("grafana")
	handWrite(t, src, map[string]any{"user": "admin"})
	f.create(f.seed("grafana", dst, `{"password": "<ref:`+src+`#password>"}`))
	f.waitReason("grafana", ohmlabv1alpha1.ReasonRefPending, 20*time.Second)

	ops := recordOps(f, dst)
	handWrite(t, src, map[string]any{"user": "admin", "password": "filled-by-hand"})
	// The retries come 5 s doubling: the two after the fill are at most
	// 30 s away.
	g.Eventually(func() bool { _, over := firstReconcile(ops()); return over }).
		WithTimeout(90*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "a retry after the fill")
	first, _ := firstReconcile(ops())
	g.Expect(first).To(ContainElement("write"), "the first retry after the fill writes the path")
	f.waitReady("grafana")
	g.Expect(readPath(t, dst).Data["password"]).To(Equal("filled-by-hand"))
}

// recordOps records, from now on, the Vault operations of the controller on
// path, in the order they returned (a write recorded has been answered);
// the function returned reads them.
func recordOps(f *fixture, path string) func() []string {
	var mu sync.Mutex
	var ops []string
	f.kv.setAfter(func(op, p string) {
		if p == path {
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
		}
	})
	f.t.Cleanup(func() { f.kv.setAfter(nil) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ops)
	}
}

// firstReconcile returns the operations of the first reconcile in ops, from
// its read of the path to the next read, and whether it is over: the next
// read came, or it wrote.
func firstReconcile(ops []string) ([]string, bool) {
	i := slices.Index(ops, "read")
	if i < 0 {
		return nil, false
	}
	if j := slices.Index(ops[i+1:], "read"); j >= 0 {
		return ops[i : i+1+j], true
	}
	return ops[i:], slices.Contains(ops[i:], "write")
}

// laterPhase returns the name of an object in namespace ns whose first
// resync comes at least half a period from now (untilPhase), so that a
// change made right after its creation's reconcile comes before that
// resync.
func laterPhase(ns string, period time.Duration) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("copy-%d", i)
		if untilPhase(types.NamespacedName{Namespace: ns, Name: name}, period, time.Now()) >= period/2 {
			return name
		}
	}
}

// handDelete deletes a path and all its versions as a person would.
func handDelete(t testing.TB, path string) {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	if err := vault.Client.KVv2(mount).DeleteMetadata(context.Background(), rest); err != nil {
		t.Fatalf("deleting %s: %v", path, err)
	}
}
