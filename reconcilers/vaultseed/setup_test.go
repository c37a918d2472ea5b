package vaultseed

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
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
	t.Run("objects share the slots of the period", func(t *testing.T) {
		due := map[time.Time]int{}
		for i := range 1000 {
			due[now.Add(untilPhase(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("bench-%05d", i)}, period, now))]++
		}
		if len(due) > resyncSlots {
			t.Errorf("1000 objects come due at %d instants of the period, want at most %d", len(due), resyncSlots)
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

func TestDeferAfterStart(t *testing.T) {
	ready := func(gen, observed int64, status metav1.ConditionStatus) *ohmlabv1alpha1.VaultSeed {
		s := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o", Generation: gen}}
		s.Status.ObservedGeneration = observed
		s.Status.Conditions = []metav1.Condition{{Type: ohmlabv1alpha1.ConditionReady, Status: status, Reason: ohmlabv1alpha1.ReasonReconciled, ObservedGeneration: observed}}
		return s
	}
	requested := func(s *ohmlabv1alpha1.VaultSeed, value, handled string) *ohmlabv1alpha1.VaultSeed {
		s.Annotations = map[string]string{ohmlabv1alpha1.ReconcileRequestAnnotation: value}
		s.Status.LastHandledReconcileAt = handled
		return s
	}
	tests := []struct {
		name  string
		seed  *ohmlabv1alpha1.VaultSeed
		asked bool // a dependent's source was written before the first reconcile
		want  []bool
	}{
		{name: "Ready before the start: the first reconcile waits for its phase, the next run", seed: ready(2, 2, metav1.ConditionTrue), want: []bool{true, false, false}},
		{name: "asked for by its source", seed: ready(2, 2, metav1.ConditionTrue), asked: true, want: []bool{false}},
		{name: "changed while the process was down", seed: ready(3, 2, metav1.ConditionTrue), want: []bool{false}},
		{name: "not Ready", seed: ready(2, 2, metav1.ConditionFalse), want: []bool{false}},
		{name: "new, no status", seed: &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o", Generation: 1}}, want: []bool{false}},
		{name: "a reconcile request not handled yet", seed: requested(ready(2, 2, metav1.ConditionTrue), "2", "1"), want: []bool{false}},
		{name: "a reconcile request handled before the start", seed: requested(ready(2, 2, metav1.ConditionTrue), "1", "1"), want: []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{Metrics: NewMetrics(prometheus.NewRegistry()), Target: "vault"}
			if tt.asked {
				r.store.add(types.NamespacedName{Namespace: "ns", Name: "o"}, factSeen)
			}
			for i, want := range tt.want {
				if got := r.deferAfterStart(tt.seed); got != want {
					t.Errorf("reconcile %d: deferAfterStart() = %v, want %v", i, got, want)
				}
			}
			if tt.want[0] {
				if diff := cmp.Diff([]string{"vault/ns/o Reconciled 1"}, readySeries(t, r.Metrics)); diff != "" {
					t.Errorf("a deferred object's Ready metric (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestForgetObjectIsSeenAgainAsNew(t *testing.T) {
	r := &Reconciler{Metrics: NewMetrics(prometheus.NewRegistry()),
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](backoffBase, backoffMax)}
	key := types.NamespacedName{Namespace: "ns", Name: "o"}
	r.store.add(key, factSeen)
	r.forgetObject(key)
	if r.store.has(key, factSeen) {
		t.Error("a deleted object is still remembered")
	}
}
