package activities

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/runner"
)

// fakeReporter answers heartbeats and completions from functions and
// records the completions it accepted.
type fakeReporter struct {
	mu        sync.Mutex
	heartbeat func() error
	complete  func() error
	// completeToken, when set, answers by task token instead.
	completeToken func(token []byte) error
	completed     []RunBuildResult
	beats         int
}

func (f *fakeReporter) RecordActivityHeartbeat(context.Context, []byte, ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats++
	if f.heartbeat == nil {
		return nil
	}
	return f.heartbeat()
}

func (f *fakeReporter) CompleteActivity(_ context.Context, token []byte, result any, _ error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completeToken != nil {
		if err := f.completeToken(token); err != nil {
			return err
		}
	}
	if f.complete != nil {
		if err := f.complete(); err != nil {
			return err
		}
	}
	f.completed = append(f.completed, result.(RunBuildResult))
	return nil
}

func (f *fakeReporter) results() []RunBuildResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RunBuildResult(nil), f.completed...)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestHeartbeaterCauses(t *testing.T) {
	t.Parallel()
	unavailable := serviceerror.NewUnavailable("connection refused")
	tests := []struct {
		name    string
		answer  error
		timeout time.Duration
		// want is the cause the build is cancelled with; nil: it keeps running.
		want error
	}{
		{name: "healthy", answer: nil, timeout: 400 * time.Millisecond},
		{name: "cancel requested", answer: temporal.NewCanceledError(), timeout: 400 * time.Millisecond, want: errCancelRequested},
		{name: "attempt gone", answer: serviceerror.NewNotFound("activity not found"), timeout: 400 * time.Millisecond, want: errAttemptGone},
		{name: "short outage keeps the build", answer: unavailable, timeout: 5 * time.Second},
		{name: "outage past the heartbeat timeout", answer: unavailable, timeout: 400 * time.Millisecond, want: errUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := &fakeReporter{heartbeat: func() error { return tt.answer }}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			hb := newHeartbeater(ctx, rep, []byte("token"), "exec", tt.timeout, cancel, discardLogger(), false)
			hb.step("work")
			select {
			case <-ctx.Done():
			case <-time.After(1500 * time.Millisecond):
			}
			hb.stop()
			if tt.want == nil {
				require.NoError(t, ctx.Err(), "the build keeps running")
			} else {
				require.ErrorIs(t, context.Cause(ctx), tt.want)
			}
			rep.mu.Lock()
			defer rep.mu.Unlock()
			require.Positive(t, rep.beats)
		})
	}
}

// TestHeartbeaterBeatsAfterAPeriod: a build's attempt, which just started,
// is first heartbeaten after one period, so that a build shorter than that
// costs the server no heartbeat; an attempt picked up again after its
// executor restarted is heartbeaten at once.
func TestHeartbeaterBeatsAfterAPeriod(t *testing.T) {
	t.Parallel()
	for _, beatFirst := range []bool{false, true} {
		rep := &fakeReporter{}
		ctx, cancel := context.WithCancelCause(t.Context())
		began := time.Now()
		hb := newHeartbeater(ctx, rep, []byte("token"), "exec", time.Minute, cancel, discardLogger(), beatFirst)
		hb.step("work")
		if beatFirst {
			require.Eventually(t, func() bool {
				rep.mu.Lock()
				defer rep.mu.Unlock()
				return rep.beats == 1
			}, 10*time.Second, time.Millisecond)
		}
		hb.stop()
		elapsed := time.Since(began)
		cancel(nil)
		rep.mu.Lock()
		beats := rep.beats
		rep.mu.Unlock()
		// One beat a period (1s here), the first after one unless
		// beatFirst: stopped at once, the attempt got none.
		periods := int(elapsed / heartbeatPeriod)
		if beatFirst {
			require.LessOrEqual(t, beats, 1+periods)
			require.GreaterOrEqual(t, beats, 1)
		} else {
			require.LessOrEqual(t, beats, periods, "no beat before the first period")
		}
	}
}

// hangingReporter's heartbeats hang until their context ends, as against a
// server that is down, and say why they ended.
type hangingReporter struct {
	fakeReporter
	started chan struct{}
	ended   chan error
}

func (h *hangingReporter) RecordActivityHeartbeat(ctx context.Context, _ []byte, _ ...any) error {
	select {
	case h.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	select {
	case h.ended <- ctx.Err():
	default:
	}
	return serviceerror.NewUnavailable("connection refused")
}

// TestHeartbeaterStopAbandonsACallInFlight: a finished build must not wait
// for a heartbeat hanging on an unreachable server before its result goes to
// the outbox, so stop cancels the call (context.Canceled, not its own
// deadline) and leaves the build's context alone.
func TestHeartbeaterStopAbandonsACallInFlight(t *testing.T) {
	t.Parallel()
	rep := &hangingReporter{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	hb := newHeartbeater(ctx, rep, []byte("token"), "exec", time.Minute, cancel, discardLogger(), false)
	<-rep.started
	hb.stop()
	require.ErrorIs(t, <-rep.ended, context.Canceled, "the call in flight was abandoned by stop, not by its own timeout")
	require.NoError(t, ctx.Err(), "stopping the heartbeats does not cancel the build")
}

func TestReportDeliversThroughAnOutage(t *testing.T) {
	t.Parallel()
	// The server refuses the first three deliveries, then takes the
	// result: the report keeps trying through the outage.
	var mu sync.Mutex
	refused := 0
	rep := &fakeReporter{complete: func() error {
		mu.Lock()
		defer mu.Unlock()
		if refused < 3 {
			refused++
			return serviceerror.NewUnavailable("connection refused")
		}
		return nil
	}}
	a := &Activities{Logger: discardLogger(), Reporter: rep, Outbox: t.TempDir()}
	res := RunBuildResult{Executor: "exec", Status: runner.StatusSuccess, LogKey: "p/j/1/1"}
	_, err := a.report(t.Context(), rep, pendingResult{BuildID: "p/j/1", Attempt: 1, TaskToken: []byte("token"), Result: res}, "", nil)
	require.ErrorIs(t, err, activity.ErrResultPending)
	require.Equal(t, []RunBuildResult{res}, rep.results())
	mu.Lock()
	require.Equal(t, 3, refused, "three refused deliveries before the one that landed")
	mu.Unlock()
	entries, err := os.ReadDir(a.Outbox)
	require.NoError(t, err)
	require.Empty(t, entries, "a delivered result leaves the outbox")
}

func TestDeliverPendingAfterARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The previous run saved two results and died: one attempt is still
	// waited for, the other was given up (Temporal answers NotFound).
	died := &Activities{Logger: discardLogger(), Outbox: dir}
	kept := RunBuildResult{Executor: "exec", Status: runner.StatusSuccess, LogKey: "p/a/1/1"}
	_, err := died.saveResult(pendingResult{BuildID: "p/a/1", Attempt: 1, TaskToken: []byte("a"), Result: kept})
	require.NoError(t, err)
	_, err = died.saveResult(pendingResult{
		BuildID: "p/b/1", Attempt: 2, TaskToken: []byte("b"),
		Result: RunBuildResult{Status: runner.StatusSuccess},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("{"), 0o644))

	rep := &fakeReporter{completeToken: func(token []byte) error {
		if string(token) == "b" {
			return serviceerror.NewNotFound("activity not found")
		}
		return nil
	}}
	restarted := &Activities{Logger: discardLogger(), Outbox: dir, Reporter: rep}
	restarted.DeliverPending(t.Context())
	require.Equal(t, []RunBuildResult{kept}, rep.results())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestDeliverLeavesTheEntryWhenStopping(t *testing.T) {
	t.Parallel()
	rep := &fakeReporter{complete: func() error { return serviceerror.NewUnavailable("down") }}
	a := &Activities{Logger: discardLogger(), Outbox: t.TempDir(), Reporter: rep}
	p := pendingResult{BuildID: "p/a/1", Attempt: 1, TaskToken: []byte("a")}
	path, err := a.saveResult(p)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = deliver(ctx, rep, p, path, a.Logger)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.FileExists(t, path)
}

func TestReadOutbox(t *testing.T) {
	t.Parallel()
	dir := OutboxDir(t.TempDir(), "exec/1")
	none, err := ReadOutbox(dir)
	require.NoError(t, err)
	require.Empty(t, none)
	a := &Activities{Outbox: dir}
	saved := time.Now()
	_, err = a.saveResult(pendingResult{BuildID: "p/a/3", Attempt: 2, Saved: saved})
	require.NoError(t, err)
	got, err := ReadOutbox(dir)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "p/a/3", got[0].BuildID)
	require.Equal(t, 2, got[0].Attempt)
	require.WithinDuration(t, saved, got[0].Saved, time.Millisecond)
}
