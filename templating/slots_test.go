package templating

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
)

// TestBcryptSlotsTakeTurns: the order in which computations waiting for
// one slot run, each queued after the one before it waits.
func TestBcryptSlotsTakeTurns(t *testing.T) {
	burst := func(turn string, n int) []string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("%s/%d", turn, i))
		}
		return names
	}
	tests := []struct {
		name    string
		arrive  []string // turn/i, in arrival order
		stopped []string // waiters whose context ends before the slot is free
		want    []string
	}{
		{"one turn keeps its arrival order", burst("a", 3), nil, []string{"a/0", "a/1", "a/2"}},
		{"a burst, then another turn's: served after one of the burst",
			append(burst("noisy", 4), "quiet/0"), nil,
			[]string{"noisy/0", "quiet/0", "noisy/1", "noisy/2", "noisy/3"}},
		{"two bursts take turns",
			append(burst("a", 3), burst("b", 3)...), nil,
			[]string{"a/0", "b/0", "a/1", "b/1", "a/2", "b/2"}},
		{"a turn whose only waiter stopped waiting loses its place",
			[]string{"a/0", "b/0", "a/1"}, []string{"b/0"},
			[]string{"a/0", "a/1"}},
		{"a stopped waiter leaves the rest of its turn in place",
			[]string{"a/0", "a/1", "b/0", "a/2"}, []string{"a/0"},
			[]string{"a/1", "b/0", "a/2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := NewBcryptSlots(1)
				if err := s.acquire(t.Context(), "holder"); err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var got []string
				cancels := map[string]context.CancelFunc{}
				var wg sync.WaitGroup
				for _, name := range tt.arrive {
					ctx, cancel := context.WithCancel(t.Context())
					cancels[name] = cancel
					wg.Go(func() {
						_ = s.run(ctx, name[:len(name)-2], func() {
							mu.Lock()
							got = append(got, name)
							mu.Unlock()
						})
					})
					synctest.Wait() // name waits before the next arrives
				}
				for _, name := range tt.stopped {
					cancels[name]()
					synctest.Wait()
				}
				s.release()
				wg.Wait()
				for _, cancel := range cancels {
					cancel()
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("order (-want +got):\n%s", diff)
				}
				if s.free != 1 || len(s.turns) != 0 || len(s.waiting) != 0 {
					t.Errorf("after the last release: %d free, turns %v, %d waiting", s.free, s.turns, len(s.waiting))
				}
			})
		})
	}
}

// TestBcryptSlotsBound: many computations of several turns, some of whose
// contexts end while they wait, never run more at once than the slots, and
// leave every slot free.
func TestBcryptSlotsBound(t *testing.T) {
	const n = 3
	s := NewBcryptSlots(n)
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 400 {
		ctx, cancel := context.WithCancel(t.Context())
		wg.Go(func() {
			defer cancel()
			if rand.IntN(4) == 0 {
				go cancel()
			}
			_ = s.run(ctx, fmt.Sprint(i%7), func() {
				r := running.Add(1)
				for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
				}
				running.Add(-1)
			})
		})
	}
	wg.Wait()
	if m := most.Load(); m > n {
		t.Errorf("%d computations ran at once, the bound is %d", m, n)
	}
	if s.free != n || len(s.turns) != 0 || len(s.waiting) != 0 {
		t.Errorf("at the end: %d free of %d, turns %v, %d waiting", s.free, n, s.turns, len(s.waiting))
	}
}
