package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

func startEventsResult(t *testing.T, res *updateResult) StartEventsResult {
	t.Helper()
	require.True(t, res.Done, "update did not finish")
	require.NoError(t, res.Rejected)
	require.NoError(t, res.Err)
	out, ok := res.Value.(StartEventsResult)
	require.True(t, ok, "update returned %T", res.Value)
	return out
}

func TestPipelineStartEventsNumbersInOrder(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	push := func(delivery string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, Branch: "main", DeliveryID: delivery}}
	}
	single := h.startEvent(time.Minute, push("d-0"))
	batch := updateAt(h.env, 2*time.Minute, UpdateStartEvents, StartEventsRequest{Requests: []StartEventRequest{
		push("d-1"),
		{Trigger: Trigger{Kind: TriggerPR}},
		push("d-1"),
		push("d-0"),
		push("d-2"),
	}})
	h.deleteAt(10 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	ev := func(n int) EventRef { return EventRef{Pipeline: "app", Number: n} }
	require.Equal(t, StartEventResult{Event: ev(1), Queue: "default"}, startResult(t, single))
	require.Equal(t, StartEventsResult{Outcomes: []StartEventOutcome{
		{Result: StartEventResult{Event: ev(2), Queue: "default"}},
		{Error: "a pr event needs a pull request number"},
		{Result: StartEventResult{Event: ev(2), Duplicate: true}},
		{Result: StartEventResult{Event: ev(1), Duplicate: true}},
		{Result: StartEventResult{Event: ev(3), Queue: "default"}},
	}}, startEventsResult(t, batch))
	require.Equal(t, []string{"event/app/1", "event/app/2", "event/app/3"}, h.rec.children)
	// Child workflows of one batch run concurrently in the test
	// environment: find event 3 by its number, not by start order.
	require.Len(t, h.events, 3)
	deliveries := map[int]string{}
	for _, e := range h.events {
		deliveries[e.Input.Event.Number] = e.Input.Trigger.DeliveryID
	}
	require.Equal(t, map[int]string{1: "d-0", 2: "d-1", 3: "d-2"}, deliveries)
}

func TestPipelineStartEventsValidation(t *testing.T) {
	t.Parallel()
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}
	tooMany := make([]StartEventRequest, MaxStartEvents+1)
	for i := range tooMany {
		tooMany[i] = commit
	}
	tests := []struct {
		name    string
		req     StartEventsRequest
		deleted bool
		wantErr string
	}{
		{name: "empty", req: StartEventsRequest{}, wantErr: "no events to start"},
		{name: "too many", req: StartEventsRequest{Requests: tooMany}, wantErr: "201 events in one request: at most 200"},
		{name: "deleted pipeline", req: StartEventsRequest{Requests: []StartEventRequest{commit}}, deleted: true, wantErr: "pipeline deleted: app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			var res *updateResult
			if tc.deleted {
				// Keep one build in the lane so the deleted pipeline stays open.
				h.enqueue(time.Second, lreqFor(appBuild("test", 1)))
				h.deleteAt(time.Minute)
				res = updateAt(h.env, 2*time.Minute, UpdateStartEvents, tc.req)
				h.done(3*time.Minute, appBuild("test", 1), StatusSuccess)
			} else {
				res = updateAt(h.env, time.Minute, UpdateStartEvents, tc.req)
				h.deleteAt(2 * time.Minute)
			}
			h.run(PipelineInput{Config: appConfig})
			require.True(t, res.Done)
			require.False(t, res.Accepted)
			require.ErrorContains(t, res.Rejected, tc.wantErr)
			require.Empty(t, h.events)
		})
	}
}

func TestPipelineStartEventsStartFailureLiftsTheHold(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	h.failStart = map[int]bool{1: true}
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}
	batch := updateAt(h.env, time.Minute, UpdateStartEvents, StartEventsRequest{Requests: []StartEventRequest{commit, commit}})
	// Event 1 never started: it does not hold event 2's builds.
	h.enqueue(3*time.Minute, lreqFor(appBuild("test", 2)))
	h.done(4*time.Minute, appBuild("test", 2), StatusSuccess)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	// Both were numbered: the answer does not wait for the workflows.
	require.Equal(t, StartEventsResult{Outcomes: []StartEventOutcome{
		{Result: StartEventResult{Event: EventRef{Pipeline: "app", Number: 1}, Queue: "default"}},
		{Result: StartEventResult{Event: EventRef{Pipeline: "app", Number: 2}, Queue: "default"}},
	}}, startEventsResult(t, batch))
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[appBuild("test", 2).WorkflowID()])
}

// One coroutine waits for a batch's starts in order (changeOneLauncher): a
// start that fails between two that do not lifts its own hold and the
// waiting goes on to the next.
func TestPipelineStartEventsFailureAmidTheBatch(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	h.failStart = map[int]bool{2: true}
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}
	batch := updateAt(h.env, time.Minute, UpdateStartEvents, StartEventsRequest{Requests: []StartEventRequest{commit, commit, commit}})
	h.enqueue(2*time.Minute, lreqFor(appBuild("test", 1)))
	h.done(3*time.Minute, appBuild("test", 1), StatusSuccess)
	// Event 2 never started: event 3's build waits for nothing but event 1's.
	h.enqueue(4*time.Minute, lreqFor(appBuild("test", 3)))
	h.done(5*time.Minute, appBuild("test", 3), StatusSuccess)
	h.deleteAt(6 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	require.Len(t, startEventsResult(t, batch).Outcomes, 3)
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[appBuild("test", 1).WorkflowID()])
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[appBuild("test", 3).WorkflowID()])
}

func TestPipelineContinuesAsNewAfterABatch(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}
	var batch *updateResult
	at(h.env, time.Minute, func() {
		h.env.SetCurrentHistoryLength(continueAsNewAfter + 1)
		batch = &updateResult{}
		sendUpdate(h.env, batch, UpdateStartEvents, StartEventsRequest{Requests: []StartEventRequest{commit, commit, commit}})
	})
	h.env.ExecuteWorkflow(PipelineWorkflow, PipelineInput{Config: appConfig, State: &PipelineState{NextEvent: 7}})
	require.True(t, h.env.IsWorkflowCompleted())

	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.env.GetWorkflowError(), &can)
	var next PipelineInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, 10, next.State.NextEvent)
	require.Len(t, startEventsResult(t, batch).Outcomes, 3)
	// Every event of the batch started before the run continued as new.
	require.Equal(t, []string{"event/app/7", "event/app/8", "event/app/9"}, h.rec.children)
}
