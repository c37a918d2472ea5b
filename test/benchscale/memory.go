package main

import (
	"context"
	"fmt"
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
