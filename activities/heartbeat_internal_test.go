package activities

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeepHeartbeating: heartbeats go out while the work lasts and stop
// with it, so a short heartbeat timeout does not give up on a long clone.
func TestKeepHeartbeating(t *testing.T) {
	t.Parallel()
	var beats atomic.Int32
	stop := keepHeartbeating(t.Context(), 10*time.Millisecond, func() { beats.Add(1) })
	require.Eventually(t, func() bool { return beats.Load() >= 3 }, 10*time.Second, time.Millisecond,
		"a heartbeat at once and then every interval")
	stop()
	n := beats.Load()
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, n, beats.Load(), "no heartbeat once stopped")
}
