package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/runner"
)

var testBuild = BuildRef{Pipeline: "app", Job: "test", Event: 7}

// buildInput is a build as events start them now (Lean).
func buildInput() BuildInput {
	return BuildInput{
		Lean:  true,
		Build: testBuild, Repo: "/src/app", SHA: "0123456789abcdef", Branch: "main",
		Trigger: Trigger{Kind: TriggerCommit, Branch: "main"}, Queue: "gpu", Priority: 2,
		Image: "golang:1.26", Steps: []pipeline.Command{{Name: "test", Command: "go test ./..."}},
		Environment: map[string]string{"CGO_ENABLED": "0"}, Timeout: 30 * time.Minute,
		Lane:     LaneRequest{Build: testBuild, Collapse: true, BlockedBySameJob: true},
		Dispatch: Dispatch{HeartbeatTimeout: 30 * time.Second, MaxAttempts: 3},
	}
}

// buildStep is something the test does while a RunBuild attempt has just
// started (in the testsuite's main loop, before the attempt returns).
type buildStep func(h *buildHarness, in activities.RunBuildInput)

// attemptPlan scripts one RunBuild activity call.
type attemptPlan struct {
	steps  []buildStep
	result activities.RunBuildResult
	err    error
	// block keeps the attempt running until the workflow cancels it.
	block bool
	// until keeps the attempt running until it holds (polled; the
	// workflow runs meanwhile).
	until func(h *buildHarness) bool
}

// claimRecord is one claim the test sent and how the build answered.
type claimRecord struct {
	Attempt  int
	Executor string
	Err      error // the validator's rejection, nil when accepted
}

type buildHarness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	rec   *recorder
	plans []attemptPlan
	host  hostKind
	// result is ownedBuildHost's (host eventHost).
	result ownedHostResult

	mu        sync.Mutex
	started   int
	ran       int
	inputs    []activities.RunBuildInput
	infos     []activity.Info
	cancelCh  map[string]chan struct{}
	cancelled int
	claims    []claimRecord
	// build is the build run (testBuild until run).
	build BuildRef
}

func newBuildHarness(t *testing.T, host hostKind, plans ...attemptPlan) *buildHarness {
	t.Helper()
	env, rec := newEnv(t, func(env *testsuite.TestWorkflowEnvironment) { env.RegisterWorkflow(ownedBuildHost) })
	h := &buildHarness{t: t, env: env, rec: rec, plans: plans, host: host, build: testBuild, cancelCh: map[string]chan struct{}{}}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		in, ok := runBuildStarted(t, info, args)
		if !ok {
			return
		}
		h.mu.Lock()
		i := h.started
		h.started++
		h.inputs = append(h.inputs, in)
		h.infos = append(h.infos, *info)
		h.cancelCh[info.ActivityID] = make(chan struct{})
		h.mu.Unlock()
		for _, step := range h.plan(i).steps {
			step(h, in)
		}
	})
	env.SetOnActivityCanceledListener(func(info *activity.Info) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cancelled++
		if ch, ok := h.cancelCh[info.ActivityID]; ok {
			close(ch)
			delete(h.cancelCh, info.ActivityID)
		}
	})
	env.OnActivity(acts.RunBuild, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ activities.RunBuildInput) (activities.RunBuildResult, error) {
			id := activity.GetInfo(ctx).ActivityID
			h.mu.Lock()
			i := h.ran
			h.ran++
			ch := h.cancelCh[id]
			h.mu.Unlock()
			p := h.plan(i)
			for deadline := time.Now().Add(10 * time.Second); p.until != nil && !p.until(h); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					return activities.RunBuildResult{}, errors.New("test: the attempt's condition never held")
				}
			}
			if p.block {
				if ch == nil {
					return activities.RunBuildResult{}, errors.New("attempt was cancelled before it ran")
				}
				select {
				case <-ch:
					return activities.RunBuildResult{}, temporal.NewCanceledError()
				case <-time.After(10 * time.Second):
					return activities.RunBuildResult{}, errors.New("test: attempt never cancelled")
				}
			}
			return p.result, p.err
		}).Maybe()
	return h
}

// runBuildStarted decodes the input of a RunBuild activity that started
// (false: another activity, or an input that does not decode).
func runBuildStarted(t *testing.T, info *activity.Info, args converter.EncodedValues) (activities.RunBuildInput, bool) {
	t.Helper()
	var in activities.RunBuildInput
	if info.ActivityType.Name != "RunBuild" {
		return in, false
	}
	if err := args.Get(&in); err != nil {
		t.Errorf("decode RunBuild input: %v", err)
		return in, false
	}
	return in, true
}

func (h *buildHarness) plan(i int) attemptPlan {
	if i >= len(h.plans) {
		h.t.Errorf("RunBuild called %d times, only %d attempts planned", i+1, len(h.plans))
		return attemptPlan{err: errors.New("unplanned attempt")}
	}
	return h.plans[i]
}

// claim sends the claim update as executor for the given attempt.
func (h *buildHarness) claim(attempt int, executor string) {
	h.claimDispatch(attempt, 0, executor)
}

// claimDispatch claims as executor for the given attempt and dispatch.
func (h *buildHarness) claimDispatch(attempt, dispatch int, executor string) {
	rec := claimRecord{Attempt: attempt, Executor: executor}
	h.sendClaim(rec, ClaimRequest{Attempt: attempt, Executor: executor, Dispatch: dispatch})
}

// sendClaim sends a claim and records how the build answered. An event
// that owns the build takes claims naming it (older executors name none).
func (h *buildHarness) sendClaim(rec claimRecord, req ClaimRequest) {
	if h.host == eventHost {
		req.Build = h.ref().String()
	}
	h.env.UpdateWorkflow(UpdateClaim, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			rec.Err = err
			h.addClaim(rec)
		},
		OnComplete: func(_ any, err error) {
			rec.Err = err
			h.addClaim(rec)
		},
	}, req)
}

func (h *buildHarness) addClaim(c claimRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = append(h.claims, c)
}

func (h *buildHarness) run(in BuildInput) BuildState {
	h.t.Helper()
	h.mu.Lock()
	h.build = in.Build
	h.mu.Unlock()
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: h.workflowID()})
	if h.host == eventHost {
		h.env.ExecuteWorkflow(ownedBuildHost, in)
	} else {
		h.env.ExecuteWorkflow(BuildWorkflow, in)
	}
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	if h.host == eventHost {
		require.NoError(h.t, h.env.GetWorkflowResult(&h.result))
		return h.result.State
	}
	var st BuildState
	require.NoError(h.t, h.env.GetWorkflowResult(&st))
	return st
}

// doneSignals are the BuildDone signals the build sent its pipeline: an
// event that owns the build gives its place back with its next batch
// (EnqueueBatch.Done), as the build's end.
func (h *buildHarness) doneSignals() []BuildDone {
	var out []BuildDone
	if h.host == eventHost {
		for _, b := range h.result.Done {
			out = append(out, BuildDone{Build: b, Status: h.result.State.Status})
		}
		require.Empty(h.t, h.rec.signalsTo(PipelineWorkflowID(testBuild.Pipeline), SignalBuildDone), "an owned build sends no build-done")
		return out
	}
	for _, s := range h.rec.signalsTo(PipelineWorkflowID(testBuild.Pipeline), SignalBuildDone) {
		out = append(out, s.(BuildDone))
	}
	return out
}

// Steps a test takes while an attempt runs.

func claimAs(executor string) buildStep {
	return func(h *buildHarness, in activities.RunBuildInput) { h.claim(in.Attempt, executor) }
}

func claimAttempt(attempt int, executor string) buildStep {
	return func(h *buildHarness, _ activities.RunBuildInput) { h.claim(attempt, executor) }
}

func laneSignal(msg LaneMessage) buildStep {
	return func(h *buildHarness, _ activities.RunBuildInput) { h.lane(msg) }
}

func cancelBuild() buildStep {
	return func(h *buildHarness, _ activities.RunBuildInput) { h.cancel("") }
}

var (
	grantMsg    = LaneMessage{Kind: LaneGrant}
	collapseMsg = LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Into: "app/test/8", Reason: "collapsed into build app/test/8"}
)

func succeeded(executor string) activities.RunBuildResult {
	return activities.RunBuildResult{Executor: executor, Status: runner.StatusSuccess, LogKey: "app/test/7/1"}
}

func heartbeatLost() error { return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil) }

// grantAt signals the lane's grant d after the start.
func grantAt(h *buildHarness, d time.Duration) {
	at(h.env, d, func() { h.lane(grantMsg) })
}

func TestBuildWorkflowRunsOnItsQueue(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		leans := []bool{true, false}
		if host == eventHost {
			leans = leans[:1] // an event that owns its builds is lean
		}
		for _, lean := range leans {
			t.Run(fmt.Sprintf("lean=%v", lean), func(t *testing.T) {
				t.Parallel()
				testBuildRunsOnItsQueue(t, host, lean)
			})
		}
	})
}

// testBuildRunsOnItsQueue: a lean build (started QUEUED by its event) and
// one recorded before Lean behave alike.
func testBuildRunsOnItsQueue(t *testing.T, host hostKind, lean bool) {
	steps := []activities.StepResult{{Name: "test", ExitCode: 0, Start: wfT0, End: wfT0.Add(time.Minute)}}
	dispatched := func(h *buildHarness, _ activities.RunBuildInput) {
		st := h.state(t)
		require.Equal(t, StatusQueued, st.Status)
		require.Equal(t, WaitSlotBusy, st.WaitCode, "dispatched to its queue, it waits for a slot")
	}
	h := newBuildHarness(t, host, attemptPlan{
		steps:  []buildStep{dispatched, claimAs("exec-a")},
		result: activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusSuccess, Steps: steps},
	})
	in := buildInput()
	in.Lean = lean
	until := wfT0.Add(time.Hour)
	at(h.env, time.Minute, func() {
		st := h.state(t)
		require.Equal(t, StatusQueued, st.Status)
		require.Equal(t, "waiting for its turn in the job's lane", st.Reason)
		require.Equal(t, WaitLaneOrder, st.WaitCode)
		// A message from a lane recorded before wait codes carries none.
		h.lane(LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Reason: "blocked by build app/test/6 of the same job"})
	})
	at(h.env, 2*time.Minute, func() {
		st := h.state(t)
		require.Equal(t, StatusBlocked, st.Status)
		require.Equal(t, "blocked by build app/test/6 of the same job", st.Reason)
		require.Equal(t, WaitBlockedBy, st.WaitCode)
		h.lane(LaneMessage{Kind: LaneStatus, Status: StatusFrozen, Reason: "frozen until ...", Code: WaitFrozen, Until: until})
	})
	at(h.env, 3*time.Minute, func() {
		st := h.state(t)
		require.Equal(t, StatusFrozen, st.Status)
		require.Equal(t, WaitFrozen, st.WaitCode)
		require.True(t, until.Equal(st.WaitUntil), "WaitUntil = %s", st.WaitUntil)
	})
	grantAt(h, 4*time.Minute)

	st := h.run(in)

	// The event hands builds to the lane: the build itself does not enqueue.
	require.Empty(t, h.rec.signalsTo("pipeline/app", SignalEnqueue))
	// It ran once on its queue's task queue with its priority and fairness key.
	require.Len(t, h.inputs, 1)
	got := h.inputs[0]
	require.Equal(t, activities.RunBuildInput{
		WorkflowID: h.workflowID(), BuildID: "app/test/7", Pipeline: "app", Job: "test", EventID: "app/7",
		Attempt: 1, Repo: in.Repo, SHA: in.SHA, Branch: "main", Trigger: "commit", Image: in.Image,
		Steps: in.Steps, Environment: in.Environment, Timeout: in.Timeout, Dispatch: 1,
		StartMeta: OwnStartMeta(in.Build, in.SHA, in.Trigger),
	}, got)
	require.Equal(t, "queue/gpu", h.infos[0].TaskQueue)
	opts := h.rec.activityOptions("RunBuild")
	require.Len(t, opts, 1)
	require.Equal(t, "queue/gpu", opts[0].TaskQueue)
	require.Equal(t, temporal.Priority{PriorityKey: 2, FairnessKey: "app"}, opts[0].Priority)
	require.Equal(t, 30*time.Second, opts[0].HeartbeatTimeout)
	require.Equal(t, in.Timeout+10*time.Minute, opts[0].StartToCloseTimeout)
	require.Equal(t, int32(1), opts[0].RetryPolicy.MaximumAttempts)
	require.True(t, opts[0].WaitForCancellation)

	require.Equal(t, []claimRecord{{Attempt: 1, Executor: "exec-a"}}, h.claims)
	require.Equal(t, StatusSuccess, st.Status)
	require.Equal(t, "exec-a", st.Executor)
	require.Equal(t, "app/test/7", st.ID)
	require.Equal(t, "gpu", st.Queue)
	require.Equal(t, 2, st.Priority)
	require.Equal(t, wfT0, st.CreateTime)
	require.Equal(t, wfT0.Add(4*time.Minute), st.QueuedTime)
	require.False(t, st.StartTime.IsZero())
	require.False(t, st.EndTime.IsZero())
	require.True(t, st.WaitUntil.IsZero())
	require.Empty(t, st.WaitCode, "an ended build waits for nothing")
	require.Equal(t, []StepOutcome{{Name: "test", ExitCode: 0, Start: wfT0, End: wfT0.Add(time.Minute)}}, st.Steps)
	require.Len(t, st.Attempts, 1)
	require.Equal(t, 1, st.Attempts[0].Number)
	require.Equal(t, "exec-a", st.Attempts[0].Executor)
	require.Equal(t, "success", st.Attempts[0].Outcome)
	require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusSuccess}}, h.doneSignals())
	require.Zero(t, h.cancelled)
}

func TestBuildWorkflowResults(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		tests := []struct {
			name       string
			result     activities.RunBuildResult
			wantStatus Status
		}{
			{"success", activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusSuccess}, StatusSuccess},
			{"failure", activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusFailure, Reason: "step test exited 1"}, StatusFailure},
			{"timeout is a failure", activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusTimeout, Reason: "timed out after 30m"}, StatusFailure},
			{"aborted", activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusAborted, Reason: "killed"}, StatusAborted},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{claimAs("exec-a")}, result: tc.result})
				grantAt(h, time.Minute)
				st := h.run(buildInput())
				require.Equal(t, tc.wantStatus, st.Status)
				require.Equal(t, tc.result.Reason, st.Reason)
				require.Equal(t, []BuildDone{{Build: testBuild, Status: tc.wantStatus}}, h.doneSignals())
			})
		}
	})
}

func TestBuildWorkflowLaneEndsWait(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		tests := []struct {
			name          string
			msg           LaneMessage
			wantStatus    Status
			wantReason    string
			wantCollapsed string
		}{
			{
				name: "collapse while waiting", msg: collapseMsg,
				wantStatus: StatusCollapsed, wantReason: "collapsed into build app/test/8", wantCollapsed: "app/test/8",
			},
			{
				name:       "abort while waiting",
				msg:        LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: "pipeline app was deleted"},
				wantStatus: StatusAborted, wantReason: "pipeline app was deleted",
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host)
				at(h.env, time.Minute, func() {
					h.lane(LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Reason: "blocked"})
				})
				at(h.env, 2*time.Minute, func() { h.lane(tc.msg) })
				st := h.run(buildInput())
				require.Equal(t, tc.wantStatus, st.Status)
				require.Equal(t, tc.wantReason, st.Reason)
				require.Equal(t, tc.wantCollapsed, st.CollapsedInto)
				require.Equal(t, wfT0.Add(2*time.Minute), st.EndTime)
				// The lane already dropped the build: no done signal, no dispatch.
				require.Empty(t, h.doneSignals())
				require.Zero(t, h.started)
			})
		}
	})
}

func TestBuildWorkflowCollapseAfterGrant(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		tests := []struct {
			name          string
			plan          attemptPlan
			wantStatus    Status
			wantReason    string
			wantCollapsed string
			wantCancelled int
			wantAttempts  int
		}{
			{
				name:       "before the claim the attempt is cancelled and the build collapses",
				plan:       attemptPlan{steps: []buildStep{laneSignal(collapseMsg)}, block: true},
				wantStatus: StatusCollapsed, wantReason: "collapsed into build app/test/8", wantCollapsed: "app/test/8",
				wantCancelled: 1,
			},
			{
				name: "after the claim the collapse is ignored and the build finishes",
				plan: attemptPlan{
					steps:  []buildStep{claimAs("exec-a"), laneSignal(collapseMsg)},
					result: succeeded("exec-a"),
				},
				wantStatus: StatusSuccess, wantAttempts: 1,
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host, tc.plan)
				grantAt(h, time.Minute)
				st := h.run(buildInput())
				require.Equal(t, tc.wantStatus, st.Status)
				require.Equal(t, tc.wantReason, st.Reason)
				require.Equal(t, tc.wantCollapsed, st.CollapsedInto)
				require.Equal(t, tc.wantCancelled, h.cancelled)
				require.Len(t, st.Attempts, tc.wantAttempts)
				// The lane held the granted build: it is told the build left.
				require.Equal(t, []BuildDone{{Build: testBuild, Status: tc.wantStatus}}, h.doneSignals())
			})
		}
	})
}

func TestBuildWorkflowCancel(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		t.Run("while waiting in the lane", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host)
			at(h.env, time.Minute, func() {
				h.lane(LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Reason: "blocked"})
			})
			at(h.env, 2*time.Minute, func() { h.cancel("") })
			st := h.run(buildInput())
			require.Equal(t, StatusAborted, st.Status)
			require.Equal(t, "cancelled while blocked", st.Reason)
			require.Zero(t, h.started)
			require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusAborted}}, h.doneSignals())
		})
		t.Run("while queued on the task queue", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{cancelBuild()}, block: true})
			grantAt(h, time.Minute)
			st := h.run(buildInput())
			require.Equal(t, StatusAborted, st.Status)
			require.Equal(t, "cancelled while queued on gpu", st.Reason)
			require.Equal(t, 1, h.cancelled)
			require.Empty(t, st.Attempts)
			require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusAborted}}, h.doneSignals())
		})
		t.Run("while running", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{claimAs("exec-a"), cancelBuild()}, block: true})
			grantAt(h, time.Minute)
			st := h.run(buildInput())
			require.Equal(t, StatusAborted, st.Status)
			require.Equal(t, "cancelled while running on exec-a", st.Reason)
			require.Equal(t, 1, h.cancelled)
			require.Len(t, st.Attempts, 1)
			require.Equal(t, "aborted", st.Attempts[0].Outcome)
			require.Equal(t, "exec-a", st.Attempts[0].Executor)
			require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusAborted}}, h.doneSignals())
		})
	})
}

func TestBuildWorkflowRedispatch(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		declined := temporal.NewNonRetryableApplicationError("executor exec-x declined build app/test/7: draining", activities.ErrTypeDeclined, nil)
		stopped := temporal.NewApplicationError("executor exec-a stopped during build app/test/7", activities.ErrTypeExecutorStopped)
		lost := func(exec string) string { return "lost: " + exec + " stopped heartbeating (timeout 30s)" }
		tests := []struct {
			name         string
			maxAttempts  int
			plans        []attemptPlan
			wantStatus   Status
			wantReason   string
			wantInputs   []int // RunBuildInput.Attempt of each dispatch
			wantAttempts []attemptWant
		}{
			{
				name:        "lost executors exhaust the attempts",
				maxAttempts: 3,
				plans: []attemptPlan{
					{steps: []buildStep{claimAs("exec-a")}, err: heartbeatLost()},
					{steps: []buildStep{claimAs("exec-b")}, err: heartbeatLost()},
					{steps: []buildStep{claimAs("exec-c")}, err: heartbeatLost()},
				},
				wantStatus: StatusFailure,
				wantReason: "gave up after 3 attempts: #1 on exec-a " + lost("exec-a") + "; #2 on exec-b " + lost("exec-b") +
					"; #3 on exec-c " + lost("exec-c"),
				wantInputs: []int{1, 2, 3},
				wantAttempts: []attemptWant{
					{1, "exec-a", lost("exec-a")}, {2, "exec-b", lost("exec-b")}, {3, "exec-c", lost("exec-c")},
				},
			},
			{
				name:        "a lost executor, then success on another",
				maxAttempts: 3,
				plans: []attemptPlan{
					{steps: []buildStep{claimAs("exec-a")}, err: heartbeatLost()},
					{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
				},
				wantStatus:   StatusSuccess,
				wantInputs:   []int{1, 2},
				wantAttempts: []attemptWant{{1, "exec-a", lost("exec-a")}, {2, "exec-b", "success"}},
			},
			{
				name:        "declined dispatches do not count as attempts",
				maxAttempts: 1,
				plans: []attemptPlan{
					{err: declined},
					{err: declined},
					{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
				},
				wantStatus:   StatusSuccess,
				wantInputs:   []int{1, 1, 1},
				wantAttempts: []attemptWant{{1, "exec-b", "success"}},
			},
			{
				name:        "a stopping executor does not count as a lost attempt",
				maxAttempts: 1,
				plans: []attemptPlan{
					{steps: []buildStep{claimAs("exec-a")}, err: stopped},
					{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
				},
				wantStatus: StatusSuccess,
				wantInputs: []int{1, 2},
				wantAttempts: []attemptWant{
					{1, "exec-a", "interrupted: executor exec-a stopped during build app/test/7"}, {2, "exec-b", "success"},
				},
			},
			{
				name:        "an attempt past its build timeout",
				maxAttempts: 1,
				plans: []attemptPlan{
					{steps: []buildStep{claimAs("exec-a")}, err: temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)},
				},
				wantStatus:   StatusFailure,
				wantReason:   "gave up after 1 attempts: #1 on exec-a lost: exec-a exceeded the build timeout 30m0s",
				wantInputs:   []int{1},
				wantAttempts: []attemptWant{{1, "exec-a", "lost: exec-a exceeded the build timeout 30m0s"}},
			},
			{
				name:        "a refused claim does not count as an attempt",
				maxAttempts: 1,
				plans: []attemptPlan{
					{err: temporal.NewNonRetryableApplicationError("build app/test/7 refused executor exec-x: stale", activities.ErrTypeSuperseded, nil)},
					{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
				},
				wantStatus:   StatusSuccess,
				wantInputs:   []int{1, 1},
				wantAttempts: []attemptWant{{1, "exec-b", "success"}},
			},
			{
				// Nothing ran (the executor died before its claim, or the claim
				// waited on a stalled controller): not an attempt.
				name:        "a dispatch lost before any claim is not an attempt",
				maxAttempts: 1,
				plans: []attemptPlan{
					{err: heartbeatLost()},
					{err: heartbeatLost()},
					{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
				},
				wantStatus:   StatusSuccess,
				wantInputs:   []int{1, 1, 1},
				wantAttempts: []attemptWant{{1, "exec-b", "success"}},
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host, tc.plans...)
				grantAt(h, time.Minute)
				in := buildInput()
				in.Dispatch.MaxAttempts = tc.maxAttempts
				st := h.run(in)
				require.Equal(t, tc.wantStatus, st.Status)
				if tc.wantReason != "" {
					require.Equal(t, tc.wantReason, st.Reason)
				}
				var inputs []int
				for _, in := range h.inputs {
					inputs = append(inputs, in.Attempt)
				}
				require.Equal(t, tc.wantInputs, inputs)
				var attempts []attemptWant
				for _, at := range st.Attempts {
					attempts = append(attempts, attemptWant{at.Number, at.Executor, at.Outcome})
				}
				require.Equal(t, tc.wantAttempts, attempts)
				require.Equal(t, []BuildDone{{Build: testBuild, Status: tc.wantStatus}}, h.doneSignals())
			})
		}
	})
}

func TestBuildWorkflowClaimValidator(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host,
			attemptPlan{
				steps: []buildStep{
					claimAttempt(1, "exec-a"),
					claimAttempt(1, "exec-b"), // duplicate
				},
				err: heartbeatLost(),
			},
			attemptPlan{
				steps: []buildStep{
					claimAttempt(1, "exec-a"), // stale
					claimAttempt(2, ""),       // anonymous
					claimAttempt(2, "exec-c"),
				},
				result: succeeded("exec-c"),
			},
		)
		// A claim before the build was dispatched is refused too.
		at(h.env, 30*time.Second, func() { h.claim(1, "exec-early") })
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Equal(t, StatusSuccess, st.Status)
		require.Equal(t, "exec-c", st.Executor)

		require.Len(t, h.claims, 6)
		wantErrs := []string{
			"build app/test/7 is on attempt 0, not 1",
			"",
			"build app/test/7 attempt 1 is already running on exec-a",
			"build app/test/7 is on attempt 2, not 1",
			"claim names no executor",
			"",
		}
		for i, c := range h.claims {
			if wantErrs[i] == "" {
				require.NoError(t, c.Err, "claim %d (%+v)", i, c)
				continue
			}
			require.Error(t, c.Err, "claim %d (%+v)", i, c)
			require.Contains(t, c.Err.Error(), wantErrs[i], "claim %d", i)
		}
	})
}

func TestBuildWorkflowRefusesClaimsWhileCollapsing(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host, attemptPlan{
			steps: []buildStep{laneSignal(collapseMsg), claimAs("exec-a")},
			block: true,
		})
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Equal(t, StatusCollapsed, st.Status)
		require.Len(t, h.claims, 1)
		require.ErrorContains(t, h.claims[0].Err, "is being collapsed")
	})
}

func TestBuildWorkflowVirtualJob(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host)
		in := buildInput()
		in.Virtual = true
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status)
		require.Equal(t, "virtual job: nothing to run", st.Reason)
		require.Zero(t, h.started)
		require.Empty(t, h.rec.signalsTo("pipeline/app", SignalEnqueue))
		require.Empty(t, h.doneSignals())
	})
}

func TestBuildWorkflowTellsLaneItRuns(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		started := func(h *buildHarness) bool {
			return len(h.rec.signalsTo(PipelineWorkflowID("app"), SignalBuildStarted)) > 0
		}
		h := newBuildHarness(t, host, attemptPlan{
			steps:  []buildStep{claimAs("exec-a"), laneSignal(collapseMsg)},
			until:  started,
			result: succeeded("exec-a"),
		})
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Equal(t, []claimRecord{{Attempt: 1, Executor: "exec-a"}}, h.claims)
		require.Equal(t, StatusSuccess, st.Status)
		// The collapse came too late: the build says it runs, so the lane stops
		// waiting for it to give way.
		require.Equal(t, []any{BuildStarted{Build: testBuild}}, h.rec.signalsTo(PipelineWorkflowID("app"), SignalBuildStarted))
	})
}

func TestBuildWorkflowSupersededByNewerCommit(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		cancel := LaneMessage{Kind: LaneCancel, Reason: "superseded by c0ffee000000 (event 9)"}
		t.Run("before an executor claimed it: COLLAPSED", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{laneSignal(cancel)}, block: true})
			grantAt(h, time.Minute)
			st := h.run(buildInput())
			require.Equal(t, StatusCollapsed, st.Status)
			require.Equal(t, cancel.Reason, st.Reason)
			require.Empty(t, st.Attempts)
			require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusCollapsed}}, h.doneSignals())
		})
		t.Run("while running: its processes are killed and it ends ABORTED", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{claimAs("exec-a"), laneSignal(cancel)}, block: true})
			grantAt(h, time.Minute)
			st := h.run(buildInput())
			require.Equal(t, StatusAborted, st.Status)
			require.Equal(t, cancel.Reason, st.Reason)
			require.Equal(t, 1, h.cancelled)
			require.Len(t, st.Attempts, 1)
			require.Equal(t, "aborted", st.Attempts[0].Outcome)
		})
		t.Run("granted but not dispatched yet", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host)
			at(h.env, time.Minute, func() { h.lane(cancel) })
			st := h.run(buildInput())
			require.Equal(t, StatusCollapsed, st.Status)
			require.Zero(t, h.started)
		})
	})
}

func TestBuildWorkflowFailsOnDeletedQueue(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		fail := LaneMessage{Kind: LaneFail, Reason: "queue gpu was deleted"}
		h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{laneSignal(fail)}, block: true})
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Equal(t, StatusFailure, st.Status)
		require.Equal(t, "queue gpu was deleted", st.Reason)
	})
}

func TestBuildWorkflowRefusesLateClaimOfEarlierDispatch(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host,
			// Dispatch 1 was lost before its claim returned.
			attemptPlan{err: heartbeatLost()},
			attemptPlan{
				steps: []buildStep{
					// The claim of dispatch 1 arrives late, after dispatch 2 began.
					func(h *buildHarness, in activities.RunBuildInput) { h.claimDispatch(in.Attempt, 1, "exec-old") },
					func(h *buildHarness, in activities.RunBuildInput) { h.claimDispatch(in.Attempt, in.Dispatch, "exec-b") },
				},
				result: succeeded("exec-b"),
			},
		)
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Equal(t, StatusSuccess, st.Status)
		require.Equal(t, []int{1, 2}, []int{h.inputs[0].Dispatch, h.inputs[1].Dispatch})
		require.Len(t, h.claims, 2)
		require.ErrorContains(t, h.claims[0].Err, "was dispatched again (dispatch 2, not 1)")
		require.NoError(t, h.claims[1].Err)
		require.Equal(t, []attemptWant{{1, "exec-b", "success"}}, attemptsOf(st))
	})
}

func TestBuildWorkflowFreezeWindowAtClaim(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host,
			// The grant came before the window; the claim falls inside it.
			attemptPlan{steps: []buildStep{claimAs("exec-a")}, err: temporal.NewNonRetryableApplicationError(
				"build app/test/7 refused executor exec-a: frozen", activities.ErrTypeSuperseded, nil)},
			attemptPlan{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
		)
		h.env.SetStartTime(wfNight)
		in := buildInput()
		in.Lane.FreezeWindows = []string{nightWindow}
		open := wfNight.Add(4 * time.Hour)
		grantAt(h, time.Minute)
		at(h.env, 2*time.Hour, func() {
			st := h.state(t)
			require.Equal(t, StatusFrozen, st.Status)
			require.Equal(t, "frozen until "+open.Format(time.RFC3339)+" by freeze window `"+nightWindow+"` (it reached an executor inside the window)", st.Reason)
			require.Equal(t, WaitFrozen, st.WaitCode)
			require.True(t, open.Equal(st.WaitUntil))
		})
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status)
		require.Len(t, h.claims, 2)
		require.ErrorContains(t, h.claims[0].Err, "frozen until")
		require.NoError(t, h.claims[1].Err)
		require.True(t, open.Equal(st.StartTime), "started at %s, want the window's end %s", st.StartTime, open)
		require.Equal(t, []attemptWant{{1, "exec-b", "success"}}, attemptsOf(st))
	})
}

// A build frozen after its claim still hears its lane and its cancel: a
// collapse, a newer pull request commit or a cancel ends it at once, not
// when the window opens, and it is never dispatched again (M3e: lane
// messages ignored while frozen survived every test).
func TestBuildWorkflowFrozenAfterClaimStillListens(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		tests := []struct {
			name       string
			send       func(h *buildHarness)
			wantStatus Status
			wantReason string
		}{
			{"collapsed", func(h *buildHarness) { h.lane(collapseMsg) }, StatusCollapsed, "collapsed into build app/test/8"},
			{"superseded", func(h *buildHarness) {
				h.lane(LaneMessage{Kind: LaneCancel, Reason: "superseded by event 9 of pull request 3"})
			}, StatusCollapsed, "superseded by event 9 of pull request 3"},
			{"aborted", func(h *buildHarness) {
				h.lane(LaneMessage{Kind: LaneAbort, Reason: "pipeline deleted"})
			}, StatusAborted, "pipeline deleted"},
			{"cancelled", func(h *buildHarness) { h.cancel("") }, StatusAborted, "cancelled while frozen"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host,
					attemptPlan{steps: []buildStep{claimAs("exec-a")}, err: temporal.NewNonRetryableApplicationError(
						"build app/test/7 refused executor exec-a: frozen", activities.ErrTypeSuperseded, nil)},
				)
				h.env.SetStartTime(wfNight)
				in := buildInput()
				in.Lane.FreezeWindows = []string{nightWindow}
				grantAt(h, time.Minute)
				at(h.env, 2*time.Hour, func() {
					require.Equal(t, StatusFrozen, h.state(t).Status)
					tt.send(h)
				})
				st := h.run(in)
				require.Equal(t, tt.wantStatus, st.Status)
				require.Equal(t, tt.wantReason, st.Reason)
				require.Len(t, h.claims, 1, "never dispatched again")
				require.True(t, st.EndTime.Before(wfNight.Add(3*time.Hour)), "ended at %s, when told, not when the window opened", st.EndTime)
			})
		}
	})
}

func TestBuildWorkflowForcedIgnoresFreezeAtClaim(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{claimAs("exec-a")}, result: succeeded("exec-a")})
		h.env.SetStartTime(wfNight)
		in := buildInput()
		in.Lane.FreezeWindows, in.Lane.Force = []string{nightWindow}, true
		grantAt(h, time.Minute)
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status)
		require.NoError(t, h.claims[0].Err)
	})
}

// attemptWant is one attempt's number, executor and outcome.
type attemptWant struct {
	Number   int
	Executor string
	Outcome  string
}

func attemptsOf(st BuildState) []attemptWant {
	var out []attemptWant
	for _, at := range st.Attempts {
		out = append(out, attemptWant{at.Number, at.Executor, at.Outcome})
	}
	return out
}

// TestBuildRecordsTheAttemptCredentialHash: the claim's credential hash is
// recorded on its attempt (the API checks credentials against it); a claim
// whose hash is not a hex SHA-256 is refused.
func TestBuildRecordsTheAttemptCredentialHash(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		hash := activities.CredentialHash("the-credential")
		claimWith := func(h string) buildStep {
			return func(bh *buildHarness, in activities.RunBuildInput) {
				bh.sendClaim(claimRecord{Attempt: in.Attempt, Executor: "exec-a"},
					ClaimRequest{Attempt: in.Attempt, Executor: "exec-a", Dispatch: in.Dispatch, CredentialHash: h})
			}
		}
		h := newBuildHarness(t, host, attemptPlan{
			steps:  []buildStep{claimWith("not-a-hash"), claimWith(hash)},
			result: succeeded("exec-a"),
		})
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Len(t, h.claims, 2)
		require.ErrorContains(t, h.claims[0].Err, "credential hash is not a hex SHA-256")
		require.NoError(t, h.claims[1].Err)
		require.Len(t, st.Attempts, 1)
		require.Equal(t, hash, st.Attempts[0].CredentialHash)
	})
}

// A queue's max-wait ends a build no executor claimed in time: FAILURE
// with cause refused and the reason; a build claimed before it runs on.
func TestBuildWorkflowMaxWait(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		t.Run("unclaimed at max-wait: refused", func(t *testing.T) {
			t.Parallel()
			// Executors keep handing it back (the test clock moves only while
			// no activity runs: the build backs off between dispatches).
			declined := temporal.NewNonRetryableApplicationError("executor exec-x declined build app/test/7: draining", activities.ErrTypeDeclined, nil)
			plans := make([]attemptPlan, 40)
			for i := range plans {
				plans[i] = attemptPlan{err: declined}
			}
			h := newBuildHarness(t, host, plans...)
			grantAt(h, time.Minute)
			in := buildInput()
			in.MaxWait = 10 * time.Second
			st := h.run(in)
			require.Equal(t, StatusFailure, st.Status)
			require.Equal(t, CauseRefused, st.Cause)
			require.Equal(t, "refused: no executor took it within queue gpu's max-wait of 10s", st.Reason)
			require.False(t, st.EndTime.Before(wfT0.Add(time.Minute+10*time.Second)), "it waited its max-wait after its dispatch: ended %s", st.EndTime)
			require.Less(t, st.EndTime.Sub(wfT0), time.Minute+20*time.Second, "and no longer than a back-off more")
			require.Empty(t, st.Attempts)
		})
		t.Run("claimed in time: it runs past max-wait", func(t *testing.T) {
			t.Parallel()
			h := newBuildHarness(t, host, attemptPlan{steps: []buildStep{claimAs("exec-a")}, result: succeeded("exec-a")})
			grantAt(h, time.Minute)
			in := buildInput()
			in.MaxWait = time.Second
			st := h.run(in)
			require.Equal(t, StatusSuccess, st.Status)
			require.Equal(t, CauseSucceeded, st.Cause)
		})
	})
}

// TestSlimBuildLeavesItsLaneThroughItsEvent: a Slim build that ends holding
// its lane place says so in its result (its event tells the pipeline)
// instead of signalling build-done; a cancelled one still signals (its
// event may have been terminated); one the lane already dropped does
// neither.
func TestSlimBuildLeavesItsLaneThroughItsEvent(t *testing.T) {
	t.Parallel()
	slim := func() BuildInput {
		in := buildInput()
		in.Slim = true
		return in
	}
	t.Run("ran", func(t *testing.T) {
		t.Parallel()
		h := newBuildHarness(t, ownHost, attemptPlan{
			steps:  []buildStep{claimAs("exec-a")},
			result: activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusSuccess},
		})
		grantAt(h, time.Minute)
		st := h.run(slim())
		require.Equal(t, StatusSuccess, st.Status)
		require.True(t, st.LaneRelease)
		require.Empty(t, h.doneSignals())
	})
	t.Run("refused by its lane", func(t *testing.T) {
		t.Parallel()
		h := newBuildHarness(t, ownHost)
		at(h.env, time.Minute, func() {
			h.lane(LaneMessage{Kind: LaneFail, Status: StatusFailure, Reason: "lane full"})
		})
		st := h.run(slim())
		require.Equal(t, StatusFailure, st.Status)
		require.True(t, st.LaneRelease, "the lane holds a refused build until it hears of its end")
		require.Empty(t, h.doneSignals())
	})
	t.Run("cancelled while queued", func(t *testing.T) {
		t.Parallel()
		h := newBuildHarness(t, ownHost)
		at(h.env, time.Minute, func() { h.cancel("") })
		st := h.run(slim())
		require.Equal(t, StatusAborted, st.Status)
		require.False(t, st.LaneRelease)
		require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusAborted}}, h.doneSignals())
	})
	t.Run("cancelled while running", func(t *testing.T) {
		t.Parallel()
		h := newBuildHarness(t, ownHost, attemptPlan{steps: []buildStep{claimAs("exec-a"), cancelBuild()}, block: true})
		grantAt(h, time.Minute)
		st := h.run(slim())
		require.Equal(t, StatusAborted, st.Status)
		require.False(t, st.LaneRelease)
		require.Equal(t, []BuildDone{{Build: testBuild, Status: StatusAborted}}, h.doneSignals())
	})
	t.Run("collapsed by its lane", func(t *testing.T) {
		t.Parallel()
		h := newBuildHarness(t, ownHost)
		at(h.env, time.Minute, func() {
			h.lane(laneCollapseMsg(BuildRef{Pipeline: "app", Job: "test", Event: 8}, "collapsed into app/test/8"))
		})
		st := h.run(slim())
		require.Equal(t, StatusCollapsed, st.Status)
		require.False(t, st.LaneRelease, "the lane already dropped it")
		require.Empty(t, h.doneSignals())
	})
}
