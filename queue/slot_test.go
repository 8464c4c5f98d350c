package queue_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/queue/queuetest"
)

// waitFor is how long a test waits for something that should happen at once.
const waitFor = 5 * time.Second

func setupPool(t *testing.T, limit int, gap time.Duration) (*queue.SlotPool, *queuetest.ManualClock) {
	t.Helper()
	clock := queuetest.NewManualClock(time.Time{})
	pool := queue.NewSlotPool(clock)
	pool.SetLimit(limit, gap)
	return pool, clock
}

func mustTry(t *testing.T, pool *queue.SlotPool) *queue.Slot {
	t.Helper()
	s, ok := pool.TryReserve()
	require.True(t, ok, "a slot should be free (used %d of %d)", pool.Used(), pool.Limit())
	return s
}

func requireNoSlot(t *testing.T, pool *queue.SlotPool) {
	t.Helper()
	s, ok := pool.TryReserve()
	require.False(t, ok)
	require.Nil(t, s)
}

type reserveResult struct {
	slot *queue.Slot
	err  error
}

// reserveAsync starts a Reserve and waits until it is blocked in the pool.
func reserveAsync(ctx context.Context, t *testing.T, pool *queue.SlotPool) <-chan reserveResult {
	t.Helper()
	before := pool.Waiting()
	done := make(chan reserveResult, 1)
	go func() {
		s, err := pool.Reserve(ctx)
		done <- reserveResult{s, err}
	}()
	require.Eventually(t, func() bool { return pool.Waiting() > before }, waitFor, time.Millisecond, "Reserve should block")
	return done
}

func receive(t *testing.T, done <-chan reserveResult) reserveResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(waitFor):
		require.FailNow(t, "Reserve did not return")
		return reserveResult{}
	}
}

func requireBlocked(t *testing.T, done <-chan reserveResult) {
	t.Helper()
	select {
	case r := <-done:
		require.FailNow(t, "Reserve returned early", "slot %v, err %v", r.slot, r.err)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestSlotPoolTryReserve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock)
	}{
		{
			name: "a new pool has no slots",
			run: func(t *testing.T, _ *queue.SlotPool, _ *queuetest.ManualClock) {
				pool := queue.NewSlotPool(queuetest.NewManualClock(time.Time{}))
				require.Equal(t, 0, pool.Limit())
				requireNoSlot(t, pool)
			},
		},
		{
			name: "up to the limit, lowest index first",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				a, b := mustTry(t, pool), mustTry(t, pool)
				require.Equal(t, 0, a.Index())
				require.Equal(t, 1, b.Index())
				require.Equal(t, 2, pool.Used())
				requireNoSlot(t, pool)
				a.Release()
				require.Equal(t, 1, pool.Used())
				require.Equal(t, 0, mustTry(t, pool).Index())
			},
		},
		{
			name: "release twice counts once",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				a, b := mustTry(t, pool), mustTry(t, pool)
				a.Release()
				a.Release()
				require.Equal(t, 1, pool.Used())
				b.Release()
				require.Equal(t, 0, pool.Used())
			},
		},
		{
			name: "lowering the limit keeps held slots",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(3, 0)
				a, b, c := mustTry(t, pool), mustTry(t, pool), mustTry(t, pool)
				pool.SetLimit(1, 0)
				require.Equal(t, 3, pool.Used())
				require.Equal(t, 1, pool.Limit())
				requireNoSlot(t, pool)
				b.Release()
				requireNoSlot(t, pool)
				c.Release()
				requireNoSlot(t, pool)
				a.Release()
				require.Equal(t, 0, mustTry(t, pool).Index())
				requireNoSlot(t, pool)
			},
		},
		{
			name: "a slot beyond a lowered limit is not handed out",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(3, 0)
				a, b, c := mustTry(t, pool), mustTry(t, pool), mustTry(t, pool)
				pool.SetLimit(2, 0)
				a.Release()
				c.Release()
				// one held (b), limit 2: slot 0 is free, slot 2 is out of range.
				require.Equal(t, 0, mustTry(t, pool).Index())
				requireNoSlot(t, pool)
				b.Release()
			},
		},
		{
			name: "negative limit and gap count as zero",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(-4, -time.Second)
				require.Equal(t, 0, pool.Limit())
				require.Equal(t, time.Duration(0), pool.MinGap())
				requireNoSlot(t, pool)
			},
		},
		{
			name: "a slot rests for the gap after its build",
			run: func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock) {
				pool.SetLimit(1, 5*time.Second)
				mustTry(t, pool).Release()
				require.Equal(t, 0, pool.Used(), "a resting slot is not used")
				requireNoSlot(t, pool)
				clock.Advance(5*time.Second - time.Nanosecond)
				requireNoSlot(t, pool)
				clock.Advance(time.Nanosecond)
				require.Equal(t, 0, mustTry(t, pool).Index())
			},
		},
		{
			name: "the gap is per slot",
			run: func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock) {
				pool.SetLimit(2, 10*time.Second)
				a, b := mustTry(t, pool), mustTry(t, pool)
				a.Release()
				clock.Advance(5 * time.Second)
				b.Release()
				requireNoSlot(t, pool)
				clock.Advance(5 * time.Second)
				require.Equal(t, 0, mustTry(t, pool).Index())
				requireNoSlot(t, pool)
				clock.Advance(5 * time.Second)
				require.Equal(t, 1, mustTry(t, pool).Index())
			},
		},
		{
			name: "a fresh slot is used while another rests",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(2, time.Minute)
				mustTry(t, pool).Release()
				require.Equal(t, 1, mustTry(t, pool).Index())
			},
		},
		{
			name: "a new gap applies to resting slots at once",
			run: func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock) {
				pool.SetLimit(1, time.Minute)
				mustTry(t, pool).Release()
				clock.Advance(10 * time.Second)
				requireNoSlot(t, pool)
				pool.SetLimit(1, 10*time.Second)
				s := mustTry(t, pool)
				pool.SetLimit(1, time.Hour)
				s.Release()
				clock.Advance(time.Minute)
				requireNoSlot(t, pool)
			},
		},
		{
			name: "gaps survive a limit round trip",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(2, time.Minute)
				a, b := mustTry(t, pool), mustTry(t, pool)
				a.Release()
				b.Release()
				pool.SetLimit(0, time.Minute)
				pool.SetLimit(3, time.Minute)
				require.Equal(t, 2, mustTry(t, pool).Index())
				requireNoSlot(t, pool)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, clock := setupPool(t, 2, 0)
			tt.run(t, pool, clock)
		})
	}
}

func TestSlotPoolReserve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock)
	}{
		{
			name: "returns at once when a slot is free",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				s, err := pool.Reserve(t.Context())
				require.NoError(t, err)
				require.Equal(t, 0, s.Index())
				require.Equal(t, 0, pool.Waiting())
			},
		},
		{
			name: "wakes when a slot is released",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				held := mustTry(t, pool)
				done := reserveAsync(t.Context(), t, pool)
				requireBlocked(t, done)
				held.Release()
				r := receive(t, done)
				require.NoError(t, r.err)
				require.Equal(t, 0, r.slot.Index())
				require.Equal(t, 0, pool.Waiting())
			},
		},
		{
			name: "wakes when the limit is raised",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				mustTry(t, pool)
				done := reserveAsync(t.Context(), t, pool)
				requireBlocked(t, done)
				pool.SetLimit(2, 0)
				r := receive(t, done)
				require.NoError(t, r.err)
				require.Equal(t, 1, r.slot.Index())
				require.Equal(t, 2, pool.Used())
			},
		},
		{
			name: "a new pool waits for its first limit",
			run: func(t *testing.T, _ *queue.SlotPool, clock *queuetest.ManualClock) {
				pool := queue.NewSlotPool(clock)
				done := reserveAsync(t.Context(), t, pool)
				requireBlocked(t, done)
				pool.SetLimit(1, 0)
				require.NoError(t, receive(t, done).err)
			},
		},
		{
			name: "wakes when the gap passes",
			run: func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock) {
				pool.SetLimit(1, 5*time.Second)
				mustTry(t, pool).Release()
				done := reserveAsync(t.Context(), t, pool)
				require.NoError(t, clock.WaitForTimers(t.Context(), 1))
				clock.Advance(4 * time.Second)
				requireBlocked(t, done)
				clock.Advance(time.Second)
				r := receive(t, done)
				require.NoError(t, r.err)
				require.Equal(t, 0, r.slot.Index())
			},
		},
		{
			name: "waits for the first of several resting slots",
			run: func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock) {
				pool.SetLimit(2, 10*time.Second)
				a, b := mustTry(t, pool), mustTry(t, pool)
				b.Release()
				clock.Advance(3 * time.Second)
				a.Release()
				done := reserveAsync(t.Context(), t, pool)
				require.NoError(t, clock.WaitForTimers(t.Context(), 1))
				clock.Advance(7 * time.Second)
				r := receive(t, done)
				require.NoError(t, r.err)
				require.Equal(t, 1, r.slot.Index())
			},
		},
		{
			name: "wakes when the gap is shortened",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(1, time.Hour)
				mustTry(t, pool).Release()
				done := reserveAsync(t.Context(), t, pool)
				requireBlocked(t, done)
				pool.SetLimit(1, 0)
				require.NoError(t, receive(t, done).err)
			},
		},
		{
			name: "a lengthened gap keeps the waiter waiting",
			run: func(t *testing.T, pool *queue.SlotPool, clock *queuetest.ManualClock) {
				pool.SetLimit(1, 5*time.Second)
				mustTry(t, pool).Release()
				done := reserveAsync(t.Context(), t, pool)
				require.NoError(t, clock.WaitForTimers(t.Context(), 1))
				pool.SetLimit(1, 20*time.Second)
				require.NoError(t, clock.WaitForTimers(t.Context(), 2))
				clock.Advance(5 * time.Second)
				requireBlocked(t, done)
				clock.Advance(15 * time.Second)
				require.NoError(t, receive(t, done).err)
			},
		},
		{
			name: "cancel returns ctx.Err and takes no slot",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				held := mustTry(t, pool)
				ctx, cancel := context.WithCancel(t.Context())
				done := reserveAsync(ctx, t, pool)
				cancel()
				r := receive(t, done)
				require.ErrorIs(t, r.err, context.Canceled)
				require.Nil(t, r.slot)
				require.Equal(t, 0, pool.Waiting())
				require.Equal(t, 1, pool.Used())
				held.Release()
				require.Equal(t, 0, pool.Used())
				require.Equal(t, 0, mustTry(t, pool).Index())
			},
		},
		{
			name: "deadline while resting",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				pool.SetLimit(1, time.Hour)
				mustTry(t, pool).Release()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
				defer cancel()
				s, err := pool.Reserve(ctx)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Nil(t, s)
				require.Equal(t, 0, pool.Used())
				require.Equal(t, 0, pool.Waiting())
			},
		},
		{
			name: "an ended context fails even with a free slot",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				s, err := pool.Reserve(ctx)
				require.ErrorIs(t, err, context.Canceled)
				require.Nil(t, s)
				require.Equal(t, 0, pool.Used())
			},
		},
		{
			name: "one release wakes one of several waiters",
			run: func(t *testing.T, pool *queue.SlotPool, _ *queuetest.ManualClock) {
				held := mustTry(t, pool)
				first := reserveAsync(t.Context(), t, pool)
				second := reserveAsync(t.Context(), t, pool)
				held.Release()
				var got reserveResult
				var other <-chan reserveResult
				select {
				case got = <-first:
					other = second
				case got = <-second:
					other = first
				case <-time.After(waitFor):
					require.FailNow(t, "no waiter woke")
				}
				require.NoError(t, got.err)
				requireBlocked(t, other)
				require.Equal(t, 1, pool.Waiting())
				got.slot.Release()
				require.NoError(t, receive(t, other).err)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, clock := setupPool(t, 1, 0)
			tt.run(t, pool, clock)
		})
	}
}

func TestSlotPoolNilClockIsReal(t *testing.T) {
	t.Parallel()
	pool := queue.NewSlotPool(nil)
	pool.SetLimit(1, time.Millisecond)
	s, err := pool.Reserve(t.Context())
	require.NoError(t, err)
	start := time.Now()
	s.Release()
	s, err = pool.Reserve(t.Context())
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), time.Millisecond)
	s.Release()
}

// TestSlotPoolStress runs many goroutines against one pool on the real
// clock and checks the two promises: never more holders than the limit, and
// never a slot reused before its gap has passed.
func TestSlotPoolStress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		limit      int
		gap        time.Duration
		workers    int
		rounds     int
		flipLimits []int // when set, a goroutine keeps switching between these limits
	}{
		{name: "fixed limit, no gap", limit: 4, workers: 32, rounds: 50},
		{name: "fixed limit with gap", limit: 4, gap: 2 * time.Millisecond, workers: 32, rounds: 10},
		{name: "single slot with gap", limit: 1, gap: time.Millisecond, workers: 16, rounds: 5},
		{name: "changing limits", limit: 3, gap: time.Millisecond, workers: 24, rounds: 10, flipLimits: []int{1, 5, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := queue.NewSlotPool(queue.RealClock{})
			pool.SetLimit(tt.limit, tt.gap)
			maxLimit := tt.limit
			for _, l := range tt.flipLimits {
				maxLimit = max(maxLimit, l)
			}

			var (
				current, peak atomic.Int64
				mu            sync.Mutex
				holder        = map[int]bool{}
				released      = map[int]time.Time{}
				violations    []string
			)
			record := func(v string) {
				mu.Lock()
				defer mu.Unlock()
				violations = append(violations, v)
			}

			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			var flipper sync.WaitGroup
			if len(tt.flipLimits) > 0 {
				flipper.Go(func() {
					for i := 0; ctx.Err() == nil; i++ {
						pool.SetLimit(tt.flipLimits[i%len(tt.flipLimits)], tt.gap)
						time.Sleep(200 * time.Microsecond)
					}
				})
			}

			var wg sync.WaitGroup
			for w := range tt.workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					for range tt.rounds {
						s, err := pool.Reserve(ctx)
						if err != nil {
							record("reserve failed: " + err.Error())
							return
						}
						got := time.Now()
						n := current.Add(1)
						for {
							p := peak.Load()
							if n <= p || peak.CompareAndSwap(p, n) {
								break
							}
						}
						if n > int64(maxLimit) {
							record("more holders than the limit")
						}
						if len(tt.flipLimits) == 0 && n > int64(tt.limit) {
							record("more holders than the fixed limit")
						}
						mu.Lock()
						if holder[s.Index()] {
							violations = append(violations, "slot held twice")
						}
						holder[s.Index()] = true
						if last, ok := released[s.Index()]; ok && got.Sub(last) < tt.gap {
							violations = append(violations, "slot reused inside its gap")
						}
						mu.Unlock()

						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)

						mu.Lock()
						holder[s.Index()] = false
						released[s.Index()] = time.Now()
						mu.Unlock()
						current.Add(-1)
						s.Release()
					}
				})
			}
			wg.Wait()
			stop()
			flipper.Wait()

			require.Empty(t, violations)
			require.LessOrEqual(t, peak.Load(), int64(maxLimit))
			require.Positive(t, peak.Load())
			require.Equal(t, 0, pool.Used())
			require.Equal(t, 0, pool.Waiting())
		})
	}
}
