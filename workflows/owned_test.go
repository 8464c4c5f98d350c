package workflows

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/runner"
)

// The build tests run each scenario twice: in the build's own
// BuildWorkflow, and in an event that owns it (EventInput.OwnsBuilds,
// docs/option-b.md), where the same logic answers claims, queries, lane
// messages and cancels through the event.

// hostKind is where a test's build runs.
type hostKind string

const (
	// ownHost: the build's own BuildWorkflow.
	ownHost hostKind = "own"
	// eventHost: an event that owns the build (ownedBuildHost).
	eventHost hostKind = "event"
)

// eachHost runs fn once per host, as parallel subtests.
func eachHost(t *testing.T, fn func(t *testing.T, host hostKind)) {
	t.Helper()
	for _, host := range []hostKind{ownHost, eventHost} {
		t.Run(string(host), func(t *testing.T) {
			t.Parallel()
			fn(t, host)
		})
	}
}

// ownedHostResult is what ownedBuildHost returns: the build's record and
// the builds whose lane places the event gives back with its next batch.
type ownedHostResult struct {
	State BuildState `json:"state"`
	Done  []BuildRef `json:"done"`
}

// ownedBuildHost is an event reduced to hosting one build it owns: the
// event's own machinery (ownBuilds, ownedBuilds.start and recordStarted,
// the end's wait for handlers) around the build's logic, without a spec or
// lanes. EventWorkflow tests with OwnsBuilds cover the rest.
func ownedBuildHost(ctx workflow.Context, in BuildInput) (ownedHostResult, error) {
	in.Lean = true // an event that owns its builds is lean
	e := &eventRun{in: EventInput{Event: in.Build.EventRef(), Lean: true, EnqueueUpdate: true, OwnsBuilds: true}}
	if err := e.ownBuilds(ctx); err != nil {
		return ownedHostResult{}, err
	}
	ob, fut := e.owned.start(ctx, in)
	e.owned.recordStarted(ctx, []*ownedBuild{ob})
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var st BuildState
	if err := fut.Get(dctx, &st); err != nil {
		return ownedHostResult{}, err
	}
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
	return ownedHostResult{State: st, Done: e.pendingDone}, nil
}

// lane sends the build a lane message, as its host receives them.
func (h *buildHarness) lane(msg LaneMessage) {
	if h.host == eventHost {
		h.env.SignalWorkflow(SignalBuildLanes, BuildLanes{Effects: []LaneEffect{{Build: h.ref(), Msg: msg}}})
		return
	}
	h.env.SignalWorkflow(SignalLane, msg)
}

// state queries the build's record from its host.
func (h *buildHarness) state(t *testing.T) BuildState {
	t.Helper()
	if h.host == eventHost {
		return query[BuildState](t, h.env, QueryBuild, h.ref().String())
	}
	return query[BuildState](t, h.env, QueryBuild)
}

// cancel cancels the build as the API does, naming who ("": nobody).
func (h *buildHarness) cancel(by string) {
	if h.host == eventHost {
		h.env.UpdateWorkflow(UpdateCancelBuild, "", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { h.t.Errorf("cancel-build refused: %v", err) },
			OnComplete: func(_ any, err error) { require.NoError(h.t, err) },
		}, CancelBuildRequest{Build: h.ref().String(), By: by})
		return
	}
	if by != "" {
		h.env.SignalWorkflow(SignalCancelledBy, CancelledBy{User: by})
	}
	h.env.CancelWorkflow()
}

// workflowID is the ID of the workflow the build runs in.
func (h *buildHarness) workflowID() string {
	if h.host == eventHost {
		return h.ref().EventRef().WorkflowID()
	}
	return h.ref().WorkflowID()
}

// ref is the build the harness runs.
func (h *buildHarness) ref() BuildRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.build
}

// ownedEvent is an event that owns its builds (EventInput.OwnsBuilds),
// with the lanes answering its updates (updateStandIn: a grant unless
// answer says otherwise) and each RunBuild attempt doing what its job's
// step says when it starts, then ending as its job's plan says.
type ownedEvent struct {
	h  *eventHarness
	u  *updateStandIn
	up *upserts
	// onStart runs in the test's main loop when a job's attempt starts
	// (default: exec-a claims it).
	onStart map[string]func(in activities.RunBuildInput)

	mu       sync.Mutex
	runs     []activities.RunBuildInput
	ids      []string
	claims   []error
	cancelCh map[string]chan struct{}
	// blocks: jobs whose attempts run until cancelled.
	blocks map[string]bool
}

func newOwnedEvent(t *testing.T, yaml string) *ownedEvent {
	t.Helper()
	o := &ownedEvent{
		h: newEventHarness(t, yaml), up: &upserts{}, onStart: map[string]func(activities.RunBuildInput){},
		cancelCh: map[string]chan struct{}{}, blocks: map[string]bool{},
	}
	o.u = &updateStandIn{answer: func(LaneRequest) []LaneMessage { return []LaneMessage{grantMsg} }}
	o.u.install(o.h)
	o.up.install(o.h.env)
	env := o.h.env
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		in, ok := runBuildStarted(t, info, args)
		if !ok {
			return
		}
		o.mu.Lock()
		o.runs, o.ids = append(o.runs, in), append(o.ids, info.ActivityID)
		o.cancelCh[info.ActivityID] = make(chan struct{})
		step := o.onStart[in.Job]
		o.mu.Unlock()
		if step != nil {
			step(in)
			return
		}
		o.claim(in, ClaimRequest{Build: in.BuildID, Attempt: in.Attempt, Dispatch: in.Dispatch, Executor: "exec-a"})
	})
	env.SetOnActivityCanceledListener(func(info *activity.Info) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if ch, ok := o.cancelCh[info.ActivityID]; ok {
			close(ch)
			delete(o.cancelCh, info.ActivityID)
		}
	})
	env.OnActivity(acts.RunBuild, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunBuildInput) (activities.RunBuildResult, error) {
			ref, err := ParseBuildRef(in.BuildID)
			if err != nil {
				return activities.RunBuildResult{}, err
			}
			o.mu.Lock()
			ch, block := o.cancelCh[activity.GetInfo(ctx).ActivityID], o.blocks[in.Job]
			o.mu.Unlock()
			if block {
				select {
				case <-ch:
					return activities.RunBuildResult{}, temporal.NewCanceledError()
				case <-time.After(10 * time.Second):
					return activities.RunBuildResult{}, errors.New("test: attempt never cancelled")
				}
			}
			p := o.h.planFor(ref)
			res := activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusSuccess}
			if p.status == StatusFailure {
				res.Status, res.Reason = runner.StatusFailure, p.reason
			}
			return res, nil
		}).Maybe()
	return o
}

// claim sends a claim and records the build's answer.
func (o *ownedEvent) claim(_ activities.RunBuildInput, req ClaimRequest) {
	record := func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.claims = append(o.claims, err)
	}
	o.h.env.UpdateWorkflow(UpdateClaim, "", &testsuite.TestUpdateCallback{
		OnReject:   record,
		OnComplete: func(_ any, err error) { record(err) },
	}, req)
}

func (o *ownedEvent) run() EventState {
	in := eventInput(commitOnMain)
	in.EnqueueUpdate, in.OwnsBuilds = true, true
	o.h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: in.Event.WorkflowID()})
	return o.h.run(in)
}

// openBuilds lists the SAOpenBuilds upserts ("-": an upsert that only
// removes: the SDK's mock hides which attribute).
func (o *ownedEvent) openBuilds() []string {
	o.up.mu.Lock()
	defer o.up.mu.Unlock()
	var out []string
	for _, sa := range o.up.sas {
		if sa.Size() == 0 {
			out = append(out, "-")
		}
		if list, ok := sa.GetKeywordList(SAOpenBuilds); ok {
			out = append(out, strings.Join(list, ","))
		}
	}
	return out
}

// ownedMemos are the memo upserts' summaries of build id, in order.
func (o *ownedEvent) ownedMemos(id string) []BuildSummary {
	o.up.mu.Lock()
	defer o.up.mu.Unlock()
	var out []BuildSummary
	for _, m := range o.up.memos {
		if s, ok := m[OwnedBuildMemo(id)]; ok {
			out = append(out, s.(BuildSummary))
		}
	}
	return out
}

// TestEventOwnsItsBuilds: an event with OwnsBuilds runs each build of its
// graph itself — no child workflow — dispatching RunBuild with the event as
// the workflow to claim, taking the claims that name the build, giving each
// ended build's lane place back with its next batch (the last in its
// result), keeping each build's summary in its memo and its unfinished
// builds' statuses in SAOpenBuilds, and returning every build's record.
func TestEventOwnsItsBuilds(t *testing.T) {
	t.Parallel()
	o := newOwnedEvent(t, chainSpec)
	st := o.run()
	require.Equal(t, StatusSuccess, st.Status, st.Reason)

	o.h.rec.mu.Lock()
	require.Empty(t, o.h.rec.children, "no build workflow starts")
	o.h.rec.mu.Unlock()
	a, b := BuildRef{Pipeline: "app", Job: "a", Event: 1}, BuildRef{Pipeline: "app", Job: "b", Event: 1}
	require.Len(t, st.Builds, 2)
	for i, want := range []BuildRef{a, b} {
		got := st.Builds[i]
		require.Equal(t, want, got.Build)
		require.Equal(t, StatusSuccess, got.Status, got.Reason)
		require.Equal(t, CauseSucceeded, got.Cause)
		require.Equal(t, "exec-a", got.Executor)
		require.Len(t, got.Attempts, 1)
		require.False(t, got.QueuedTime.IsZero(), "granted at once, it was dispatched")
	}
	require.Equal(t, []error{nil, nil}, o.claims)
	require.Len(t, o.runs, 2)
	for i, want := range []BuildRef{a, b} {
		require.Equal(t, "event/app/1", o.runs[i].WorkflowID, "the executor claims from the event")
		require.Equal(t, want.String(), o.runs[i].BuildID)
		require.Equal(t, want.String()+"/1", o.ids[i], "the activity is named after its build and dispatch")
	}
	// Lane places: a's with b's request, b's in the result.
	require.Len(t, o.u.arg, 2)
	require.Equal(t, []BuildRef{a}, o.u.arg[1].Done)
	require.Equal(t, []BuildRef{b}, st.LaneDone)
	require.Empty(t, o.h.rec.signalsTo(PipelineWorkflowID("app"), SignalBuildDone), "no build-done signal")

	// Visibility: one token per status and queue while builds are open,
	// upserted once per change: a's end rides on b's creation, b's on the
	// event's final status.
	require.Equal(t, []string{"QUEUED@default", "RUNNING@default", "QUEUED@default", "RUNNING@default"}, o.openBuilds())
	o.up.mu.Lock()
	final, first, firstMemo := o.up.sas[len(o.up.sas)-1], o.up.sas[0], o.up.memos[0]
	o.up.mu.Unlock()
	// The event's own first upserts ride on its first builds': one memo
	// (where statuses go, the build's summary), one search attribute
	// upsert (the queues it reaches, its commit, its open builds).
	require.Contains(t, firstMemo, MemoStatuses)
	require.Contains(t, firstMemo, OwnedBuildMemo(a.String()))
	queues, _ := first.GetKeywordList(SAQueues)
	require.Equal(t, []string{"default"}, queues)
	sha, _ := first.GetKeyword(SASHA)
	require.Equal(t, eventSHA, sha)
	open, _ := first.GetKeywordList(SAOpenBuilds)
	require.Equal(t, []string{"QUEUED@default"}, open)
	status, _ := final.GetKeyword(SAStatus)
	require.Equal(t, string(StatusSuccess), status)
	memos := o.ownedMemos(a.String())
	require.NotEmpty(t, memos)
	created := memos[0]
	require.Equal(t, StatusQueued, created.Status)
	require.Equal(t, "default", created.Queue)
	require.Equal(t, WaitSlotBusy, created.WaitCode)
	require.False(t, created.QueuedTime.IsZero())
	last := memos[len(memos)-1]
	require.Equal(t, StatusSuccess, last.Status)
	require.Equal(t, CauseSucceeded, last.Cause)
	require.Equal(t, "exec-a", last.Executor)

	// Its builds are queried through the event, also once it ended.
	got := query[BuildState](t, o.h.env, QueryBuild, "build/"+b.String())
	require.Equal(t, StatusSuccess, got.Status)
	_, err := o.h.env.QueryWorkflow(QueryBuild, "app/c/1")
	require.ErrorContains(t, err, "event app/1 has no build app/c/1")
}

// TestEventOwnedBuildsClaimsCancelsAndLanes: what reaches one build of an
// event that owns it — claims naming it (a claim naming none or another
// build is refused), a cancel naming who (another build's cancel is
// refused), the lanes' messages by SignalBuildLanes, a deleted queue.
func TestEventOwnedBuildsClaimsCancelsAndLanes(t *testing.T) {
	t.Parallel()
	t.Run("claims name the build", func(t *testing.T) {
		t.Parallel()
		o := newOwnedEvent(t, chainSpec)
		o.onStart["a"] = func(in activities.RunBuildInput) {
			o.claim(in, ClaimRequest{Attempt: in.Attempt, Dispatch: in.Dispatch, Executor: "exec-old"})
			o.claim(in, ClaimRequest{Build: "app/zz/1", Attempt: in.Attempt, Dispatch: in.Dispatch, Executor: "exec-a"})
			o.claim(in, ClaimRequest{Build: in.BuildID, Attempt: in.Attempt, Dispatch: in.Dispatch, Executor: "exec-a"})
		}
		st := o.run()
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Len(t, o.claims, 4)
		require.ErrorContains(t, o.claims[0], "the claim names no build")
		require.ErrorContains(t, o.claims[1], "event app/1 has no build app/zz/1")
		require.NoError(t, o.claims[2])
		require.NoError(t, o.claims[3], "b's claim")
	})
	t.Run("cancel one build", func(t *testing.T) {
		t.Parallel()
		o := newOwnedEvent(t, chainSpec)
		o.blocks["a"] = true
		other := &updateResult{}
		o.onStart["a"] = func(in activities.RunBuildInput) {
			o.claim(in, ClaimRequest{Build: in.BuildID, Attempt: in.Attempt, Dispatch: in.Dispatch, Executor: "exec-a"})
			sendUpdate(o.h.env, other, UpdateCancelBuild, CancelBuildRequest{Build: "app/b/1", By: "erin"})
			sendUpdate(o.h.env, &updateResult{}, UpdateCancelBuild, CancelBuildRequest{Build: in.BuildID, By: "dana"})
		}
		st := o.run()
		require.ErrorContains(t, other.Rejected, "event app/1 has no build app/b/1", "b was not created yet")
		require.Equal(t, StatusAborted, st.Status)
		require.Len(t, st.Builds, 1)
		a := st.Builds[0]
		require.Equal(t, StatusAborted, a.Status)
		require.Equal(t, "cancelled while running on exec-a", a.Reason)
		require.Equal(t, CauseCancelled, a.Cause)
		require.Equal(t, &CauseInfo{By: "dana"}, a.CauseInfo)
		require.Equal(t, "not run: requires a, which ended ABORTED", outcomeOf(t, st, "b").Reason)
		require.Equal(t, []BuildRef{a.Build}, st.LaneDone, "its lane place goes back")
	})
	t.Run("the lanes' messages", func(t *testing.T) {
		t.Parallel()
		o := newOwnedEvent(t, chainSpec)
		o.u.answer = func(r LaneRequest) []LaneMessage {
			if r.Build.Job == "a" {
				return []LaneMessage{sameJobBlock(BuildRef{Pipeline: "app", Job: "a", Event: 0})}
			}
			return []LaneMessage{grantMsg}
		}
		aRef := BuildRef{Pipeline: "app", Job: "a", Event: 1}
		at(o.h.env, time.Minute, func() {
			got := query[BuildState](t, o.h.env, QueryBuild, aRef.String())
			require.Equal(t, StatusBlocked, got.Status)
			o.h.env.SignalWorkflow(SignalBuildLanes, BuildLanes{Effects: []LaneEffect{
				{Build: BuildRef{Pipeline: "app", Job: "x", Event: 1}, Msg: grantMsg}, // not its build: dropped
				{Build: aRef, Msg: grantMsg},
			}})
		})
		st := o.run()
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, wfT0.Add(time.Minute), st.Builds[0].QueuedTime, "dispatched when granted")
		// Created waiting in its lane, told blocked, granted: waiting for
		// a slot, then running.
		require.Equal(t, []string{"QUEUED@default", "BLOCKED@default", "QUEUED@default", "RUNNING@default", "QUEUED@default", "RUNNING@default"}, o.openBuilds())
	})
	t.Run("its queue deleted", func(t *testing.T) {
		t.Parallel()
		o := newOwnedEvent(t, chainSpec)
		o.blocks["a"] = true
		o.onStart["a"] = func(activities.RunBuildInput) {
			o.h.env.SignalWorkflow(SignalQueueDeleted, QueueDeleted{Queue: "default", Reason: "queue default was deleted"})
		}
		st := o.run()
		require.Equal(t, StatusFailure, st.Status)
		a := st.Builds[0]
		require.Equal(t, StatusFailure, a.Status)
		require.Equal(t, "queue default was deleted", a.Reason)
		require.Equal(t, CauseRefused, a.Cause)
	})
}

// TestEventOwnedBuildsWithoutTheLanesAnswer: when the enqueue update
// fails, an event that owns its builds starts them waiting and hands them
// to the lanes by signal; the lanes' grant then comes by SignalBuildLanes.
func TestEventOwnedBuildsWithoutTheLanesAnswer(t *testing.T) {
	t.Parallel()
	o := newOwnedEvent(t, chainSpec)
	o.u.err = temporal.NewNonRetryableApplicationError("this worker sends no pipeline updates", activities.ErrTypeNoUpdater, nil)
	grant := func(job string) func() {
		return func() {
			o.h.env.SignalWorkflow(SignalBuildLanes, BuildLanes{Effects: []LaneEffect{{Build: BuildRef{Pipeline: "app", Job: job, Event: 1}, Msg: grantMsg}}})
		}
	}
	at(o.h.env, time.Minute, grant("a"))
	at(o.h.env, 2*time.Minute, grant("b"))
	st := o.run()
	require.Equal(t, StatusSuccess, st.Status, st.Reason)
	signalled := o.h.rec.signalsTo(PipelineWorkflowID("app"), SignalEnqueue)
	require.Len(t, signalled, 2)
	a, b := st.Builds[0].Build, st.Builds[1].Build
	first, second := signalled[0].(EnqueueBatch), signalled[1].(EnqueueBatch)
	require.Len(t, first.Requests, 1)
	require.Equal(t, a, first.Requests[0].Build)
	require.Len(t, second.Requests, 1)
	require.Equal(t, b, second.Requests[0].Build)
	require.Equal(t, []BuildRef{a}, second.Done, "a's place goes back with b's request")
	require.Equal(t, wfT0.Add(time.Minute), st.Builds[0].QueuedTime)
	require.Equal(t, wfT0.Add(2*time.Minute), st.Builds[1].QueuedTime)
}

// TestPipelineStartsEventsThatOwnTheirBuilds: a pipeline configured with
// BuildsInEvents starts its events with OwnsBuilds and remembers which
// (PipelineState.OwnedEvents); configured without it again, it starts
// them as before.
func TestPipelineStartsEventsThatOwnTheirBuilds(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	owned := appConfig
	owned.BuildsInEvents = true
	commit := StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, Branch: "main"}}
	h.startEvent(time.Minute, commit)
	h.startEvent(2*time.Minute, commit)
	configured := updateAt(h.env, 3*time.Minute, UpdateConfigure, appConfig)
	h.startEvent(4*time.Minute, commit)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: owned})

	require.True(t, configured.Done)
	require.NoError(t, configured.Err)
	require.Len(t, h.events, 3)
	require.True(t, h.events[0].Input.OwnsBuilds)
	require.True(t, h.events[1].Input.OwnsBuilds)
	require.False(t, h.events[2].Input.OwnsBuilds, "configured without BuildsInEvents")
	st := PipelineState{OwnedEvents: []EventRange{{From: 1, To: 3}}}
	for n, want := range map[int]bool{0: false, 1: true, 2: true, 3: false} {
		require.Equal(t, want, st.ownsBuildsOf(n), "event %d", n)
	}
	st.markOwned(5)
	st.markOwned(6)
	require.Equal(t, []EventRange{{From: 1, To: 3}, {From: 5, To: 7}}, st.OwnedEvents)
}

// TestPipelineTellsEventsOfTheirBuilds: the lanes' messages to builds
// whose event runs them go to that event, one SignalBuildLanes per event
// and pass, never to a build workflow, and such builds are not kept as
// starting (their event exists); when the event is gone, its builds leave
// the lanes.
func TestPipelineTellsEventsOfTheirBuilds(t *testing.T) {
	t.Parallel()
	test1, test2, test3 := appBuild("test", 1), appBuild("test", 2), appBuild("test", 3)
	h := newPipelineHarness(t)
	h.rec.fail = func(workflowID, name string) error {
		if workflowID == (EventRef{Pipeline: "app", Number: 3}).WorkflowID() && name == SignalBuildLanes {
			return &temporal.UnknownExternalWorkflowExecutionError{} // event 3 has ended
		}
		return nil
	}
	first := h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
	second := h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2)}})
	at(h.env, 150*time.Second, func() {
		st := query[PipelineInfo](t, h.env, QueryPipeline)
		en, _ := st.Lanes.find(test2)
		require.NotNil(t, en)
	})
	h.signal(3*time.Minute, SignalEnqueue, EnqueueBatch{Event: 1, Done: []BuildRef{test1}})
	// Event 3's build waits behind test/2, but event 3 is gone: the
	// lanes forget its build.
	h.enqueue(4*time.Minute, lreqFor(test3, noCollapse))
	at(h.env, 270*time.Second, func() {
		st := query[PipelineInfo](t, h.env, QueryPipeline)
		en, _ := st.Lanes.find(test3)
		require.Nil(t, en, "the build of an event that is gone left its lane")
	})
	h.signal(5*time.Minute, SignalEnqueue, EnqueueBatch{Event: 2, Done: []BuildRef{test2}})
	h.deleteAt(6 * time.Minute)
	h.run(PipelineInput{Config: appConfig, State: &PipelineState{NextEvent: 4, OwnedEvents: []EventRange{{From: 1, To: 4}}}})

	require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test1.String(): {grantMsg}}}, enqueueAnswer(t, first))
	giveWay := LaneMessage{Kind: LaneStatus, Status: StatusQueued, Code: WaitLaneOrder, Reason: "waiting for build app/test/1 to give way"}
	require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {giveWay}}}, enqueueAnswer(t, second))
	collapse := LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Into: test2.String(), Reason: "collapsed into build " + test2.String()}
	require.Empty(t, h.rec.laneMessages(), "no build workflow is signalled")
	ev := func(n int) string { return EventRef{Pipeline: "app", Number: n}.WorkflowID() }
	require.Equal(t, []any{BuildLanes{Effects: []LaneEffect{{Build: test1, Msg: collapse}}}}, h.rec.signalsTo(ev(1), SignalBuildLanes))
	require.Equal(t, []any{BuildLanes{Effects: []LaneEffect{{Build: test2, Msg: grantMsg}}}}, h.rec.signalsTo(ev(2), SignalBuildLanes))
	require.Equal(t, []any{BuildLanes{Effects: []LaneEffect{{Build: test3, Msg: sameJobBlock(test2)}}}}, h.rec.signalsTo(ev(3), SignalBuildLanes),
		"told once that it waits; never granted")
}

// An event that runs its builds itself runs at most maxOwnedBuildsPerEvent
// of them (its history holds every build's); a job past the limit is not
// run and says why.
func TestOwnedEventBuildLimit(t *testing.T) {
	t.Parallel()
	var spec strings.Builder
	spec.WriteString("shared:\n  image: alpine\n  steps:\n    - run: ./run.sh\n  annotations:\n    screwdriver.cd/collapseBuilds: false\n    screwdriver.cd/blockedBySameJob: false\njobs:\n")
	var vals []string
	for i := range pipeline.MaxPermutations {
		vals = append(vals, strconv.Itoa(i+1))
	}
	jobs := maxOwnedBuildsPerEvent/pipeline.MaxPermutations + 1
	for i := range jobs {
		fmt.Fprintf(&spec, "  j%02d:\n    requires: [~commit]\n    matrix:\n      N: [%s]\n", i+1, strings.Join(vals, ", "))
	}
	o := newOwnedEvent(t, spec.String())
	st := o.run()
	require.Equal(t, StatusSuccess, st.Status, st.Reason)
	require.Len(t, st.Builds, maxOwnedBuildsPerEvent)
	skipped := 0
	for _, j := range st.Jobs {
		if j.Status == StatusSkipped {
			skipped++
			require.Contains(t, j.Reason, fmt.Sprintf("reached its limit of %d builds", maxOwnedBuildsPerEvent))
			require.Empty(t, j.Builds)
		}
	}
	require.Equal(t, 1, skipped, "the job past the limit")
}
