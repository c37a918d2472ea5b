package vaultseed

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

func TestUntilPhase(t *testing.T) {
	const period = 10 * time.Minute
	now := time.Unix(1_800_000_000, 123)
	t.Run("within one period", func(t *testing.T) {
		for i := range 1000 {
			key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("o%d", i)}
			for _, at := range []time.Time{now, now.Add(time.Duration(i) * time.Second), time.Unix(0, 0)} {
				if d := untilPhase(key, period, at); d <= 0 || d > period {
					t.Fatalf("untilPhase(%s, %s) = %s, want in (0, %s]", key, at, d, period)
				}
			}
		}
	})
	t.Run("a fixed phase: the next resync is one period after the last", func(t *testing.T) {
		key := types.NamespacedName{Namespace: "ns", Name: "o"}
		due := now.Add(untilPhase(key, period, now))
		if d := untilPhase(key, period, due); d != period {
			t.Errorf("at its due time, the next resync is in %s, want %s", d, period)
		}
		// A reconcile in between (a change) does not move the phase.
		if got := now.Add(time.Minute).Add(untilPhase(key, period, now.Add(time.Minute))); !got.Equal(due) && !got.Equal(due.Add(period)) {
			t.Errorf("a reconcile a minute later is due at %s, want %s", got, due)
		}
	})
	t.Run("objects created together spread over the period", func(t *testing.T) {
		const n, buckets = 10000, 10
		var count [buckets]int
		for i := range n {
			d := untilPhase(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("bench-%05d", i)}, period, now)
			count[min(int(d*buckets/period), buckets-1)]++
		}
		for b, c := range count {
			if c < n/buckets*8/10 || c > n/buckets*12/10 {
				t.Errorf("tenth %d of the period holds %d of %d resyncs, want about %d", b, c, n, n/buckets)
			}
		}
	})
	t.Run("no period", func(t *testing.T) {
		if d := untilPhase(types.NamespacedName{Name: "o"}, 0, now); d != 0 {
			t.Errorf("untilPhase with no period = %s, want 0", d)
		}
	})
}

func TestResyncIsLowPriority(t *testing.T) {
	r := &Reconciler{ResyncPeriod: time.Minute}
	res := r.resync(types.NamespacedName{Namespace: "ns", Name: "o"}, time.Now())
	if res.Priority == nil || *res.Priority != handler.LowPriority {
		t.Errorf("resync priority = %v, want handler.LowPriority", res.Priority)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Errorf("resync after %s, want within the period", res.RequeueAfter)
	}
}
