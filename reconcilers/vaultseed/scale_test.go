package vaultseed

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
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
