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

// fakePipeline numbers starts as the pipeline workflow does, by update
// (UpdateStartEvents) or admission signal, once per admission ID. The
// first update waits for hold; with busy set, updates never answer (their
// caller's wait runs out).
type fakePipeline struct {
	mu       sync.Mutex
	updates  [][]workflows.StartEventRequest
	signals  [][]workflows.StartEventRequest
	seen     map[string]workflows.AdmissionSeen
	next     int
	inFlight chan struct{} // closed at the first update
	hold     chan struct{} // the first update waits for it
	busy     bool
	sigErr   error
	updErr   error
}

func newFakePipeline() *fakePipeline {
	return &fakePipeline{seen: map[string]workflows.AdmissionSeen{}, next: 1, inFlight: make(chan struct{}), hold: make(chan struct{})}
}

// number handles one request, once per admission (f.mu held).
func (f *fakePipeline) number(r workflows.StartEventRequest) workflows.AdmissionSeen {
	if a, ok := f.seen[r.Admission]; ok {
		return a
	}
	a := workflows.AdmissionSeen{ID: r.Admission, Event: f.next}
	if r.Trigger.SHA == "bad" {
		a = workflows.AdmissionSeen{ID: r.Admission, Error: "parent event 9 does not exist in pipeline app (last event is 0)"}
	} else {
		f.next++
	}
	f.seen[r.Admission] = a
	return a
}

func (f *fakePipeline) client(t *testing.T) *mocks.Client {
	c := mocks.NewClient(t)
	c.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(
		func(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			require.Equal(t, workflows.UpdateStartEvents, o.UpdateName)
			f.mu.Lock()
			first := len(f.updates) == 0
			reqs := o.Args[0].(workflows.StartEventsRequest).Requests
			f.updates = append(f.updates, reqs)
			f.mu.Unlock()
			if first {
				close(f.inFlight)
				<-f.hold
			}
			if f.busy {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			if f.updErr != nil {
				return nil, f.updErr
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			var out workflows.StartEventsResult
			for _, r := range reqs {
				a := f.number(r)
				out.Outcomes = append(out.Outcomes, workflows.StartEventOutcome{
					Result: workflows.StartEventResult{Event: workflows.EventRef{Pipeline: "app", Number: a.Event}}, Error: a.Error,
				})
			}
			return answer(t, out, nil), nil
		}).Maybe()
	c.On("SignalWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.SignalAdmitEvents, mock.Anything).Return(
		func(_ context.Context, _, _, _ string, arg any) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.sigErr != nil {
				return f.sigErr
			}
			reqs := arg.(workflows.AdmitEvents).Requests
			f.signals = append(f.signals, reqs)
			for _, r := range reqs {
				f.number(r)
			}
			return nil
		}).Maybe()
	return c
}

// answer is an update handle whose Get decodes v (like the SDK) or fails.
func answer(t *testing.T, v any, err error) *mocks.WorkflowUpdateHandle {
	t.Helper()
	h := mocks.NewWorkflowUpdateHandle(t)
	h.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
		if err != nil {
			return err
		}
		p, perr := converter.GetDefaultDataConverter().ToPayloads(v)
		if perr != nil {
			return perr
		}
		return converter.GetDefaultDataConverter().FromPayloads(p, ptr)
	}).Once()
	return h
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
	require.Eventually(t, func() bool { return b.queued.waiting("app") == len(rest) }, 5*time.Second, time.Millisecond)
	close(f.hold)
	wg.Wait()
	return out
}

func TestEventStartsQueuedBehindAnUpdateGoTogether(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	got := burst(t, &eventBatcher{}, f.client(t), f, "aaa", "bbb", "ccc", "bad")
	require.Len(t, f.updates, 2, "the starts queued behind the first update went in one")
	require.Len(t, f.updates[1], 3)
	require.Empty(t, f.signals, "answered in time: nothing admitted by signal")
	numbers := map[int]bool{}
	for _, sha := range []string{"aaa", "bbb", "ccc"} {
		require.NoError(t, got[sha].err)
		require.Empty(t, got[sha].pending)
		numbers[got[sha].res.Event.Number] = true
	}
	require.Equal(t, map[int]bool{1: true, 2: true, 3: true}, numbers)
	// A refusal reaches its caller as before.
	require.ErrorContains(t, updateError(got["bad"].err, "pipeline app"), "parent event 9 does not exist")
	require.ErrorIs(t, updateError(got["bad"].err, "pipeline app"), ErrInvalid)
	// Every start has an admission ID of its own.
	ids := map[string]bool{}
	for _, batch := range f.updates {
		for _, r := range batch {
			require.NotEmpty(t, r.Admission)
			ids[r.Admission] = true
		}
	}
	require.Len(t, ids, 4)
}

// TestEventStartAnswersPendingWhenThePipelineIsBusy: a pipeline that does
// not answer (busy, or its controller down) holds no caller past the admit
// wait: the start is admitted by signal, with the update's admission ID
// (the pipeline starts it once), and the answer is pending.
func TestEventStartAnswersPendingWhenThePipelineIsBusy(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	f.busy = true
	close(f.hold)
	b := &eventBatcher{admitWait: 50 * time.Millisecond}
	res, pending, err := b.admit(context.Background(), f.client(t), "app", commitAt("aaa"))
	require.NoError(t, err)
	require.Zero(t, res)
	require.Len(t, f.signals, 1, "admitted before answering")
	require.Equal(t, f.updates[0][0].Admission, f.signals[0][0].Admission)
	require.Equal(t, f.signals[0][0].Admission, pending)
}

// TestEventStartInABurstAcrossPipelinesIsAdmittedAtOnce: while as many
// pipelines as maxNumbering are numbering starts by update, a start to
// another pipeline is admitted by signal at once — no update, no admit
// wait — and answered pending; once they are done, starts go by update
// again.
func TestEventStartInABurstAcrossPipelinesIsAdmittedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	close(f.hold)
	b := &eventBatcher{admitWait: time.Hour}
	b.numbering.Store(maxNumbering) // the other pipelines' updates in flight
	res, pending, err := b.admit(context.Background(), f.client(t), "app", commitAt("aaa"))
	require.NoError(t, err)
	require.Zero(t, res)
	require.Empty(t, f.updates, "no update in a burst")
	require.Len(t, f.signals, 1)
	require.Equal(t, f.signals[0][0].Admission, pending)
	require.Equal(t, int32(maxNumbering), b.numbering.Load(), "the burst's count is left as it was")

	b.numbering.Store(maxNumbering - 1)
	res, pending, err = b.admit(context.Background(), f.client(t), "app", commitAt("bbb"))
	require.NoError(t, err)
	require.Empty(t, pending)
	require.Equal(t, 2, res.Event.Number, "numbered by update")
	require.Len(t, f.updates, 1)
	require.Equal(t, int32(maxNumbering-1), b.numbering.Load())
}

func TestEventStartsSignalFailureReachesEveryCaller(t *testing.T) {
	t.Parallel()
	f := newFakePipeline()
	f.updErr = errors.New("resource exhausted")
	f.sigErr = errors.New("frontend unavailable")
	close(f.hold)
	b := &eventBatcher{}
	_, _, err := b.admit(context.Background(), f.client(t), "app", commitAt("aaa"))
	require.ErrorContains(t, err, "frontend unavailable")
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
	// The update it sent still completes; the lane empties.
	close(f.hold)
	require.Eventually(t, func() bool { return b.queued.busy() == 0 }, 5*time.Second, time.Millisecond)
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
			c.On("QueryWorkflowWithOptions", mock.Anything, mock.Anything).Return(nil, serviceerror.NewNotFound("workflow not found")).Once()
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

// A cancel that reaches an event numbered a moment ago, whose workflow has
// not started yet, waits for it and cancels it; an event never numbered is
// not found at once.
func TestCancelEventWaitsForANumberedEventToStart(t *testing.T) {
	t.Parallel()
	t.Run("numbered", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		ref := workflows.EventRef{Pipeline: "app", Number: 5}
		c.On("CancelWorkflow", mock.Anything, ref.WorkflowID(), "").Return(serviceerror.NewNotFound("workflow not found")).Twice()
		c.On("CancelWorkflow", mock.Anything, ref.WorkflowID(), "").Return(nil).Once()
		c.On("QueryWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.QueryPipeline).
			Return(encodedValue{workflows.PipelineInfo{Events: 5}}, nil).Once()
		s := &Service{Client: c, Namespace: "default"}
		require.NoError(t, s.CancelEvent(context.Background(), ref))
	})
	t.Run("never numbered", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		ref := workflows.EventRef{Pipeline: "app", Number: 6}
		c.On("CancelWorkflow", mock.Anything, ref.WorkflowID(), "").Return(serviceerror.NewNotFound("workflow not found")).Once()
		c.On("QueryWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.QueryPipeline).
			Return(encodedValue{workflows.PipelineInfo{Events: 5}}, nil).Once()
		s := &Service{Client: c, Namespace: "default"}
		require.ErrorIs(t, s.CancelEvent(context.Background(), ref), ErrNotFound)
	})
}

func TestValidAdmissionID(t *testing.T) {
	t.Parallel()
	for range 3 {
		require.True(t, validAdmissionID(admissionID()))
	}
	for _, bad := range []string{"", "adm-", "adm-nope", "adm-0123456789abcdef0123456", "adm-0123456789abcdef012345678", "adm-0123456789ABCDEF01234567", "xdm-0123456789abcdef01234567", "adm-0123456789abcdef0123456g"} {
		require.False(t, validAdmissionID(bad), bad)
	}
}
