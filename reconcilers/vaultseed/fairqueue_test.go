package vaultseed

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns string, i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprint(i)}}
}

// TestFairQueueTakesTurns: the order in which one worker gets the keys of
// controller-runtime's priority queue behind fairQueue, with the
// reconciler's share of 1.
func TestFairQueueTakesTurns(t *testing.T) {
	type add struct {
		opts priorityqueue.AddOpts
		keys []reconcile.Request
	}
	burst := func(ns string, n int) add {
		var keys []reconcile.Request
		for i := range n {
			keys = append(keys, req(ns, i))
		}
		return add{keys: keys}
	}
	one := func(ns string, i int) add { return add{keys: []reconcile.Request{req(ns, i)}} }
	low := func(a add) add { a.opts.Priority = new(handler.LowPriority); return a }
	tests := []struct {
		name string
		adds []add
		want []string
	}{
		{"a burst, then another namespace's key: after the burst's share",
			[]add{burst("noisy", 6), one("quiet", 0)},
			[]string{"noisy/0", "quiet/0", "noisy/1", "noisy/2", "noisy/3", "noisy/4", "noisy/5"}},
		{"two bursts take turns",
			[]add{burst("a", 5), burst("b", 5)},
			[]string{"a/0", "b/0", "a/1", "b/1", "a/2", "b/2", "a/3", "b/3", "a/4", "b/4"}},
		{"a key added again while held is not queued twice",
			[]add{burst("a", 4), one("a", 3), one("a", 2)},
			[]string{"a/0", "a/1", "a/2", "a/3"}},
		{"the held keys of a burst still go before resyncs",
			[]add{low(one("idle", 0)), burst("a", 4)},
			[]string{"a/0", "a/1", "a/2", "a/3", "idle/0"}},
		{"resyncs are not held: a low-priority burst keeps its order",
			[]add{low(burst("a", 4)), low(one("b", 0))},
			[]string{"a/0", "a/1", "a/2", "a/3", "b/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newFairQueue("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), logr.Discard(), 1)
			defer q.ShutDown()
			for _, a := range tt.adds {
				q.AddWithOpts(a.opts, a.keys...)
			}
			var got []string
			for range tt.want {
				// One worker: each key is done before the next is got,
				// and the queue's handoff has settled.
				key, priority, _ := q.GetWithPriority()
				if priority == overflowPriority {
					t.Errorf("%s reported at the held priority", key)
				}
				got = append(got, key.String())
				q.Done(key)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if n := q.Len(); n != 0 {
				t.Errorf("%d keys left in the queue", n)
			}
		})
	}
}

// TestFairQueueRaisedKeyWaitsItsTurn: a held key raised when a worker takes
// its namespace's waiting key goes behind the keys queued before the
// raise, not at its first add's place: a namespace's key added while a
// burst is being worked waits for one of the burst's keys, not for all of
// them. controller-runtime's priority queue gives a key whose priority is
// raised a new place in line; fairQueue relies on it.
func TestFairQueueRaisedKeyWaitsItsTurn(t *testing.T) {
	q := newFairQueue("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), logr.Discard(), 1)
	defer q.ShutDown()
	var keys []reconcile.Request
	for i := range 4 {
		keys = append(keys, req("noisy", i))
	}
	q.AddWithOpts(priorityqueue.AddOpts{}, keys...)
	var got []string
	get := func() {
		key, _, _ := q.GetWithPriority()
		got = append(got, key.String())
		q.Done(key)
	}
	get() // noisy/0; noisy/1 is raised
	q.Add(req("quiet", 0))
	for range 4 {
		get()
	}
	want := []string{"noisy/0", "noisy/1", "quiet/0", "noisy/2", "noisy/3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
