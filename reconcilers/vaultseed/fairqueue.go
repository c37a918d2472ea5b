package vaultseed

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// overflowPriority is the priority of a namespace's work beyond its share:
// below every namespace's share of new work, above handler.LowPriority
// (the initial list and the resyncs), so a namespace's burst still goes
// before resyncs that are merely due, and idle workers take it at once.
const overflowPriority = -1

// fairQueue is controller-runtime's priority queue with a share per
// namespace: of the work queued at the default priority or above and ready
// at once (a created or changed object, a dependent whose source was
// written), each namespace has at most share keys waiting at that
// priority; its further keys wait at overflowPriority, first in, first
// out, and the next one is raised each time a worker takes one of its
// waiting keys. The priority queue puts a raised key after the keys
// queued before it, so the namespaces with work take turns at the
// workers: a namespace that creates a thousand objects gets one worker in
// as many turns as there are namespaces with work, and delays another
// namespace's new object by at most share of its keys, instead of all of
// them. Held keys are still handed to idle workers, so the share costs no
// throughput. Work queued with a delay (retries, resyncs) and at lower
// priorities passes through unchanged; so do the workqueue metrics, where
// a held key counts at overflowPriority.
type fairQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	share int

	mu sync.Mutex
	// active are the keys of each namespace waiting at the default
	// priority or above, at most share.
	active map[string]map[reconcile.Request]struct{}
	// overflow are the keys of each namespace held at overflowPriority,
	// oldest first; held is the same keys, as a set.
	overflow map[string][]reconcile.Request
	held     map[reconcile.Request]struct{}
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = (*fairQueue)(nil)

// newFairQueue returns the queue of controller name as controller-runtime
// would make it with UsePriorityQueue (its rate limiter, its logger, its
// metrics), with share keys per namespace (at least 1).
func newFairQueue(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request], log logr.Logger, share int) *fairQueue {
	inner := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
		o.Log = log.WithValues("controller", name)
		o.RateLimiter = rateLimiter
	})
	return &fairQueue{PriorityQueue: inner, share: max(share, 1),
		active: map[string]map[reconcile.Request]struct{}{}, overflow: map[string][]reconcile.Request{}, held: map[reconcile.Request]struct{}{}}
}

// AddWithOpts implements priorityqueue.PriorityQueue.
func (q *fairQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.After > 0 || o.RateLimited || (o.Priority != nil && *o.Priority < 0) {
		q.PriorityQueue.AddWithOpts(o, items...)
		return
	}
	var held []reconcile.Request
	passed := items[:0:0]
	q.mu.Lock()
	for _, key := range items {
		if q.admit(key) {
			passed = append(passed, key)
		} else {
			held = append(held, key)
		}
	}
	q.mu.Unlock()
	if len(passed) > 0 {
		q.PriorityQueue.AddWithOpts(o, passed...)
	}
	if len(held) > 0 {
		q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{Priority: new(overflowPriority)}, held...)
	}
}

// admit reports whether key is queued at its own priority (within its
// namespace's share, or active already); otherwise it is held. Called with
// q.mu held.
func (q *fairQueue) admit(key reconcile.Request) bool {
	ns := key.Namespace
	active := q.active[ns]
	if _, ok := active[key]; ok {
		return true
	}
	if len(active) < q.share {
		if active == nil {
			active = map[reconcile.Request]struct{}{}
			q.active[ns] = active
		}
		active[key] = struct{}{}
		return true
	}
	if _, ok := q.held[key]; !ok {
		q.held[key] = struct{}{}
		q.overflow[ns] = append(q.overflow[ns], key)
	}
	return false
}

// Add implements workqueue.TypedInterface.
func (q *fairQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

// GetWithPriority implements priorityqueue.PriorityQueue: the
// namespace's oldest held key, if any, takes the place of a waiting key
// taken. A held key that an idle worker takes is reported at the default
// priority: the controller requeues a failed reconcile at the priority it
// got.
func (q *fairQueue) GetWithPriority() (reconcile.Request, int, bool) {
	key, priority, shutdown := q.PriorityQueue.GetWithPriority()
	if priority == overflowPriority {
		priority = 0
	}
	ns := key.Namespace
	var raise []reconcile.Request
	q.mu.Lock()
	q.unhold(key)
	delete(q.active[ns], key)
	for len(q.active[ns]) < q.share && len(q.overflow[ns]) > 0 {
		next := q.overflow[ns][0]
		q.unhold(next)
		q.activate(next)
		raise = append(raise, next)
	}
	if len(q.active[ns]) == 0 {
		delete(q.active, ns)
	}
	q.mu.Unlock()
	if len(raise) > 0 {
		q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{}, raise...)
	}
	return key, priority, shutdown
}

// Get implements workqueue.TypedInterface.
func (q *fairQueue) Get() (reconcile.Request, bool) {
	key, _, shutdown := q.GetWithPriority()
	return key, shutdown
}

// unhold removes key from its namespace's held keys, reporting whether it
// was held. Called with q.mu held.
func (q *fairQueue) unhold(key reconcile.Request) bool {
	if _, ok := q.held[key]; !ok {
		return false
	}
	delete(q.held, key)
	held := q.overflow[key.Namespace]
	for i, k := range held {
		if k == key {
			held = append(held[:i], held[i+1:]...)
			if len(held) == 0 {
				delete(q.overflow, key.Namespace)
			} else {
				q.overflow[key.Namespace] = held
			}
			break
		}
	}
	return true
}

// activate counts key in its namespace's share. Called with q.mu held.
func (q *fairQueue) activate(key reconcile.Request) {
	if q.active[key.Namespace] == nil {
		q.active[key.Namespace] = map[reconcile.Request]struct{}{}
	}
	q.active[key.Namespace][key] = struct{}{}
}
