package vaultseed

import (
	"github.com/prometheus/client_golang/prometheus"
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
}

// NewMetrics creates the reconciler's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
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

// setReady keeps one ohmlab_object_ready series per object.
func (m *Metrics) setReady(target, namespace, name, reason string, ready bool) {
	m.Ready.DeletePartialMatch(prometheus.Labels{"target": target, "namespace": namespace, "name": name})
	v := 0.0
	if ready {
		v = 1
	}
	m.Ready.WithLabelValues(target, namespace, name, reason).Set(v)
}

// forget removes every series of a deleted object.
func (m *Metrics) forget(target, namespace, name string) {
	m.PlannedChanges.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	obj := prometheus.Labels{"target": target, "namespace": namespace, "name": name}
	m.DataWrites.DeletePartialMatch(obj)
	m.LastReconcile.DeletePartialMatch(obj)
	m.Ready.DeletePartialMatch(obj)
}
