package workers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/queue/queuetest"
)

// markUsed and release are the SDK's callbacks' arguments; only Permit is
// read by poolSupplier.
type markUsed struct {
	worker.SlotMarkUsedInfo
	permit *worker.SlotPermit
}

func (m markUsed) Permit() *worker.SlotPermit { return m.permit }

type release struct {
	worker.SlotReleaseInfo
	permit *worker.SlotPermit
}

func (r release) Permit() *worker.SlotPermit { return r.permit }

// setupSupplier returns a supplier over a pool with limit slots and gap,
// on a manual clock.
func setupSupplier(t *testing.T, limit int, gap time.Duration) (*poolSupplier, *queue.SlotPool, *queuetest.ManualClock) {
	t.Helper()
	clock := queuetest.NewManualClock(time.Time{})
	pool := queue.NewSlotPool(clock)
	pool.SetLimit(limit, gap)
	return &poolSupplier{pool: pool}, pool, clock
}

// reserveAsync runs ReserveSlot in a goroutine and returns its outcome.
func reserveAsync(ctx context.Context, s *poolSupplier) <-chan reserved {
	ch := make(chan reserved, 1)
	go func() {
		p, err := s.ReserveSlot(ctx, nil)
		ch <- reserved{p, err}
	}()
	return ch
}

type reserved struct {
	permit *worker.SlotPermit
	err    error
}

// waitBlocked waits until n ReserveSlot calls wait on the pool.
func waitBlocked(t *testing.T, pool *queue.SlotPool, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return pool.Waiting() == n }, 5*time.Second, time.Millisecond)
}

func requireNotDone(t *testing.T, ch <-chan reserved) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("ReserveSlot returned early: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func requireDone(t *testing.T, ch <-chan reserved) reserved {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("ReserveSlot still blocked")
		return reserved{}
	}
}

func TestPoolSupplierReserveBlocksAtLimit(t *testing.T) {
	t.Parallel()
	s, pool, _ := setupSupplier(t, 2, 0)
	ctx := context.Background()
	a, err := s.ReserveSlot(ctx, nil)
	require.NoError(t, err)
	b := s.TryReserveSlot(nil)
	require.NotNil(t, b)
	require.Equal(t, 2, pool.Used())
	require.Nil(t, s.TryReserveSlot(nil), "the pool is full")

	ch := reserveAsync(ctx, s)
	waitBlocked(t, pool, 1)
	requireNotDone(t, ch)

	s.MarkSlotUsed(markUsed{permit: a})
	s.ReleaseSlot(release{permit: a})
	r := requireDone(t, ch)
	require.NoError(t, r.err)
	require.NotNil(t, r.permit)
	require.Equal(t, 2, pool.Used())
	require.Zero(t, s.MaxSlots(), "the limit lives in the pool, not in the SDK")
}

func TestPoolSupplierUsedSlotKeepsMinGap(t *testing.T) {
	t.Parallel()
	s, pool, clock := setupSupplier(t, 1, 30*time.Second)
	ctx := context.Background()
	p, err := s.ReserveSlot(ctx, nil)
	require.NoError(t, err)
	s.MarkSlotUsed(markUsed{permit: p})
	s.ReleaseSlot(release{permit: p})
	require.Zero(t, pool.Used())
	require.Nil(t, s.TryReserveSlot(nil), "a slot that ran a build rests for the min-gap")

	ch := reserveAsync(ctx, s)
	require.NoError(t, clock.WaitForTimers(ctx, 1))
	clock.Advance(29 * time.Second)
	requireNotDone(t, ch)
	clock.Advance(time.Second)
	r := requireDone(t, ch)
	require.NoError(t, r.err)
	require.Equal(t, 1, pool.Used())
}

func TestPoolSupplierUnusedSlotIsFreeAtOnce(t *testing.T) {
	t.Parallel()
	s, pool, _ := setupSupplier(t, 1, time.Hour)
	p, err := s.ReserveSlot(context.Background(), nil)
	require.NoError(t, err)
	// The poll brought no task: MarkSlotUsed is never called.
	s.ReleaseSlot(release{permit: p})
	require.Zero(t, pool.Used())
	again := s.TryReserveSlot(nil)
	require.NotNil(t, again, "an unused slot skips the min-gap")
	require.Equal(t, p.UserData.(*permitData).slot.Index(), again.UserData.(*permitData).slot.Index())
}

func TestPoolSupplierReleaseTwiceIsHarmless(t *testing.T) {
	t.Parallel()
	s, pool, _ := setupSupplier(t, 2, 0)
	p := s.TryReserveSlot(nil)
	require.NotNil(t, p)
	q := s.TryReserveSlot(nil)
	require.NotNil(t, q)
	s.ReleaseSlot(release{permit: p})
	s.ReleaseSlot(release{permit: p})
	require.Equal(t, 1, pool.Used(), "a second release of one permit frees nothing else")
	// A permit this supplier did not issue is ignored.
	s.ReleaseSlot(release{permit: &worker.SlotPermit{UserData: "foreign"}})
	s.MarkSlotUsed(markUsed{permit: &worker.SlotPermit{}})
	require.Equal(t, 1, pool.Used())
}

func TestPoolSupplierContextCancel(t *testing.T) {
	t.Parallel()
	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		s, pool, _ := setupSupplier(t, 1, 0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p, err := s.ReserveSlot(ctx, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.Nil(t, p)
		require.Zero(t, pool.Used())
	})
	t.Run("while waiting", func(t *testing.T) {
		t.Parallel()
		s, pool, _ := setupSupplier(t, 0, 0)
		ctx, cancel := context.WithCancel(context.Background())
		ch := reserveAsync(ctx, s)
		waitBlocked(t, pool, 1)
		cancel()
		r := requireDone(t, ch)
		require.ErrorIs(t, r.err, context.Canceled)
		require.Nil(t, r.permit)
		require.Zero(t, pool.Waiting())
		require.Zero(t, pool.Used())
	})
}

func TestPoolSupplierLimitZeroMeansNoPolling(t *testing.T) {
	t.Parallel()
	s, pool, _ := setupSupplier(t, 0, 0)
	require.Nil(t, s.TryReserveSlot(nil))
	ch := reserveAsync(context.Background(), s)
	waitBlocked(t, pool, 1)
	requireNotDone(t, ch)
	// The member enters the queue's active rule: the waiting poll proceeds.
	pool.SetLimit(1, 0)
	r := requireDone(t, ch)
	require.NoError(t, r.err)
	require.NotNil(t, r.permit)
}
