package templating

import (
	"context"
	"sync"
)

// BcryptSlots bounds how many bcrypt hashes and compares run at once in a
// process: each takes a core for tens of milliseconds, so more at once than
// cores only share the cores, and delay the reconciles that have no bcrypt
// to do. When every slot is taken, the computations that wait are served
// by turn ([Generator.Turn], the object's namespace), round-robin, and in
// arrival order within a turn: a namespace that asks for a thousand
// hashes delays another namespace's hash by one hash per turn waiting,
// not by its thousand. Make it with [NewBcryptSlots]; a nil *BcryptSlots
// bounds nothing.
type BcryptSlots struct {
	mu sync.Mutex
	// free is the slots nobody holds: 0 while any computation waits, as a
	// release hands its slot to a waiter.
	free int
	// turns are the turns with computations waiting, the next to be
	// served first; waiting holds each one's, oldest first. A waiter is
	// served by closing its channel, which hands it the slot.
	turns   []string
	waiting map[string][]chan struct{}
}

// NewBcryptSlots returns a bound of n bcrypt computations at once (at least
// one).
func NewBcryptSlots(n int) *BcryptSlots {
	return &BcryptSlots{free: max(n, 1), waiting: map[string][]chan struct{}{}}
}

// seat is where a computation of a Generator waits: its slots and its turn.
type seat struct {
	slots *BcryptSlots
	turn  string
}

func (g Generator) seat() seat { return seat{slots: g.Slots, turn: g.Turn} }

// run runs f in a slot, waiting for one in turn. It returns ctx's error,
// without running f, when ctx ends first: a computation already running
// cannot be stopped, so the context is checked before it starts.
func (s *BcryptSlots) run(ctx context.Context, turn string, f func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s == nil {
		f()
		return nil
	}
	if err := s.acquire(ctx, turn); err != nil {
		return err
	}
	defer s.release()
	f()
	return nil
}

// acquire takes a slot: a free one when nobody waits, else the one that a
// release hands over when turn's waiter is served.
func (s *BcryptSlots) acquire(ctx context.Context, turn string) error {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	served := make(chan struct{})
	if len(s.waiting[turn]) == 0 {
		s.turns = append(s.turns, turn)
	}
	s.waiting[turn] = append(s.waiting[turn], served)
	s.mu.Unlock()
	select {
	case <-served:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !s.leave(turn, served) {
		// Served while ctx ended: the slot was handed over; pass it on.
		s.mu.Unlock()
		s.release()
		return ctx.Err()
	}
	s.mu.Unlock()
	return ctx.Err()
}

// leave removes the waiter served from turn, reporting whether it was
// still waiting. Called with s.mu held.
func (s *BcryptSlots) leave(turn string, served chan struct{}) bool {
	q := s.waiting[turn]
	for i, c := range q {
		if c != served {
			continue
		}
		if q = append(q[:i], q[i+1:]...); len(q) > 0 {
			s.waiting[turn] = q
			return true
		}
		delete(s.waiting, turn)
		for j, t := range s.turns {
			if t == turn {
				s.turns = append(s.turns[:j], s.turns[j+1:]...)
				break
			}
		}
		return true
	}
	return false
}

// release frees a slot, or hands it to the oldest waiter of the next turn,
// which then goes to the back of the turns when it has more waiting.
func (s *BcryptSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns) == 0 {
		s.free++
		return
	}
	turn := s.turns[0]
	s.turns = s.turns[1:]
	q := s.waiting[turn]
	close(q[0])
	if q = q[1:]; len(q) > 0 {
		s.waiting[turn] = q
		s.turns = append(s.turns, turn)
	} else {
		delete(s.waiting, turn)
	}
}
