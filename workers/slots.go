package workers

import (
	"context"
	"sync"
	"sync/atomic"

	"go.temporal.io/sdk/worker"

	"github.com/sluice-ci/sluice/queue"
)

// poolSupplier hands out activity slots from a queue.SlotPool. The SDK
// reserves a slot before it polls, so a pool with limit 0 means no polling:
// that is how a member outside a queue's active rule stops taking builds.
//
// A member that may run a queue's untrusted builds polls the queue's two
// task queues with two workers whose suppliers share pool, the member's
// slots for the queue, so the queue's max parallel runs hold across both.
// Each then also has a gate, its own task queue's allowance (a rule may
// give the member slots for one kind of build and not the other), reserved
// before a slot of pool, and turns, which keeps one task queue's idle polls
// from holding pool's last free slot forever.
type poolSupplier struct {
	pool *queue.SlotPool
	// gate, when set, is the task queue's own allowance.
	gate *queue.SlotPool
	// turns, when set, is shared with the other task queue's supplier;
	// side tells the two apart (0 or 1).
	turns *turns
	side  int
	// idle: the last poll brought no task.
	idle atomic.Bool
}

var _ worker.SlotSupplier = (*poolSupplier)(nil)

type permitData struct {
	slot *queue.Slot
	gate *queue.Slot
	used atomic.Bool
}

func (p *poolSupplier) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	var g *queue.Slot
	if p.gate != nil {
		var err error
		if g, err = p.gate.Reserve(ctx); err != nil {
			return nil, err
		}
	}
	var s *queue.Slot
	var err error
	if p.turns != nil {
		s, err = p.turns.reserve(ctx, p.pool, p.side, p.idle.Load())
	} else {
		s, err = p.pool.Reserve(ctx)
	}
	if err != nil {
		g.Unreserve()
		return nil, err
	}
	return &worker.SlotPermit{UserData: &permitData{slot: s, gate: g}}, nil
}

func (p *poolSupplier) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	var g *queue.Slot
	if p.gate != nil {
		var ok bool
		if g, ok = p.gate.TryReserve(); !ok {
			return nil
		}
	}
	s, ok := p.pool.TryReserve()
	if !ok {
		g.Unreserve()
		return nil
	}
	return &worker.SlotPermit{UserData: &permitData{slot: s, gate: g}}
}

// MarkSlotUsed notes that the slot got a task: a build runs on it.
func (p *poolSupplier) MarkSlotUsed(info worker.SlotMarkUsedInfo) {
	if d, ok := info.Permit().UserData.(*permitData); ok {
		d.used.Store(true)
		p.idle.Store(false)
	}
}

// ReleaseSlot keeps a slot that ran a build busy for the min-gap; a slot
// whose poll brought nothing is free at once.
func (p *poolSupplier) ReleaseSlot(info worker.SlotReleaseInfo) {
	d, ok := info.Permit().UserData.(*permitData)
	if !ok {
		return
	}
	if !d.used.Load() {
		p.idle.Store(true)
		d.slot.Unreserve()
		d.gate.Unreserve()
		return
	}
	d.slot.Release()
	d.gate.Release()
}

// MaxSlots is 0: the limit changes with the queue's rules.
func (p *poolSupplier) MaxSlots() int { return 0 }

// turns lets the two task queues of a queue take turns for the member's
// last free slot. The SDK reserves a slot for every long poll; a poll that
// brings nothing releases it and the poller reserves again at once, so
// without turns the side that polls first could keep the slot and the other
// side's builds would wait as long as it stays idle. A side whose last poll
// was idle therefore lets a waiting other side go first.
type turns struct {
	mu      sync.Mutex
	waiting [2]int
	// changed is closed and replaced whenever waiting changes.
	changed chan struct{}
}

func newTurns() *turns { return &turns{changed: make(chan struct{})} }

func (t *turns) add(side, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting[side] += n
	close(t.changed)
	t.changed = make(chan struct{})
}

// reserve reserves a slot of pool for side; yield first waits while the
// other side waits for pool.
func (t *turns) reserve(ctx context.Context, pool *queue.SlotPool, side int, yield bool) (*queue.Slot, error) {
	for yield {
		t.mu.Lock()
		other, changed := t.waiting[1-side], t.changed
		t.mu.Unlock()
		if other == 0 {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	t.add(side, 1)
	defer t.add(side, -1)
	return pool.Reserve(ctx)
}
