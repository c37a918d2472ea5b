package vaultseed

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A reconcile whose status write the API server refuses has not completed:
// ohmlab_object_last_reconcile_timestamp_seconds keeps the time of the
// first attempt, so the object ages into OhmlabReconcileStale (three resync
// periods), although every reconcile wrote Vault (issue 23, item 7).
func TestLastReconcileTimestampIsNotSetByAFailedStatusWrite(t *testing.T) {
	g := NewWithT(t)
	const period = time.Second
	f := startController(t, controllerOptions{resync: period})
	f.refuseStatusWrites()
	path := f.path("app")
	var mu sync.Mutex
	var wrote time.Time // the object's first data write
	reads := 0          // the object's reconciles (each reads its path)
	f.kv.setBefore(func(op, p string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p != path:
		case op == "write" && wrote.IsZero():
			wrote = time.Now()
		case op == "read":
			reads++
		}
	})
	t.Cleanup(func() { f.kv.setBefore(nil) })
	f.create(f.seed("app", path, `{"x": "<random:8>"}`))

	labels := map[string]string{"name": "app"}
	g.Eventually(func() int {
		mu.Lock()
		defer mu.Unlock()
		return reads
	}).WithTimeout(30*time.Second).Should(BeNumerically(">=", 3), "reconciles after the first one's refused status write")
	first, found := f.gaugeValue("ohmlab_object_last_reconcile_timestamp_seconds", labels)
	g.Expect(found).To(BeTrue(), "the series exists from the first attempt")
	mu.Lock()
	g.Expect(wrote.IsZero()).To(BeFalse(), "the reconcile wrote the path")
	g.Expect(first).To(BeNumerically("<", float64(wrote.UnixNano())/1e9), "not set by a reconcile whose status write failed")
	mu.Unlock()

	g.Eventually(func() float64 {
		return float64(time.Now().UnixNano())/1e9 - f.value("ohmlab_object_last_reconcile_timestamp_seconds", labels)
	}).WithTimeout(30*time.Second).Should(BeNumerically(">", (3*period).Seconds()), "stale: older than three resync periods")
	g.Expect(f.value("ohmlab_object_last_reconcile_timestamp_seconds", labels)).To(Equal(first))
	g.Expect(f.get("app").Status.Conditions).To(BeEmpty(), "no status write got through")
}
