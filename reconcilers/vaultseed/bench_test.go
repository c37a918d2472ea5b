package vaultseed

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
)

// BenchmarkReportMetrics is the metrics work of one reconcile among 100
// and among 10,000 objects: the same cost at both sizes is O(1) per
// reconcile (issue 13). report: Ready and last-reconcile series;
// observe-only: the planned changes too; write: a data write counted;
// reason change: the Ready series replaced; forget: a deleted object's
// series removed (and made again by its next reconcile).
func BenchmarkReportMetrics(b *testing.B) {
	const obj = "bench-00001"
	cases := []struct {
		name string
		op   func(m *Metrics)
	}{
		{"report", func(m *Metrics) {
			m.setReady("vault", testNamespace, obj, ohmlabv1alpha1.ReasonReconciled, true)
			m.reconciled("vault", testNamespace, obj)
		}},
		{"observe-only", func(m *Metrics) {
			m.setPlanned("vault", testNamespace, obj, map[string]int{planner.ActionUpdateField: 1})
			m.setReady("vault", testNamespace, obj, ohmlabv1alpha1.ReasonObserveOnly, false)
		}},
		{"write", func(m *Metrics) { m.wrote("vault", testNamespace, obj) }},
		{"reason change", func(m *Metrics) {
			m.setReady("vault", testNamespace, obj, ohmlabv1alpha1.ReasonBackendUnavailable, false)
			m.setReady("vault", testNamespace, obj, ohmlabv1alpha1.ReasonReconciled, true)
		}},
		{"forget", func(m *Metrics) {
			m.forget("vault", testNamespace, obj)
			m.setReady("vault", testNamespace, obj, ohmlabv1alpha1.ReasonReconciled, true)
			m.reconciled("vault", testNamespace, obj)
			m.wrote("vault", testNamespace, obj)
		}},
	}
	for _, n := range []int{100, 10000} {
		m := NewMetrics(prometheus.NewRegistry())
		for i := range n {
			name := fmt.Sprintf("bench-%05d", i)
			m.setReady("vault", testNamespace, name, ohmlabv1alpha1.ReasonReconciled, true)
			m.reconciled("vault", testNamespace, name)
			m.wrote("vault", testNamespace, name)
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/objects-%d", c.name, n), func(b *testing.B) {
				for b.Loop() {
					c.op(m)
				}
			})
		}
	}
}

// BenchmarkQuietReconcile is one reconcile of an object that is Ready and
// unchanged, against the real API server and Vault (the manager's cache,
// one Vault read, the source from the resync's read): what a quiet resync
// costs per object besides the work queue. The objects are those of `make
// bench-scale` at the tests' bcrypt cost; each has been reconciled, so its
// hash is in the cache.
func BenchmarkQuietReconcile(b *testing.B) {
	const n = 20
	f := startController(b, controllerOptions{resync: time.Hour})
	for i := range n {
		data := `{"password": "<random:24>", "hash": "<bcrypt:password>"`
		if i%2 == 1 {
			data += `, "previous": "<ref:` + f.path(fmt.Sprintf("o%02d", i-1)) + `#password>"`
		}
		f.create(f.seed(fmt.Sprintf("o%02d", i), f.path(fmt.Sprintf("o%02d", i)), data+"}"))
	}
	for i := range n {
		f.waitReady(fmt.Sprintf("o%02d", i))
	}
	reads := f.kv.Counts()["read"]
	ctx := context.Background()
	i := 0
	for b.Loop() {
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: fmt.Sprintf("o%02d", i%n)}}
		if _, err := f.r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	got := f.kv.Counts()["read"] - reads
	b.ReportMetric(float64(got)/float64(i), "reads/reconcile")
	if got > i {
		b.Errorf("%d Vault reads for %d reconciles, want at most one each", got, i)
	}
	if w := f.kv.Counts()["write"]; w != n {
		b.Errorf("%d Vault writes, want the %d of the creations", w, n)
	}
}

// BenchmarkMetricsMemory is the live heap that the per-object metrics of
// 10,000 Ready objects hold, per object (issue 13: memory at 10,000
// objects); run with -benchtime=1x.
func BenchmarkMetricsMemory(b *testing.B) {
	const n = 10000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%05d", i)
	}
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := NewMetrics(prometheus.NewRegistry())
		for _, name := range names {
			m.setReady("vault", testNamespace, name, ohmlabv1alpha1.ReasonReconciled, true)
			m.reconciled("vault", testNamespace, name)
			m.wrote("vault", testNamespace, name)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/object")
		runtime.KeepAlive(m)
	}
}

// BenchmarkGather is one scrape's work of the per-object metrics of 10,000
// Ready objects (three series each): gathering their families and writing
// them in the text exposition format, as the metrics endpoint does. Its
// allocations are garbage once the scrape is written.
func BenchmarkGather(b *testing.B) {
	const n = 10000
	m := NewMetrics(prometheus.NewRegistry())
	for i := range n {
		name := fmt.Sprintf("bench-%05d", i)
		m.setReady("vault", testNamespace, name, ohmlabv1alpha1.ReasonReconciled, true)
		m.reconciled("vault", testNamespace, name)
		m.wrote("vault", testNamespace, name)
	}
	b.ReportAllocs()
	for b.Loop() {
		families, err := m.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range families {
			if err := enc.Encode(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}
