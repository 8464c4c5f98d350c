package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
)

// continueAsNewAfter bounds a long-lived entity's history (design.md §5
// suggests 4,096 events; the server also suggests it when a run grows).
const continueAsNewAfter = 4000

// changeDrainBeforeCAN: the pipeline continues as new only with no signal
// to a build in flight.
const changeDrainBeforeCAN = "drain-before-can"

// changeAbortGranted: deleting a pipeline aborts its granted, unclaimed
// builds too.
const changeAbortGranted = "abort-granted"

// changeOldRestartKeepsHead: restarting an older event of a pull request
// leaves the pull request's newer builds alone (N4).
const changeOldRestartKeepsHead = "old-restart-keeps-head"

// changeReleaseOlderPRHolds: a pull request's newer commit lifts its older
// events' holds (N20).
const changeReleaseOlderPRHolds = "release-older-pr-holds"

// changeBlockerReason: a build blocked by another job's builds names the
// job, not one of its builds (N17).
const changeBlockerReason = "blocker-reason"

// changeLazyHoldTimer: an event's hold arms the pipeline's timer only while
// a later event's build waits behind it (Lanes.lazyHolds).
const changeLazyHoldTimer = "lazy-hold-timer"

// changeHolds: a build held for earlier events is told so once ("waiting
// for earlier events to start their jobs"), not again each time the oldest
// of them starts its jobs (in a burst of n events that was up to n
// messages per build), and a build its lane can never keep waiting
// (LaneRequest.Inert) is not held at all (Lanes.oldHolds).
const changeHolds = "holds"

// changeEventResultDone: the run takes the lane places its events' last
// builds hold from the events' results (EventInput.DoneInResult), and hands
// that back to them by SignalHandBack before it continues as new.
const changeEventResultDone = "event-result-done"

// changeEnqueueUpdate: the run starts events with EventInput.EnqueueUpdate
// (their builds reach the lanes by UpdateEnqueue, answered with the lanes'
// first messages), and keeps a build the lanes hold whose workflow does not
// exist yet (it is about to start) instead of forgetting it.
const changeEnqueueUpdate = "enqueue-update"

// changeOneLauncher: one coroutine waits for the starts of the events the
// run launched, in order (pipelineRun.watchStart), where each event had a
// coroutine of its own: the SDK wakes every blocked coroutine on each pass
// of a workflow task, so a burst of hundreds of events waiting to start
// cost the pipeline's tasks hundreds of wake-ups each.
const changeOneLauncher = "one-launcher"

// UpdateEnqueue hands the lanes an EnqueueBatch and answers with the
// lanes' messages to its builds (EnqueueAnswer), which their workflows do
// not exist to receive yet.
const UpdateEnqueue = "enqueue-builds"

// startGrace is how long after its batch reached the lanes by UpdateEnqueue
// a build whose workflow cannot be signalled is taken to be starting (its
// event starts it right after the answer): the signal is sent again after
// resendAfter (see outbox). Past it, the build is taken to be gone, as
// before.
const (
	startGrace  = time.Minute
	resendAfter = time.Second
)

// changeLaneBound: a pipeline refuses builds past MaxLaneBuilds.
const changeLaneBound = "lane-bound"

// changeSupersedeWaiting: a pull request's newer event (or its close) tells
// the previous one, which may wait for approval, that it was superseded.
const changeSupersedeWaiting = "supersede-waiting"

// MaxLaneBuilds bounds the builds a pipeline's lanes hold (waiting, granted
// or running): the lanes are carried through continue-as-new, whose input
// Temporal caps at 2 MiB; at this bound it stays under 1 MiB
// (TestLanesCarriedSizeAtTheBound). A build past it ends FAILURE with
// "lane full: …" instead of the pipeline workflow being terminated.
const MaxLaneBuilds = 2000

// laneFull reports whether the lanes are at MaxLaneBuilds, with the
// message that refuses build b.
func laneFull(l *Lanes, pipeline string, b BuildRef) (LaneEffect, bool) {
	n := l.Len()
	if n < MaxLaneBuilds {
		return LaneEffect{}, false
	}
	return LaneEffect{Build: b, Msg: LaneMessage{
		Kind: LaneFail, Status: StatusFailure,
		Reason: fmt.Sprintf("lane full: pipeline %s already holds %d builds waiting or running (the limit is %d); the build is refused", pipeline, n, MaxLaneBuilds),
	}}, true
}

// maxDeliveries is how many webhook deliveries a pipeline remembers for
// deduplication.
const maxDeliveries = 500

// eventHold bounds how long later events wait for an earlier one to hand
// its first builds to the lanes (reading a spec from a large repository's
// first clone can take minutes).
const eventHold = 10 * time.Minute

// ErrPipelineDeleted is returned to updates on a deleted pipeline.
var ErrPipelineDeleted = errors.New("pipeline deleted")

type pendingSignal struct {
	build BuildRef
	// builds are the builds of one event that runs them itself, told
	// together (SignalBuildLanes); build is then unset.
	builds []BuildRef
	f      workflow.Future
	// event: a signal to an event workflow (SignalPRSuperseded), not to a
	// build's lane; its failure (the event ended) frees nothing.
	event bool
	// outbox: the signal is the first message of the build's outbox.
	outbox bool
}

// outbox holds the lane messages to one build whose workflow may still be
// starting (PipelineState.Starting: handed over by UpdateEnqueue, within
// startGrace of it). They go one at a time, in the order the lanes decided
// them: a message that finds no workflow is sent again after resendAfter
// until the grace ends, even
// when the lanes no longer hold the build (a collapse drops a waiting
// build at once, and the build must still hear of it), and those behind it
// wait for it (a collapse must never overtake the grant before it). The
// outbox is dropped when the lanes hear of the build's end.
type outbox struct {
	build BuildRef
	msgs  []LaneMessage
	// inFlight: msgs[0] is being signalled; else it goes again at at.
	inFlight bool
	at       time.Time
	// until is the end of the build's grace (its enqueue + startGrace).
	until time.Time
}

type pipelineRun struct {
	cfg PipelineConfig
	// st is everything carried through continue-as-new (the delete too:
	// st.Deleted); the fields below are drained before it.
	st PipelineState
	// legacy: a run recorded before changeLaneOrder.
	legacy bool
	// pending signals to builds, drained before continue-as-new.
	pending []pendingSignal
	// startQueue are events asked for by signal (schedules), started in order.
	startQueue []StartEventRequest
	syncs      []SpecSync
	// launching counts events admitted by UpdateStartEvents whose workflows
	// have not started yet; the run does not continue as new meanwhile.
	launching int
	// oneLauncher: one coroutine waits for those starts, in the order of
	// toWatch, while it is not empty (decided once by GetVersion).
	oneLauncher bool
	toWatch     []launchedEvent
	// releaseOlderPRHolds: this run lifts older PR events' holds (N20;
	// decided once by GetVersion).
	releaseOlderPRHolds bool
	// wake tells the main loop that an update changed something it acts on
	// (a delete must end the run even when no signal follows).
	wake workflow.Channel
	// resultDone: this run starts events with EventInput.DoneInResult
	// (decided once by GetVersion).
	resultDone bool
	// children are the DoneInResult events this run started and has not
	// heard the end of (nor handed back).
	children []childEvent
	// enqueueUpdate: this run starts events with EventInput.EnqueueUpdate
	// (decided once by GetVersion).
	enqueueUpdate bool
	// outboxes hold the messages to builds whose workflows may be starting.
	outboxes []*outbox
}

// childEvent is a DoneInResult event of this run.
type childEvent struct {
	event int
	fut   workflow.ChildWorkflowFuture
	// handBack is SignalHandBack, sent before continue-as-new; failed: it
	// could not be delivered (the event ended), so its result comes.
	handBack workflow.Future
	failed   bool
}

// PipelineWorkflow is a pipeline's entity: it numbers and starts events,
// holds the per-job lanes that decide when each build may dispatch, and keeps
// the pipeline's remote-trigger subscriptions and periodic schedules in step
// with the spec on its default branch. It runs until the pipeline is deleted,
// continuing as new to keep its history short.
func PipelineWorkflow(ctx workflow.Context, in PipelineInput) error {
	p := &pipelineRun{cfg: in.Config, wake: workflow.NewBufferedChannel(ctx, 1)}
	if in.State != nil {
		p.st = *in.State
	}
	if p.st.NextEvent == 0 {
		p.st.NextEvent = 1
	}
	log := workflow.GetLogger(ctx)
	// Runs recorded before lanes kept the order of granted builds, pull
	// requests had lanes of their own and syncs were ordered replay with the
	// old rules until they continue as new.
	p.legacy = workflow.GetVersion(ctx, changeLaneOrder, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	p.st.Lanes.legacy = p.legacy
	p.st.Lanes.blockerNamesBuild = workflow.GetVersion(ctx, changeBlockerReason, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	p.st.Lanes.lazyHolds = workflow.GetVersion(ctx, changeLazyHoldTimer, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	p.st.Lanes.oldHolds = workflow.GetVersion(ctx, changeHolds, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	p.resultDone = workflow.GetVersion(ctx, changeEventResultDone, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	p.enqueueUpdate = workflow.GetVersion(ctx, changeEnqueueUpdate, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	p.oneLauncher = workflow.GetVersion(ctx, changeOneLauncher, workflow.DefaultVersion, 1) != workflow.DefaultVersion

	if err := workflow.SetQueryHandler(ctx, QueryPipeline, func() (PipelineInfo, error) {
		return PipelineInfo{
			Config: p.cfg, Events: p.st.NextEvent - 1, Lanes: p.st.Lanes,
			Subscriptions: p.st.Subscriptions, Periodic: p.st.Periodic, LastSHA: p.st.LastSHA,
			ScheduleError: p.st.ScheduleError, SyncedAt: p.st.SyncedAt, Warnings: p.st.SpecWarnings, Parameters: p.st.SpecParameters,
		}, nil
	}); err != nil {
		return fmt.Errorf("register pipeline query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateStartEvent, p.startEvent,
		workflow.UpdateHandlerOptions{Validator: p.validateStart}); err != nil {
		return fmt.Errorf("register start-event update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateStartEvents, p.startEvents,
		workflow.UpdateHandlerOptions{Validator: p.validateStartEvents}); err != nil {
		return fmt.Errorf("register start-events update: %w", err)
	}
	if p.enqueueUpdate {
		if err := workflow.SetUpdateHandler(ctx, UpdateEnqueue, p.enqueueByUpdate); err != nil {
			return fmt.Errorf("register enqueue update: %w", err)
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateConfigure,
		func(ctx workflow.Context, c PipelineConfig) (PipelineConfig, error) {
			p.cfg.Repo, p.cfg.Branch, p.cfg.Queue, p.cfg.Statuses, p.cfg.Public = c.Repo, c.Branch, c.Queue, c.Statuses, c.Public
			p.cfg.BuildsInEvents = c.BuildsInEvents
			if c.Dispatch != (Dispatch{}) {
				p.cfg.Dispatch = c.Dispatch
			}
			if c.Owner != nil {
				p.cfg.Owner = c.Owner
			}
			if c.Admins != nil {
				p.cfg.Admins = c.Admins
			}
			return p.cfg, nil
		}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, c PipelineConfig) error {
			if p.st.Deleted {
				return ErrPipelineDeleted
			}
			if c.Repo == "" {
				return errors.New("repo must not be empty")
			}
			return nil
		}}); err != nil {
		return fmt.Errorf("register configure update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDelete,
		func(ctx workflow.Context, _ string) (int, error) {
			p.st.Deleted = true
			// N10: builds granted but not claimed end too (runs recorded
			// before this change aborted only the waiting ones).
			granted := workflow.GetVersion(ctx, changeAbortGranted, workflow.DefaultVersion, 1) != workflow.DefaultVersion
			effects := p.st.Lanes.AbortAll(fmt.Sprintf("pipeline %s was deleted", p.cfg.Name), granted)
			p.send(ctx, effects)
			p.wake.SendAsync(true)
			return len(effects), nil
		}, workflow.UpdateHandlerOptions{Validator: func(workflow.Context, string) error {
			if p.st.Deleted {
				return ErrPipelineDeleted
			}
			return nil
		}}); err != nil {
		return fmt.Errorf("register delete update: %w", err)
	}

	if err := workflow.SetQueryHandler(ctx, QueryAdmissions, p.admissions); err != nil {
		return fmt.Errorf("register admissions query: %w", err)
	}
	// Admissions are numbered as they arrive, whatever the main loop waits
	// for (a coroutine issues no command until a signal comes: runs
	// recorded before it replay alike).
	admitCh := workflow.GetSignalChannel(ctx, SignalAdmitEvents)
	workflow.Go(ctx, func(ctx workflow.Context) { p.admitLoop(ctx, admitCh) })

	enqueueCh := workflow.GetSignalChannel(ctx, SignalEnqueue)
	doneCh := workflow.GetSignalChannel(ctx, SignalBuildDone)
	syncCh := workflow.GetSignalChannel(ctx, SignalSpecSynced)
	startCh := workflow.GetSignalChannel(ctx, SignalStartEvent)
	startedCh := workflow.GetSignalChannel(ctx, SignalBuildStarted)

	// One timer, for the earliest timed wait (freeze window or delay).
	var timer workflow.Future
	var timerCancel workflow.CancelFunc
	var timerAt time.Time
	for {
		now := workflow.Now(ctx)
		wake := p.st.Lanes.NextWake(now)
		for _, o := range p.outboxes {
			if !o.inFlight && (wake.IsZero() || o.at.Before(wake)) {
				wake = o.at
			}
		}
		if timer != nil && (timer.IsReady() || !wake.Equal(timerAt)) {
			timerCancel()
			timer = nil
		}
		if timer == nil && !wake.IsZero() {
			tctx, cancel := workflow.WithCancel(ctx)
			timer, timerCancel, timerAt = workflow.NewTimerWithOptions(tctx, wake.Sub(now),
				workflow.TimerOptions{Summary: "a freeze window or delay ends"}), cancel, wake
		}
		sel := workflow.NewSelector(ctx)
		if timer != nil {
			sel.AddFuture(timer, func(workflow.Future) {})
		}
		for _, ps := range p.pending {
			sel.AddFuture(ps.f, func(workflow.Future) {})
		}
		for _, c := range p.children {
			sel.AddFuture(c.fut, func(workflow.Future) {})
			if c.handBack == nil && !c.fut.GetChildWorkflowExecution().IsReady() {
				sel.AddFuture(c.fut.GetChildWorkflowExecution(), func(workflow.Future) {})
			}
			if c.handBack != nil && !c.failed {
				sel.AddFuture(c.handBack, func(workflow.Future) {})
			}
		}
		// The callbacks only wake the loop; everything is drained below.
		for _, ch := range []workflow.ReceiveChannel{enqueueCh, doneCh, syncCh, startCh, startedCh} {
			sel.AddReceive(ch, func(workflow.ReceiveChannel, bool) {})
		}
		sel.AddReceive(p.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		sel.Select(ctx)

		// Drain everything that arrived, in a fixed order.
		now = workflow.Now(ctx)
		var effects []LaneEffect
		var batches []EnqueueBatch
		for {
			var batch EnqueueBatch
			if !enqueueCh.ReceiveAsync(&batch) {
				break
			}
			batches = append(batches, batch)
		}
		for {
			var d BuildDone
			if !doneCh.ReceiveAsync(&d) {
				break
			}
			p.ended(d.Build)
		}
		// Builds whose event tells of their end (Slim), as if they had
		// signalled it themselves.
		for _, batch := range batches {
			for _, b := range batch.Done {
				p.ended(b)
			}
		}
		p.reapChildren(ctx)
		for {
			var st BuildStarted
			if !startedCh.ReceiveAsync(&st) {
				break
			}
			p.st.Lanes.Started(st.Build)
		}
		// A build that ended without the lane hearing of it (its signal to
		// the build failed) leaves the lane.
		effects = append(effects, p.reap(ctx, now)...)
		// Oldest event first, so the lanes see builds in event order.
		sort.SliceStable(batches, func(i, j int) bool { return batches[i].Event < batches[j].Event })
		for _, batch := range batches {
			effects = append(effects, p.applyBatch(ctx, batch, now, false)...)
		}
		for {
			var s SpecSync
			if !syncCh.ReceiveAsync(&s) {
				break
			}
			p.syncs = append(p.syncs, s)
		}
		for {
			var r StartEventRequest
			if !startCh.ReceiveAsync(&r) {
				break
			}
			p.startQueue = append(p.startQueue, r)
		}
		p.sendDue(ctx, now)
		effects = append(effects, p.st.Lanes.Evaluate(now)...)
		p.send(ctx, effects)

		for len(p.startQueue) > 0 && !p.st.Deleted {
			r := p.startQueue[0]
			p.startQueue = p.startQueue[1:]
			if err := p.validateStart(ctx, r); err != nil {
				log.Warn("signalled_event_rejected", "pipeline", p.cfg.Name, "error", err)
				p.notifyPeriodic(ctx, r.Notify, err.Error())
				continue
			}
			if _, err := p.startEvent(ctx, r); err != nil {
				log.Warn("signalled_event_failed", "pipeline", p.cfg.Name, "error", err)
				p.notifyPeriodic(ctx, r.Notify, err.Error())
			}
		}
		if len(p.syncs) > 0 {
			last := p.newestSync()
			p.syncs = nil
			p.applySync(ctx, last)
		}

		if p.st.Deleted && p.st.Lanes.Len() == 0 && p.launching == 0 {
			p.flush(ctx)
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			if !p.legacy {
				if err := workflow.UpsertMemo(ctx, map[string]any{MemoNextEvent: p.st.NextEvent}); err != nil {
					log.Warn("next_event_memo_failed", "pipeline", p.cfg.Name, "error", err)
				}
			}
			if err := p.syncSchedules(ctx, nil); err != nil {
				log.Warn("schedule_cleanup_failed", "pipeline", p.cfg.Name, "error", err)
			}
			return nil
		}
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() > continueAsNewAfter || info.GetContinueAsNewSuggested() {
			p.handBack(ctx)
			p.flush(ctx)
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			// Signals that arrived meanwhile stay in the channels; keep going
			// until a pass ends with nothing pending.
			// An update handler may have queued signals to builds while
			// the run waited for handlers (N12): those must be sent, not
			// dropped with the run (the server drops a closed sender's
			// signals), so a pass with any pending goes round. Runs
			// recorded before this change continued regardless.
			drained := len(p.pending) == 0
			if !drained && workflow.GetVersion(ctx, changeDrainBeforeCAN, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				drained = true
			}
			if enqueueCh.Len() == 0 && doneCh.Len() == 0 && syncCh.Len() == 0 && startCh.Len() == 0 && startedCh.Len() == 0 && admitCh.Len() == 0 &&
				len(p.startQueue) == 0 && len(p.syncs) == 0 && p.launching == 0 && drained && len(p.children) == 0 && len(p.outboxes) == 0 {
				st := p.st
				return workflow.NewContinueAsNewError(ctx, PipelineWorkflow, PipelineInput{Config: p.cfg, State: &st})
			}
		}
	}
}

// reapChildren takes the lane places back from the results of the
// DoneInResult events that ended, and forgets the events that took the
// duty back (their hand-back was delivered: they send a batch instead).
func (p *pipelineRun) reapChildren(ctx workflow.Context) {
	kept := p.children[:0]
	for _, c := range p.children {
		if c.fut.IsReady() {
			var st EventState
			if err := c.fut.Get(ctx, &st); err == nil {
				for _, b := range st.LaneDone {
					p.ended(b)
				}
			}
			continue
		}
		if c.handBack != nil && !c.failed && c.handBack.IsReady() {
			if err := c.handBack.Get(ctx, nil); err == nil {
				continue
			}
			c.failed = true // it ended: its result is on its way
		}
		kept = append(kept, c)
	}
	p.children = kept
}

// handBack tells every DoneInResult event still running that this run is
// about to continue as new (the next run is not their parent): they give
// their last lane places back by an enqueue batch. The run continues as
// new once each was told or has ended.
func (p *pipelineRun) handBack(ctx workflow.Context) {
	for i := range p.children {
		// Once it started (a continue-as-new waits for starts anyway).
		if p.children[i].handBack == nil && p.children[i].fut.GetChildWorkflowExecution().IsReady() {
			id := EventRef{Pipeline: p.cfg.Name, Number: p.children[i].event}.WorkflowID()
			p.children[i].handBack = workflow.SignalExternalWorkflow(ctx, id, "", SignalHandBack, "continue-as-new")
		}
	}
}

// send signals each effect to its build. Futures are kept so nothing is in
// flight when the run continues as new, and so a failed signal (the build
// already ended) frees its place in the lane.
func (p *pipelineRun) send(ctx workflow.Context, effects []LaneEffect) {
	now := workflow.Now(ctx)
	if len(p.st.Starting) > 0 {
		// Builds whose grace ended are no longer starting.
		p.st.Starting = slices.DeleteFunc(p.st.Starting, func(s StartingBuild) bool { return !now.Before(s.Until) })
	}
	var owned map[int][]LaneEffect
	var events []int
	for _, e := range effects {
		if n := e.Build.Event; p.st.ownsBuildsOf(n) {
			// The event exists (it handed the build over): no outbox.
			if owned == nil {
				owned = map[int][]LaneEffect{}
			}
			if _, ok := owned[n]; !ok {
				events = append(events, n)
			}
			owned[n] = append(owned[n], e)
			continue
		}
		if o := p.outboxOf(e.Build); o != nil {
			o.msgs = append(o.msgs, e.Msg)
			continue
		}
		if until, ok := p.starting(e.Build); ok {
			o := &outbox{build: e.Build, msgs: []LaneMessage{e.Msg}, until: until}
			p.outboxes = append(p.outboxes, o)
			p.sendFirst(ctx, o)
			continue
		}
		p.pending = append(p.pending, pendingSignal{build: e.Build, f: workflow.SignalExternalWorkflow(ctx, e.Build.WorkflowID(), "", SignalLane, e.Msg)})
	}
	for _, n := range events {
		fx := owned[n]
		builds := make([]BuildRef, 0, len(fx))
		for _, e := range fx {
			builds = append(builds, e.Build)
		}
		ev := EventRef{Pipeline: p.cfg.Name, Number: n}
		p.pending = append(p.pending, pendingSignal{builds: builds, f: workflow.SignalExternalWorkflow(ctx, ev.WorkflowID(), "", SignalBuildLanes, BuildLanes{Effects: fx})})
	}
}

// refs are the builds a signal told.
func (ps pendingSignal) refs() []BuildRef {
	if ps.builds != nil {
		return ps.builds
	}
	return []BuildRef{ps.build}
}

func (p *pipelineRun) outboxOf(b BuildRef) *outbox {
	for _, o := range p.outboxes {
		if o.build == b {
			return o
		}
	}
	return nil
}

// sendFirst signals the first message of o.
func (p *pipelineRun) sendFirst(ctx workflow.Context, o *outbox) {
	o.inFlight = true
	p.pending = append(p.pending, pendingSignal{
		build: o.build, outbox: true,
		f: workflow.SignalExternalWorkflow(ctx, o.build.WorkflowID(), "", SignalLane, o.msgs[0]),
	})
}

// dropOutbox forgets o.
func (p *pipelineRun) dropOutbox(o *outbox) {
	p.outboxes = slices.DeleteFunc(p.outboxes, func(x *outbox) bool { return x == o })
}

// ended forgets a build whose end the lanes heard of, and its outbox:
// nothing it was to be told matters any more.
func (p *pipelineRun) ended(b BuildRef) {
	p.st.Lanes.Remove(b)
	if o := p.outboxOf(b); o != nil {
		p.dropOutbox(o)
	}
	p.st.Starting = slices.DeleteFunc(p.st.Starting, func(s StartingBuild) bool { return s.Build == b })
}

// starting reports whether build b may still be starting (and until when).
func (p *pipelineRun) starting(b BuildRef) (time.Time, bool) {
	for _, s := range p.st.Starting {
		if s.Build == b {
			return s.Until, true
		}
	}
	return time.Time{}, false
}

// sent takes the outcome of the first message of o: the next goes when it
// was delivered; when no workflow took it, it goes again after resendAfter
// within the build's grace, else the build is gone (the effects of its
// leaving the lanes are returned). next collects the outboxes whose next
// message is to be sent.
func (p *pipelineRun) sent(ctx workflow.Context, o *outbox, err error, now time.Time, next *[]*outbox) []LaneEffect {
	o.inFlight = false
	var gone *temporal.UnknownExternalWorkflowExecutionError
	if err == nil || !errors.As(err, &gone) {
		if err != nil {
			workflow.GetLogger(ctx).Info("lane_signal_failed", "build", o.build.String(), "error", err)
		}
		o.msgs = o.msgs[1:]
		if len(o.msgs) == 0 {
			p.dropOutbox(o)
		} else {
			*next = append(*next, o)
		}
		return nil
	}
	if now.Before(o.until) {
		o.at = now.Add(resendAfter)
		return nil
	}
	workflow.GetLogger(ctx).Info("lane_signal_failed", "build", o.build.String(), "error", err)
	p.dropOutbox(o)
	return p.st.Lanes.Done(o.build, now)
}

// sendDue sends again the first message of each outbox whose wait ended.
func (p *pipelineRun) sendDue(ctx workflow.Context, now time.Time) {
	for _, o := range p.outboxes {
		if !o.inFlight && !o.at.After(now) {
			p.sendFirst(ctx, o)
		}
	}
}

// reap drops finished signal futures; builds that could not be signalled
// have ended, so the lanes forget them.
func (p *pipelineRun) reap(ctx workflow.Context, now time.Time) []LaneEffect {
	var effects []LaneEffect
	var next []*outbox
	kept := p.pending[:0]
	for _, ps := range p.pending {
		if !ps.f.IsReady() {
			kept = append(kept, ps)
			continue
		}
		if ps.outbox {
			if o := p.outboxOf(ps.build); o != nil {
				effects = append(effects, p.sent(ctx, o, ps.f.Get(ctx, nil), now, &next)...)
			}
			continue
		}
		if err := ps.f.Get(ctx, nil); err != nil && ps.event {
			workflow.GetLogger(ctx).Debug("event_signal_failed", "error", err) // the event ended: nothing waits
		} else if err != nil {
			workflow.GetLogger(ctx).Info("lane_signal_failed", "builds", fmt.Sprint(ps.refs()), "error", err)
			var gone *temporal.UnknownExternalWorkflowExecutionError
			if p.legacy || errors.As(err, &gone) {
				for _, b := range ps.refs() {
					effects = append(effects, p.st.Lanes.Done(b, now)...)
				}
			}
		}
	}
	p.pending = kept
	for _, o := range next {
		p.sendFirst(ctx, o)
	}
	return effects
}

func (p *pipelineRun) flush(ctx workflow.Context) {
	for len(p.pending) > 0 {
		_ = workflow.Await(ctx, func() bool {
			for _, ps := range p.pending {
				if !ps.f.IsReady() {
					return false
				}
			}
			return true
		})
		p.send(ctx, p.reap(ctx, workflow.Now(ctx)))
	}
}

func (p *pipelineRun) validateStart(_ workflow.Context, r StartEventRequest) error {
	if p.st.Deleted {
		return fmt.Errorf("%w: %s", ErrPipelineDeleted, p.cfg.Name)
	}
	if !r.Trigger.Kind.Valid() {
		return fmt.Errorf("unknown trigger kind %q (want commit, pr, pr-closed, release, tag, manual, periodic or remote)", r.Trigger.Kind)
	}
	if r.Parent < 0 || r.Parent >= p.st.NextEvent {
		return fmt.Errorf("parent event %d does not exist in pipeline %s (last event is %d)", r.Parent, p.cfg.Name, p.st.NextEvent-1)
	}
	if r.Trigger.PR < 0 {
		return fmt.Errorf("pull request number %d must be positive", r.Trigger.PR)
	}
	if (r.Trigger.Kind == TriggerPR || r.Trigger.Kind == TriggerPRClosed) && r.Trigger.PR == 0 {
		return fmt.Errorf("a %s event needs a pull request number", r.Trigger.Kind)
	}
	return nil
}

// startEvent numbers the event and starts its workflow. A webhook delivery
// seen before returns the event it started then.
func (p *pipelineRun) startEvent(ctx workflow.Context, r StartEventRequest) (StartEventResult, error) {
	return p.launchEvent(ctx, r).wait(ctx, p)
}

// launchedEvent is an event whose workflow start has been asked for.
type launchedEvent struct {
	res StartEventResult
	// started resolves once the event's workflow started; nil for a
	// delivery seen before.
	started workflow.Future
}

// launchEvent numbers the event and asks for its workflow's start without
// waiting for it (UpdateStartEvents starts many in one workflow task).
func (p *pipelineRun) launchEvent(ctx workflow.Context, r StartEventRequest) launchedEvent {
	if id := r.Trigger.DeliveryID; id != "" {
		for _, d := range p.st.Deliveries {
			if d.ID == id {
				return launchedEvent{res: StartEventResult{Event: EventRef{Pipeline: p.cfg.Name, Number: d.Event}, Duplicate: true}}
			}
		}
	}
	ref := EventRef{Pipeline: p.cfg.Name, Number: p.st.NextEvent}
	p.st.NextEvent++
	if pr := r.Trigger.PR; !p.legacy && pr > 0 && (r.Trigger.Kind == TriggerPR || r.Trigger.Kind == TriggerPRClosed) {
		p.st.Lanes.HoldPR(ref.Number, pr, workflow.Now(ctx).Add(eventHold))
	} else {
		p.st.Lanes.Hold(ref.Number, workflow.Now(ctx).Add(eventHold))
	}
	if r.Identity == nil && (r.Trigger.Kind == TriggerPR || r.Trigger.Kind == TriggerPRClosed) {
		// A pull request nobody started by hand runs a stranger's code:
		// it acts for the unprivileged pull-request identity, never for
		// the owner (data only: no command changes, so no version).
		pr := PullRequestIdentity()
		r.Identity = &pr
	}
	if !p.legacy {
		if r.Identity == nil && r.Trigger.Kind == TriggerPeriodic && p.st.ScheduleBy != nil {
			// A schedule acts for who set it up (checked then).
			by := *p.st.ScheduleBy
			r.Identity = &by
		}
		if r.Identity == nil && p.cfg.Owner != nil {
			// Nobody started it by hand: it acts for the pipeline's owner.
			owner := *p.cfg.Owner
			r.Identity = &owner
		}
		// N4: a restart or re-run of an older event of the pull request
		// runs beside its newer commit; it neither supersedes the head nor
		// becomes the pull request's newest event.
		st, known := p.st.PRs[r.Trigger.PR]
		besideHead := r.Parent > 0 && known && st.Event > r.Parent &&
			workflow.GetVersion(ctx, changeOldRestartKeepsHead, workflow.DefaultVersion, 1) != workflow.DefaultVersion
		if !besideHead {
			if r.Trigger.Kind == TriggerPR && p.st.Lanes.olderPRHold(r.Trigger.PR, ref.Number) {
				p.releaseOlderPRHolds = workflow.GetVersion(ctx, changeReleaseOlderPRHolds, workflow.DefaultVersion, 1) != workflow.DefaultVersion
			}
			p.send(ctx, p.supersedePR(r.Trigger, ref.Number))
			p.supersedeWaiting(ctx, r.Trigger, st, known, ref.Number)
		}
	}
	if id := r.Trigger.DeliveryID; id != "" {
		p.st.Deliveries = append(p.st.Deliveries, DeliverySeen{ID: id, Event: ref.Number})
		if len(p.st.Deliveries) > maxDeliveries {
			p.st.Deliveries = p.st.Deliveries[len(p.st.Deliveries)-maxDeliveries:]
		}
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            ref.WorkflowID(),
		TaskQueue:             ControllerTaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// The memo and the PR attribute are data of the start command, not
		// commands: old histories replay alike (the SDK matches a child's
		// start by its workflow type).
		TypedSearchAttributes: temporal.NewSearchAttributes(eventSearchAttributes(p.cfg, ref, r.Trigger)...),
		Memo:                  map[string]any{MemoEvent: SummaryOf(r.Trigger, eventBranch(p.cfg, r.Trigger))},
		StaticSummary:         fmt.Sprintf("event %s: %s", ref, describeTrigger(r.Trigger, r.StartFrom)),
	})
	// Data, not a command: runs recorded before BuildsInEvents replay alike
	// (docs/option-b.md: every controller must run this code before a
	// pipeline opts in).
	owns := p.cfg.BuildsInEvents && p.enqueueUpdate
	if owns {
		p.st.markOwned(ref.Number)
	}
	child := workflow.ExecuteChildWorkflow(cctx, EventWorkflow, EventInput{
		Event: ref, Config: p.cfg, Trigger: r.Trigger, StartFrom: r.StartFrom, StartJobs: r.StartJobs, Rerun: r.Rerun,
		Notify: r.Notify, Force: r.Force, Parent: r.Parent,
		ParentSucceeded: r.ParentSucceeded, Creator: r.Creator, Identity: r.Identity, Parameters: r.Parameters,
		Lean: true, Slim: true, DoneInResult: p.resultDone, EnqueueUpdate: p.enqueueUpdate, // data, not a command: old runs replay alike
		OwnsBuilds: owns,
	})
	if p.resultDone {
		p.children = append(p.children, childEvent{event: ref.Number, fut: child})
	}
	return launchedEvent{res: StartEventResult{Event: ref, Queue: p.queueName()}, started: child.GetChildWorkflowExecution()}
}

// queueName is the pipeline's queue (the default queue when it names none).
func (p *pipelineRun) queueName() string { return cmp.Or(p.cfg.Queue, queue.DefaultQueueName) }

// watchStart waits, beside the handler that launched it, for the event's
// workflow to start: the run does not continue as new before (launching).
// A run since changeOneLauncher waits for all of them in one coroutine, in
// launch order: the server starts children about in the order they were
// asked for, and one that came before an earlier one is counted as soon as
// that one has.
func (p *pipelineRun) watchStart(ctx workflow.Context, l launchedEvent) {
	p.launching++
	if !p.oneLauncher {
		workflow.Go(ctx, func(ctx workflow.Context) { p.awaitStart(ctx, l) })
		return
	}
	p.toWatch = append(p.toWatch, l)
	if len(p.toWatch) > 1 {
		return // the coroutine waiting for the first comes to it
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for len(p.toWatch) > 0 {
			p.awaitStart(ctx, p.toWatch[0])
			p.toWatch = p.toWatch[1:]
		}
	})
}

// awaitStart waits for one launched event's workflow to start.
func (p *pipelineRun) awaitStart(ctx workflow.Context, l launchedEvent) {
	if _, err := l.wait(ctx, p); err != nil {
		workflow.GetLogger(ctx).Error("event_start_failed", "pipeline", p.cfg.Name, "error", err)
	}
	p.launching--
	p.wake.SendAsync(true) // a continue-as-new may wait for this
}

// wait returns once the event's workflow started. When it cannot start, the
// event no longer holds later events' builds.
func (l launchedEvent) wait(ctx workflow.Context, p *pipelineRun) (StartEventResult, error) {
	if l.started == nil {
		return l.res, nil
	}
	if err := l.started.Get(ctx, nil); err != nil {
		p.st.Lanes.Release(l.res.Event.Number)
		return StartEventResult{}, fmt.Errorf("start event %s: %w", l.res.Event, err)
	}
	return l.res, nil
}

func eventBranch(cfg PipelineConfig, t Trigger) string {
	if t.Branch != "" {
		return t.Branch
	}
	return cfg.Branch
}

func describeTrigger(t Trigger, startFrom string) string {
	s := string(t.Kind)
	switch {
	case t.Kind == TriggerPR || t.Kind == TriggerPRClosed:
		s += fmt.Sprintf(" #%d", t.PR)
	case t.Ref != "":
		s += " " + t.Ref
	case t.Branch != "":
		s += " on " + t.Branch
	}
	if startFrom != "" {
		s += " from " + startFrom
	}
	return s
}

// newestSync picks the sync to apply from those that arrived together: the
// newest event's (legacy runs: the last to arrive).
func (p *pipelineRun) newestSync() SpecSync {
	last := p.syncs[len(p.syncs)-1]
	if p.legacy {
		return last
	}
	for _, s := range p.syncs {
		if s.Event > last.Event {
			last = s
		}
	}
	return last
}

// applySync records the default branch's subscriptions and periodic jobs,
// updating the search attribute and the schedules when they changed. A sync
// from an event older than the last one applied is ignored: an old commit
// that resolved slowly must not bring back its older spec.
func (p *pipelineRun) applySync(ctx workflow.Context, s SpecSync) {
	if !p.legacy {
		if s.Event < p.st.SyncedEvent || (s.Event == 0 && p.st.SyncedEvent > 0) {
			workflow.GetLogger(ctx).Info("stale_spec_sync_ignored", "pipeline", p.cfg.Name, "event", s.Event, "applied", p.st.SyncedEvent)
			return
		}
		p.st.SyncedEvent = s.Event
	}
	p.st.LastSHA = s.SHA
	p.st.SyncedAt = workflow.Now(ctx).UTC()
	p.st.SpecWarnings, p.st.SpecParameters = s.Warnings, s.Parameters
	subs := slices.Clone(s.Subscriptions)
	sort.Strings(subs)
	if !slices.Equal(subs, p.st.Subscriptions) {
		p.st.Subscriptions = subs
		if err := workflow.UpsertTypedSearchAttributes(ctx, SASubscriptions.ValueSet(subs)); err != nil {
			workflow.GetLogger(ctx).Warn("subscriptions_upsert_failed", "error", err)
		}
	}
	if s.SetBy != nil {
		by := *s.SetBy
		p.st.ScheduleBy = &by
	}
	same := maps.Equal(s.Periodic, p.st.Periodic) //workflowcheck:ignore (maps.Equal does not depend on the order)
	if !same {
		if err := p.syncSchedules(ctx, s.Periodic); err != nil {
			workflow.GetLogger(ctx).Warn("schedule_sync_failed", "pipeline", p.cfg.Name, "error", err)
			if !p.legacy {
				p.st.ScheduleError = "periodic builds are not scheduled: " + rootMessage(err)
			}
			return
		}
		p.st.Periodic = s.Periodic
		p.st.ScheduleError = ""
	}
	if len(s.Refused) > 0 {
		p.st.ScheduleError = "periodic builds not scheduled for " + s.SetBy.User + ": " + strings.Join(s.Refused, "; ")
	} else if same && s.SetBy != nil {
		p.st.ScheduleError = ""
	}
}

// supersedePR ends the builds of a pull request's older events when a newer
// commit to it (a pr event) or its close (a pr-closed event) arrives.
func (p *pipelineRun) supersedePR(t Trigger, event int) []LaneEffect {
	if t.PR <= 0 || (t.Kind != TriggerPR && t.Kind != TriggerPRClosed) {
		return nil
	}
	if p.st.PRs == nil {
		p.st.PRs = map[int]PRState{}
	}
	p.st.PRs[t.PR] = PRState{Event: event, SHA: t.SHA, Closed: t.Kind == TriggerPRClosed}
	if t.Kind == TriggerPRClosed {
		p.pruneClosedPRs()
		return p.st.Lanes.SupersedePR(t.PR, event, LaneAbort, fmt.Sprintf("pull request #%d was closed", t.PR))
	}
	if p.releaseOlderPRHolds {
		p.st.Lanes.ReleasePR(t.PR, event)
	}
	return p.st.Lanes.SupersedePR(t.PR, event, LaneCollapse, supersededBy(t, event))
}

// supersededBy is the reason a pull request's older builds end with.
// supersedeWaiting tells the pull request's previous event that a newer
// commit or the close replaced it: if it still waits for approval, it ends
// (an approval would only start builds superseded at once).
func (p *pipelineRun) supersedeWaiting(ctx workflow.Context, t Trigger, prev PRState, known bool, event int) {
	if !known || prev.Event >= event || t.PR <= 0 || (t.Kind != TriggerPR && t.Kind != TriggerPRClosed) {
		return
	}
	if workflow.GetVersion(ctx, changeSupersedeWaiting, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	why := supersededBy(t, event)
	if t.Kind == TriggerPRClosed {
		why = fmt.Sprintf("pull request #%d was closed", t.PR)
	}
	target := EventRef{Pipeline: p.cfg.Name, Number: prev.Event}.WorkflowID()
	p.pending = append(p.pending, pendingSignal{event: true, f: workflow.SignalExternalWorkflow(ctx, target, "", SignalPRSuperseded,
		PRSuperseded{Closed: t.Kind == TriggerPRClosed, Reason: why})})
}

func supersededBy(t Trigger, event int) string {
	if t.SHA != "" {
		return fmt.Sprintf("superseded by %s (event %d)", short(t.SHA), event)
	}
	return fmt.Sprintf("superseded by event %d of pull request #%d", event, t.PR)
}

// supersededPR answers a pull request build that arrives after a newer
// event of its pull request (or its close) superseded its event.
func (p *pipelineRun) supersededPR(b BuildRef) (LaneEffect, bool) {
	if p.legacy || b.PR <= 0 {
		return LaneEffect{}, false
	}
	st, ok := p.st.PRs[b.PR]
	if !ok || b.Event >= st.Event {
		return LaneEffect{}, false
	}
	if st.Closed {
		return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: fmt.Sprintf("pull request #%d was closed", b.PR)}}, true
	}
	return LaneEffect{Build: b, Msg: LaneMessage{
		Kind: LaneCollapse, Status: StatusCollapsed,
		Reason: supersededBy(Trigger{Kind: TriggerPR, PR: b.PR, SHA: st.SHA}, st.Event),
	}}, true
}

// maxClosedPRs bounds how many closed pull requests a pipeline remembers.
const maxClosedPRs = 200

// pruneClosedPRs forgets the oldest closed pull requests beyond
// maxClosedPRs: a build of theirs arriving later is unlikely, and would
// only run once more.
func (p *pipelineRun) pruneClosedPRs() {
	var closed []int
	// Collected, then sorted.
	//workflowcheck:ignore
	for n, st := range p.st.PRs {
		if st.Closed {
			closed = append(closed, n)
		}
	}
	if len(closed) <= maxClosedPRs {
		return
	}
	sort.Slice(closed, func(i, j int) bool { return p.st.PRs[closed[i]].Event < p.st.PRs[closed[j]].Event })
	for _, n := range closed[:len(closed)-maxClosedPRs] {
		delete(p.st.PRs, n)
		p.st.Lanes.ForgetPR(n)
	}
}

// notifyPeriodic tells a schedule's PeriodicWorkflow that its fire started
// nothing (so the schedule's next fire is not held back).
func (p *pipelineRun) notifyPeriodic(ctx workflow.Context, id, reason string) {
	if id == "" {
		return
	}
	_ = workflow.SignalExternalWorkflow(ctx, id, "", SignalPeriodicDone, PeriodicDone{Reason: reason})
}

func (p *pipelineRun) syncSchedules(ctx workflow.Context, periodic map[string]string) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           ControllerTaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	// The jobs scheduled so far, so that a schedule created moments ago
	// (not yet in the visibility-backed list) is updated or deleted too (N14).
	previous := slices.Sorted(maps.Keys(p.st.Periodic)) //workflowcheck:ignore (sorted: the order of the map does not matter)
	return workflow.ExecuteActivity(actx, a.SyncSchedules, activities.SyncSchedulesInput{Pipeline: p.cfg.Name, Periodic: periodic, Previous: previous}).Get(ctx, nil)
}

// applyBatch applies an event's batch, its Done aside: its spec sync, the
// release of its hold on later events, and its builds (addRequests).
func (p *pipelineRun) applyBatch(ctx workflow.Context, batch EnqueueBatch, now time.Time, byUpdate bool) []LaneEffect {
	if batch.Sync != nil {
		p.syncs = append(p.syncs, *batch.Sync)
	}
	p.st.Lanes.Release(batch.Event)
	return p.addRequests(ctx, batch, now, byUpdate)
}

// addRequests adds a batch's builds to the lanes, or answers those that
// cannot wait in them (the pipeline was deleted, their pull request moved
// on, their lane is full). byUpdate marks the added builds as reached by
// UpdateEnqueue (LaneEntry.ByUpdate) and starting (PipelineState.Starting).
// A run at changeEnqueueUpdate restates what the lanes last told a build
// they already hold: its event sends a batch again when it could not learn
// the answer to its update.
func (p *pipelineRun) addRequests(ctx workflow.Context, batch EnqueueBatch, now time.Time, byUpdate bool) []LaneEffect {
	var effects []LaneEffect
	for _, req := range batch.Requests {
		if p.st.Deleted {
			effects = append(effects, LaneEffect{Build: req.Build, Msg: LaneMessage{
				Kind: LaneAbort, Status: StatusAborted,
				Reason: fmt.Sprintf("pipeline %s was deleted", p.cfg.Name),
			}})
			continue
		}
		if e, ok := p.supersededPR(req.Build); ok {
			effects = append(effects, e)
			continue
		}
		if refusal, full := laneFull(&p.st.Lanes, p.cfg.Name, req.Build); full &&
			workflow.GetVersion(ctx, changeLaneBound, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
			// N3: the lanes travel through continue-as-new; past the
			// bound the build is refused, never the pipeline lost.
			effects = append(effects, refusal)
			continue
		}
		if p.st.Lanes.Add(req, now) {
			if byUpdate {
				en, _ := p.st.Lanes.find(req.Build)
				en.ByUpdate = true
				if !p.st.ownsBuildsOf(req.Build.Event) {
					p.st.Starting = append(p.st.Starting, StartingBuild{Build: req.Build, Until: now.Add(startGrace)})
				}
			}
			continue
		}
		if p.enqueueUpdate {
			if e, ok := p.st.Lanes.restate(req.Build); ok {
				effects = append(effects, e)
			}
		}
	}
	return effects
}

// enqueueByUpdate is UpdateEnqueue: the batch is applied as the main loop
// applies a signalled one, and the lanes' messages to its own builds are
// the answer; messages to other builds go out as signals.
func (p *pipelineRun) enqueueByUpdate(ctx workflow.Context, batch EnqueueBatch) (EnqueueAnswer, error) {
	now := workflow.Now(ctx)
	for _, b := range batch.Done {
		p.ended(b)
	}
	effects := p.applyBatch(ctx, batch, now, true)
	effects = append(effects, p.st.Lanes.Evaluate(now)...)
	mine := make(map[BuildRef]bool, len(batch.Requests))
	for _, r := range batch.Requests {
		mine[r.Build] = true
	}
	ans := EnqueueAnswer{Messages: map[string][]LaneMessage{}}
	var others []LaneEffect
	for _, e := range effects {
		if mine[e.Build] {
			ans.Messages[e.Build.String()] = append(ans.Messages[e.Build.String()], e.Msg)
			continue
		}
		others = append(others, e)
	}
	p.send(ctx, others)
	// The main loop arms the timers, applies the sync and may continue
	// as new.
	p.wake.SendAsync(true)
	return ans, nil
}
