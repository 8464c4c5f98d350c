package workers

import (
	"context"
	"sync/atomic"

	"go.temporal.io/sdk/worker"

	"github.com/sluice-ci/sluice/queue"
)

// poolSupplier hands out activity slots from a queue.SlotPool. The SDK
// reserves a slot before it polls, so a pool with limit 0 means no polling:
// that is how a member outside a queue's active rule stops taking builds.
type poolSupplier struct {
	pool *queue.SlotPool
}

var _ worker.SlotSupplier = (*poolSupplier)(nil)

type permitData struct {
	slot *queue.Slot
	used atomic.Bool
}

func (p *poolSupplier) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	s, err := p.pool.Reserve(ctx)
	if err != nil {
		return nil, err
	}
	return &worker.SlotPermit{UserData: &permitData{slot: s}}, nil
}

func (p *poolSupplier) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	s, ok := p.pool.TryReserve()
	if !ok {
		return nil
	}
	return &worker.SlotPermit{UserData: &permitData{slot: s}}
}

// MarkSlotUsed notes that the slot got a task: a build runs on it.
func (p *poolSupplier) MarkSlotUsed(info worker.SlotMarkUsedInfo) {
	if d, ok := info.Permit().UserData.(*permitData); ok {
		d.used.Store(true)
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
		d.slot.Unreserve()
		return
	}
	d.slot.Release()
}

// MaxSlots is 0: the limit changes with the queue's rules.
func (p *poolSupplier) MaxSlots() int { return 0 }
