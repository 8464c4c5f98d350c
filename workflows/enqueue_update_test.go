package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
)

// Tests of the enqueue-by-update path: an event hands its builds to the
// lanes by UpdateEnqueue and starts them with the lanes' answer
// (EventInput.EnqueueUpdate, changeEnqueueUpdate).

// enqueueByUpdate sends the pipeline an UpdateEnqueue d after the start.
func (h *pipelineHarness) enqueueByUpdate(d time.Duration, batch EnqueueBatch) *updateResult {
	return updateAt(h.env, d, UpdateEnqueue, batch)
}

func enqueueAnswer(t *testing.T, res *updateResult) EnqueueAnswer {
	t.Helper()
	require.True(t, res.Done, "update did not finish")
	require.NoError(t, res.Rejected)
	require.NoError(t, res.Err)
	out, ok := res.Value.(EnqueueAnswer)
	require.True(t, ok, "update returned %T", res.Value)
	return out
}

func sameJobBlock(b BuildRef) LaneMessage {
	return LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build " + b.String() + " of the same job"}
}

// TestPipelineEnqueueUpdateAnswersItsBuilds: the lanes' messages to the
// builds of an UpdateEnqueue batch are its answer, not signals (their
// workflows do not exist yet): a grant for the first build of a job, a
// wait for the next; when the first build's end arrives, however it comes,
// the next is granted by signal.
func TestPipelineEnqueueUpdateAnswersItsBuilds(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	// Each way test/1's end may come; the returned check runs after the run.
	ends := []struct {
		name string
		end  func(h *pipelineHarness, d time.Duration) (check func(t *testing.T))
	}{
		{"build-done signal", func(h *pipelineHarness, d time.Duration) func(*testing.T) {
			h.done(d, test1, StatusSuccess)
			return nil
		}},
		{"done in a later signalled batch", func(h *pipelineHarness, d time.Duration) func(*testing.T) {
			h.signal(d, SignalEnqueue, EnqueueBatch{Event: 1, Done: []BuildRef{test1}})
			return nil
		}},
		{"done in a later update", func(h *pipelineHarness, d time.Duration) func(*testing.T) {
			res := h.enqueueByUpdate(d, EnqueueBatch{Event: 1, Done: []BuildRef{test1}})
			return func(t *testing.T) {
				require.Empty(t, enqueueAnswer(t, res).Messages, "the batch names no build to answer")
			}
		}},
	}
	for _, tc := range ends {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			first := h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
			second := h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			at(h.env, 150*time.Second, func() {
				require.Empty(t, h.rec.laneMessages(), "answered builds are not signalled")
				info := query[PipelineInfo](t, h.env, QueryPipeline)
				require.Equal(t, 2, info.Lanes.Len())
				for _, b := range []BuildRef{test1, test2} {
					en, _ := info.Lanes.find(b)
					require.NotNil(t, en, "the lanes hold %s", b)
					require.True(t, en.ByUpdate, "%s came by update", b)
				}
			})
			check := tc.end(h, 3*time.Minute)
			h.done(4*time.Minute, test2, StatusSuccess)
			h.deleteAt(5 * time.Minute)
			h.run(PipelineInput{Config: appConfig})

			require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test1.String(): {grantMsg}}}, enqueueAnswer(t, first))
			require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {sameJobBlock(test1)}}}, enqueueAnswer(t, second))
			require.Equal(t, map[string][]LaneMessage{test2.WorkflowID(): {grantMsg}}, h.rec.laneMessages(),
				"test/2 is granted by signal once test/1 ended; test/1 is never signalled")
			if check != nil {
				check(t)
			}
		})
	}
}

// TestPipelineEnqueueUpdateSignalsOtherBuilds: what the batch makes the
// lanes tell builds outside it goes out as signals (here the collapse of
// an older build granted but not claimed).
func TestPipelineEnqueueUpdateSignalsOtherBuilds(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	h := newPipelineHarness(t)
	h.enqueue(time.Minute, lreqFor(test1))
	second := h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2)}})
	h.done(3*time.Minute, test1, StatusCollapsed)
	h.done(4*time.Minute, test2, StatusSuccess)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	giveWay := LaneMessage{Kind: LaneStatus, Status: StatusQueued, Code: WaitLaneOrder, Reason: "waiting for build app/test/1 to give way"}
	require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {giveWay}}}, enqueueAnswer(t, second))
	collapse := LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Into: test2.String(), Reason: "collapsed into build " + test2.String()}
	require.Equal(t, map[string][]LaneMessage{
		test1.WorkflowID(): {grantMsg, collapse},
		test2.WorkflowID(): {grantMsg},
	}, h.rec.laneMessages())
}

// failingLane makes the lane signals to one build fail as if its workflow
// did not exist (the first n of them; n < 0: all), and records when each
// was sent.
type failingLane struct {
	mu    sync.Mutex
	build BuildRef
	n     int
	sent  []time.Time
}

func (f *failingLane) install(h *pipelineHarness) {
	h.rec.fail = func(workflowID, name string) error {
		if workflowID != f.build.WorkflowID() || name != SignalLane {
			return nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sent = append(f.sent, h.env.Now())
		if f.n < 0 || len(f.sent) <= f.n {
			return &temporal.UnknownExternalWorkflowExecutionError{}
		}
		return nil
	}
}

func (f *failingLane) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.sent...)
}

// TestPipelineResendsToABuildStillStarting: a lane signal to a build that
// came by update and whose workflow does not exist yet (its event starts
// it right after the answer) is sent again a second later, and the lanes
// keep the build; a build that came by signal and cannot be signalled has
// ended, so the lanes drop it (as before); and a build that came by update
// but still cannot be signalled a minute after it came is dropped too.
func TestPipelineResendsToABuildStillStarting(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	const (
		enqueued = 2 * time.Minute
		freed    = enqueued + 10*time.Second // test/1 ends: test/2 is granted
	)
	tests := []struct {
		name     string
		byUpdate bool
		failures int // -1: every signal fails
		// wantSent are when the lane signals to test/2 were sent (after the
		// start).
		wantSent []time.Duration
		// wantHeld: the lanes still hold test/2 at the check.
		wantHeld bool
		// endsAt: test/2's end reaches the lanes then (0: at the end).
		endsAt time.Duration
	}{
		{name: "by update, starting", byUpdate: true, failures: 2, wantSent: []time.Duration{freed, freed + resendAfter, freed + 2*resendAfter}, wantHeld: true},
		// Its wait status, sent when it came, fails: it is dropped at once.
		{name: "by signal", byUpdate: false, failures: 2, wantSent: []time.Duration{enqueued}},
		{name: "by update, never started", byUpdate: true, failures: -1},
		// Its end came before the resend: nothing is sent again.
		{name: "by update, ended meanwhile", byUpdate: true, failures: -1, wantSent: []time.Duration{freed}, endsAt: freed + resendAfter/2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			f := &failingLane{build: test2, n: tc.failures}
			f.install(h)
			h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
			req := lreqFor(test2, noCollapse)
			if tc.byUpdate {
				h.enqueueByUpdate(enqueued, EnqueueBatch{Event: 2, Requests: []LaneRequest{req}})
			} else {
				h.enqueue(enqueued, req)
			}
			h.done(freed, test1, StatusSuccess)
			if tc.endsAt > 0 {
				h.done(tc.endsAt, test2, StatusAborted)
			}
			// Past startGrace: whatever was to be resent was.
			check := enqueued + startGrace + 30*time.Second
			at(h.env, check, func() {
				info := query[PipelineInfo](t, h.env, QueryPipeline)
				en, active := info.Lanes.find(test2)
				if !tc.wantHeld {
					require.Nil(t, en, "the lanes dropped test/2")
					return
				}
				require.NotNil(t, en, "the lanes keep test/2")
				require.True(t, active, "test/2 holds its grant")
			})
			h.done(check+time.Minute, test2, StatusSuccess)
			h.deleteAt(check + 2*time.Minute)
			h.run(PipelineInput{Config: appConfig})

			sent := f.times()
			if tc.wantSent != nil {
				var got []time.Duration
				for _, s := range sent {
					got = append(got, s.Sub(wfT0))
				}
				require.Equal(t, tc.wantSent, got, "lane signals sent to test/2")
			} else {
				// Sent again every resendAfter while within startGrace of
				// its enqueue, then dropped.
				require.Greater(t, len(sent), 10, "sent %d times", len(sent))
				for i, s := range sent {
					require.True(t, s.Before(wfT0.Add(enqueued+startGrace+resendAfter)), "grant %d sent at %s, past the grace", i, s.Sub(wfT0))
				}
			}
			if tc.byUpdate {
				for _, m := range h.rec.laneMessages()[test2.WorkflowID()] {
					require.Equal(t, grantMsg, m, "only the grant is sent again")
				}
			}
		})
	}
}

// TestPipelineRestatesADuplicateRequest: a request for a build the lanes
// already hold (its event sends the batch again by signal when it could
// not learn the update's answer) is answered with what the lanes last
// told it; a run recorded before changeEnqueueUpdate ignores it.
func TestPipelineRestatesADuplicateRequest(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	for _, restates := range []bool{true, false} {
		name := "restated"
		if !restates {
			name = "before changeEnqueueUpdate"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			if restates {
				h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
				h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			} else {
				h.env.OnGetVersion(changeEnqueueUpdate, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				h.enqueue(time.Minute, lreqFor(test1))
				h.enqueue(2*time.Minute, lreqFor(test2, noCollapse))
			}
			before := map[string][]LaneMessage{}
			at(h.env, 150*time.Second, func() { before = h.rec.laneMessages() })
			// Both again, by signal.
			h.signal(3*time.Minute, SignalEnqueue, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
			h.signal(4*time.Minute, SignalEnqueue, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			var again *updateResult
			if restates {
				// And by update: the answer restates too.
				again = h.enqueueByUpdate(5*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			}
			h.done(6*time.Minute, test1, StatusSuccess)
			h.done(7*time.Minute, test2, StatusSuccess)
			h.deleteAt(8 * time.Minute)
			h.run(PipelineInput{Config: appConfig})

			after := h.rec.laneMessages()
			if !restates {
				require.Equal(t, map[string][]LaneMessage{
					test1.WorkflowID(): {grantMsg},
					test2.WorkflowID(): {sameJobBlock(test1), grantMsg},
				}, after, "the duplicates are ignored")
				return
			}
			require.Empty(t, before, "answered by update, not signalled")
			require.Equal(t, map[string][]LaneMessage{
				test1.WorkflowID(): {grantMsg},                      // active: its grant
				test2.WorkflowID(): {sameJobBlock(test1), grantMsg}, // waiting: its last status, then its grant
			}, after)
			require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {sameJobBlock(test1)}}}, enqueueAnswer(t, again))
		})
	}
}

func TestLanesRestate(t *testing.T) {
	t.Parallel()
	j1, j2, j3, other := bref("j", 1), bref("j", 2), bref("j", 3), bref("k", 1)
	l := &Lanes{}
	require.Equal(t, []LaneEffect{grantFx(j1)}, l.Enqueue(lreq(j1), laneT0))
	blocked := statusFx(j2, StatusBlocked, "blocked by build p/j/1 of the same job")
	require.Equal(t, []LaneEffect{blocked}, l.Enqueue(lreq(j2, noCollapse), laneT0))
	// Added, not yet evaluated: it was told nothing.
	require.True(t, l.Add(lreq(j3, noCollapse), laneT0))

	for _, tc := range []struct {
		name string
		b    BuildRef
		want LaneEffect
		ok   bool
	}{
		{name: "active: its grant", b: j1, want: grantFx(j1), ok: true},
		{name: "waiting: its last status", b: j2, want: blocked, ok: true},
		{name: "told nothing yet", b: j3},
		{name: "not in the lanes", b: other},
	} {
		got, ok := l.restate(tc.b)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
	// A restatement changes nothing: the lanes decide as before.
	require.Equal(t, []LaneEffect{statusFx(j3, StatusBlocked, "waiting behind build p/j/2 of the same job")}, l.Evaluate(laneT0))
	require.Equal(t, []LaneEffect{grantFx(j2), statusFx(j3, StatusBlocked, "blocked by build p/j/2 of the same job")}, l.Done(j1, laneT0))
	got, ok := l.restate(j2)
	require.True(t, ok)
	require.Equal(t, grantFx(j2), got, "granted since: its grant")
}

// updateStandIn answers the event's UpdatePipeline local activity, as the
// pipeline would (or fails it).
type updateStandIn struct {
	mu     sync.Mutex
	calls  []activities.UpdatePipelineInput
	arg    []EnqueueBatch
	answer func(LaneRequest) []LaneMessage
	err    error
}

func (u *updateStandIn) install(h *eventHarness) {
	h.env.OnActivity(acts.UpdatePipeline, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.UpdatePipelineInput) (json.RawMessage, error) {
			raw, err := json.Marshal(in.Arg)
			if err != nil {
				return nil, err
			}
			var batch EnqueueBatch
			if err := json.Unmarshal(raw, &batch); err != nil {
				return nil, err
			}
			u.mu.Lock()
			defer u.mu.Unlock()
			in.Arg = nil
			u.calls, u.arg = append(u.calls, in), append(u.arg, batch)
			if u.err != nil {
				return nil, u.err
			}
			ans := EnqueueAnswer{Messages: map[string][]LaneMessage{}}
			for _, r := range batch.Requests {
				if msgs := u.answer(r); len(msgs) > 0 {
					ans.Messages[r.Build.String()] = msgs
				}
			}
			return json.Marshal(ans)
		}).Maybe()
}

func withoutSync(b EnqueueBatch) EnqueueBatch {
	b.Sync = nil
	return b
}

// chainSpec: b runs after a.
const chainSpec = `
shared:
  image: alpine
  steps:
    - run: ./run.sh
jobs:
  a: {requires: [~commit]}
  b: {requires: [a]}
`

// TestEventEnqueueUpdateStartsBuildsWithTheLanesAnswer: with
// EnqueueUpdate an event hands each batch to the lanes through the
// UpdatePipeline local activity, before it starts the batch's builds, and
// starts each with the lanes' answer: a build granted at once starts
// dispatched (DispatchedAt, SADispatchedAt and the slot-wait memo at its
// start). When the update fails, the builds start without an answer and
// the batch goes by signal.
func TestEventEnqueueUpdateStartsBuildsWithTheLanesAnswer(t *testing.T) {
	t.Parallel()
	blocked := LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build app/a/0 of the same job"}
	noUpdater := temporal.NewNonRetryableApplicationError("this worker sends no pipeline updates", activities.ErrTypeNoUpdater, nil)
	tests := []struct {
		name   string
		answer []LaneMessage
		err    error
	}{
		{name: "granted", answer: []LaneMessage{grantMsg}},
		{name: "waiting", answer: []LaneMessage{blocked}},
		{name: "update fails", err: noUpdater},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, chainSpec)
			h.plans["a"] = buildPlan{status: StatusSuccess, laneRelease: true}
			u := &updateStandIn{answer: func(LaneRequest) []LaneMessage { return tc.answer }, err: tc.err}
			u.install(h)
			in := eventInput(commitOnMain)
			in.EnqueueUpdate = true
			st := h.run(in)
			require.Equal(t, StatusSuccess, st.Status, st.Reason)

			a, b := h.runsOf("a"), h.runsOf("b")
			require.Len(t, a, 1)
			require.Len(t, b, 1)
			ev := EventRef{Pipeline: "app", Number: 1}
			// One update per batch, each with its own ID, whatever its fate.
			require.Len(t, u.calls, 2)
			for i, c := range u.calls {
				require.Equal(t, activities.UpdatePipelineInput{
					Pipeline: "app", Name: UpdateEnqueue, UpdateID: fmt.Sprintf("%s/enqueue/%d", ev, i+1),
				}, c)
			}
			// The first batch carries the spec's sync of the main branch's
			// commit, as a signalled one would.
			require.NotNil(t, u.arg[0].Sync)
			require.Equal(t, eventSHA, u.arg[0].Sync.SHA)
			require.Equal(t, EnqueueBatch{Event: 1, Requests: []LaneRequest{a[0].Input.Lane}}, withoutSync(u.arg[0]))
			signalled := h.rec.signalsTo(PipelineWorkflowID("app"), SignalEnqueue)
			if tc.err != nil {
				// The batches went by signal, their builds started without
				// an answer.
				require.Equal(t, EnqueueBatch{Event: 1, Done: []BuildRef{a[0].Input.Build}, Requests: []LaneRequest{b[0].Input.Lane}}, u.arg[1])
				require.Len(t, signalled, 2)
				require.Equal(t, u.arg[0], signalled[0], "the first batch goes by signal, sync included")
				require.Equal(t, EnqueueBatch{Event: 1, Done: []BuildRef{a[0].Input.Build}, Requests: []LaneRequest{b[0].Input.Lane}}, signalled[1])
				for _, r := range append(a, b...) {
					require.Nil(t, r.Input.Initial, r.WorkflowID)
					require.True(t, r.Input.DispatchedAt.IsZero(), r.WorkflowID)
				}
				return
			}
			// The second batch gives a's place back with b's request.
			require.Equal(t, EnqueueBatch{Event: 1, Done: []BuildRef{a[0].Input.Build}, Requests: []LaneRequest{b[0].Input.Lane}}, u.arg[1])
			require.Empty(t, signalled, "no batch goes by signal")
			for _, r := range append(a, b...) {
				require.Equal(t, tc.answer, r.Input.Initial, r.WorkflowID)
				opts := h.rec.childOptions(r.WorkflowID)
				dispatchedAt, hasSA := opts.TypedSearchAttributes.GetTime(SADispatchedAt)
				if tc.answer[0].Kind != LaneGrant {
					require.True(t, r.Input.DispatchedAt.IsZero(), r.WorkflowID)
					require.False(t, hasSA, "%s starts waiting in its lane", r.WorkflowID)
					require.Equal(t, map[string]any{MemoBuild: BuildSummary{Reason: laneWaitReason, WaitCode: WaitLaneOrder}}, opts.Memo)
					continue
				}
				// Granted: it starts dispatched.
				require.False(t, r.Input.DispatchedAt.IsZero(), r.WorkflowID)
				require.False(t, r.Input.DispatchedAt.After(r.Start), "dispatched at %s, started at %s", r.Input.DispatchedAt, r.Start)
				require.True(t, hasSA, "%s starts with %s", r.WorkflowID, SADispatchedAt.GetName())
				require.True(t, r.Input.DispatchedAt.Equal(dispatchedAt))
				status, _ := opts.TypedSearchAttributes.GetKeyword(SAStatus)
				require.Equal(t, string(StatusQueued), status)
				require.Equal(t, map[string]any{MemoBuild: BuildSummary{
					Reason: slotWaitReason(r.Input.Queue), WaitCode: WaitSlotBusy, QueuedTime: r.Input.DispatchedAt,
				}}, opts.Memo)
			}
		})
	}
}

// TestEventEnqueueUpdateGivesBackThePlaceOfABuildThatNeverStarted: the
// lanes took a build by update before its workflow started; when its
// workflow cannot start, nobody else gives its place back, so the event
// does (here in its result: EventState.LaneDone).
func TestEventEnqueueUpdateGivesBackThePlaceOfABuildThatNeverStarted(t *testing.T) {
	t.Parallel()
	const oneJob = `
shared:
  image: alpine
  steps:
    - run: ./run.sh
jobs:
  a: {requires: [~commit]}
`
	for _, byUpdate := range []bool{true, false} {
		t.Run(fmt.Sprintf("byUpdate=%v", byUpdate), func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, oneJob)
			h.env.OnWorkflow("BuildWorkflow", mock.Anything, mock.Anything).Return(
				func(workflow.Context, BuildInput) (BuildState, error) {
					return BuildState{}, testsuite.ErrMockStartChildWorkflowFailed
				})
			u := &updateStandIn{answer: func(LaneRequest) []LaneMessage { return []LaneMessage{grantMsg} }}
			u.install(h)
			in := eventInput(commitOnMain)
			in.EnqueueUpdate = byUpdate
			st := h.run(in)

			a := BuildRef{Pipeline: "app", Job: "a", Event: 1}
			require.Equal(t, StatusFailure, outcomeOf(t, st, "a").Status)
			if !byUpdate {
				// By signal, a build is handed over once it started: a
				// build that never started was never in the lanes.
				require.Empty(t, u.calls)
				require.Empty(t, st.LaneDone)
				return
			}
			require.Len(t, u.calls, 1)
			require.Equal(t, []BuildRef{a}, st.LaneDone, "the event gives the lane place back")
		})
	}
}

// TestEventEnqueueUpdateFailedGivesBackThePlaceOfABuildThatNeverStarted:
// when the update's answer is lost (it may have reached the lanes) and the
// build then cannot start, the event gives back the place it may hold.
func TestEventEnqueueUpdateFailedGivesBackThePlaceOfABuildThatNeverStarted(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, "shared:\n  image: alpine\n  steps:\n    - run: ./run.sh\njobs:\n  a: {requires: [~commit]}\n")
	h.env.OnWorkflow("BuildWorkflow", mock.Anything, mock.Anything).Return(
		func(workflow.Context, BuildInput) (BuildState, error) {
			return BuildState{}, testsuite.ErrMockStartChildWorkflowFailed
		})
	u := &updateStandIn{err: errors.New("the answer was lost")}
	u.install(h)
	in := eventInput(commitOnMain)
	in.EnqueueUpdate = true
	st := h.run(in)
	require.Equal(t, StatusFailure, outcomeOf(t, st, "a").Status)
	require.NotEmpty(t, u.calls, "the update was tried")
	require.Equal(t, []BuildRef{{Pipeline: "app", Job: "a", Event: 1}}, st.LaneDone, "the event gives the place back")
}

// upserts records a build's search attribute and memo upserts.
type upserts struct {
	mu    sync.Mutex
	sas   []temporal.SearchAttributes
	memos []map[string]any
}

func (u *upserts) install(env *testsuite.TestWorkflowEnvironment) {
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.sas = append(u.sas, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil).Maybe()
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.memos = append(u.memos, args.Get(0).(map[string]any))
	}).Return(nil).Maybe()
}

// dispatchedAt lists the SADispatchedAt values upserted.
func (u *upserts) dispatchedAt() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []time.Time
	for _, sa := range u.sas {
		if v, ok := sa.GetTime(SADispatchedAt); ok {
			out = append(out, v)
		}
	}
	return out
}

func (u *upserts) memoCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.memos)
}

// TestBuildStartsDispatchedWithTheLanesGrant: a Lean build its event
// started with the lanes' grant (BuildInput.Initial) dispatches at once,
// without a signal; started with DispatchedAt, its first dispatch upserts
// neither SADispatchedAt nor its memo (its start carried both) and its
// QueuedTime is DispatchedAt. Without DispatchedAt it upserts them, as a
// build granted by signal does.
func TestBuildStartsDispatchedWithTheLanesGrant(t *testing.T) {
	t.Parallel()
	dispatched := wfT0.Add(-3 * time.Second) // when its event had the answer
	for _, pre := range []bool{true, false} {
		t.Run(fmt.Sprintf("dispatchedAt=%v", pre), func(t *testing.T) {
			t.Parallel()
			wantQueued := wfT0
			if pre {
				wantQueued = dispatched
			}
			u := &upserts{}
			var checked bool
			beforeClaim := func(h *buildHarness, in activities.RunBuildInput) {
				checked = true
				require.Equal(t, 1, in.Attempt)
				require.True(t, wfT0.Equal(h.env.Now()), "dispatched at once, not at %s", h.env.Now())
				st := query[BuildState](t, h.env, QueryBuild)
				require.Equal(t, StatusQueued, st.Status)
				require.Equal(t, slotWaitReason("gpu"), st.Reason)
				require.Equal(t, WaitSlotBusy, st.WaitCode)
				require.True(t, wantQueued.Equal(st.QueuedTime), "QueuedTime %s, want %s", st.QueuedTime, wantQueued)
				if pre {
					require.Empty(t, u.dispatchedAt(), "its start carried %s", SADispatchedAt.GetName())
					require.Zero(t, u.memoCount(), "its start carried its memo")
				} else {
					require.Equal(t, []time.Time{wfT0}, u.dispatchedAt())
					require.NotZero(t, u.memoCount())
				}
			}
			h := newBuildHarness(t, ownHost, attemptPlan{steps: []buildStep{beforeClaim, claimAs("exec-a")}, result: succeeded("exec-a")})
			u.install(h.env)
			in := buildInput()
			in.Initial = []LaneMessage{grantMsg}
			if pre {
				in.DispatchedAt = dispatched
			}
			st := h.run(in)

			require.True(t, checked, "RunBuild was scheduled")
			require.Equal(t, StatusSuccess, st.Status)
			require.True(t, wantQueued.Equal(st.QueuedTime), "QueuedTime %s", st.QueuedTime)
			require.Len(t, h.infos, 1)
			if pre {
				require.Empty(t, u.dispatchedAt())
			}
			require.Empty(t, h.rec.signalsTo(PipelineWorkflowID("app"), SignalEnqueue))
		})
	}
}

// TestBuildTakesInitialMessagesBeforeSignals: the lanes' answer to its
// event (BuildInput.Initial) is a build's first lane message; the grant
// that comes later by signal dispatches it then (no DispatchedAt).
func TestBuildTakesInitialMessagesBeforeSignals(t *testing.T) {
	t.Parallel()
	blocked := LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build app/test/6 of the same job"}
	h := newBuildHarness(t, ownHost, attemptPlan{steps: []buildStep{claimAs("exec-a")}, result: succeeded("exec-a")})
	u := &upserts{}
	u.install(h.env)
	at(h.env, time.Minute, func() {
		st := query[BuildState](t, h.env, QueryBuild)
		require.Equal(t, StatusBlocked, st.Status)
		require.Equal(t, blocked.Reason, st.Reason)
		require.Equal(t, WaitBlockedBy, st.WaitCode)
	})
	grantAt(h, 2*time.Minute)
	in := buildInput()
	in.Initial = []LaneMessage{blocked}
	st := h.run(in)

	require.Equal(t, StatusSuccess, st.Status)
	require.True(t, wfT0.Add(2*time.Minute).Equal(st.QueuedTime), "QueuedTime %s", st.QueuedTime)
	require.Equal(t, []time.Time{wfT0.Add(2 * time.Minute)}, u.dispatchedAt())
}

// TestPipelineOutboxKeepsTheLanesOrder: a message to a build whose workflow
// was still starting is sent again, and the lanes' later messages to that
// build wait behind it: the build is never told to give way before it
// heard of its grant (which made it end COLLAPSED without telling the lane
// and stalled the job's lane for startGrace).
func TestPipelineOutboxKeepsTheLanesOrder(t *testing.T) {
	t.Parallel()
	h, w, test1, test2, test3, _ := behindARunningBuild(t, 1)
	// test/1 ends: test/2's grant finds no workflow and waits 1 s; test/3
	// arrives meanwhile, and the lane asks test/2 to give way.
	h.done(2*time.Minute+10*time.Second, test1, StatusSuccess)
	h.enqueueByUpdate(2*time.Minute+10*time.Second+500*time.Millisecond, EnqueueBatch{Event: 3, Requests: []LaneRequest{lreqFor(test3)}})
	h.done(4*time.Minute, test2, StatusCollapsed)
	h.done(5*time.Minute, test3, StatusSuccess)
	h.deleteAt(6 * time.Minute)
	h.run(PipelineInput{Config: appConfig})
	delivered, attempts := w.result()
	require.Len(t, delivered, 2, "the grant, then the request to give way: %+v", delivered)
	require.Equal(t, LaneGrant, delivered[0].Kind, "delivered to test/2 in the lanes' order: %+v", delivered)
	require.NotEqual(t, LaneGrant, delivered[1].Kind)
	require.Equal(t, 3, attempts, "one failed attempt, then each message once")
}

// TestPipelineResendsACollapseToABuildStillStarting: a newer build
// collapses a waiting one, which the lanes drop at once; when the
// collapsed build's workflow did not exist yet, the collapse is sent again
// until it arrives (it was lost: the build waited for its lane forever,
// and its event never ended — the collapse storm of `make bench` found it).
func TestPipelineResendsACollapseToABuildStillStarting(t *testing.T) {
	t.Parallel()
	h, w, test1, test2, test3, second := behindARunningBuild(t, 2)
	h.enqueueByUpdate(2*time.Minute+time.Second, EnqueueBatch{Event: 3, Requests: []LaneRequest{lreqFor(test3)}})
	// test/1 ends: test/3 is granted and test/2, waiting, collapses into it.
	h.done(2*time.Minute+10*time.Second, test1, StatusSuccess)
	h.done(4*time.Minute, test3, StatusSuccess)
	h.deleteAt(6 * time.Minute)
	h.run(PipelineInput{Config: appConfig})
	delivered, attempts := w.result()
	require.NotEqual(t, LaneGrant, enqueueAnswer(t, second).Messages[test2.String()][0].Kind, "test/2 waits behind test/1")
	require.Len(t, delivered, 1, "the collapse reaches test/2 once its workflow exists: %+v", delivered)
	require.Equal(t, LaneCollapse, delivered[0].Kind)
	require.Equal(t, 3, attempts, "two attempts found no workflow, the third delivered")
}

// behindARunningBuild: test/1 is granted (by update) and runs from 1m10s;
// test/2 is handed over at 2m and waits behind it, its first missing lane
// signals finding no workflow (startingWorkflow). test/3 is for the test.
func behindARunningBuild(t *testing.T, missing int) (h *pipelineHarness, w *startingBuildWorkflow, test1, test2, test3 BuildRef, second *updateResult) {
	t.Helper()
	test1, test2, test3 = appBuild("test", 1), appBuild("test", 2), appBuild("test", 3)
	h = newPipelineHarness(t)
	w = startingWorkflow(h, test2, missing)
	h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
	h.signal(70*time.Second, SignalBuildStarted, BuildStarted{Build: test1})
	second = h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2)}})
	return h, w, test1, test2, test3, second
}

// startingBuildWorkflow counts the lane signals to one build and records
// those delivered (startingWorkflow).
type startingBuildWorkflow struct {
	mu        sync.Mutex
	attempts  int
	delivered []LaneMessage
}

// startingWorkflow makes the lane signals to build b find no workflow the
// first missing times (it is starting), then records the messages
// delivered to it.
func startingWorkflow(h *pipelineHarness, b BuildRef, missing int) *startingBuildWorkflow {
	w := &startingBuildWorkflow{}
	h.rec.fail = func(workflowID, name string) error {
		if workflowID != b.WorkflowID() || name != SignalLane {
			return nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.attempts++
		if w.attempts <= missing {
			return &temporal.UnknownExternalWorkflowExecutionError{}
		}
		msgs := h.rec.laneMessages()[b.WorkflowID()]
		w.delivered = append(w.delivered, msgs[len(msgs)-1])
		return nil
	}
	return w
}

// result is what the build received, and how many signals were tried.
func (w *startingBuildWorkflow) result() ([]LaneMessage, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delivered, w.attempts
}
