package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// rssPeaks samples the controller's resident set every second and keeps the
// largest sample of each phase of the run, so that the high-water mark can be
// put down to a phase (creation, a resync, admission).
type rssPeaks struct {
	mu     sync.Mutex
	pid    int
	phase  string
	order  []string
	peak   map[string]uint64
	cancel context.CancelFunc
}

func startRSS(ctx context.Context, pid int, phase string) *rssPeaks {
	ctx, cancel := context.WithCancel(ctx)
	p := &rssPeaks{pid: pid, peak: map[string]uint64{}, cancel: cancel}
	p.enter(phase)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			p.take()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p
}

func (p *rssPeaks) take() {
	proc, err := procfs.NewProc(p.pid)
	if err != nil {
		return
	}
	s, err := proc.NewStatus()
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peak[p.phase] = max(p.peak[p.phase], s.VmRSS)
}

// enter starts a phase: later samples count towards it.
func (p *rssPeaks) enter(phase string) {
	p.take()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = phase
	p.order = append(p.order, phase)
}

// stop ends the sampling and returns the peaks in phase order.
func (p *rssPeaks) stop() string {
	p.take()
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	parts := make([]string, 0, len(p.order))
	for _, ph := range p.order {
		parts = append(parts, fmt.Sprintf("%s %s", ph, mib(p.peak[ph])))
	}
	return strings.Join(parts, ", ")
}

// scrapes fetches the controller's /metrics every interval, as the chart's
// PodMonitor has Prometheus do (podMonitor.interval, 30 s), so that the
// memory a scrape takes counts in the run's high-water mark as it would in
// a cluster. stop ends it and describes the scrapes.
type scrapes struct {
	cancel context.CancelFunc
	done   chan struct{}
	n      int
	bytes  int64         // the largest exposition
	time   time.Duration // the slowest scrape
}

func startScrapes(ctx context.Context, url string, interval time.Duration) *scrapes {
	ctx, cancel := context.WithCancel(ctx)
	s := &scrapes{cancel: cancel, done: make(chan struct{})}
	if interval <= 0 {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			start := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			s.n++
			s.bytes, s.time = max(s.bytes, n), max(s.time, time.Since(start))
		}
	}()
	return s
}

func (s *scrapes) stop() string {
	s.cancel()
	<-s.done
	if s.n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d scrapes, the largest %.1f MiB, the slowest %s", s.n, float64(s.bytes)/(1<<20), s.time.Round(time.Millisecond))
}
