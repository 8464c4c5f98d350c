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
	running, release := make(chan struct{}), make(chan struct{})
	stop := keepHeartbeating(t.Context(), time.Millisecond, func() {
		if beats.Add(1) == 3 {
			close(running)
			<-release
		}
	})
	<-running // a heartbeat at once and then every interval: the third is under way
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// stop waits for the heartbeating goroutine, so no heartbeat can come
	// after it returns: while the third one runs, it has not returned.
	select {
	case <-stopped:
		t.Fatal("stop returned while a heartbeat was still running")
	default:
	}
	close(release)
	<-stopped
	require.GreaterOrEqual(t, beats.Load(), int32(3))
}
