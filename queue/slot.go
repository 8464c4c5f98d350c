package queue

import (
	"context"
	"sync"
	"time"
)

// Clock is the time source of a SlotPool. RealClock is the production one;
// tests pass a manual clock (see package queuetest).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the Clock of the operating system. It is for executor
// processes only: workflow code must never read the wall clock, and so never
// uses a SlotPool.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// SlotPool hands out the execution slots one executor process has for one
// queue: at most Limit at a time, and a slot whose build ended less than the
// minimum gap ago stays occupied (FlowForce's "minimum time between runs",
// counted per slot). It is safe for concurrent use.
//
// A new pool has limit 0: nothing can be reserved until SetLimit, which an
// executor calls with its entry of Plan.Allowed and Plan.Rule.MinGap, and
// again whenever the plan changes.
//
// Waiters are not served in FIFO order; whichever waiting Reserve sees a
// free slot first takes it. Free slots are handed out lowest index first.
type SlotPool struct {
	clock Clock

	mu      sync.Mutex
	limit   int
	minGap  time.Duration
	slots   []slotState // grows on demand; entries beyond limit keep their history
	used    int
	waiting int
	// wake is closed and replaced whenever something a waiter may be
	// waiting for changes: a release or a new limit or gap.
	wake chan struct{}
}

type slotState struct {
	held  bool
	ended time.Time // when the last build on the slot ended; zero if none yet
}

// Slot is one reserved execution slot. Release it when the build ends.
type Slot struct {
	pool     *SlotPool
	index    int
	released bool // guarded by pool.mu
}

// NewSlotPool returns an empty pool with limit 0 and no gap, reading time
// from clock (RealClock{} when nil).
func NewSlotPool(clock Clock) *SlotPool {
	if clock == nil {
		clock = RealClock{}
	}
	return &SlotPool{clock: clock, wake: make(chan struct{})}
}

// SetLimit sets how many slots may be held at once and how long a slot rests
// after its build ends. Both take effect at once for new reservations, and
// waiting Reserve calls re-check immediately. Lowering the limit never takes
// a slot from its holder: Used may exceed Limit until enough slots are
// released. A negative n counts as 0 (no new reservations) and a negative
// gap as 0.
func (p *SlotPool) SetLimit(n int, minGap time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = max(0, n)
	p.minGap = max(0, minGap)
	p.broadcastLocked()
}

// Limit returns the current limit.
func (p *SlotPool) Limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// MinGap returns the current minimum time between runs on one slot.
func (p *SlotPool) MinGap() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.minGap
}

// Used returns how many slots are held right now. Slots resting after a
// build are not counted.
func (p *SlotPool) Used() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Waiting returns how many Reserve calls are blocked right now, for metrics
// and tests.
func (p *SlotPool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// TryReserve reserves a slot if one is free right now, without waiting.
func (p *SlotPool) TryReserve() (*Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, _, _ := p.tryLocked()
	return s, s != nil
}

// Reserve blocks until a slot is free and reserves it. A slot is free when
// fewer than Limit slots are held and the slot's last build ended at least
// MinGap ago. Reserve wakes as soon as a slot is released, the limit or gap
// changes, or a resting slot's gap passes. When ctx ends first it returns
// ctx.Err() and holds nothing; a ctx that has already ended fails even if a
// slot is free.
func (p *SlotPool) Reserve(ctx context.Context) (*Slot, error) {
	counted := false
	defer func() {
		if counted {
			p.mu.Lock()
			p.waiting--
			p.mu.Unlock()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		s, wait, timed := p.tryLocked()
		wake := p.wake
		if s == nil && !counted {
			counted = true
			p.waiting++
		}
		p.mu.Unlock()
		if s != nil {
			return s, nil
		}
		var timer <-chan time.Time
		if timed {
			timer = p.clock.After(wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-timer:
		}
	}
}

// tryLocked grants the lowest free slot. When none is free but one is
// resting, it returns how long until the first resting slot may be used and
// timed=true; when the limit is reached it returns timed=false, since only a
// release or SetLimit can help.
func (p *SlotPool) tryLocked() (s *Slot, wait time.Duration, timed bool) {
	if p.used >= p.limit {
		return nil, 0, false
	}
	now := p.clock.Now()
	var earliest time.Time
	for i := 0; i < p.limit; i++ {
		if i == len(p.slots) {
			p.slots = append(p.slots, slotState{})
		}
		st := &p.slots[i]
		if st.held {
			continue
		}
		ready := st.ended.Add(p.minGap)
		if st.ended.IsZero() || !now.Before(ready) {
			st.held = true
			p.used++
			return &Slot{pool: p, index: i}, 0, false
		}
		if !timed || ready.Before(earliest) {
			earliest, timed = ready, true
		}
	}
	return nil, earliest.Sub(now), timed
}

func (p *SlotPool) broadcastLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Index returns the slot's position in its pool, counting from 0, so
// callers can record which slot ran which build. An index is reused once
// the slot is released and its gap has passed.
func (s *Slot) Index() int { return s.index }

// Release ends the slot's use now. The slot becomes reusable once the pool's
// MinGap has passed. Calling Release again, or on a nil Slot, does nothing.
func (s *Slot) Release() { s.release(true) }

// Unreserve returns a slot that never ran a build (a poll that brought no
// task): it is free again at once, without the gap.
func (s *Slot) Unreserve() { s.release(false) }

func (s *Slot) release(used bool) {
	if s == nil {
		return
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	st := &p.slots[s.index]
	st.held = false
	if used {
		st.ended = p.clock.Now()
	}
	p.used--
	p.broadcastLocked()
}
