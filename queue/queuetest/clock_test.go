package queuetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/queue/queuetest"
)

var _ queue.Clock = (*queuetest.ManualClock)(nil)

func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestManualClock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, c *queuetest.ManualClock)
	}{
		{
			name: "starts at Start when given zero",
			run: func(t *testing.T, c *queuetest.ManualClock) {
				require.Equal(t, queuetest.Start, c.Now())
			},
		},
		{
			name: "fires timers when due",
			run: func(t *testing.T, c *queuetest.ManualClock) {
				short, long := c.After(time.Second), c.After(time.Minute)
				require.Equal(t, 2, c.Timers())
				c.Advance(999 * time.Millisecond)
				require.False(t, fired(short))
				c.Advance(time.Millisecond)
				require.True(t, fired(short))
				require.False(t, fired(long))
				require.Equal(t, 1, c.Timers())
				c.Set(queuetest.Start.Add(time.Hour))
				require.True(t, fired(long))
				require.Equal(t, 0, c.Timers())
			},
		},
		{
			name: "non-positive durations fire at once",
			run: func(t *testing.T, c *queuetest.ManualClock) {
				require.True(t, fired(c.After(0)))
				require.True(t, fired(c.After(-time.Second)))
				require.Equal(t, 0, c.Timers())
			},
		},
		{
			name: "never goes backwards",
			run: func(t *testing.T, c *queuetest.ManualClock) {
				c.Set(queuetest.Start.Add(-time.Hour))
				require.Equal(t, queuetest.Start, c.Now())
			},
		},
		{
			name: "WaitForTimers sees a timer added later",
			run: func(t *testing.T, c *queuetest.ManualClock) {
				go func() {
					time.Sleep(5 * time.Millisecond)
					c.After(time.Second)
				}()
				require.NoError(t, c.WaitForTimers(t.Context(), 1))
			},
		},
		{
			name: "WaitForTimers gives up with its context",
			run: func(t *testing.T, c *queuetest.ManualClock) {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
				defer cancel()
				require.ErrorIs(t, c.WaitForTimers(ctx, 1), context.DeadlineExceeded)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, queuetest.NewManualClock(time.Time{}))
		})
	}
}
