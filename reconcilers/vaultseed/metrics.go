package vaultseed

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// Metrics are the per-object metrics of the VaultSeed reconciler. No label
// ever holds a value; namespace and name identify the object.
//
// The series are made at scrape time from one small record per object
// (Prometheus' pattern for metrics of objects kept elsewhere, as in
// kube-state-metrics), instead of one child of a metric vector per series:
// a child holds its label pairs and a map entry, which at scale is the
// largest live part of the heap (docs/maintainers/performance.md, "Memory"). Every
// update is O(1) in the number of objects.
//
// Metrics is a prometheus.Gatherer of its own families, served beside the
// registry (prometheus.NewMultiTRegistry): a Collector's series go through
// a const metric, its label pairs and the registry's copy and consistency
// hash each, several allocations per series and scrape. Gather builds the
// families themselves, in a few blocks per scrape.
type Metrics struct {
	mu      sync.Mutex
	objects map[objectKey]*objectSeries
	// vanished are the series of each target's brake (brake.go).
	vanished map[string]vanishedSeries
}

// vanishedSeries is what the brake's series of one target say:
// ohmlab_vanished_paths{target}, the known paths found missing within the
// last resync period, and ohmlab_vanished_brake_holds{target}, 1 while
// they are too many to be created anew (alert OhmlabVaultDataLoss).
type vanishedSeries struct {
	paths int
	holds bool
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
	// ohmlab_last_rotation_timestamp_seconds{target,namespace,name}: the
	// Unix time the path records under ohmlab.fr/rotated-at (the last
	// rotation, or the start of rotate.every's period), as last read or
	// written; 0: no series (nothing recorded).
	lastRotation float64
	// ohmlab_planned_changes{namespace,name,action}: the changes a real run
	// would make, in observe-only mode, by action (indexed like planner.ActionOrder());
	// nil: none.
	planned []int
}

// The families of Metrics, by name. No label ever holds a value.
var (
	writesFamily = family{"ohmlab_data_writes_total", dto.MetricType_COUNTER,
		"KV data writes made for the object; each creates a KV version.",
		[]string{"target", "namespace", "name"}}
	lastReconcileFamily = family{"ohmlab_object_last_reconcile_timestamp_seconds", dto.MetricType_GAUGE,
		"Unix time of the object's last completed reconcile: Vault answered in time and the status write, if any, succeeded. Before the first, the time this process first attempted the object.",
		[]string{"target", "namespace", "name"}}
	readyFamily = family{"ohmlab_object_ready", dto.MetricType_GAUGE,
		"1 when the object is Ready, else 0; reason is the Ready condition's reason.",
		[]string{"target", "namespace", "name", "reason"}}
	lastRotationFamily = family{"ohmlab_last_rotation_timestamp_seconds", dto.MetricType_GAUGE,
		"Unix time the object's rotation keys were last regenerated (rotate.token or rotate.every), as its path records it; with rotate.every, the start of the period when nothing has rotated since. No series before either.",
		[]string{"target", "namespace", "name"}}
	plannedFamily = family{"ohmlab_planned_changes", dto.MetricType_GAUGE,
		"Changes a real run would make to the object's path, by action (observe-only mode).",
		[]string{"namespace", "name", "action"}}
	vanishedFamily = family{"ohmlab_vanished_paths", dto.MetricType_GAUGE,
		"Paths that the target's objects wrote and that were found missing from Vault within the last resync period.",
		[]string{"target"}}
	brakeFamily = family{"ohmlab_vanished_brake_holds", dto.MetricType_GAUGE,
		"1 while the target does not create its vanished paths anew: too many vanished at once (alert OhmlabVaultDataLoss), else 0.",
		[]string{"target"}}
)

type family struct {
	name   string
	typ    dto.MetricType
	help   string
	labels []string
}

// NewMetrics creates the reconciler's metrics and reserves their names in
// reg, so that no other collector can register them; the process serves
// their series from Gather, beside reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	reg.MustRegister(names{})
	return &Metrics{objects: map[objectKey]*objectSeries{}, vanished: map[string]vanishedSeries{}}
}

// names describes the families of Metrics to the registry, which rejects
// another collector of the same names; it collects nothing, Metrics.Gather
// does.
type names struct{}

func (names) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range []family{writesFamily, lastRotationFamily, lastReconcileFamily, readyFamily, plannedFamily, brakeFamily, vanishedFamily} {
		ch <- prometheus.NewDesc(f.name, f.help, f.labels, nil)
	}
}

func (names) Collect(chan<- prometheus.Metric) {}

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
		for i, action := range planner.ActionOrder() {
			if n := counts[action]; n > 0 {
				if s.planned == nil {
					s.planned = make([]int, len(planner.ActionOrder()))
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

// rotatedAt sets the time the object's path records for its last
// rotation.
func (m *Metrics) rotatedAt(target, namespace, name string, at time.Time) {
	v := float64(at.Unix())
	m.update(target, namespace, name, func(s *objectSeries) { s.lastRotation = v })
}

// wrote counts one KV data write of the object.
func (m *Metrics) wrote(target, namespace, name string) {
	m.update(target, namespace, name, func(s *objectSeries) { s.writes, s.hasWrites = s.writes+1, true })
}

// setVanished sets the series of the target's brake.
func (m *Metrics) setVanished(target string, paths int, holds bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vanished[target] = vanishedSeries{paths: paths, holds: holds}
}

// vanishedMetrics are the brake's series of every target, in target order.
func (m *Metrics) vanishedMetrics() (paths, holds []*dto.Metric) {
	for target, s := range m.vanished {
		label := []*dto.LabelPair{{Name: proto.String(labelTarget), Value: proto.String(target)}}
		paths = append(paths, &dto.Metric{Label: label, Gauge: &dto.Gauge{Value: proto.Float64(float64(s.paths))}})
		v := 0.0
		if s.holds {
			v = 1
		}
		holds = append(holds, &dto.Metric{Label: label, Gauge: &dto.Gauge{Value: proto.Float64(v)}})
	}
	return paths, holds
}

// forget removes every series of a deleted object.
func (m *Metrics) forget(target, namespace, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, objectKey{target, namespace, name})
}

// The label names of the series; a label pair points to them.
var (
	labelAction    = "action"
	labelName      = "name"
	labelNamespace = "namespace"
	labelReason    = "reason"
	labelTarget    = "target"
)

// objectBlock is what the series of one object are made of in a scrape:
// its label pairs and its metrics, allocated with every other object's in
// one block.
type objectBlock struct {
	name     string // the name pair's value
	namePair dto.LabelPair
	// The pairs of each series, in the registry's order: by label name.
	readyLabels [4]*dto.LabelPair // name, namespace, reason, target
	labels      [3]*dto.LabelPair // name, namespace, target
	ready       dto.Metric
	last        dto.Metric
	lastGauge   dto.Gauge
	lastValue   float64
	writes      dto.Metric
	counter     dto.Counter
	writesValue float64
	rotation    dto.Metric
	rotGauge    dto.Gauge
	rotValue    float64
}

// Gather implements prometheus.Gatherer: the families that have series,
// by name, each one's series sorted by their label values as the registry
// sorts them (the exposition is the one a Collector of const metrics gave,
// TestGatherIsTheRegistrysExposition). It builds the series under the lock
// from the records, in one block for every object: a scrape's allocations
// do not grow in number with the objects.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	readyValues := [2]float64{0, 1}
	readyGauges := [2]dto.Gauge{{Value: &readyValues[0]}, {Value: &readyValues[1]}}
	// Pairs whose value many objects share: one per value.
	shared := map[[2]string]*dto.LabelPair{}
	pair := func(name *string, value string) *dto.LabelPair {
		k := [2]string{*name, value}
		p := shared[k]
		if p == nil {
			v := value // escapes here only, not at every call
			p = &dto.LabelPair{Name: name, Value: &v}
			shared[k] = p
		}
		return p
	}
	m.mu.Lock()
	blocks := make([]objectBlock, len(m.objects))
	ready, last, writes := make([]*dto.Metric, 0, len(blocks)), make([]*dto.Metric, 0, len(blocks)), make([]*dto.Metric, 0, len(blocks))
	rotations := make([]*dto.Metric, 0, len(blocks))
	var planned []*dto.Metric
	i := 0
	for k, s := range m.objects {
		b := &blocks[i]
		i++
		b.name = k.name
		b.namePair = dto.LabelPair{Name: &labelName, Value: &b.name}
		namespace, target := pair(&labelNamespace, k.namespace), pair(&labelTarget, k.target)
		b.labels = [3]*dto.LabelPair{&b.namePair, namespace, target}
		if s.reason != "" {
			b.readyLabels = [4]*dto.LabelPair{&b.namePair, namespace, pair(&labelReason, s.reason), target}
			b.ready.Label = b.readyLabels[:]
			b.ready.Gauge = &readyGauges[0]
			if s.ready {
				b.ready.Gauge = &readyGauges[1]
			}
			ready = append(ready, &b.ready)
		}
		if s.lastReconcile != 0 {
			b.lastValue = s.lastReconcile
			b.lastGauge.Value = &b.lastValue
			b.last.Label, b.last.Gauge = b.labels[:], &b.lastGauge
			last = append(last, &b.last)
		}
		if s.hasWrites {
			b.writesValue = s.writes
			b.counter.Value = &b.writesValue
			b.writes.Label, b.writes.Counter = b.labels[:], &b.counter
			writes = append(writes, &b.writes)
		}
		if s.lastRotation != 0 {
			b.rotValue = s.lastRotation
			b.rotGauge.Value = &b.rotValue
			b.rotation.Label, b.rotation.Gauge = b.labels[:], &b.rotGauge
			rotations = append(rotations, &b.rotation)
		}
		// Only in observe-only mode: made one by one.
		for a, n := range s.planned {
			if n > 0 {
				planned = append(planned, &dto.Metric{
					Label: []*dto.LabelPair{pair(&labelAction, planner.ActionOrder()[a]), &b.namePair, namespace},
					Gauge: &dto.Gauge{Value: proto.Float64(float64(n))},
				})
			}
		}
	}
	vanished, holds := m.vanishedMetrics()
	m.mu.Unlock()
	var families []*dto.MetricFamily
	for _, f := range []struct {
		family
		metrics []*dto.Metric
	}{{writesFamily, writes}, {lastRotationFamily, rotations}, {lastReconcileFamily, last}, {readyFamily, ready}, {plannedFamily, planned}, {brakeFamily, holds}, {vanishedFamily, vanished}} {
		if len(f.metrics) == 0 {
			continue
		}
		slices.SortFunc(f.metrics, byLabelValues)
		families = append(families, &dto.MetricFamily{Name: proto.String(f.name), Help: proto.String(f.help), Type: f.typ.Enum(), Metric: f.metrics})
	}
	return families, nil
}

// byLabelValues orders the series of one family, whose label names are
// the same, by their label values in turn.
func byLabelValues(a, b *dto.Metric) int {
	for i, p := range a.Label {
		if c := strings.Compare(p.GetValue(), b.Label[i].GetValue()); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a.Label), len(b.Label))
}
