// Package queuetest provides test helpers for package queue: a manual clock
// for SlotPool and anything else that takes a queue.Clock.
package queuetest

import (
	"context"
	"sync"
	"time"
)

// Start is the time NewManualClock starts at when given the zero time. A
// SlotPool treats a zero end time as "never used", so manual clocks never
// start at zero.
var Start = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// ManualClock is a queue.Clock whose time moves only when the test says so.
// It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []timer
	changed chan struct{} // closed and replaced when a timer is added
}

type timer struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a clock showing start (Start if start is zero).
func NewManualClock(start time.Time) *ManualClock {
	if start.IsZero() {
		start = Start
	}
	return &ManualClock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once Advance or Set
// has moved it d or more past now. A d ≤ 0 fires at once.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, timer{at: c.now.Add(d), ch: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock forward by d and fires every timer that is due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t (never backwards) and fires every timer that is
// due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.setLocked(t)
	}
}

func (c *ManualClock) setLocked(t time.Time) {
	c.now = t
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if t.Before(tm.at) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- t
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// Timers returns how many After channels have not fired yet.
func (c *ManualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n After channels are pending, so a
// test can advance the clock knowing the code under test is waiting on it.
// It returns ctx.Err() if ctx ends first.
func (c *ManualClock) WaitForTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		pending, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
