package vaultseed

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// readySeries returns the ohmlab_object_ready series as
// "namespace/name reason value" lines, sorted.
func readySeries(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
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
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			for _, c := range tt.calls {
				if c.forget {
					m.forget("vault", "ns", c.name)
				} else {
					m.setReady("vault", "ns", c.name, c.reason, c.ready)
				}
			}
			if diff := cmp.Diff(tt.want, readySeries(t, reg)); diff != "" {
				t.Errorf("ohmlab_object_ready (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForgetRemovesEverySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, name := range []string{"a", "b"} {
		m.setReady("vault", "ns", name, "Succeeded", true)
		m.setPlanned("vault", "ns", name, map[string]int{ActionCreate: 1, ActionRotate: 2})
		m.wrote("vault", "ns", name)
		m.reconciled("vault", "ns", name)
	}
	m.forget("vault", "ns", "a")
	for metric, want := range map[string]int{"ohmlab_object_ready": 1, "ohmlab_planned_changes": 2, "ohmlab_data_writes_total": 1, "ohmlab_object_last_reconcile_timestamp_seconds": 1} {
		if got, err := testutil.GatherAndCount(reg, metric); err != nil || got != want {
			t.Errorf("%s: %d series (%v), want %d", metric, got, err, want)
		}
	}
	for _, s := range readySeries(t, reg) {
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
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.seen("vault", "ns", "a")
	if n, err := testutil.GatherAndCount(reg, family); err != nil || n != 1 {
		t.Fatalf("%d series after the first attempt (%v), want 1", n, err)
	}
	m.reconciled("vault", "ns", "a")
	completed := testutil.ToFloat64(m)
	m.seen("vault", "ns", "a")
	if got := testutil.ToFloat64(m); got != completed {
		t.Errorf("seen moved the series from %v to %v", completed, got)
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
