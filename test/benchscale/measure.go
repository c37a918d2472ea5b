package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs"

	"github.com/ohmlab/ohmlab-controller/test/e2e"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// loadFigures are the machine's 1-minute load averages sampled during the
// run: the other jobs of a shared machine show there.
type loadFigures struct {
	min, mean, max float64
	samples        int
}

func (l loadFigures) String() string {
	if l.samples == 0 {
		return "not sampled"
	}
	return fmt.Sprintf("mean %.1f (min %.1f, max %.1f, %d samples)", l.mean, l.min, l.max, l.samples)
}

// startLoad samples /proc/loadavg every 10 s until ctx ends; the function it
// returns gives the figures so far.
func startLoad(ctx context.Context) func() loadFigures {
	var mu sync.Mutex
	l := loadFigures{min: math.Inf(1)}
	sum := 0.0
	fs, err := procfs.NewDefaultFS()
	take := func() {
		if err != nil {
			return
		}
		avg, err := fs.LoadAvg()
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		l.samples++
		sum += avg.Load1
		l.min, l.max, l.mean = min(l.min, avg.Load1), max(l.max, avg.Load1), sum/float64(l.samples)
	}
	take()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				take()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() loadFigures {
		take()
		mu.Lock()
		defer mu.Unlock()
		return l
	}
}

// cpuProfile writes the controller's CPU profile over d (Go's
// /debug/pprof/profile at addr) to file.
func cpuProfile(ctx context.Context, addr string, d time.Duration, file string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
	return fetchProfile(ctx, http.DefaultClient, "CPU profile", url, d+time.Minute, file)
}

// heapProfile writes the controller's heap profile (Go's /debug/pprof/heap
// at addr, after a GC) to file.
func heapProfile(ctx context.Context, addr, file string) error {
	return fetchProfile(ctx, http.DefaultClient, "heap profile", fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr), time.Minute, file)
}

// fetchProfile writes what url answers within timeout to file, asked with
// hc (the API server's needs its client's credentials).
func fetchProfile(ctx context.Context, hc *http.Client, what, url string, timeout time.Duration, file string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", what, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", what, err)
	}
	return f.Close()
}

// staleness counts the objects prefix00000... of n whose last completed
// reconcile (ohmlab_object_last_reconcile_timestamp_seconds) is older than
// period, and those never reconciled (no series), and returns the age of
// the oldest last reconcile.
func staleness(ctx context.Context, c *e2e.Controller, prefix string, n int, period time.Duration) (stale, never int, oldest time.Duration, err error) {
	families, err := scrape(ctx, "http://"+c.MetricsAddr+"/metrics")
	if err != nil {
		return 0, 0, 0, err
	}
	now := time.Now()
	last := map[string]float64{}
	if mf := families["ohmlab_object_last_reconcile_timestamp_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			if label(m, "target") == "vault" && label(m, "namespace") == e2e.SeedNamespace {
				last[label(m, "name")] = m.GetGauge().GetValue()
			}
		}
	}
	for i := range n {
		ts, ok := last[fmt.Sprintf("%s%05d", prefix, i)]
		if !ok {
			never++
			continue
		}
		age := now.Sub(time.Unix(0, int64(ts*1e9)))
		oldest = max(oldest, age)
		if age > period {
			stale++
		}
	}
	return stale, never, oldest, nil
}

// histogram is the cumulative buckets of one Prometheus histogram.
type histogram struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64 // upper bound -> cumulative count
}

// webhookLatency reads the controller's histogram of the VaultSeed
// webhook's handling time.
func webhookLatency(ctx context.Context, c *e2e.Controller) (histogram, error) {
	h := histogram{buckets: map[float64]uint64{}}
	families, err := scrape(ctx, "http://"+c.MetricsAddr+"/metrics")
	if err != nil {
		return h, err
	}
	mf := families["controller_runtime_webhook_latency_seconds"]
	if mf == nil {
		return h, nil
	}
	for _, m := range mf.GetMetric() {
		if label(m, "webhook") != webhooks.Path {
			continue
		}
		addHistogram(&h, m.GetHistogram())
	}
	return h, nil
}

func addHistogram(h *histogram, p *dto.Histogram) {
	h.count += p.GetSampleCount()
	h.sum += p.GetSampleSum()
	for _, b := range p.GetBucket() {
		h.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
	}
}

func (h histogram) sub(o histogram) histogram {
	d := histogram{count: h.count - o.count, sum: h.sum - o.sum, buckets: map[float64]uint64{}}
	for b, v := range h.buckets {
		d.buckets[b] = v - o.buckets[b]
	}
	return d
}

// String gives the count, the mean and the bucket bounds of p50, p90 and
// p99.
func (h histogram) String() string {
	if h.count == 0 {
		return "no requests"
	}
	bounds := make([]float64, 0, len(h.buckets))
	for b := range h.buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	at := func(p float64) string {
		rank := uint64(math.Ceil(p * float64(h.count)))
		for _, b := range bounds {
			if h.buckets[b] >= rank {
				return fmt.Sprintf("<= %s", time.Duration(b*float64(time.Second)))
			}
		}
		return "> the largest bucket"
	}
	parts := []string{fmt.Sprintf("%d requests, mean %s", h.count, time.Duration(h.sum/float64(h.count)*float64(time.Second)).Round(100*time.Microsecond))}
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
		parts = append(parts, p.name+" "+at(p.q))
	}
	return strings.Join(parts, ", ")
}

// goHeap reads the Go runtime's memory figures from the controller's
// /metrics: what of the resident set is heap, what the collector lets it
// grow to, and what the runtime holds in all.
func goHeap(ctx context.Context, c *e2e.Controller) (string, error) {
	families, err := scrape(ctx, "http://"+c.MetricsAddr+"/metrics")
	if err != nil {
		return "", err
	}
	value := func(name string) uint64 {
		f := families[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0
		}
		return uint64(f.GetMetric()[0].GetGauge().GetValue())
	}
	return fmt.Sprintf("heap in use %s, next GC at %s, stacks %s, obtained from the OS %s",
		mib(value("go_memstats_heap_inuse_bytes")), mib(value("go_memstats_next_gc_bytes")),
		mib(value("go_memstats_stack_inuse_bytes")), mib(value("go_memstats_sys_bytes"))), nil
}
