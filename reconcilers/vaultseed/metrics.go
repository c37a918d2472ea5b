package vaultseed

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are the per-object metrics of the VaultSeed reconciler. No label
// ever holds a value; namespace and name identify the object.
type Metrics struct {
	// PlannedChanges is ohmlab_planned_changes{namespace,name,action}: the
	// changes a real run would make, in observe-only mode.
	PlannedChanges *prometheus.GaugeVec
	// DataWrites is ohmlab_data_writes_total{target,namespace,name}: KV data
	// writes (each one creates a KV version). A sustained rate means
	// something else rewrites the path (alert OhmlabWriteLoop).
	DataWrites *prometheus.CounterVec
	// LastReconcile is ohmlab_object_last_reconcile_timestamp_seconds: the
	// Unix time of the object's last completed reconcile (alert
	// OhmlabReconcileStale).
	LastReconcile *prometheus.GaugeVec
	// Ready is ohmlab_object_ready{target,namespace,name,reason}: 1 when
	// Ready=True, else 0, with the Ready reason; one series per object.
	Ready *prometheus.GaugeVec

	// readyReason is the reason label of each object's ohmlab_object_ready
	// series, so that replacing it costs one deletion, not a scan of every
	// series (issue 13: metrics work per reconcile is O(1)).
	mu          sync.Mutex
	readyReason map[types.NamespacedName]string
}

// NewMetrics creates the reconciler's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		readyReason: map[types.NamespacedName]string{},
		PlannedChanges: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ohmlab_planned_changes",
			Help: "Changes a real run would make to the object's path, by action (observe-only mode).",
		}, []string{"namespace", "name", "action"}),
		DataWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ohmlab_data_writes_total",
			Help: "KV data writes made for the object; each creates a KV version.",
		}, []string{"target", "namespace", "name"}),
		LastReconcile: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ohmlab_object_last_reconcile_timestamp_seconds",
			Help: "Unix time of the object's last completed reconcile.",
		}, []string{"target", "namespace", "name"}),
		Ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ohmlab_object_ready",
			Help: "1 when the object is Ready, else 0; reason is the Ready condition's reason.",
		}, []string{"target", "namespace", "name", "reason"}),
	}
	reg.MustRegister(m.PlannedChanges, m.DataWrites, m.LastReconcile, m.Ready)
	return m
}

// setPlanned sets the planned changes of one object; actions without a
// change are removed.
func (m *Metrics) setPlanned(namespace, name string, counts map[string]int) {
	for _, action := range actionOrder {
		if n := counts[action]; n > 0 {
			m.PlannedChanges.WithLabelValues(namespace, name, action).Set(float64(n))
		} else {
			m.PlannedChanges.DeleteLabelValues(namespace, name, action)
		}
	}
}

// setReady keeps one ohmlab_object_ready series per object: the series of
// the previous reason, if another, is deleted.
func (m *Metrics) setReady(target, namespace, name, reason string, ready bool) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	m.mu.Lock()
	old, had := m.readyReason[key]
	m.readyReason[key] = reason
	m.mu.Unlock()
	if had && old != reason {
		m.Ready.DeleteLabelValues(target, namespace, name, old)
	}
	v := 0.0
	if ready {
		v = 1
	}
	m.Ready.WithLabelValues(target, namespace, name, reason).Set(v)
}

// forget removes every series of a deleted object, each by its full label
// values (no scan of the other objects' series).
func (m *Metrics) forget(target, namespace, name string) {
	for _, action := range actionOrder {
		m.PlannedChanges.DeleteLabelValues(namespace, name, action)
	}
	m.DataWrites.DeleteLabelValues(target, namespace, name)
	m.LastReconcile.DeleteLabelValues(target, namespace, name)
	key := types.NamespacedName{Namespace: namespace, Name: name}
	m.mu.Lock()
	reason, had := m.readyReason[key]
	delete(m.readyReason, key)
	m.mu.Unlock()
	if had {
		m.Ready.DeleteLabelValues(target, namespace, name, reason)
	}
}
