package vaultseed

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
)

// readySeries returns the ohmlab_object_ready series as
// "namespace/name reason value" lines, sorted.
func readySeries(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "ohmlab_object_ready" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, fmt.Sprintf("%s/%s/%s %s %g", l["target"], l["namespace"], l["name"], l["reason"], m.GetGauge().GetValue()))
		}
	}
	return out
}

type readyCall struct {
	forget       bool
	name, reason string
	ready        bool
}

func TestSetReady(t *testing.T) {
	tests := []struct {
		name  string
		calls []readyCall
		want  []string
	}{
		{name: "one series per object", calls: []readyCall{{name: "a", reason: "Succeeded", ready: true}, {name: "b", reason: "RefPending"}},
			want: []string{"vault/ns/a Succeeded 1", "vault/ns/b RefPending 0"}},
		{name: "a new reason replaces the old series", calls: []readyCall{{name: "a", reason: "RefPending"}, {name: "a", reason: "Succeeded", ready: true}},
			want: []string{"vault/ns/a Succeeded 1"}},
		{name: "the same reason updates the value", calls: []readyCall{{name: "a", reason: "Succeeded", ready: true}, {name: "a", reason: "Succeeded"}},
			want: []string{"vault/ns/a Succeeded 0"}},
		{name: "back to an earlier reason", calls: []readyCall{{name: "a", reason: "RefPending"}, {name: "a", reason: "Succeeded", ready: true}, {name: "a", reason: "RefPending"}},
			want: []string{"vault/ns/a RefPending 0"}},
		{name: "forget removes the object's series only", calls: []readyCall{{name: "a", reason: "RefPending"}, {name: "b", reason: "Succeeded", ready: true}, {forget: true, name: "a"}},
			want: []string{"vault/ns/b Succeeded 1"}},
		{name: "set again after forget", calls: []readyCall{{name: "a", reason: "RefPending"}, {forget: true, name: "a"}, {name: "a", reason: "Succeeded", ready: true}},
			want: []string{"vault/ns/a Succeeded 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			for _, c := range tt.calls {
				if c.forget {
					m.forget("vault", "ns", c.name)
				} else {
					m.setReady("vault", "ns", c.name, c.reason, c.ready)
				}
			}
			if diff := cmp.Diff(tt.want, readySeries(t, m)); diff != "" {
				t.Errorf("ohmlab_object_ready (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForgetRemovesEverySeries(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for _, name := range []string{"a", "b"} {
		m.setReady("vault", "ns", name, "Succeeded", true)
		m.setPlanned("vault", "ns", name, map[string]int{planner.ActionCreate: 1, planner.ActionRotate: 2})
		m.wrote("vault", "ns", name)
		m.reconciled("vault", "ns", name)
	}
	m.forget("vault", "ns", "a")
	for metric, want := range map[string]int{"ohmlab_object_ready": 1, "ohmlab_planned_changes": 2, "ohmlab_data_writes_total": 1, "ohmlab_object_last_reconcile_timestamp_seconds": 1} {
		if got, err := testutil.GatherAndCount(m, metric); err != nil || got != want {
			t.Errorf("%s: %d series (%v), want %d", metric, got, err, want)
		}
	}
	for _, s := range readySeries(t, m) {
		if strings.Contains(s, "/a ") {
			t.Errorf("series of the forgotten object left: %s", s)
		}
	}
}

// TestSeenStartsTheLastReconcileSeriesOnly: the first attempt makes the
// series, so that an object never reconciled to completion ages; it never
// moves a series that a completed reconcile set (issue 23, item 7).
func TestSeenStartsTheLastReconcileSeriesOnly(t *testing.T) {
	const family = "ohmlab_object_last_reconcile_timestamp_seconds"
	m := NewMetrics(prometheus.NewRegistry())
	m.seen("vault", "ns", "a")
	if n, err := testutil.GatherAndCount(m, family); err != nil || n != 1 {
		t.Fatalf("%d series after the first attempt (%v), want 1", n, err)
	}
	m.reconciled("vault", "ns", "a")
	completed := lastReconcile(t, m)
	m.seen("vault", "ns", "a")
	if got := lastReconcile(t, m); got != completed {
		t.Errorf("seen moved the series from %v to %v", completed, got)
	}
}

// lastReconcile is the value of the one last-reconcile series of m.
func lastReconcile(t *testing.T, m *Metrics) float64 {
	t.Helper()
	families, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "ohmlab_object_last_reconcile_timestamp_seconds" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no single last-reconcile series")
	return 0
}

// TestExpositionIsUnchanged: the text exposition of a set of records is
// byte for byte the one of d6da5e2, whose series were a Collector's const
// metrics gathered by the registry (names, help, types, labels, values,
// order), so that dashboards, alerts and recorded scrapes see no change
// (issue 25, item 4).
func TestExpositionIsUnchanged(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for _, r := range expositionRecords() {
		m.update(r.target, r.namespace, r.name, func(s *objectSeries) { *s = r.series })
	}
	m.setPlanned("vault", "team-a", "a-1", map[string]int{planner.ActionCreateField: 2, planner.ActionRotate: 1, planner.ActionDelete: 1})
	m.setPlanned("vault", "team-b", "b", map[string]int{planner.ActionCreate: 1})
	if diff := cmp.Diff(expositionOfD6da5e2, exposition(t, m)); diff != "" {
		t.Errorf("exposition (-d6da5e2 +now):\n%s", diff)
	}
}

type expositionRecord struct {
	target, namespace, name string
	series                  objectSeries
}

// expositionRecords are objects in several namespaces and targets, names
// that sort differently by byte and by label, each kind of series alone.
func expositionRecords() []expositionRecord {
	return []expositionRecord{
		{"vault", "team-b", "b", objectSeries{reason: "Reconciled", ready: true, lastReconcile: 1764633600.5, writes: 2, hasWrites: true}},
		{"vault", "team-a", "b", objectSeries{reason: "Reconciled", ready: true, lastReconcile: 1764633601, writes: 1, hasWrites: true}},
		{"vault", "team-a", "a", objectSeries{reason: "RefPending", lastReconcile: 1764633602.25}},
		{"vault", "team-a", "a-1", objectSeries{reason: "Reconciled", lastReconcile: 1764633603}},
		{"vault", "team-a", "ab", objectSeries{reason: "Reconciled", ready: true}},
		{"other", "team-a", "a", objectSeries{reason: "RefPending"}},
		{"vault", "team-c", "w", objectSeries{writes: 12345, hasWrites: true}},
		{"vault", "team-b", "z", objectSeries{reason: "InvalidSpec", lastReconcile: 1.764633599123e9}},
	}
}

// expositionOfD6da5e2 is what d6da5e2 exposed for expositionRecords.
const expositionOfD6da5e2 = `# HELP ohmlab_data_writes_total KV data writes made for the object; each creates a KV version.
# TYPE ohmlab_data_writes_total counter
ohmlab_data_writes_total{name="b",namespace="team-a",target="vault"} 1
ohmlab_data_writes_total{name="b",namespace="team-b",target="vault"} 2
ohmlab_data_writes_total{name="w",namespace="team-c",target="vault"} 12345
# HELP ohmlab_object_last_reconcile_timestamp_seconds Unix time of the object's last completed reconcile: Vault answered in time and the status write, if any, succeeded. Before the first, the time this process first attempted the object.
# TYPE ohmlab_object_last_reconcile_timestamp_seconds gauge
ohmlab_object_last_reconcile_timestamp_seconds{name="a",namespace="team-a",target="vault"} 1.76463360225e+09
ohmlab_object_last_reconcile_timestamp_seconds{name="a-1",namespace="team-a",target="vault"} 1.764633603e+09
ohmlab_object_last_reconcile_timestamp_seconds{name="b",namespace="team-a",target="vault"} 1.764633601e+09
ohmlab_object_last_reconcile_timestamp_seconds{name="b",namespace="team-b",target="vault"} 1.7646336005e+09
ohmlab_object_last_reconcile_timestamp_seconds{name="z",namespace="team-b",target="vault"} 1.764633599123e+09
# HELP ohmlab_object_ready 1 when the object is Ready, else 0; reason is the Ready condition's reason.
# TYPE ohmlab_object_ready gauge
ohmlab_object_ready{name="a",namespace="team-a",reason="RefPending",target="other"} 0
ohmlab_object_ready{name="a",namespace="team-a",reason="RefPending",target="vault"} 0
ohmlab_object_ready{name="a-1",namespace="team-a",reason="Reconciled",target="vault"} 0
ohmlab_object_ready{name="ab",namespace="team-a",reason="Reconciled",target="vault"} 1
ohmlab_object_ready{name="b",namespace="team-a",reason="Reconciled",target="vault"} 1
ohmlab_object_ready{name="b",namespace="team-b",reason="Reconciled",target="vault"} 1
ohmlab_object_ready{name="z",namespace="team-b",reason="InvalidSpec",target="vault"} 0
# HELP ohmlab_planned_changes Changes a real run would make to the object's path, by action (observe-only mode).
# TYPE ohmlab_planned_changes gauge
ohmlab_planned_changes{action="create",name="b",namespace="team-b"} 1
ohmlab_planned_changes{action="create-field",name="a-1",namespace="team-a"} 2
ohmlab_planned_changes{action="delete",name="a-1",namespace="team-a"} 1
ohmlab_planned_changes{action="rotate",name="a-1",namespace="team-a"} 1
`

// exposition is g's text exposition, as the metrics endpoint writes it.
func exposition(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestGatherAllocationsDoNotGrowWithObjects: a scrape's allocations are a
// few blocks, as many for 10,000 objects as for 100 (issue 25, item 4:
// with a const metric per series, a scrape of 10,000 objects was 540,000
// allocations).
func TestGatherAllocationsDoNotGrowWithObjects(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{100, 10000} {
		m := NewMetrics(prometheus.NewRegistry())
		for i := range n {
			name := fmt.Sprintf("o-%05d", i)
			m.setReady("vault", testNamespace, name, ohmlabv1alpha1.ReasonReconciled, true)
			m.reconciled("vault", testNamespace, name)
			m.wrote("vault", testNamespace, name)
		}
		allocs[n] = testing.AllocsPerRun(5, func() {
			if _, err := m.Gather(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if allocs[10000] != allocs[100] {
		t.Errorf("a scrape allocates %v times for 100 objects, %v times for 10,000: want as many", allocs[100], allocs[10000])
	}
}

// BenchmarkSetReady is the metrics work of one reconcile among n objects:
// it must not grow with n.
func BenchmarkSetReady(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			m := NewMetrics(prometheus.NewRegistry())
			for i := range n {
				m.setReady("vault", "ns", fmt.Sprintf("o%d", i), "Succeeded", true)
			}
			reasons := []string{"Succeeded", "RefPending"}
			i := 0
			for b.Loop() {
				m.setReady("vault", "ns", "o1", reasons[i%2], i%2 == 0)
				i++
			}
		})
	}
}
