package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/scm"
)

// UpdateClaim is the update an executor sends before it runs a build.
const UpdateClaim = "claim"

// ClaimRequest is UpdateClaim's argument.
type ClaimRequest struct {
	// Build names the build claimed (its ID, "<pipeline>/<job>/<event>");
	// a build workflow refuses a claim naming another build. "" (older
	// executors) skips the check. Executors send it ahead of builds owned
	// by their event (docs/option-b.md), which will need it.
	Build    string `json:"build,omitempty"`
	Attempt  int    `json:"attempt"`
	Executor string `json:"executor"`
	// Dispatch is the dispatch the executor's task came from
	// (RunBuildInput.Dispatch): a late claim from an earlier dispatch of the
	// same attempt is refused. 0 (older executors) skips the check.
	Dispatch int `json:"dispatch,omitempty"`
	// CredentialHash is the SHA-256 (hex) of the credential the executor
	// generated for this attempt (activities.NewAttemptCredential): the API
	// gives the build's secrets, and takes its log writes, only from the
	// holder of that credential. The credential itself never reaches
	// Temporal. "" (older executors): the API keeps the old rule.
	CredentialHash string `json:"credential_hash,omitempty"`
	// StepCredentialHash is the SHA-256 (hex) of a second credential the
	// executor generated for the attempt and gave its steps
	// (SD_BUILD_CREDENTIAL): with it the build's own commands (meta get
	// --external, sluice artifact get) read through the API what the
	// build may read, and nothing else; it does not stand for the
	// executor. "": none (older executors).
	StepCredentialHash string `json:"step_credential_hash,omitempty"`
}

// AvoidLostExecutorFor is how long the executor that lost a build's attempt
// declines the build's next dispatch, so that another live executor takes
// it first.
const AvoidLostExecutorFor = 30 * time.Second

// changeReportLoss: a build tells the registry when its executor lost it.
const changeReportLoss = "report-loss"

// a is the activities receiver; workflows only take method references.
var a *activities.Activities

// build is one BuildWorkflow run's state.
type build struct {
	in    BuildInput
	state BuildState
	// inLane: the pipeline's lane holds this build (it must be told when it ends).
	inLane bool
	// attempt numbers the claims; lost counts attempts lost to executors.
	attempt  int
	lost     int
	declines int
	claimed  bool
	cancel   bool
	collapse string
	abort    string
	// fail ends a build that has not started FAILURE (its queue was deleted).
	fail string
	// supersede ends the build because a newer commit to its pull request
	// replaced it: COLLAPSED before an executor claimed it, ABORTED after.
	supersede string
	// dispatchN numbers the dispatches (RunBuild activities) of the build.
	dispatchN int
	// frozenUntil is set when a claim fell inside a freeze window: the
	// build waits, FROZEN, until the window ends.
	frozenUntil time.Time
	frozenWhy   string
	// legacy: a run recorded before changeLaneOrder.
	legacy bool
	// avoid is the executor that lost the last attempt, declined by it
	// until avoidUntil (RunBuildInput.Avoid).
	avoid      string
	avoidUntil time.Time
	// host is the workflow the build runs in (its own BuildWorkflow:
	// ownWorkflow).
	host buildHost
	// byCh carries who cancels the build (SignalCancelledBy, sent by the
	// API right before it cancels the workflow); read when it ends.
	byCh workflow.ReceiveChannel
	// statusSent are the commit status signals sent (the build waits for
	// them before it closes: the server drops a closed sender's signals).
	statusSent []workflow.Future
	// maxWaitOff: an executor was ready for the build (its claim fell in a
	// freeze window), so the queue's max-wait no longer applies.
	maxWaitOff bool
}

// BuildWorkflow runs one build: its event hands it to the pipeline's lane;
// it waits for the lane's grant (collapse,
// blockedBy, freeze windows, delay), dispatches the build to its queue, where
// an executor claims and runs it, dispatches it again if that executor is
// lost, and records the outcome.
func BuildWorkflow(ctx workflow.Context, in BuildInput) (BuildState, error) {
	b := newBuild(ctx, in, ownWorkflow{})
	if !in.Lean {
		b.legacy = workflow.GetVersion(ctx, changeLaneOrder, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	}
	if err := workflow.SetQueryHandler(ctx, QueryBuild, func() (BuildState, error) { return b.state, nil }); err != nil {
		return b.state, fmt.Errorf("register build query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateClaim, b.claim, workflow.UpdateHandlerOptions{Validator: b.validateClaim}); err != nil {
		return b.state, fmt.Errorf("register claim update: %w", err)
	}
	return b.run(ctx), nil
}

// newBuild is a build's state before it runs, hosted by host.
func newBuild(ctx workflow.Context, in BuildInput, host buildHost) *build {
	in.Dispatch = in.Dispatch.orDefault()
	b := &build{in: in, host: host, state: BuildState{
		ID: in.Build.String(), Build: in.Build, Status: StatusCreated, Queue: in.Queue,
		Priority: in.Priority, SHA: in.SHA, CreateTime: workflow.Now(ctx), Fork: in.Trigger.Fork && in.Build.PR > 0,
		Secrets: in.Secrets, SecretsListed: true, Upstream: in.Upstream, Branch: in.Branch,
	}}
	if in.Lean && !in.DispatchedAt.IsZero() && in.DispatchedAt.Before(b.state.CreateTime) {
		// Its event created it, granted, a moment before its workflow ran.
		b.state.CreateTime = in.DispatchedAt
	}
	return b
}

// run runs the build to its end: it waits for its lane's grant, then
// dispatches it until an attempt ends it.
func (b *build) run(ctx workflow.Context) BuildState {
	in := b.in
	laneCh := b.host.laneMessages(ctx)
	b.byCh = b.host.cancelledBy(ctx)

	if in.Virtual {
		now := workflow.Now(ctx)
		b.state.StartTime, b.state.QueuedTime = now, now
		return b.finish(ctx, StatusSuccess, "virtual job: nothing to run", CauseSucceeded, nil)
	}

	// 1. Wait for the lane's grant. The event hands the build to its
	// pipeline's lane once this workflow exists.
	b.inLane = true
	if in.Lean {
		// Its start options set the QUEUED status and this memo already.
		b.state.Status, b.state.Reason, b.state.WaitCode = StatusQueued, laneWaitReason, WaitLaneOrder
		b.commitStatus(ctx)
	} else {
		b.setStatus(ctx, StatusQueued, WaitLaneOrder, laneWaitReason, time.Time{})
	}
	// The lanes' first messages may come with the input (its event asked
	// them before this workflow existed: EventInput.EnqueueUpdate).
	initial := in.Initial
	for granted := false; !granted; {
		var msg LaneMessage
		if len(initial) > 0 {
			msg, initial = initial[0], initial[1:]
		} else {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(laneCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &msg) })
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { b.cancel = true })
			sel.Select(ctx)
			if b.cancel {
				return b.finish(ctx, StatusAborted, "cancelled while "+strings.ToLower(string(b.state.Status)), CauseCancelled, b.cancelledBy())
			}
		}
		switch msg.Kind {
		case LaneStatus:
			code := msg.Code
			if code == "" {
				code = WaitCodeOf(msg.Status, msg.Reason)
			}
			b.setStatus(ctx, msg.Status, code, msg.Reason, msg.Until)
		case LaneGrant:
			granted = true
		case LaneCollapse:
			b.inLane = false // the lane already dropped it
			b.state.CollapsedInto = msg.Into
			return b.finish(ctx, StatusCollapsed, msg.Reason, CauseSuperseded, &CauseInfo{Build: msg.Into})
		case LaneAbort:
			b.inLane = false
			return b.finish(ctx, StatusAborted, msg.Reason, CauseCancelled, nil)
		case LaneCancel:
			// Granted, then superseded before it dispatched: the lane holds
			// it until it hears of its end.
			return b.finish(ctx, StatusCollapsed, msg.Reason, CauseSuperseded, nil)
		case LaneFail:
			return b.finish(ctx, StatusFailure, msg.Reason, CauseRefused, nil)
		}
	}

	// 2. Dispatch until an attempt ends the build.
	return b.dispatch(ctx, laneCh)
}

func (b *build) dispatch(ctx workflow.Context, laneCh workflow.ReceiveChannel) BuildState {
	in := b.in
	b.attempt = 1
	// A build its event started granted carries its first dispatch's
	// search attribute and memo from its start (BuildInput.DispatchedAt).
	pre := in.Lean && !in.DispatchedAt.IsZero()
	if pre {
		b.state.QueuedTime = in.DispatchedAt
	} else {
		b.state.QueuedTime = workflow.Now(ctx)
		b.host.upsert(ctx, SADispatchedAt.ValueSet(b.state.QueuedTime))
	}
	// The queue's max-wait: a build still unclaimed when it expires ends
	// refused (builds started before queues had one carry 0: no timer).
	var maxWait workflow.Future
	maxWaitFired := false
	if in.MaxWait > 0 {
		mctx, cancelMaxWait := workflow.WithCancel(ctx)
		defer cancelMaxWait()
		maxWait = workflow.NewTimerWithOptions(mctx, in.MaxWait, workflow.TimerOptions{Summary: "the queue's max-wait"})
	}
	for {
		b.claimed = false
		if !b.frozenUntil.IsZero() {
			if st, done := b.waitFrozen(ctx, laneCh); done {
				return st
			}
		}
		b.dispatchN++
		if pre && b.dispatchN == 1 {
			b.state.Status, b.state.Reason, b.state.WaitUntil, b.state.WaitCode = StatusQueued, slotWaitReason(in.Queue), time.Time{}, WaitSlotBusy
			b.commitStatus(ctx)
		} else {
			b.setStatus(ctx, StatusQueued, WaitSlotBusy, slotWaitReason(in.Queue), time.Time{})
		}
		actCtx, cancelAct := workflow.WithCancel(ctx)
		actCtx = workflow.WithActivityOptions(actCtx, workflow.ActivityOptions{
			ActivityID:          b.host.activityID(b.state.ID, b.dispatchN),
			TaskQueue:           b.taskQueue(ctx),
			StartToCloseTimeout: in.Timeout + 10*time.Minute,
			HeartbeatTimeout:    in.Dispatch.HeartbeatTimeout,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
			WaitForCancellation: true,
			Priority:            temporal.Priority{PriorityKey: in.Priority, FairnessKey: in.Build.Pipeline},
			Summary:             fmt.Sprintf("build %s attempt %d on queue %s", b.state.ID, b.attempt, in.Queue),
		})
		runIn := activities.RunBuildInput{
			WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, BuildID: b.state.ID, Pipeline: in.Build.Pipeline, Job: in.Build.Job,
			EventID: in.Build.EventRef().String(), Attempt: b.attempt, Repo: in.Repo, SHA: in.SHA, Branch: in.Branch,
			PR: in.Trigger.PR, Trigger: string(in.Trigger.Kind), Image: in.Image, Steps: in.Steps, Secrets: in.Secrets,
			Environment: in.Environment, Timeout: in.Timeout, CPU: in.CPU, RAM: in.RAM, Fork: b.state.Fork,
			RepoAuth: in.RepoAuth,
			Cache:    in.Cache,
		}
		runIn.StartMeta = knownStartMeta(in, b.attempt)
		if !b.legacy {
			runIn.Dispatch = b.dispatchN
		}
		runIn.Avoid, runIn.AvoidUntil = b.avoid, b.avoidUntil
		fut := workflow.ExecuteActivity(actCtx, a.RunBuild, runIn)
		var res activities.RunBuildResult
		var actErr error
		for resolved := false; !resolved; {
			sel := workflow.NewSelector(ctx)
			sel.AddFuture(fut, func(f workflow.Future) { actErr = f.Get(ctx, &res); resolved = true })
			sel.AddReceive(laneCh, func(c workflow.ReceiveChannel, _ bool) {
				var msg LaneMessage
				c.Receive(ctx, &msg)
				if b.onLaneMessage(ctx, msg) {
					cancelAct()
				}
			})
			if !b.cancel {
				sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
					b.cancel = true
					cancelAct()
				})
			}
			if maxWait != nil && !maxWaitFired && !b.maxWaitOff && b.state.StartTime.IsZero() {
				sel.AddFuture(maxWait, func(workflow.Future) {
					maxWaitFired = true
					if !b.claimed && b.fail == "" && b.state.StartTime.IsZero() {
						b.fail = fmt.Sprintf("refused: no executor took it within queue %s's max-wait of %s", in.Queue, in.MaxWait)
						cancelAct()
					}
				})
			}
			sel.Select(ctx)
		}
		cancelAct()
		if actErr == nil {
			b.recordAttempt(ctx, res.Executor, string(res.Status))
			b.state.Steps = stepOutcomes(res.Steps)
			reason := res.Reason
			if b.supersede != "" && res.Status == runner.StatusAborted {
				reason = b.supersede
			}
			cause, info := resultCause(res)
			if b.supersede != "" && res.Status == runner.StatusAborted {
				cause, info = CauseSuperseded, nil
			} else if cause == CauseCancelled {
				info = b.cancelledBy()
			}
			return b.finish(ctx, statusOf(res.Status), reason, cause, info)
		}
		switch {
		case b.collapse != "" && !b.claimed:
			return b.finish(ctx, StatusCollapsed, b.collapse, CauseSuperseded, &CauseInfo{Build: b.state.CollapsedInto})
		case b.supersede != "" && !b.claimed:
			return b.finish(ctx, StatusCollapsed, b.supersede, CauseSuperseded, nil)
		case b.abort != "" && !b.claimed:
			return b.finish(ctx, StatusAborted, b.abort, CauseCancelled, nil)
		case b.fail != "" && !b.claimed:
			return b.finish(ctx, StatusFailure, b.fail, CauseRefused, nil)
		case b.supersede != "":
			b.recordAttempt(ctx, b.state.Executor, "aborted")
			return b.finish(ctx, StatusAborted, b.supersede, CauseSuperseded, nil)
		case b.cancel:
			if b.claimed {
				b.recordAttempt(ctx, b.state.Executor, "aborted")
				return b.finish(ctx, StatusAborted, "cancelled while running on "+b.state.Executor, CauseCancelled, b.cancelledBy())
			}
			return b.finish(ctx, StatusAborted, "cancelled while queued on "+in.Queue, CauseCancelled, b.cancelledBy())
		case activities.IsQueueDeleted(actErr) && !b.claimed:
			// N9: sent to a queue deleted after its event checked it.
			return b.finish(ctx, StatusFailure, rootMessage(actErr), CauseRefused, nil)
		case activities.IsDeclined(actErr), activities.IsSuperseded(actErr) && !b.claimed:
			if !b.frozenUntil.IsZero() {
				continue // the claim fell inside a freeze window: wait for its end
			}
			// Not an attempt: the executor handed the build back. Back off a
			// little when it keeps happening (a member whose slots were just
			// taken away may still hold a poll), so the history stays small.
			b.declines++
			b.count(ctx, "sluice_build_redispatches", "declined")
			workflow.GetLogger(ctx).Info("build_redispatched", "build", b.state.ID, "why", rootMessage(actErr))
			if b.declines > 1 {
				_ = workflow.Sleep(ctx, min(time.Duration(1<<min(b.declines, 6))*100*time.Millisecond, 5*time.Second))
			}
			continue
		case activities.IsExecutorStopped(actErr):
			// An executor shutting down is not the build's fault.
			b.count(ctx, "sluice_build_redispatches", "executor_stopped")
			b.recordAttempt(ctx, b.state.Executor, "interrupted: "+rootMessage(actErr))
			b.nextAttempt(ctx)
			continue
		}
		var timeout *temporal.TimeoutError
		if !b.legacy && !b.claimed && errors.As(actErr, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
			// Lost before any executor claimed it (a task handed to an
			// executor that died, or a claim that waited on a stalled
			// controller): nothing ran, so it is not an attempt. The next
			// dispatch has a new number, so a late claim of this one fails.
			b.count(ctx, "sluice_build_redispatches", "unclaimed")
			workflow.GetLogger(ctx).Info("build_redispatched", "build", b.state.ID, "why", "no claim before the heartbeat timeout")
			continue
		}
		who := b.state.Executor
		if !b.claimed || who == "" {
			who = "an executor"
		}
		outcome := "failed: " + rootMessage(actErr)
		if errors.As(actErr, &timeout) {
			outcome = fmt.Sprintf("lost: %s stopped heartbeating (timeout %s)", who, in.Dispatch.HeartbeatTimeout)
			if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE {
				outcome = fmt.Sprintf("lost: %s exceeded the build timeout %s", who, in.Timeout)
			}
		}
		b.recordAttempt(ctx, b.state.Executor, outcome)
		reason := "failed"
		if errors.As(actErr, &timeout) {
			reason = "timeout"
			switch timeout.TimeoutType() {
			case enumspb.TIMEOUT_TYPE_HEARTBEAT:
				reason = "heartbeat"
			case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
				reason = "build_timeout"
			}
		}
		b.count(ctx, "sluice_executor_losses", reason)
		if b.claimed && b.state.Executor != "" && (b.in.Lean || workflow.GetVersion(ctx, changeReportLoss, workflow.DefaultVersion, 1) != workflow.DefaultVersion) {
			// The registry drains an executor that keeps losing builds.
			b.host.lost(ctx, BuildLost{Member: b.state.Executor, Build: b.state.ID})
		}
		b.lost++
		if b.claimed && b.state.Executor != "" {
			// Another live executor takes the next attempt first.
			b.avoid, b.avoidUntil = b.state.Executor, workflow.Now(ctx).Add(AvoidLostExecutorFor)
		}
		if in.NoRetryOnLoss {
			last := b.state.Attempts[len(b.state.Attempts)-1]
			return b.finish(ctx, StatusFailure, fmt.Sprintf("not retried (sluice.dev/retryOnLoss: false): %s", b.attemptSummary()),
				CauseExecutorLost, &CauseInfo{Executor: last.Executor, Attempt: last.Number})
		}
		if b.lost >= in.Dispatch.MaxAttempts {
			last := b.state.Attempts[len(b.state.Attempts)-1]
			return b.finish(ctx, StatusFailure, fmt.Sprintf("gave up after %d attempts: %s", len(b.state.Attempts), b.attemptSummary()),
				CauseExecutorLost, &CauseInfo{Executor: last.Executor, Attempt: last.Number})
		}
		b.nextAttempt(ctx)
	}
}

// onLaneMessage handles a message that arrives while the build is
// dispatched, and reports whether the dispatch must be cancelled.
func (b *build) onLaneMessage(ctx workflow.Context, msg LaneMessage) bool {
	idle := !b.claimed && b.collapse == "" && b.supersede == "" && !b.cancel
	switch msg.Kind {
	case LaneCollapse:
		// A running build is never killed by collapse; it tells its lane
		// it runs, so the lane stops waiting for it to give way.
		if idle {
			b.collapse, b.state.CollapsedInto = msg.Reason, msg.Into
			return true
		}
		if b.claimed && !b.legacy {
			b.host.started(ctx, BuildStarted{Build: b.in.Build})
		}
	case LaneCancel:
		if b.supersede == "" && !b.cancel && b.collapse == "" {
			b.supersede = msg.Reason
			return true
		}
	case LaneAbort:
		if !b.claimed && !b.cancel {
			b.abort = msg.Reason
			return true
		}
	case LaneFail:
		if idle {
			b.fail = msg.Reason
			return true
		}
	}
	return false
}

// waitFrozen keeps a build whose claim fell inside a freeze window FROZEN
// until the window ends (or a lane message or a cancel ends it). It
// reports true with the final state when the build ended meanwhile.
func (b *build) waitFrozen(ctx workflow.Context, laneCh workflow.ReceiveChannel) (BuildState, bool) {
	until := b.frozenUntil
	b.frozenUntil = time.Time{}
	b.setStatus(ctx, StatusFrozen, WaitFrozen, b.frozenWhy, until)
	tctx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	timer := workflow.NewTimerWithOptions(tctx, until.Sub(workflow.Now(ctx)), workflow.TimerOptions{Summary: "the freeze window ends"})
	for {
		var msg LaneMessage
		fired, gotMsg := false, false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.AddReceive(laneCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &msg); gotMsg = true })
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { b.cancel = true })
		sel.Select(ctx)
		switch {
		case b.cancel:
			return b.finish(ctx, StatusAborted, "cancelled while frozen", CauseCancelled, b.cancelledBy()), true
		case fired:
			return BuildState{}, false
		case gotMsg:
			b.onLaneMessage(ctx, msg)
			switch {
			case b.collapse != "":
				return b.finish(ctx, StatusCollapsed, b.collapse, CauseSuperseded, &CauseInfo{Build: b.state.CollapsedInto}), true
			case b.supersede != "":
				return b.finish(ctx, StatusCollapsed, b.supersede, CauseSuperseded, nil), true
			case b.abort != "":
				return b.finish(ctx, StatusAborted, b.abort, CauseCancelled, nil), true
			case b.fail != "":
				return b.finish(ctx, StatusFailure, b.fail, CauseRefused, nil), true
			}
		}
	}
}

// count adds one to a counter of the SDK's metrics handler (replay-safe:
// the SDK drops metrics while it replays), tagged with the build's queue.
func (b *build) count(ctx workflow.Context, name, reason string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"queue": b.in.Queue, "reason": reason}).Counter(name).Inc(1)
}

// nextAttempt prepares a new dispatch after a claimed attempt ended without
// a result (a fresh attempt number keeps its logs apart).
func (b *build) nextAttempt(ctx workflow.Context) {
	if b.claimed {
		b.attempt++
	}
	b.claimed = false
	b.state.Executor = ""
	b.host.upsert(ctx, SAExecutor.ValueUnset())
}

func (b *build) validateClaim(_ workflow.Context, req ClaimRequest) error {
	switch {
	case req.Build != "" && req.Build != b.state.ID:
		return fmt.Errorf("the claim is for build %s, not %s", req.Build, b.state.ID)
	case b.state.Status.Final():
		return fmt.Errorf("build %s already ended %s", b.state.ID, b.state.Status)
	case b.cancel:
		return fmt.Errorf("build %s is being cancelled", b.state.ID)
	case b.collapse != "":
		return fmt.Errorf("build %s is being collapsed: %s", b.state.ID, b.collapse)
	case b.abort != "":
		return fmt.Errorf("build %s is being aborted: %s", b.state.ID, b.abort)
	case b.claimed:
		return fmt.Errorf("build %s attempt %d is already running on %s", b.state.ID, b.attempt, b.state.Executor)
	case req.Attempt != b.attempt:
		return fmt.Errorf("build %s is on attempt %d, not %d", b.state.ID, b.attempt, req.Attempt)
	case req.Dispatch != 0 && req.Dispatch != b.dispatchN:
		return fmt.Errorf("build %s was dispatched again (dispatch %d, not %d)", b.state.ID, b.dispatchN, req.Dispatch)
	case b.supersede != "":
		return fmt.Errorf("build %s is being superseded: %s", b.state.ID, b.supersede)
	case b.fail != "":
		return fmt.Errorf("build %s is failing: %s", b.state.ID, b.fail)
	case req.Executor == "":
		return errors.New("claim names no executor")
	case req.CredentialHash != "" && !activities.ValidCredentialHash(req.CredentialHash):
		return errors.New("claim's credential hash is not a hex SHA-256")
	case req.StepCredentialHash != "" && !activities.ValidCredentialHash(req.StepCredentialHash):
		return errors.New("claim's step credential hash is not a hex SHA-256")
	}
	return nil
}

func (b *build) claim(ctx workflow.Context, req ClaimRequest) error {
	now := workflow.Now(ctx)
	// A build granted outside its freeze windows may reach an executor
	// inside one (it waited for a slot): it does not start then.
	if !b.legacy && !b.in.Lane.Force && len(b.in.Lane.FreezeWindows) > 0 {
		next, err := pipeline.NextUnfrozen(b.in.Lane.FreezeWindows, now)
		if err == nil && next.After(now) {
			b.maxWaitOff = true
			b.frozenUntil = next
			b.frozenWhy = fmt.Sprintf("frozen until %s by freeze window `%s` (it reached an executor inside the window)",
				next.UTC().Format(time.RFC3339), containing(b.in.Lane.FreezeWindows, now))
			return fmt.Errorf("build %s is %s", b.state.ID, b.frozenWhy)
		}
	}
	b.claimed = true
	b.state.Executor = req.Executor
	if b.state.StartTime.IsZero() {
		b.state.StartTime = now
	}
	b.state.Attempts = append(b.state.Attempts, Attempt{
		Number: req.Attempt, Executor: req.Executor, Start: now, CredentialHash: req.CredentialHash, StepCredentialHash: req.StepCredentialHash,
	})
	running := fmt.Sprintf("running on %s (attempt %d)", req.Executor, req.Attempt)
	if b.in.Lean && b.state.Status != StatusRunning {
		// One upsert for the executor and the status.
		b.setStatusWith(ctx, StatusRunning, "", running, time.Time{}, SAExecutor.ValueSet(req.Executor))
		return nil
	}
	b.host.upsert(ctx, SAExecutor.ValueSet(req.Executor))
	b.setStatus(ctx, StatusRunning, "", running, time.Time{})
	return nil
}

// recordAttempt closes the current attempt's record (or adds one for an
// attempt lost before it claimed).
func (b *build) recordAttempt(ctx workflow.Context, executor, outcome string) {
	now := workflow.Now(ctx)
	n := len(b.state.Attempts)
	if n > 0 && b.state.Attempts[n-1].Number == b.attempt && b.state.Attempts[n-1].End.IsZero() {
		b.state.Attempts[n-1].End = now
		b.state.Attempts[n-1].Outcome = outcome
		return
	}
	b.state.Attempts = append(b.state.Attempts, Attempt{Number: b.attempt, Executor: executor, End: now, Outcome: outcome})
}

func (b *build) attemptSummary() string {
	parts := make([]string, 0, len(b.state.Attempts))
	for _, at := range b.state.Attempts {
		who := at.Executor
		if who == "" {
			who = "unclaimed"
		}
		parts = append(parts, fmt.Sprintf("#%d on %s %s", at.Number, who, at.Outcome))
	}
	return strings.Join(parts, "; ")
}

// slotWaitReason is a build's reason while it waits for a slot on queue q.
func slotWaitReason(q string) string { return "waiting for a slot on queue " + q }

// laneWaitReason is a build's reason while it waits in its lane.
const laneWaitReason = "waiting for its turn in the job's lane"

func (b *build) setStatus(ctx workflow.Context, s Status, code WaitCode, reason string, until time.Time) {
	b.setStatusWith(ctx, s, code, reason, until)
}

// setStatusWith is setStatus with more search attributes in the status's
// upsert (the status must change).
func (b *build) setStatusWith(ctx workflow.Context, s Status, code WaitCode, reason string, until time.Time, more ...temporal.SearchAttributeUpdate) {
	if b.state.Status == s && b.state.Reason == reason && b.state.WaitUntil.Equal(until) {
		b.state.WaitCode = code // follows from the reason: no new memo
		return
	}
	changed := b.state.Status != s
	b.state.Status, b.state.Reason, b.state.WaitUntil, b.state.WaitCode = s, reason, until, code
	if changed {
		updates := append([]temporal.SearchAttributeUpdate{SAStatus.ValueSet(string(s))}, more...)
		if s.Final() && b.state.Cause != "" {
			// In the same upsert as the final status: no extra command.
			updates = append(updates, SACause.ValueSet(string(b.state.Cause)))
		}
		b.host.upsert(ctx, updates...)
	}
	// The memo lets list views show reasons and times from one visibility call.
	b.host.summarize(ctx, b.summary())
	b.commitStatus(ctx)
}

// commitStatus tells the event's StatusWorkflow what the build waits for
// or where it runs; the event sends the job's final status.
func (b *build) commitStatus(ctx workflow.Context) {
	if b.in.Statuses == "" || b.state.Status.Final() {
		return
	}
	state, desc := scm.StatePending, b.state.Reason
	if b.state.Status == StatusRunning {
		state = scm.StateRunning
	}
	if b.in.Build.Index > 0 {
		desc = fmt.Sprintf("#%d: %s", b.in.Build.Index, desc)
	}
	u := StatusUpdate{Context: b.in.StatusContext, State: state, Description: desc, Page: BuildPage(b.state.ID), At: workflow.Now(ctx)}
	b.statusSent = append(b.statusSent, workflow.SignalExternalWorkflow(ctx, b.in.Statuses, "", SignalCommitStatus, StatusBatch{Updates: []StatusUpdate{u}}))
}

// summary is the memo form of the build's record.
func (b *build) summary() BuildSummary {
	return BuildSummary{
		Reason: b.state.Reason, WaitCode: b.state.WaitCode, Executor: b.state.Executor, Attempts: len(b.state.Attempts),
		QueuedTime: b.state.QueuedTime, StartTime: b.state.StartTime, EndTime: b.state.EndTime,
		WaitUntil: b.state.WaitUntil, CollapsedInto: b.state.CollapsedInto, Fork: b.state.Fork,
	}
}

// finish records the outcome and its cause and frees the build's place in
// its lane.
func (b *build) finish(ctx workflow.Context, s Status, reason string, cause Cause, info *CauseInfo) BuildState {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	b.state.EndTime = workflow.Now(dctx)
	b.state.Cause, b.state.CauseInfo = cause, info
	b.setStatus(dctx, s, "", reason, time.Time{})
	workflow.GetMetricsHandler(dctx).WithTags(map[string]string{"queue": b.in.Queue, "cause": string(cause)}).Counter("sluice_builds_ended").Inc(1)
	if b.inLane && b.in.Slim && !b.cancel && ctx.Err() == nil {
		// Its event tells the pipeline, with its next batch.
		b.inLane = false
		b.state.LaneRelease = true
	}
	if b.inLane {
		b.inLane = false
		if err := b.host.leaveLane(dctx, BuildDone{Build: b.in.Build, Status: s}); err != nil {
			workflow.GetLogger(ctx).Warn("lane_release_failed", "build", b.state.ID, "error", err)
		}
	}
	for _, f := range b.statusSent {
		_ = f.Get(dctx, nil) // a reporter that already ended is fine
	}
	b.host.settle(dctx)
	return b.state
}

// resultCause is the cause of an attempt that ran to its end: the step
// that failed or ran out of time, with its exit code.
func resultCause(res activities.RunBuildResult) (Cause, *CauseInfo) {
	var failed *activities.StepResult
	for i := range res.Steps {
		if s := &res.Steps[i]; !s.Skipped && s.ExitCode != 0 {
			failed = s
			break
		}
	}
	info := func() *CauseInfo {
		if failed == nil {
			return nil
		}
		return &CauseInfo{Step: failed.Name, ExitCode: failed.ExitCode}
	}
	switch res.Status {
	case runner.StatusSuccess:
		return CauseSucceeded, nil
	case runner.StatusAborted:
		return CauseCancelled, nil
	case runner.StatusTimeout:
		return CauseTimedOut, info()
	default:
		return CauseFailed, info()
	}
}

// cancelledBy names who cancelled the build, when the API said.
func (b *build) cancelledBy() *CauseInfo {
	by := ""
	for b.byCh != nil {
		var msg CancelledBy
		if !b.byCh.ReceiveAsync(&msg) {
			break
		}
		by = msg.User
	}
	if by == "" {
		return nil
	}
	return &CauseInfo{By: by}
}

func statusOf(s runner.Status) Status {
	switch s {
	case runner.StatusSuccess:
		return StatusSuccess
	case runner.StatusAborted:
		return StatusAborted
	default:
		return StatusFailure
	}
}

func stepOutcomes(steps []activities.StepResult) []StepOutcome {
	out := make([]StepOutcome, 0, len(steps))
	for _, s := range steps {
		out = append(out, StepOutcome(s))
	}
	return out
}

// rootMessage is the message of the outermost application error in a
// Temporal error chain (the one an activity returned), or of the innermost
// error otherwise.
func rootMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				return app.Message()
			}
			return err.Error()
		}
		err = next
	}
}
