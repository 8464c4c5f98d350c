package workflows

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
)

var appConfig = PipelineConfig{Name: "app", Repo: "/src/app", Branch: "main"}

// startedEvent is one EventWorkflow child the pipeline started.
type startedEvent struct {
	WorkflowID string
	Input      EventInput
}

type pipelineHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	rec *recorder

	mu        sync.Mutex
	events    []startedEvent
	schedules []map[string]string
	// failStart lists events whose workflow fails to start (ID taken).
	failStart map[int]bool
	// scheduleErr, when set, fails SyncSchedules.
	scheduleErr error
}

func newPipelineHarness(t *testing.T) *pipelineHarness {
	t.Helper()
	env, rec := newEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: PipelineWorkflowID("app")})
	h := &pipelineHarness{t: t, env: env, rec: rec}
	env.OnWorkflow(EventWorkflow, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in EventInput) (EventState, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.failStart[in.Event.Number] {
				return EventState{}, testsuite.ErrMockStartChildWorkflowFailed
			}
			h.events = append(h.events, startedEvent{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Input: in})
			return EventState{Event: in.Event, Status: StatusSuccess}, nil
		}).Maybe()
	env.OnActivity(acts.SyncSchedules, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SyncSchedulesInput) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.schedules = append(h.schedules, in.Periodic)
			return h.scheduleErr
		}).Maybe()
	return h
}

// deleteAt deletes the pipeline at d, which ends the workflow once its lanes
// are empty.
func (h *pipelineHarness) deleteAt(d time.Duration) *updateResult {
	return updateAt(h.env, d, UpdateDelete, "")
}

func (h *pipelineHarness) run(in PipelineInput) {
	h.t.Helper()
	h.env.ExecuteWorkflow(PipelineWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
}

func (h *pipelineHarness) startEvent(d time.Duration, req StartEventRequest) *updateResult {
	return updateAt(h.env, d, UpdateStartEvent, req)
}

func (h *pipelineHarness) signal(d time.Duration, name string, arg any) {
	at(h.env, d, func() { h.env.SignalWorkflow(name, arg) })
}

// enqueue hands the lanes one build, as its event's batch.
func (h *pipelineHarness) enqueue(d time.Duration, r LaneRequest) {
	h.signal(d, SignalEnqueue, EnqueueBatch{Event: r.Build.Event, Requests: []LaneRequest{r}})
}

func (h *pipelineHarness) done(d time.Duration, b BuildRef, s Status) {
	h.signal(d, SignalBuildDone, BuildDone{Build: b, Status: s})
}

func startResult(t *testing.T, res *updateResult) StartEventResult {
	t.Helper()
	require.True(t, res.Done, "update did not finish")
	require.NoError(t, res.Rejected)
	require.NoError(t, res.Err)
	out, ok := res.Value.(StartEventResult)
	require.True(t, ok, "update returned %T", res.Value)
	return out
}

func appBuild(job string, event int) BuildRef {
	return BuildRef{Pipeline: "app", Job: job, Event: event}
}

func TestPipelineStartEventNumbersEvents(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	reqs := []StartEventRequest{
		{Trigger: Trigger{Kind: TriggerCommit, Branch: "main", SHA: "aaa"}},
		{Trigger: Trigger{Kind: TriggerPR, PR: 12, Branch: "main"}, Creator: "ann"},
		{Trigger: Trigger{Kind: TriggerManual}, StartFrom: "deploy", Force: true, Parent: 1, ParentSucceeded: []string{"build"}},
	}
	var results []*updateResult
	for i, r := range reqs {
		results = append(results, h.startEvent(time.Duration(i+1)*time.Minute, r))
	}
	at(h.env, 5*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, 3, info.Events)
		require.Equal(t, appConfig, info.Config)
	})
	h.deleteAt(10 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	for i, res := range results {
		require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: i + 1}, Queue: "default"}, startResult(t, res))
	}
	require.Len(t, h.events, 3)
	for i, ev := range h.events {
		n := i + 1
		var id *queue.Identity
		if reqs[i].Trigger.Kind == TriggerPR {
			pr := PullRequestIdentity() // a webhook's pull request
			id = &pr
		}
		require.Equal(t, EventRef{Pipeline: "app", Number: n}.WorkflowID(), ev.WorkflowID)
		require.Equal(t, EventInput{
			Event: EventRef{Pipeline: "app", Number: n}, Config: appConfig, Trigger: reqs[i].Trigger,
			StartFrom: reqs[i].StartFrom, Force: reqs[i].Force, Parent: reqs[i].Parent,
			ParentSucceeded: reqs[i].ParentSucceeded, Creator: reqs[i].Creator, Identity: id, Lean: true, Slim: true, DoneInResult: true, EnqueueUpdate: true,
		}, ev.Input)
	}
	require.Equal(t, []string{"event/app/1", "event/app/2", "event/app/3"}, h.rec.children)
}

func TestPipelineDeduplicatesDeliveries(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	push := func(delivery string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, Branch: "main", DeliveryID: delivery}}
	}
	first := h.startEvent(time.Minute, push("d-1"))
	again := h.startEvent(2*time.Minute, push("d-1"))
	other := h.startEvent(3*time.Minute, push("d-2"))
	third := h.startEvent(4*time.Minute, push("d-1"))
	h.deleteAt(10 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	ev1 := EventRef{Pipeline: "app", Number: 1}
	require.Equal(t, StartEventResult{Event: ev1, Queue: "default"}, startResult(t, first))
	require.Equal(t, StartEventResult{Event: ev1, Duplicate: true}, startResult(t, again))
	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: 2}, Queue: "default"}, startResult(t, other))
	require.Equal(t, StartEventResult{Event: ev1, Duplicate: true}, startResult(t, third))
	require.Len(t, h.events, 2)
}

func TestPipelineStartEventValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		req     StartEventRequest
		deleted bool
		wantErr string
	}{
		{name: "unknown trigger kind", req: StartEventRequest{Trigger: Trigger{Kind: "push"}}, wantErr: `unknown trigger kind "push"`},
		{name: "empty trigger kind", req: StartEventRequest{}, wantErr: `unknown trigger kind ""`},
		{name: "pr without number", req: StartEventRequest{Trigger: Trigger{Kind: TriggerPR}}, wantErr: "a pr event needs a pull request number"},
		{name: "pr-closed without number", req: StartEventRequest{Trigger: Trigger{Kind: TriggerPRClosed}}, wantErr: "a pr-closed event needs a pull request number"},
		{name: "negative pr", req: StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, PR: -1}}, wantErr: "pull request number -1 must be positive"},
		{name: "parent that does not exist", req: StartEventRequest{Trigger: Trigger{Kind: TriggerManual}, Parent: 4}, wantErr: "parent event 4 does not exist in pipeline app (last event is 0)"},
		{name: "deleted pipeline", req: StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}, deleted: true, wantErr: "pipeline deleted: app"},
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
				res = h.startEvent(2*time.Minute, tc.req)
				h.done(3*time.Minute, appBuild("test", 1), StatusSuccess)
			} else {
				res = h.startEvent(time.Minute, tc.req)
				h.deleteAt(2 * time.Minute)
			}
			h.run(PipelineInput{Config: appConfig})
			require.True(t, res.Done)
			require.False(t, res.Accepted)
			require.ErrorContains(t, res.Rejected, tc.wantErr)
			if tc.deleted {
				require.ErrorIs(t, res.Rejected, ErrPipelineDeleted)
			}
			require.Empty(t, h.events)
		})
	}
}

func TestPipelineConfigureAndDeleteValidation(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	badConf := updateAt(h.env, time.Minute, UpdateConfigure, PipelineConfig{Name: "app"})
	goodConf := updateAt(h.env, 2*time.Minute, UpdateConfigure, PipelineConfig{
		Repo: "/src/other", Branch: "dev", Queue: "gpu",
		Dispatch: Dispatch{HeartbeatTimeout: time.Minute, MaxAttempts: 5},
	})
	h.enqueue(3*time.Minute, lreqFor(appBuild("test", 1)))
	del := updateAt(h.env, 4*time.Minute, UpdateDelete, "")
	delAgain := updateAt(h.env, 5*time.Minute, UpdateDelete, "")
	h.done(6*time.Minute, appBuild("test", 1), StatusSuccess)
	h.run(PipelineInput{Config: appConfig})

	require.ErrorContains(t, badConf.Rejected, "repo must not be empty")
	require.NoError(t, goodConf.Err)
	require.Equal(t, PipelineConfig{
		Name: "app", Repo: "/src/other", Branch: "dev", Queue: "gpu",
		Dispatch: Dispatch{HeartbeatTimeout: time.Minute, MaxAttempts: 5},
	}, goodConf.Value)
	require.NoError(t, del.Err)
	// N10: the only build was granted but no executor had claimed it: it
	// ends too, instead of running later without the deleted secrets.
	require.Equal(t, 1, del.Value)
	require.Equal(t, LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: "pipeline app was deleted"},
		h.rec.laneMessages()[appBuild("test", 1).WorkflowID()][1])
	require.ErrorIs(t, delAgain.Rejected, ErrPipelineDeleted)
	// Deleting removes the periodic schedules.
	require.Equal(t, []map[string]string{nil}, h.schedules)
}

// lreqFor is a lane request with Screwdriver's defaults.
func lreqFor(b BuildRef, opts ...func(*LaneRequest)) LaneRequest { return lreq(b, opts...) }

func TestPipelineLaneMessages(t *testing.T) {
	t.Parallel()
	test1, test2, test3 := appBuild("test", 1), appBuild("test", 2), appBuild("test", 3)
	deploy1 := appBuild("deploy", 1)
	h := newPipelineHarness(t)
	h.enqueue(time.Minute, lreqFor(test1))
	// An executor claimed test1: it refuses the collapse test2 brings and
	// tells its pipeline it runs.
	h.signal(90*time.Second+time.Second, SignalBuildStarted, BuildStarted{Build: test1})
	h.enqueue(2*time.Minute, lreqFor(test2))
	h.enqueue(3*time.Minute, lreqFor(deploy1, blockedBy("test")))
	h.enqueue(4*time.Minute, lreqFor(test3))
	at(h.env, 5*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, 4, info.Lanes.Len()) // test1 active; test2, test3 and deploy1 waiting
	})
	h.done(6*time.Minute, test1, StatusSuccess)
	h.done(7*time.Minute, test3, StatusSuccess)
	h.done(8*time.Minute, deploy1, StatusSuccess)
	h.deleteAt(9 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	blockedByTest := LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by running builds of job test"}
	sameJob := func(b BuildRef) LaneMessage {
		return LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build " + b.String() + " of the same job"}
	}
	collapse := func(into BuildRef) LaneMessage {
		return LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Into: into.String(), Reason: "collapsed into build " + into.String()}
	}
	require.Equal(t, map[string][]LaneMessage{
		test1.WorkflowID(): {grantMsg}, // granted builds are never collapsed
		// When test1 ends, the waiting test2 collapses into the newest.
		test2.WorkflowID(): {sameJob(test1), collapse(test3)},
		// A waiting build names the build right ahead of it.
		test3.WorkflowID(): {{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "waiting behind build app/test/2 of the same job"}, grantMsg},
		// When test1 ends no test build runs: deploy1 is granted in the same
		// pass as test3 (blockedBy waits for running builds only).
		deploy1.WorkflowID(): {blockedByTest, grantMsg},
	}, h.rec.laneMessages())
}

func TestPipelineHoldsLaterEvents(t *testing.T) {
	t.Parallel()
	j1, j2 := appBuild("test", 1), appBuild("test", 2)
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}
	heldBy1 := LaneMessage{Kind: LaneStatus, Status: StatusQueued, Code: WaitLaneOrder, Reason: HeldReason}

	t.Run("until the earlier event hands over its builds", func(t *testing.T) {
		t.Parallel()
		h := newPipelineHarness(t)
		h.startEvent(time.Minute, commit)
		h.startEvent(2*time.Minute, commit)
		// Event 2 read its spec first.
		h.enqueue(3*time.Minute, lreqFor(j2))
		h.enqueue(4*time.Minute, lreqFor(j1))
		h.done(5*time.Minute, j2, StatusSuccess)
		h.deleteAt(7 * time.Minute)
		h.run(PipelineInput{Config: appConfig})
		msgs := h.rec.laneMessages()
		// Event 1's build arrives while event 2's waits: it is replaced by
		// the newer one, which runs; it never runs after it.
		require.Equal(t, []LaneMessage{{Kind: LaneCollapse, Status: StatusCollapsed, Into: j2.String(), Reason: "collapsed into build app/test/2"}}, msgs[j1.WorkflowID()])
		require.Equal(t, []LaneMessage{heldBy1, grantMsg}, msgs[j2.WorkflowID()])
	})
	t.Run("until the earlier event hands over its builds, collapse off", func(t *testing.T) {
		t.Parallel()
		h := newPipelineHarness(t)
		h.startEvent(time.Minute, commit)
		h.startEvent(2*time.Minute, commit)
		h.enqueue(3*time.Minute, lreqFor(j2, noCollapse))
		h.enqueue(4*time.Minute, lreqFor(j1, noCollapse))
		h.done(5*time.Minute, j1, StatusSuccess)
		h.done(6*time.Minute, j2, StatusSuccess)
		h.deleteAt(7 * time.Minute)
		h.run(PipelineInput{Config: appConfig})
		msgs := h.rec.laneMessages()
		require.Equal(t, []LaneMessage{grantMsg}, msgs[j1.WorkflowID()])
		require.Equal(t, []LaneMessage{
			heldBy1,
			{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build app/test/1 of the same job"},
			grantMsg,
		}, msgs[j2.WorkflowID()])
	})
	t.Run("an empty batch releases the hold", func(t *testing.T) {
		t.Parallel()
		h := newPipelineHarness(t)
		h.startEvent(time.Minute, commit)
		h.startEvent(2*time.Minute, commit)
		h.enqueue(3*time.Minute, lreqFor(j2))
		h.signal(4*time.Minute, SignalEnqueue, EnqueueBatch{Event: 1})
		h.done(5*time.Minute, j2, StatusSuccess)
		h.deleteAt(6 * time.Minute)
		h.run(PipelineInput{Config: appConfig})
		require.Equal(t, []LaneMessage{heldBy1, grantMsg}, h.rec.laneMessages()[j2.WorkflowID()])
	})
	t.Run("until the hold's deadline when the event never reports", func(t *testing.T) {
		t.Parallel()
		h := newPipelineHarness(t)
		h.startEvent(time.Minute, commit)
		h.startEvent(2*time.Minute, commit)
		h.enqueue(3*time.Minute, lreqFor(j2))
		deadline := time.Minute + eventHold
		at(h.env, deadline-time.Second, func() {
			require.Equal(t, []LaneMessage{heldBy1}, h.rec.laneMessages()[j2.WorkflowID()])
		})
		at(h.env, deadline+time.Second, func() {
			require.Equal(t, []LaneMessage{heldBy1, grantMsg}, h.rec.laneMessages()[j2.WorkflowID()])
		})
		h.done(time.Hour, j2, StatusSuccess)
		h.deleteAt(2 * time.Hour)
		h.run(PipelineInput{Config: appConfig})
	})
}

func TestPipelineFreezeWindowTimer(t *testing.T) {
	t.Parallel()
	night := wfNight
	open := wfNight.Add(4 * time.Hour)
	frozen, forcedBuild := appBuild("deploy", 1), appBuild("hotfix", 1)
	h := newPipelineHarness(t)
	h.env.SetStartTime(night)
	h.enqueue(time.Minute, lreqFor(frozen, frozenAtNight))
	h.enqueue(2*time.Minute, lreqFor(forcedBuild, frozenAtNight, forced))
	// Just before the window ends the build still waits; just after, the
	// pipeline's timer has granted it without any signal.
	at(h.env, open.Sub(night)-time.Minute, func() {
		require.Len(t, h.rec.laneMessages()[frozen.WorkflowID()], 1)
	})
	at(h.env, open.Sub(night)+time.Minute, func() {
		msgs := h.rec.laneMessages()[frozen.WorkflowID()]
		require.Len(t, msgs, 2)
		require.Equal(t, grantMsg, msgs[1])
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Len(t, info.Lanes.Jobs["deploy"].Active, 1)
		require.True(t, open.Equal(info.Lanes.Jobs["deploy"].Active[0].GrantedAt), "granted at %s", info.Lanes.Jobs["deploy"].Active[0].GrantedAt)
	})
	h.done(5*time.Hour, frozen, StatusSuccess)
	h.done(5*time.Hour, forcedBuild, StatusSuccess)
	h.deleteAt(6 * time.Hour)
	h.run(PipelineInput{Config: appConfig})

	msgs := h.rec.laneMessages()
	require.Equal(t, []LaneMessage{
		{
			Kind: LaneStatus, Status: StatusFrozen, Code: WaitFrozen, Until: open,
			Reason: "frozen until " + open.Format(time.RFC3339) + " by freeze window `" + nightWindow + "`",
		},
		grantMsg,
	}, msgs[frozen.WorkflowID()])
	require.Equal(t, []LaneMessage{grantMsg}, msgs[forcedBuild.WorkflowID()])
}

func TestPipelineDelayTimer(t *testing.T) {
	t.Parallel()
	b := appBuild("deploy", 1)
	h := newPipelineHarness(t)
	h.enqueue(time.Minute, lreqFor(b, delayed(30*time.Minute)))
	at(h.env, 30*time.Minute, func() { require.Len(t, h.rec.laneMessages()[b.WorkflowID()], 1) })
	at(h.env, 32*time.Minute, func() { require.Len(t, h.rec.laneMessages()[b.WorkflowID()], 2) })
	h.done(time.Hour, b, StatusSuccess)
	h.deleteAt(2 * time.Hour)
	h.run(PipelineInput{Config: appConfig})
	until := wfT0.Add(31 * time.Minute)
	require.Equal(t, []LaneMessage{
		{Kind: LaneStatus, Status: StatusQueued, Code: WaitDelayed, Until: until, Reason: "delayed until " + until.Format(time.RFC3339) + " (sluice.dev/delay 30m0s)"},
		grantMsg,
	}, h.rec.laneMessages()[b.WorkflowID()])
}

func TestPipelineDeleteAbortsWaitingBuilds(t *testing.T) {
	t.Parallel()
	running, waiting, late := appBuild("test", 1), appBuild("test", 2), appBuild("lint", 3)
	h := newPipelineHarness(t)
	h.enqueue(time.Minute, lreqFor(running, noCollapse))
	// An executor claimed it: a running build finishes.
	h.signal(90*time.Second, SignalBuildStarted, BuildStarted{Build: running})
	h.enqueue(2*time.Minute, lreqFor(waiting, noCollapse))
	del := h.deleteAt(3 * time.Minute)
	// A build that asks after the delete is aborted at once.
	h.enqueue(4*time.Minute, lreqFor(late))
	at(h.env, 5*time.Minute, func() { require.False(t, h.env.IsWorkflowCompleted()) })
	// The pipeline ends when its last granted build is done.
	h.done(6*time.Minute, running, StatusSuccess)
	h.run(PipelineInput{Config: appConfig})

	require.NoError(t, del.Err)
	require.Equal(t, 1, del.Value)
	abort := LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: "pipeline app was deleted"}
	msgs := h.rec.laneMessages()
	require.Equal(t, []LaneMessage{grantMsg}, msgs[running.WorkflowID()])
	require.Equal(t, abort, msgs[waiting.WorkflowID()][len(msgs[waiting.WorkflowID()])-1])
	require.Equal(t, []LaneMessage{abort}, msgs[late.WorkflowID()])
	require.Equal(t, []map[string]string{nil}, h.schedules)
}

func TestPipelineStartEventSignal(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	h.signal(time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: TriggerPeriodic, Sender: "schedule"}, StartFrom: "nightly"})
	// An invalid request by signal is dropped, not fatal.
	h.signal(2*time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: "bogus"}})
	h.signal(3*time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: TriggerPeriodic}, StartFrom: "weekly"})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	require.Len(t, h.events, 2)
	require.Equal(t, "event/app/1", h.events[0].WorkflowID)
	require.Equal(t, "nightly", h.events[0].Input.StartFrom)
	require.Equal(t, "event/app/2", h.events[1].WorkflowID)
	require.Equal(t, "weekly", h.events[1].Input.StartFrom)
}

func TestPipelineSpecSync(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	periodic := map[string]string{"nightly": "17 3 * * *"}
	h.signal(time.Minute, SignalSpecSynced, SpecSync{SHA: "s1", Subscriptions: []string{"sd@lib:publish", "sd@base:build"}, Periodic: periodic})
	// The same periodic jobs again: the schedules are not touched.
	h.signal(2*time.Minute, SignalSpecSynced, SpecSync{SHA: "s2", Subscriptions: []string{"sd@base:build"}, Periodic: map[string]string{"nightly": "17 3 * * *"}})
	at(h.env, 3*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, "s2", info.LastSHA)
		require.Equal(t, []string{"sd@base:build"}, info.Subscriptions)
		require.Equal(t, periodic, info.Periodic)
	})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	require.Equal(t, []map[string]string{periodic, nil}, h.schedules)
}

// TestPipelineSpecSyncInEnqueue: a lean event's first enqueue batch carries
// its spec sync, applied as the signal was, newest event first.
func TestPipelineSpecSyncInEnqueue(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	periodic := map[string]string{"nightly": "17 3 * * *"}
	h.signal(time.Minute, SignalEnqueue, EnqueueBatch{Event: 4, Sync: &SpecSync{Event: 4, SHA: "s4", Subscriptions: []string{"sd@lib:publish"}, Periodic: periodic}})
	// An older event's sync arriving later is ignored, as a signal's is.
	h.signal(2*time.Minute, SignalEnqueue, EnqueueBatch{Event: 3, Sync: &SpecSync{Event: 3, SHA: "s3", Subscriptions: []string{"sd@old:job"}}})
	at(h.env, 3*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, "s4", info.LastSHA)
		require.Equal(t, []string{"sd@lib:publish"}, info.Subscriptions)
		require.Equal(t, periodic, info.Periodic)
	})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	require.Equal(t, []map[string]string{periodic, nil}, h.schedules)
}

func TestPipelineContinueAsNew(t *testing.T) {
	t.Parallel()
	test1, test2, lint1 := appBuild("test", 1), appBuild("test", 2), appBuild("lint", 1)
	h := newPipelineHarness(t)
	h.startEvent(time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, DeliveryID: "d-1"}})
	h.startEvent(2*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}})
	h.enqueue(3*time.Minute, lreqFor(test1))
	h.enqueue(3*time.Minute, lreqFor(lint1))
	h.done(4*time.Minute, lint1, StatusSuccess)
	at(h.env, 5*time.Minute, func() {
		// The history grew past the limit; the signals that arrive together
		// with the next wake-up are all handled before continuing as new.
		h.env.SetCurrentHistoryLength(continueAsNewAfter + 1)
		h.env.SignalWorkflow(SignalEnqueue, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
		h.env.SignalWorkflow(SignalSpecSynced, SpecSync{SHA: "s1", Subscriptions: []string{"sd@lib:publish"}})
		h.env.SignalWorkflow(SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: TriggerPeriodic}, StartFrom: "nightly"})
	})
	h.env.ExecuteWorkflow(PipelineWorkflow, PipelineInput{Config: appConfig})
	require.True(t, h.env.IsWorkflowCompleted())

	err := h.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	require.Equal(t, "PipelineWorkflow", can.WorkflowType.Name)
	var next PipelineInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, appConfig, next.Config)
	require.NotNil(t, next.State)
	st := next.State
	require.Equal(t, 4, st.NextEvent)
	require.Equal(t, []DeliverySeen{{ID: "d-1", Event: 1}}, st.Deliveries)
	require.Equal(t, []string{"sd@lib:publish"}, st.Subscriptions)
	require.Equal(t, "s1", st.LastSHA)
	require.Equal(t, 2, st.Lanes.Len())
	require.Len(t, st.Lanes.Jobs["test"].Active, 1)
	require.Equal(t, test1, st.Lanes.Jobs["test"].Active[0].Build)
	require.Len(t, st.Lanes.Jobs["test"].Waiting, 1)
	require.Equal(t, test2, st.Lanes.Jobs["test"].Waiting[0].Build)
	require.Equal(t, StatusBlocked, st.Lanes.Jobs["test"].Waiting[0].Status)
	require.NotContains(t, st.Lanes.Jobs, "lint")
	// Events 1 and 2 handed over their builds; event 3 (started by the
	// signal) has not yet, so its hold carries over.
	require.Equal(t, map[int]time.Time{3: wfT0.Add(5*time.Minute + eventHold)}, st.Lanes.Pending)
	// The event asked for by signal was started before continuing.
	require.Len(t, h.events, 3)
	require.Equal(t, "nightly", h.events[2].Input.StartFrom)
	// Every lane message was sent before continuing.
	require.Equal(t, []LaneMessage{{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build app/test/1 of the same job"}},
		h.rec.laneMessages()[test2.WorkflowID()])
}

func TestPipelineResumesFromState(t *testing.T) {
	t.Parallel()
	// A first run's lanes and numbering, carried by continue-as-new.
	var lanes Lanes
	test1, test2 := appBuild("test", 41), appBuild("test", 42)
	lanes.Enqueue(lreqFor(test1), wfT0.Add(-time.Hour))
	lanes.Enqueue(lreqFor(test2, noCollapse), wfT0.Add(-time.Hour))
	state := &PipelineState{NextEvent: 43, Lanes: lanes, Deliveries: []DeliverySeen{{ID: "d-9", Event: 40}}}

	h := newPipelineHarness(t)
	dup := h.startEvent(time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, DeliveryID: "d-9"}})
	fresh := h.startEvent(2*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}})
	h.done(3*time.Minute, test1, StatusSuccess)
	h.done(4*time.Minute, test2, StatusSuccess)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: appConfig, State: state})

	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: 40}, Duplicate: true}, startResult(t, dup))
	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: 43}, Queue: "default"}, startResult(t, fresh))
	// The waiting build of the previous run is granted when the running one is done.
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[test2.WorkflowID()])
}

func TestPeriodicWorkflowWaitsForItsBuild(t *testing.T) {
	t.Parallel()
	t.Run("until the pipeline says the job ended", func(t *testing.T) {
		t.Parallel()
		env, rec := newEnv(t)
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "periodic/app/nightly-fire-1"})
		done := PeriodicDone{Event: "app/4", Status: StatusSuccess}
		at(env, 3*time.Hour, func() { env.SignalWorkflow(SignalPeriodicDone, done) })
		at(env, 2*time.Hour, func() { require.False(t, env.IsWorkflowCompleted(), "the fire ended before its build") })
		env.ExecuteWorkflow(PeriodicWorkflow, PeriodicInput{Pipeline: "app", Job: "nightly"})
		require.NoError(t, env.GetWorkflowError())
		require.Equal(t, []any{StartEventRequest{
			Trigger: Trigger{Kind: TriggerPeriodic, Sender: "schedule"}, StartFrom: "nightly", Creator: "schedule",
			Notify: "periodic/app/nightly-fire-1",
		}}, rec.signalsTo("pipeline/app", SignalStartEvent))
		var res PeriodicResult
		require.NoError(t, env.GetWorkflowResult(&res))
		require.Equal(t, PeriodicResult{Done: done}, res)
	})
	t.Run("at most a day", func(t *testing.T) {
		t.Parallel()
		env, _ := newEnv(t)
		env.ExecuteWorkflow(PeriodicWorkflow, PeriodicInput{Pipeline: "app", Job: "nightly"})
		require.NoError(t, env.GetWorkflowError())
		var res PeriodicResult
		require.NoError(t, env.GetWorkflowResult(&res))
		require.True(t, res.TimedOut)
	})
	t.Run("a pipeline that is gone fails the fire", func(t *testing.T) {
		t.Parallel()
		var s testsuite.WorkflowTestSuite
		gone := s.NewTestWorkflowEnvironment()
		gone.OnSignalExternalWorkflow(mock.Anything, "pipeline/app", "", SignalStartEvent, mock.Anything).Return(errors.New("not found"))
		gone.ExecuteWorkflow(PeriodicWorkflow, PeriodicInput{Pipeline: "app", Job: "nightly"})
		require.ErrorContains(t, gone.GetWorkflowError(), "start periodic event of app/nightly")
	})
}

func TestPipelineTellsPeriodicFireItStartedNothing(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	// A fire that cannot start (the pipeline is being deleted) still ends
	// its PeriodicWorkflow, or the schedule would buffer forever.
	h.signal(time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: "bogus"}, StartFrom: "nightly", Notify: "periodic-fire"})
	h.signal(2*time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: TriggerPeriodic}, StartFrom: "nightly", Notify: "periodic-fire-2"})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	got := h.rec.signalsTo("periodic-fire", SignalPeriodicDone)
	require.Len(t, got, 1)
	require.Contains(t, got[0].(PeriodicDone).Reason, `unknown trigger kind "bogus"`)
	require.Empty(t, h.rec.signalsTo("periodic-fire-2", SignalPeriodicDone), "a started event tells the fire itself")
	require.Len(t, h.events, 1)
	require.Equal(t, "periodic-fire-2", h.events[0].Input.Notify)
}

func TestPipelineEventStartFails(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	h.failStart = map[int]bool{1: true}
	failed := h.startEvent(time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}})
	ok := h.startEvent(2*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}})
	// Event 1 never started: it does not hold event 2's builds.
	h.enqueue(3*time.Minute, lreqFor(appBuild("test", 2)))
	h.done(4*time.Minute, appBuild("test", 2), StatusSuccess)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	require.True(t, failed.Accepted)
	require.ErrorContains(t, failed.Err, "start event app/1")
	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: 2}, Queue: "default"}, startResult(t, ok))
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[appBuild("test", 2).WorkflowID()])
}

func TestPipelineForgetsOldDeliveries(t *testing.T) {
	t.Parallel()
	state := &PipelineState{NextEvent: maxDeliveries + 1}
	for i := range maxDeliveries {
		state.Deliveries = append(state.Deliveries, DeliverySeen{ID: fmt.Sprintf("d-%d", i), Event: i + 1})
	}
	push := func(delivery string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, DeliveryID: delivery}}
	}
	h := newPipelineHarness(t)
	fresh := h.startEvent(time.Minute, push("new"))
	oldest := h.startEvent(2*time.Minute, push("d-0"))
	recent := h.startEvent(3*time.Minute, push(fmt.Sprintf("d-%d", maxDeliveries-1)))
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig, State: state})
	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: maxDeliveries + 1}, Queue: "default"}, startResult(t, fresh))
	// The oldest delivery was forgotten to make room: it starts a new event.
	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: maxDeliveries + 2}, Queue: "default"}, startResult(t, oldest))
	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: maxDeliveries}, Duplicate: true}, startResult(t, recent))
}

func TestPipelineConfigureReachesNewEvents(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	newCfg := PipelineConfig{Repo: "/src/app2", Branch: "trunk", Queue: "gpu"}
	updateAt(h.env, time.Minute, UpdateConfigure, newCfg)
	h.startEvent(2*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	require.Len(t, h.events, 1)
	want := appConfig
	want.Repo, want.Branch, want.Queue = newCfg.Repo, newCfg.Branch, newCfg.Queue
	require.Equal(t, want, h.events[0].Input.Config)
}

func TestPipelineForgetsBuildsItCannotSignal(t *testing.T) {
	t.Parallel()
	gone, next := appBuild("test", 1), appBuild("test", 2)
	h := newPipelineHarness(t)
	// The build of event 1 ended without telling the lane (its workflow is
	// gone): the grant cannot reach it.
	h.rec.fail = func(workflowID, name string) error {
		if workflowID == gone.WorkflowID() {
			return &temporal.UnknownExternalWorkflowExecutionError{}
		}
		return nil
	}
	h.enqueue(time.Minute, lreqFor(gone))
	h.enqueue(2*time.Minute, lreqFor(next))
	at(h.env, 3*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, 1, info.Lanes.Len())
	})
	h.done(4*time.Minute, next, StatusSuccess)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: appConfig})
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[next.WorkflowID()])
}

func TestPipelineIgnoresStaleSpecSync(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	newer := map[string]string{"nightly": "17 3 * * *"}
	h.signal(time.Minute, SignalSpecSynced, SpecSync{Event: 5, SHA: "new", Subscriptions: []string{"sd@lib:publish"}, Periodic: newer})
	// Event 3's commit resolved slowly: its older spec must not come back.
	h.signal(2*time.Minute, SignalSpecSynced, SpecSync{Event: 3, SHA: "old", Subscriptions: []string{"sd@old:job"}})
	// The creation sync (event 0) never overrides an event's.
	h.signal(3*time.Minute, SignalSpecSynced, SpecSync{SHA: "creation"})
	at(h.env, 4*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, "new", info.LastSHA)
		require.Equal(t, []string{"sd@lib:publish"}, info.Subscriptions)
		require.Equal(t, newer, info.Periodic)
	})
	// Two syncs arriving together: the newer event's wins.
	at(h.env, 5*time.Minute, func() {
		h.env.SignalWorkflow(SignalSpecSynced, SpecSync{Event: 9, SHA: "nine"})
		h.env.SignalWorkflow(SignalSpecSynced, SpecSync{Event: 8, SHA: "eight"})
	})
	at(h.env, 6*time.Minute, func() {
		require.Equal(t, "nine", query[PipelineInfo](t, h.env, QueryPipeline).LastSHA)
	})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	require.Equal(t, []map[string]string{newer, nil, nil}, h.schedules)
}

func TestPipelineShowsScheduleError(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	h.scheduleErr = temporal.NewNonRetryableApplicationError("job nightly: schedule rejected: bad cron", "ScheduleInvalid", nil)
	h.signal(time.Minute, SignalSpecSynced, SpecSync{Event: 1, SHA: "a", Periodic: map[string]string{"nightly": "x"}})
	at(h.env, 2*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, "periodic builds are not scheduled: job nightly: schedule rejected: bad cron", info.ScheduleError)
		require.Empty(t, info.Periodic)
	})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
}

func TestPipelineOwnerActsForUnattendedEvents(t *testing.T) {
	t.Parallel()
	owner := &queue.Identity{User: "rel", Roles: []string{"release"}}
	ann := &queue.Identity{User: "ann"}
	cfg := appConfig
	cfg.Owner = owner
	h := newPipelineHarness(t)
	h.startEvent(time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, DeliveryID: "webhook-1"}})
	h.startEvent(2*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerManual}, Identity: ann})
	h.signal(3*time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: TriggerPeriodic}, StartFrom: "nightly"})
	// ann's spec sync sets the schedules up from now on.
	h.signal(7*time.Minute, SignalSpecSynced, SpecSync{Event: 2, SHA: "abc", Periodic: map[string]string{}, SetBy: ann, Refused: []string{`job deploy: user "ann" may not use queue release`}})
	h.signal(8*time.Minute, SignalStartEvent, StartEventRequest{Trigger: Trigger{Kind: TriggerPeriodic}, StartFrom: "nightly"})
	at(h.env, 9*time.Minute, func() {
		info := query[PipelineInfo](t, h.env, QueryPipeline)
		require.Equal(t, `periodic builds not scheduled for ann: job deploy: user "ann" may not use queue release`, info.ScheduleError)
	})
	h.startEvent(4*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerPR, PR: 7, Branch: "main", DeliveryID: "webhook-2"}})
	h.startEvent(5*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerPRClosed, PR: 7, Branch: "main", DeliveryID: "webhook-3"}})
	h.startEvent(6*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerPR, PR: 8, Branch: "main"}, Identity: ann})
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: cfg})
	require.Len(t, h.events, 7)
	require.Equal(t, ann, h.events[6].Input.Identity, "a schedule acts for who set it up")
	require.Equal(t, owner, h.events[0].Input.Identity, "a webhook acts for the owner")
	require.Equal(t, ann, h.events[1].Input.Identity, "a person acts for themselves")
	require.Equal(t, owner, h.events[2].Input.Identity, "a schedule nobody set up acts for the owner")
	pr := PullRequestIdentity()
	require.Equal(t, &pr, h.events[3].Input.Identity, "a pull request nobody started by hand acts for the pull-request identity, never for the owner")
	require.Equal(t, &pr, h.events[4].Input.Identity, "so does its close")
	require.Equal(t, ann, h.events[5].Input.Identity, "a person who starts a pull request's event acts for themselves")
}

func TestPipelinePullRequests(t *testing.T) {
	t.Parallel()
	prBuild := func(job string, pr, event int) BuildRef {
		return BuildRef{Pipeline: "app", Job: job, Event: event, PR: pr}
	}
	a1, b1, a2 := prBuild("a", 1, 1), prBuild("b", 1, 1), prBuild("a", 1, 2)
	other := prBuild("a", 7, 3)
	h := newPipelineHarness(t)
	push := func(pr int, sha string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerPR, PR: pr, SHA: sha}}
	}
	h.startEvent(time.Minute, push(1, "aaaaaaaaaaaaaaaa"))
	h.enqueue(2*time.Minute, lreqFor(a1))
	// A second commit to pull request 1: event 1's granted build is told to
	// give way; event 1's build that arrives later is superseded at once.
	h.startEvent(3*time.Minute, push(1, "bbbbbbbbbbbbbbbbbbbb"))
	h.enqueue(4*time.Minute, lreqFor(b1))
	h.startEvent(5*time.Minute, push(7, "cccccccc"))
	h.enqueue(6*time.Minute, lreqFor(other))
	h.enqueue(7*time.Minute, lreqFor(a2))
	h.done(8*time.Minute, a1, StatusCollapsed)
	// Closing pull request 1 aborts its running build; pull request 7 is
	// not touched.
	h.startEvent(9*time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerPRClosed, PR: 1}})
	h.done(10*time.Minute, a2, StatusAborted)
	h.done(11*time.Minute, other, StatusSuccess)
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})

	superseded := "superseded by bbbbbbbbbbbb (event 2)"
	msgs := h.rec.laneMessages()
	require.Equal(t, []LaneMessage{grantMsg, {Kind: LaneCancel, Reason: superseded}}, msgs[a1.WorkflowID()])
	require.Equal(t, []LaneMessage{{Kind: LaneCollapse, Status: StatusCollapsed, Reason: superseded}}, msgs[b1.WorkflowID()])
	require.Equal(t, []LaneMessage{
		{Kind: LaneStatus, Status: StatusQueued, Code: WaitLaneOrder, Reason: "waiting for build app/PR-1:a/1 to give way"},
		grantMsg,
		{Kind: LaneCancel, Reason: "pull request #1 was closed"},
	}, msgs[a2.WorkflowID()])
	require.Equal(t, []LaneMessage{grantMsg}, msgs[other.WorkflowID()])
	// The previous event of the pull request hears it was superseded (it
	// ends if it still waits for approval); another pull request's does not.
	require.Equal(t, []any{PRSuperseded{Reason: superseded}}, h.rec.issuedTo("event/app/1", SignalPRSuperseded))
	require.Equal(t, []any{PRSuperseded{Closed: true, Reason: "pull request #1 was closed"}}, h.rec.issuedTo("event/app/2", SignalPRSuperseded))
	require.Empty(t, h.rec.issuedTo("event/app/3", SignalPRSuperseded))
}

// TestPipelineLongBacklog: a long backlog of one job with collapse off waits
// in one lane. The pipeline sends each build a bounded number of lane messages
// (total signals linear in the backlog, far from Temporal's per-run signal
// limit) and grants every build exactly once, in event order. The SDK's test
// environment itself slows super-linearly with the number of delayed
// callbacks, so this runs 200 builds; the 2,000-build proof of the lane
// algorithm is TestLanesLongBacklogSignalsLinear.
func TestPipelineLongBacklog(t *testing.T) {
	t.Parallel()
	const n = 200
	h := newPipelineHarness(t)
	h.env.SetTestTimeout(2 * time.Minute)
	for i := 1; i <= n; i++ {
		h.enqueue(time.Duration(i)*time.Second, lreqFor(appBuild("test", i), noCollapse))
	}
	for i := 1; i <= n; i++ {
		h.done(time.Duration(n+i)*time.Second, appBuild("test", i), StatusSuccess)
	}
	h.deleteAt(time.Duration(3*n) * time.Second)
	h.run(PipelineInput{Config: appConfig})

	msgs := h.rec.laneMessages()
	require.Len(t, msgs, n)
	total := 0
	for i := 1; i <= n; i++ {
		id := appBuild("test", i).WorkflowID()
		got := msgs[id]
		require.LessOrEqual(t, len(got), 3, "build %s got %v", id, got)
		total += len(got)
		require.Equal(t, grantMsg, got[len(got)-1], "build %s", id)
	}
	require.LessOrEqual(t, total, 3*n)
	// The grants went out in event order (the signals as sent).
	var grants []string
	for _, s := range h.rec.signalLog() {
		if s.Name == SignalLane && s.Arg.(LaneMessage).Kind == LaneGrant {
			grants = append(grants, s.WorkflowID)
		}
	}
	want := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		want = append(want, appBuild("test", i).WorkflowID())
	}
	require.Equal(t, want, grants, "each build granted once, in event order")
}

// N1: a pipeline deleted while a build is still in its lanes stays deleted
// across continue-as-new: the next run refuses new events and ends once the
// lanes drain, instead of coming back to life.
func TestPipelineDeleteSurvivesContinueAsNew(t *testing.T) {
	t.Parallel()
	test1 := appBuild("test", 1)
	h := newPipelineHarness(t)
	h.enqueue(time.Minute, lreqFor(test1))
	del := h.deleteAt(2 * time.Minute)
	at(h.env, 3*time.Minute, func() {
		h.env.SetCurrentHistoryLength(continueAsNewAfter + 1)
		h.env.SignalWorkflow(SignalSpecSynced, SpecSync{SHA: "s1"})
	})
	h.env.ExecuteWorkflow(PipelineWorkflow, PipelineInput{Config: appConfig})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, del.Err)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.env.GetWorkflowError(), &can)
	var next PipelineInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.True(t, next.State.Deleted, "the delete is carried")
	require.Equal(t, 1, next.State.Lanes.Len(), "the granted build is still in its lane")

	// The next run: still deleted, refuses an event, ends when the lane drains.
	h2 := newPipelineHarness(t)
	res := h2.startEvent(time.Minute, StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}})
	h2.done(2*time.Minute, test1, StatusSuccess)
	h2.run(next)
	require.ErrorIs(t, res.Rejected, ErrPipelineDeleted)
	require.Empty(t, h2.events)
	require.Equal(t, []map[string]string{nil}, h2.schedules, "the deleted pipeline's schedules are removed when it ends")
}

// Everything a pipeline run holds is either carried through continue-as-new
// (cfg, st) or drained before it: a field added to pipelineRun must be put
// in one of the two lists, or it is lost at continue-as-new (as the delete
// flag once was).
func TestPipelineRunFieldsCarriedOrDrained(t *testing.T) {
	t.Parallel()
	carried := map[string]bool{"cfg": true, "st": true}
	drained := map[string]string{
		"legacy":              "fixed per run from its history (GetVersion)",
		"pending":             "flush sends them all; continue-as-new waits for none in flight",
		"startQueue":          "started before continue-as-new (the condition checks it)",
		"syncs":               "applied before continue-as-new (the condition checks it)",
		"launching":           "continue-as-new waits for it to reach 0",
		"oneLauncher":         "fixed per run from its history (GetVersion)",
		"toWatch":             "the events counted in launching: empty when it is 0",
		"wake":                "a channel that only wakes the loop",
		"releaseOlderPRHolds": "fixed per run from its history (GetVersion)",
		"resultDone":          "fixed per run from its history (GetVersion)",
		"children":            "continue-as-new waits until each ended or was handed back (SignalHandBack)",
		"enqueueUpdate":       "fixed per run from its history (GetVersion)",
		"outboxes":            "continue-as-new waits until none is left (the condition checks it)",
	}
	typ := reflect.TypeFor[pipelineRun]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		_, d := drained[name]
		require.True(t, carried[name] || d, "pipelineRun.%s is neither carried through continue-as-new nor drained before it", name)
	}
	// And every field of the carried state survives the round trip.
	st := PipelineState{}
	fillEveryField(t, reflect.ValueOf(&st).Elem())
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(PipelineInput{Config: appConfig, State: &st})
	require.NoError(t, err)
	var back PipelineInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(payloads, &back))
	require.Equal(t, st, *back.State)
}

// fillEveryField sets every field of v (recursively for structs) to a
// non-zero value, so that a field the encoding drops shows.
func fillEveryField(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.String:
			f.SetString("x")
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			if e := s.Index(0); e.Kind() == reflect.Struct {
				fillEveryField(t, e)
			} else if e.Kind() == reflect.String {
				e.SetString("y")
			}
			f.Set(s)
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			k := reflect.New(f.Type().Key()).Elem()
			if k.Kind() == reflect.String {
				k.SetString("k")
			} else if k.Kind() == reflect.Int {
				k.SetInt(1)
			}
			val := reflect.New(f.Type().Elem()).Elem()
			if val.Kind() == reflect.Pointer && val.Type().Elem().Kind() == reflect.Struct {
				p := reflect.New(val.Type().Elem())
				fillEveryField(t, p.Elem())
				val.Set(p)
			} else if val.Kind() == reflect.Struct {
				fillEveryField(t, val)
			} else if val.Kind() == reflect.String {
				val.SetString("v")
			}
			m.SetMapIndex(k, val)
			f.Set(m)
		case reflect.Struct:
			if f.Type() == reflect.TypeFor[time.Time]() {
				f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			} else {
				fillEveryField(t, f)
			}
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			if p.Elem().Kind() == reflect.Struct {
				fillEveryField(t, p.Elem())
			}
			f.Set(p)
		}
	}
}

// backlogRequests are n builds of one event's matrix job, collapse off (none
// may replace another), each with freeze windows and blockedBy as real specs
// have them.
func backlogRequests(n int) []LaneRequest {
	reqs := make([]LaneRequest, 0, n)
	for i := 1; i <= n; i++ {
		b := appBuild("matrix", 1)
		b.Index = i
		r := lreqFor(b, noCollapse)
		r.FreezeWindows = []string{"* 0-6 ? * *"}
		r.BlockedBy = []string{"deploy", "lint"}
		reqs = append(reqs, r)
	}
	return reqs
}

// N3: a backlog of 20,000 builds never makes the state carried through
// continue-as-new too large (Temporal terminates a workflow whose
// continue-as-new input passes 2 MiB): the lanes take MaxLaneBuilds and
// the rest are refused with "lane full"; the carried state stays under
// 1 MiB.
func TestLanesCarriedSizeAtTheBound(t *testing.T) {
	t.Parallel()
	const backlog = 20000
	var l Lanes
	refused := 0
	for _, r := range backlogRequests(backlog) {
		if e, full := laneFull(&l, "app", r.Build); full {
			refused++
			require.Equal(t, LaneFail, e.Msg.Kind)
			require.Contains(t, e.Msg.Reason, "lane full: pipeline app already holds 2000 builds waiting or running (the limit is 2000)")
			continue
		}
		l.Add(r, wfT0)
	}
	l.Evaluate(wfT0.Add(time.Minute))
	require.Equal(t, backlog-MaxLaneBuilds, refused)
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(PipelineInput{Config: appConfig, State: &PipelineState{NextEvent: 2, Lanes: l}})
	require.NoError(t, err)
	size := 0
	for _, p := range payloads.GetPayloads() {
		size += len(p.GetData())
	}
	t.Logf("continue-as-new input with %d builds in the lanes: %d bytes (%.0f per build)", l.Len(), size, float64(size)/float64(l.Len()))
	require.Less(t, size, 1<<20, "the carried state stays under 1 MiB")
}

// The pipeline workflow refuses builds past the bound and carries the rest.
func TestPipelineBacklogRefusedPastTheBound(t *testing.T) {
	t.Parallel()
	const backlog = MaxLaneBuilds + 50
	h := newPipelineHarness(t)
	h.signal(time.Minute, SignalEnqueue, EnqueueBatch{Event: 1, Requests: backlogRequests(backlog)})
	at(h.env, 2*time.Minute, func() {
		h.env.SetCurrentHistoryLength(continueAsNewAfter + 1)
		h.env.SignalWorkflow(SignalSpecSynced, SpecSync{SHA: "s1"})
	})
	h.env.ExecuteWorkflow(PipelineWorkflow, PipelineInput{Config: appConfig})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.env.GetWorkflowError(), &can)
	var next PipelineInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, MaxLaneBuilds, next.State.Lanes.Len())
	refused := 0
	for _, msgs := range h.rec.laneMessages() {
		for _, m := range msgs {
			if m.Kind == LaneFail {
				refused++
				require.Contains(t, m.Reason, "lane full")
			}
		}
	}
	require.Equal(t, backlog-MaxLaneBuilds, refused)
}

// N4: restarting an older event of a pull request (its commit A, while the
// head B runs) leaves B's builds alone and does not make A the pull
// request's newest commit; a new commit afterwards still supersedes B.
func TestPipelineRestartOfAnOldPREventKeepsTheHead(t *testing.T) {
	t.Parallel()
	head := BuildRef{Pipeline: "app", Job: "a", Event: 2, PR: 5}
	h := newPipelineHarness(t)
	pr := func(sha string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerPR, PR: 5, SHA: sha}}
	}
	h.startEvent(time.Minute, pr("aaaaaaaaaaaaaaaa"))
	h.signal(90*time.Second, SignalEnqueue, EnqueueBatch{Event: 1}) // its builds ended
	h.startEvent(2*time.Minute, pr("bbbbbbbbbbbbbbbb"))
	h.enqueue(3*time.Minute, lreqFor(head))
	// A person restarts event 1 (commit A).
	restart := pr("aaaaaaaaaaaaaaaa")
	restart.Parent, restart.StartFrom = 1, "a"
	h.startEvent(4*time.Minute, restart)
	h.signal(270*time.Second, SignalEnqueue, EnqueueBatch{Event: 3})
	h.done(5*time.Minute, head, StatusSuccess)
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})

	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[head.WorkflowID()], "the head's build is not cancelled")
	require.Len(t, h.events, 3)
}

// N20: a pull request's newer commit does not wait for its older event to
// read its spec (that event's builds collapse on arrival anyway).
func TestPipelineNewerPRCommitNotHeldByTheOlder(t *testing.T) {
	t.Parallel()
	head := BuildRef{Pipeline: "app", Job: "a", Event: 2, PR: 5}
	h := newPipelineHarness(t)
	pr := func(sha string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerPR, PR: 5, SHA: sha}}
	}
	h.startEvent(time.Minute, pr("aaaaaaaaaaaaaaaa")) // a slow first clone: it never enqueues here
	h.startEvent(2*time.Minute, pr("bbbbbbbbbbbbbbbb"))
	h.enqueue(3*time.Minute, lreqFor(head))
	h.done(4*time.Minute, head, StatusSuccess)
	h.deleteAt(time.Hour)
	h.run(PipelineInput{Config: appConfig})
	require.Equal(t, []LaneMessage{grantMsg}, h.rec.laneMessages()[head.WorkflowID()], "granted at once, not held by event 1")
}

// TestPipelineDoneInEnqueueBatch: a Slim event gives its ended builds' lane
// places back in its enqueue batch (EnqueueBatch.Done), as a build-done
// signal of each would: the next build of the job is granted then.
func TestPipelineDoneInEnqueueBatch(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	h.enqueue(time.Minute, lreqFor(test1))
	h.enqueue(2*time.Minute, lreqFor(test2))
	at(h.env, 150*time.Second, func() {
		msgs := h.rec.laneMessages()[test2.WorkflowID()]
		require.NotEmpty(t, msgs)
		require.NotEqual(t, LaneGrant, msgs[len(msgs)-1].Kind, "test/2 waits while test/1 holds the lane")
	})
	h.signal(3*time.Minute, SignalEnqueue, EnqueueBatch{Event: 1, Done: []BuildRef{test1}})
	h.deleteAt(4 * time.Minute)
	h.signal(5*time.Minute, SignalEnqueue, EnqueueBatch{Event: 2, Done: []BuildRef{test2}})
	h.run(PipelineInput{Config: appConfig})
	msgs := h.rec.laneMessages()[test2.WorkflowID()]
	require.GreaterOrEqual(t, len(msgs), 2)
	require.Equal(t, LaneGrant, msgs[1].Kind, "test/2 is granted once test/1's place came back: %+v", msgs)
}

// TestPipelineEventResultGivesLanePlacesBack: a pipeline run takes the lane
// places its events' last builds hold from the events' results
// (EventState.LaneDone); before it continues as new it hands that back to
// the events still running (SignalHandBack), which then send a batch, and
// it continues only once each was told or ended.
func TestPipelineEventResultGivesLanePlacesBack(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	var mu sync.Mutex
	var inputs []EventInput
	handedBack := map[int]bool{}
	standIn := func(ctx workflow.Context, in EventInput) (EventState, error) {
		mu.Lock()
		inputs = append(inputs, in)
		mu.Unlock()
		st := EventState{Event: in.Event, Status: StatusSuccess}
		back := workflow.GetSignalChannel(ctx, SignalHandBack)
		timer := workflow.NewTimer(ctx, 3*time.Minute)
		if in.Event.Number == 2 {
			timer = workflow.NewTimer(ctx, time.Hour)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { st.LaneDone = []BuildRef{test1} })
		sel.AddReceive(back, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			mu.Lock()
			handedBack[in.Event.Number] = true
			mu.Unlock()
		})
		sel.Select(ctx)
		return st, nil
	}
	env, rec := newEnv(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(standIn, workflow.RegisterOptions{Name: "EventWorkflow"})
	})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: PipelineWorkflowID("app")})
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit}}
	updateAt(env, 30*time.Second, UpdateStartEvent, commit)
	at(env, time.Minute, func() {
		env.SignalWorkflow(SignalEnqueue, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
	})
	at(env, 2*time.Minute, func() {
		env.SignalWorkflow(SignalEnqueue, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2)}})
	})
	updateAt(env, 4*time.Minute, UpdateStartEvent, commit)
	at(env, 5*time.Minute, func() {
		env.SetCurrentHistoryLength(continueAsNewAfter + 1)
		env.SignalWorkflow(SignalEnqueue, EnqueueBatch{Event: 2}) // wakes the loop
	})
	env.ExecuteWorkflow(PipelineWorkflow, PipelineInput{Config: appConfig})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, inputs, 2)
	for _, in := range inputs {
		require.True(t, in.DoneInResult)
	}
	// Event 1's result gave test/1's place back: test/2 was granted.
	msgs := rec.laneMessages()[test2.WorkflowID()]
	require.NotEmpty(t, msgs)
	require.Equal(t, LaneGrant, msgs[len(msgs)-1].Kind, "%+v", msgs)
	// Event 2 still ran at the continue-as-new: it was handed the duty back.
	require.Equal(t, map[int]bool{2: true}, handedBack)
	require.Len(t, rec.issuedTo(EventRef{Pipeline: "app", Number: 2}.WorkflowID(), SignalHandBack), 1)
	require.Empty(t, rec.issuedTo(EventRef{Pipeline: "app", Number: 1}.WorkflowID(), SignalHandBack))
}
