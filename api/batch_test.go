package api

import (
	"context"
	"errors"
	"fmt"
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

func isUpdate(name string) any {
	return mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.WorkflowID == workflows.PipelineWorkflowID("app") && o.UpdateName == name
	})
}

func commitAt(sha string) workflows.StartEventRequest {
	return workflows.StartEventRequest{Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, SHA: sha}}
}

type started struct {
	res workflows.StartEventResult
	err error
}

// burst starts first, waits until its update is in flight, queues rest
// behind it and lets the first update answer; it returns every caller's
// result by SHA.
func burst(t *testing.T, b *eventBatcher, c client.Client, inFlight, release chan struct{}, first string, rest ...string) map[string]started {
	t.Helper()
	var mu sync.Mutex
	out := map[string]started{}
	var wg sync.WaitGroup
	start := func(sha string) {
		wg.Go(func() {
			res, err := b.start(context.Background(), c, "app", commitAt(sha))
			mu.Lock()
			out[sha] = started{res, err}
			mu.Unlock()
		})
	}
	start(first)
	<-inFlight
	for _, sha := range rest {
		start(sha)
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.lanes["app"].waiting) == len(rest)
	}, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	return out
}

// blockedStart makes the plain start-event update wait for release and
// answer event 1.
func blockedStart(t *testing.T, c *mocks.Client) (inFlight, release chan struct{}) {
	t.Helper()
	inFlight, release = make(chan struct{}), make(chan struct{})
	c.On("UpdateWorkflow", mock.Anything, isUpdate(workflows.UpdateStartEvent)).Return(
		func(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			close(inFlight)
			<-release
			return answer(t, workflows.StartEventResult{Event: workflows.EventRef{Pipeline: "app", Number: 1}}, nil), nil
		}).Once()
	return inFlight, release
}

func TestEventStartsQueuedBehindAnUpdateGoTogether(t *testing.T) {
	t.Parallel()
	c := mocks.NewClient(t)
	inFlight, release := blockedStart(t, c)
	var batch workflows.StartEventsRequest
	c.On("UpdateWorkflow", mock.Anything, isUpdate(workflows.UpdateStartEvents)).Return(
		func(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			batch = o.Args[0].(workflows.StartEventsRequest)
			var res workflows.StartEventsResult
			for i, r := range batch.Requests {
				if r.Trigger.SHA == "bad" {
					res.Outcomes = append(res.Outcomes, workflows.StartEventOutcome{Error: "parent event 9 does not exist in pipeline app (last event is 3)"})
					continue
				}
				ev := workflows.EventRef{Pipeline: "app", Number: 2 + i}
				res.Outcomes = append(res.Outcomes, workflows.StartEventOutcome{Result: workflows.StartEventResult{Event: ev}})
			}
			return answer(t, res, nil), nil
		}).Once()

	b := &eventBatcher{}
	got := burst(t, b, c, inFlight, release, "aaa", "bbb", "bad", "ccc")

	require.Equal(t, started{res: workflows.StartEventResult{Event: workflows.EventRef{Pipeline: "app", Number: 1}}}, got["aaa"])
	require.Len(t, batch.Requests, 3, "the three queued starts went in one update")
	for i, r := range batch.Requests {
		if r.Trigger.SHA == "bad" {
			continue
		}
		require.NoError(t, got[r.Trigger.SHA].err)
		require.Equal(t, 2+i, got[r.Trigger.SHA].res.Event.Number, "each caller gets its own outcome")
	}
	// A refusal inside the batch reads like an update rejection.
	err := updateError(got["bad"].err, "pipeline app")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "parent event 9 does not exist")
	b.mu.Lock()
	require.Empty(t, b.lanes, "an idle pipeline keeps no lane")
	b.mu.Unlock()
}

func TestEventStartsBatchFailureReachesEveryCaller(t *testing.T) {
	t.Parallel()
	c := mocks.NewClient(t)
	inFlight, release := blockedStart(t, c)
	c.On("UpdateWorkflow", mock.Anything, isUpdate(workflows.UpdateStartEvents)).Return(
		func(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			return nil, errors.New("frontend unavailable")
		}).Once()
	got := burst(t, &eventBatcher{}, c, inFlight, release, "aaa", "bbb", "ccc")
	require.NoError(t, got["aaa"].err)
	require.ErrorContains(t, got["bbb"].err, "frontend unavailable")
	require.ErrorContains(t, got["ccc"].err, "frontend unavailable")
}

func TestEventStartsFallBackToSingleUpdatesOnAnOldController(t *testing.T) {
	t.Parallel()
	c := mocks.NewClient(t)
	inFlight, release := blockedStart(t, c)
	c.On("UpdateWorkflow", mock.Anything, isUpdate(workflows.UpdateStartEvents)).Return(
		func(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			return answer(t, nil, fmt.Errorf("unknown update %s. KnownUpdates=[start-event configure delete]", workflows.UpdateStartEvents)), nil
		}).Once()
	var mu sync.Mutex
	next := 2
	c.On("UpdateWorkflow", mock.Anything, isUpdate(workflows.UpdateStartEvent)).Return(
		func(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			mu.Lock()
			defer mu.Unlock()
			next++
			return answer(t, workflows.StartEventResult{Event: workflows.EventRef{Pipeline: "app", Number: next - 1}}, nil), nil
		}).Twice()
	got := burst(t, &eventBatcher{}, c, inFlight, release, "aaa", "bbb", "ccc")
	numbers := []int{got["aaa"].res.Event.Number, got["bbb"].res.Event.Number, got["ccc"].res.Event.Number}
	require.ElementsMatch(t, []int{1, 2, 3}, numbers)
	for _, s := range got {
		require.NoError(t, s.err)
	}
}

func TestEventStartCallerMayGiveUp(t *testing.T) {
	t.Parallel()
	c := mocks.NewClient(t)
	inFlight, release := blockedStart(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	b := &eventBatcher{}
	done := make(chan error, 1)
	go func() {
		_, err := b.start(ctx, c, "app", commitAt("aaa"))
		done <- err
	}()
	<-inFlight
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	// The update it sent still completes; the lane empties.
	close(release)
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
