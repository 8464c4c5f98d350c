package api

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/workflows"
)

func commitAt(sha string) workflows.StartEventRequest {
	return workflows.StartEventRequest{Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, SHA: sha}}
}

type started struct {
	res     workflows.StartEventResult
	pending string
	err     error
}

// fakePipeline numbers admitted starts as the pipeline workflow does, and
// answers QueryAdmissions once release is closed (a busy pipeline).
type fakePipeline struct {
	mu       sync.Mutex
	signals  [][]workflows.StartEventRequest
	seen     map[string]workflows.AdmissionSeen
	next     int
	inFlight chan struct{} // closed at the first signal
	hold     chan struct{} // the first signal waits for it
	release  chan struct{} // queries wait for it
	sigErr   error
}

func newFakePipeline() *fakePipeline {
	return &fakePipeline{seen: map[string]workflows.AdmissionSeen{}, next: 1, inFlight: make(chan struct{}), hold: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakePipeline) client(t *testing.T) *mocks.Client {
	c := mocks.NewClient(t)
	c.On("SignalWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.SignalAdmitEvents, mock.Anything).Return(
		func(_ context.Context, _, _, _ string, arg any) error {
			f.mu.Lock()
			first := len(f.signals) == 0
			f.mu.Unlock()
			if first {
				close(f.inFlight)
				<-f.hold
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.sigErr != nil && !first {
				return f.sigErr
			}
			reqs := arg.(workflows.AdmitEvents).Requests
			f.signals = append(f.signals, reqs)
			for _, r := range reqs {
				if r.Trigger.SHA == "bad" {
					f.seen[r.Admission] = workflows.AdmissionSeen{ID: r.Admission, Error: "parent event 9 does not exist in pipeline app (last event is 0)"}
					continue
				}
				f.seen[r.Admission] = workflows.AdmissionSeen{ID: r.Admission, Event: f.next}
				f.next++
			}
			return nil
		}).Maybe()
	c.On("QueryWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.QueryAdmissions, mock.Anything).Return(
		func(ctx context.Context, _, _, _ string, args ...any) (converter.EncodedValue, error) {
			select {
			case <-f.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			ids := args[0].([]string)
			out := make([]workflows.AdmissionSeen, len(ids))
			for i, id := range ids {
				out[i] = f.seen[id]
				out[i].ID = id
			}
			return encodedValue{out}, nil
		}).Maybe()
	return c
}

// burst starts first, waits until its signal is in flight, queues rest
// behind it and lets the first signal go; it returns every caller's result
// by SHA.
func burst(t *testing.T, b *eventBatcher, c client.Client, f *fakePipeline, first string, rest ...string) map[string]started {
	t.Helper()
	var mu sync.Mutex
	out := map[string]started{}
	var wg sync.WaitGroup
	start := func(sha string) {
		wg.Go(func() {
			res, pending, err := b.admit(context.Background(), c, "app", commitAt(sha))
			mu.Lock()
			out[sha] = started{res, pending, err}
			mu.Unlock()
		})
	}
	start(first)
	<-f.inFlight
	for _, sha := range rest {
		start(sha)
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.lanes["app"].waiting) == len(rest)
	}, 5*time.Second, time.Millisecond)
	close(f.hold)
	wg.Wait()
	return out
}

func TestEventStartsQueuedBehindASignalGoTogether(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	close(f.release)
	got := burst(t, &eventBatcher{}, f.client(t), f, "aaa", "bbb", "ccc", "bad")
	require.Len(t, f.signals, 2, "the starts queued behind the first signal went in one")
	require.Len(t, f.signals[1], 3)
	numbers := map[int]bool{}
	for _, sha := range []string{"aaa", "bbb", "ccc"} {
		require.NoError(t, got[sha].err)
		require.Empty(t, got[sha].pending)
		numbers[got[sha].res.Event.Number] = true
	}
	require.Equal(t, map[int]bool{1: true, 2: true, 3: true}, numbers)
	// A refusal reaches its caller as the update's did.
	require.ErrorContains(t, updateError(got["bad"].err, "pipeline app"), "parent event 9 does not exist")
	require.ErrorIs(t, updateError(got["bad"].err, "pipeline app"), ErrInvalid)
	// Every admission has an ID of its own.
	ids := map[string]bool{}
	for _, batch := range f.signals {
		for _, r := range batch {
			require.NotEmpty(t, r.Admission)
			ids[r.Admission] = true
		}
	}
	require.Len(t, ids, 4)
}

// TestEventStartAnswersPendingWhenThePipelineIsBusy: a pipeline that does
// not answer (busy, or its controller down) holds no caller past the admit
// wait: the start is admitted, and the answer is pending.
func TestEventStartAnswersPendingWhenThePipelineIsBusy(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	close(f.hold)
	b := &eventBatcher{admitWait: 50 * time.Millisecond}
	res, pending, err := b.admit(context.Background(), f.client(t), "app", commitAt("aaa"))
	require.NoError(t, err)
	require.Zero(t, res)
	require.Len(t, f.signals, 1, "admitted before answering")
	require.Equal(t, f.signals[0][0].Admission, pending)
}

func TestEventStartsSignalFailureReachesEveryCaller(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	f.sigErr = errors.New("frontend unavailable")
	close(f.release)
	got := burst(t, &eventBatcher{}, f.client(t), f, "aaa", "bbb", "ccc")
	require.NoError(t, got["aaa"].err)
	require.ErrorContains(t, got["bbb"].err, "frontend unavailable")
	require.ErrorContains(t, got["ccc"].err, "frontend unavailable")
}

func TestEventStartCallerMayGiveUp(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	c := f.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	b := &eventBatcher{}
	done := make(chan error, 1)
	go func() {
		_, _, err := b.admit(ctx, c, "app", commitAt("aaa"))
		done <- err
	}()
	<-f.inFlight
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	// The signal it sent still goes; the lane empties.
	close(f.hold)
	close(f.release)
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.lanes) == 0
	}, 5*time.Second, time.Millisecond)
}

// encodedValue is a query answer as the SDK hands it back.
type encodedValue struct{ v any }

func (e encodedValue) HasValue() bool { return true }

func (e encodedValue) Get(ptr any) error {
	p, err := converter.GetDefaultDataConverter().ToPayloads(e.v)
	if err != nil {
		return err
	}
	return converter.GetDefaultDataConverter().FromPayloads(p, ptr)
}

func TestEventAdmittedButNotStartedIsStarting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		number int
		want   workflows.Status
	}{
		{name: "numbered", number: 5, want: workflows.StatusCreated},
		{name: "never numbered", number: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mocks.NewClient(t)
			ref := workflows.EventRef{Pipeline: "app", Number: tc.number}
			c.On("DescribeWorkflowExecution", mock.Anything, ref.WorkflowID(), "").Return(nil, serviceerror.NewNotFound("workflow not found")).Once()
			c.On("QueryWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.QueryPipeline).
				Return(encodedValue{workflows.PipelineInfo{Events: 5}}, nil).Once()
			s := &Service{Client: c, Namespace: "default"}
			st, err := s.eventState(context.Background(), ref)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, st.Status)
			require.Equal(t, ref, st.Event)
			require.False(t, st.Status.Final())
		})
	}
}
