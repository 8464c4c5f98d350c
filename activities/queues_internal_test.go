package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

// heldQueues answers ListQueues with its queues once released, counting
// the reads and telling when each starts and whether its context ended.
type heldQueues struct {
	queues  []queue.Queue
	reads   atomic.Int32
	started chan struct{}
	release chan struct{}
	stopped chan struct{}
}

func (q *heldQueues) ListQueues(ctx context.Context) ([]queue.Queue, error) {
	q.reads.Add(1)
	q.started <- struct{}{}
	select {
	case <-q.release:
		return q.queues, nil
	case <-ctx.Done():
		q.stopped <- struct{}{}
		return nil, ctx.Err()
	}
}

// TestResolutionsShareTheQueuesReadUnderWay: events resolved while a read
// of the queue definitions is under way wait for it instead of querying
// the registry each; an answer stands for queue.GrantStands after its read
// was sent, and a read that every waiter gave up on is stopped while one
// still waited is not.
func TestResolutionsShareTheQueuesReadUnderWay(t *testing.T) {
	q := &heldQueues{
		queues:  []queue.Queue{{Name: "default"}},
		started: make(chan struct{}, 4), release: make(chan struct{}), stopped: make(chan struct{}, 4),
	}
	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	at := func(d time.Duration) {
		mu.Lock()
		clock = clock.Add(d)
		mu.Unlock()
	}
	a := &Activities{Queues: q}
	a.queueReads.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	type answer struct {
		qs  []queue.Queue
		err error
	}
	ask := func(ctx context.Context) chan answer {
		ch := make(chan answer, 1)
		go func() {
			qs, err := a.sharedQueues(ctx)
			ch <- answer{qs, err}
		}()
		return ch
	}
	first := ask(t.Context())
	<-q.started
	second := ask(t.Context())
	gaveUp, giveUp := context.WithCancel(t.Context())
	third := ask(gaveUp)
	waitingFor := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return a.queueReads.Waiting(struct{}{}) == n },
			10*time.Second, time.Millisecond, "resolutions waiting for the read under way")
	}
	waitingFor(3)
	select {
	case <-q.started:
		t.Fatal("a resolution read the queues again while a read was under way")
	case <-time.After(200 * time.Millisecond):
	}
	giveUp()
	require.ErrorIs(t, (<-third).err, context.Canceled)
	waitingFor(2)
	select {
	case <-q.stopped:
		t.Fatal("the read stopped while two resolutions still waited for it")
	case <-time.After(100 * time.Millisecond):
	}
	close(q.release)
	for _, ch := range []chan answer{first, second} {
		got := <-ch
		require.NoError(t, got.err)
		require.Equal(t, q.queues, got.qs)
	}
	require.Equal(t, int32(1), q.reads.Load())

	// The read stands for the resolutions within queue.GrantStands of
	// when it was sent, and not longer: then the next one reads afresh.
	at(queue.GrantStands - time.Millisecond)
	got := <-ask(t.Context())
	require.NoError(t, got.err)
	require.Equal(t, q.queues, got.qs)
	require.Equal(t, int32(1), q.reads.Load(), "a read sent less than %s ago stands", queue.GrantStands)
	at(time.Millisecond)
	got = <-ask(t.Context())
	require.NoError(t, got.err)
	require.Equal(t, int32(2), q.reads.Load())
	<-q.started

	// A read nobody waits for any more is stopped.
	at(queue.GrantStands)
	q.release = make(chan struct{})
	alone, leave := context.WithCancel(t.Context())
	lone := ask(alone)
	<-q.started
	leave()
	require.ErrorIs(t, (<-lone).err, context.Canceled)
	select {
	case <-q.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the read went on after every resolution gave up on it")
	}
}
