package vaultseed

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the per-object metrics of the VaultSeed reconciler. No label
// ever holds a value; namespace and name identify the object.
//
// The series are made at scrape time from one small record per object
// (Prometheus' pattern for metrics of objects kept elsewhere, as in
// kube-state-metrics), instead of one child of a metric vector per series:
// a child holds its label pairs and a map entry, which at 10,000 objects and
// three series each was the largest live part of the heap (issue 13: memory
// at 10,000 objects). Every update is O(1) in the number of objects.
type Metrics struct {
	mu      sync.Mutex
	objects map[objectKey]*objectSeries
}

type objectKey struct{ target, namespace, name string }

// objectSeries is what the series of one object say.
type objectSeries struct {
	// ohmlab_object_ready{target,namespace,name,reason}: 1 when Ready=True,
	// else 0, with the Ready reason; one series per object.
	reason string
	ready  bool
	// ohmlab_object_last_reconcile_timestamp_seconds{target,namespace,name}:
	// the Unix time of the object's last completed reconcile, or before
	// the first, of the process's first attempt (seen): an object whose
	// reconciles never complete ages like one that stopped (alert
	// OhmlabReconcileStale, whose expression then needs no case of its
	// own); 0: no series yet.
	lastReconcile float64
	// ohmlab_data_writes_total{target,namespace,name}: KV data writes (each
	// creates a KV version). A sustained rate means something else rewrites
	// the path (alert OhmlabWriteLoop).
	writes    float64
	hasWrites bool
	// ohmlab_planned_changes{namespace,name,action}: the changes a real run
	// would make, in observe-only mode, by action (indexed like actionOrder);
	// nil: none.
	planned []int
}

var (
	plannedDesc = prometheus.NewDesc("ohmlab_planned_changes",
		"Changes a real run would make to the object's path, by action (observe-only mode).",
		[]string{"namespace", "name", "action"}, nil)
	writesDesc = prometheus.NewDesc("ohmlab_data_writes_total",
		"KV data writes made for the object; each creates a KV version.",
		[]string{"target", "namespace", "name"}, nil)
	lastReconcileDesc = prometheus.NewDesc("ohmlab_object_last_reconcile_timestamp_seconds",
		"Unix time of the object's last completed reconcile: Vault answered in time and the status write, if any, succeeded. Before the first, the time this process first attempted the object.",
		[]string{"target", "namespace", "name"}, nil)
	readyDesc = prometheus.NewDesc("ohmlab_object_ready",
		"1 when the object is Ready, else 0; reason is the Ready condition's reason.",
		[]string{"target", "namespace", "name", "reason"}, nil)
)

// NewMetrics creates the reconciler's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{objects: map[objectKey]*objectSeries{}}
	reg.MustRegister(m)
	return m
}

// update runs f on the record of one object, made if absent.
func (m *Metrics) update(target, namespace, name string, f func(*objectSeries)) {
	key := objectKey{target, namespace, name}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.objects[key]
	if s == nil {
		s = &objectSeries{}
		m.objects[key] = s
	}
	f(s)
}

// setPlanned sets the planned changes of one object; actions without a
// change have no series. The series has no target label (product document,
// "observeOnly"); an instance runs its target once.
func (m *Metrics) setPlanned(target, namespace, name string, counts map[string]int) {
	m.update(target, namespace, name, func(s *objectSeries) {
		s.planned = nil
		for i, action := range actionOrder {
			if n := counts[action]; n > 0 {
				if s.planned == nil {
					s.planned = make([]int, len(actionOrder))
				}
				s.planned[i] = n
			}
		}
	})
}

// setReady sets the object's one ohmlab_object_ready series: a new reason
// replaces the series of the previous one.
func (m *Metrics) setReady(target, namespace, name, reason string, ready bool) {
	m.update(target, namespace, name, func(s *objectSeries) { s.reason, s.ready = reason, ready })
}

// seen starts the object's last-reconcile series at now, when it has none.
func (m *Metrics) seen(target, namespace, name string) {
	now := float64(time.Now().UnixNano()) / 1e9
	m.update(target, namespace, name, func(s *objectSeries) {
		if s.lastReconcile == 0 {
			s.lastReconcile = now
		}
	})
}

// reconciled sets the object's last reconcile to now: a reconcile
// completed.
func (m *Metrics) reconciled(target, namespace, name string) {
	now := float64(time.Now().UnixNano()) / 1e9
	m.update(target, namespace, name, func(s *objectSeries) { s.lastReconcile = now })
}

// wrote counts one KV data write of the object.
func (m *Metrics) wrote(target, namespace, name string) {
	m.update(target, namespace, name, func(s *objectSeries) { s.writes, s.hasWrites = s.writes+1, true })
}

// forget removes every series of a deleted object.
func (m *Metrics) forget(target, namespace, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, objectKey{target, namespace, name})
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{plannedDesc, writesDesc, lastReconcileDesc, readyDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The records are copied under the
// lock and turned into series outside it, so that a scrape does not hold up
// the reconciles.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	type entry struct {
		key objectKey
		objectSeries
	}
	m.mu.Lock()
	entries := make([]entry, 0, len(m.objects))
	for k, s := range m.objects {
		entries = append(entries, entry{k, *s})
	}
	m.mu.Unlock()
	for _, e := range entries {
		k := e.key
		if e.reason != "" {
			v := 0.0
			if e.ready {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, v, k.target, k.namespace, k.name, e.reason)
		}
		if e.lastReconcile != 0 {
			ch <- prometheus.MustNewConstMetric(lastReconcileDesc, prometheus.GaugeValue, e.lastReconcile, k.target, k.namespace, k.name)
		}
		if e.hasWrites {
			ch <- prometheus.MustNewConstMetric(writesDesc, prometheus.CounterValue, e.writes, k.target, k.namespace, k.name)
		}
		for i, n := range e.planned {
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(plannedDesc, prometheus.GaugeValue, float64(n), k.namespace, k.name, actionOrder[i])
			}
		}
	}
}
