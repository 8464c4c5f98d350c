package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// maxOwnedBuildsPerEvent bounds the builds of an event that runs them
// itself (EventInput.OwnsBuilds): each costs the event's own history about
// 25 events (against Temporal's 51,200) and an update per claim (against
// history.maxTotalUpdates, 2,000 per execution).
const maxOwnedBuildsPerEvent = 400

// ownedBuilds are the builds an event runs itself: each is a coroutine of
// the event running the same logic as a BuildWorkflow (build.run), with
// the event as its host.
type ownedBuilds struct {
	e    *eventRun
	byID map[string]*ownedBuild
	// order is the builds in the order the event created them.
	order []*ownedBuild
	// open is SAOpenBuilds as last upserted.
	open []string
	// dirty: a build's status changed since; the flusher upserts
	// SAOpenBuilds once all of the workflow task's coroutines ran, unless
	// the event upserts it first (new builds, its end).
	dirty bool
}

// ownedBuild is one build an event owns.
type ownedBuild struct {
	b *build
	// lanes carries the lanes' messages to the build (SignalBuildLanes).
	lanes workflow.Channel
	// by carries who cancels it (UpdateCancelBuild).
	by workflow.Channel
	// cancel cancels the build's coroutine (UpdateCancelBuild).
	cancel workflow.CancelFunc
}

// ownBuilds makes the event the host of its builds: it answers their
// claims, queries and cancels, and hands them the lanes' messages.
func (e *eventRun) ownBuilds(ctx workflow.Context) error {
	o := &ownedBuilds{e: e, byID: map[string]*ownedBuild{}}
	if err := workflow.SetQueryHandler(ctx, QueryBuild, o.query); err != nil {
		return fmt.Errorf("register build query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateClaim, o.claim,
		workflow.UpdateHandlerOptions{Validator: o.validateClaim}); err != nil {
		return fmt.Errorf("register claim update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancelBuild, o.cancelBuild,
		workflow.UpdateHandlerOptions{Validator: o.validateCancel}); err != nil {
		return fmt.Errorf("register cancel-build update: %w", err)
	}
	lanes := workflow.GetSignalChannel(ctx, SignalBuildLanes)
	deleted := workflow.GetSignalChannel(ctx, SignalQueueDeleted)
	// The messages still reach builds ending in a cancelled event.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(lanes, func(c workflow.ReceiveChannel, _ bool) {
				var bl BuildLanes
				c.Receive(ctx, &bl)
				for _, fx := range bl.Effects {
					o.deliver(ctx, fx.Build.String(), fx.Msg)
				}
			})
			sel.AddReceive(deleted, func(c workflow.ReceiveChannel, _ bool) {
				var qd QueueDeleted
				c.Receive(ctx, &qd)
				for _, ob := range o.order {
					if ob.b.in.Queue == qd.Queue {
						o.deliver(ctx, ob.b.state.ID, LaneMessage{Kind: LaneFail, Status: StatusFailure, Reason: qd.Reason})
					}
				}
			})
			sel.Select(ctx)
		}
	})
	// The flusher runs after the coroutines that mark the list dirty in
	// the same pass, so one upsert carries a workflow task's changes; it
	// waits while the event handles a build's end, whose next builds or
	// whose own end upsert the list anyway (a chain's next build, the
	// last build).
	workflow.Go(dctx, func(ctx workflow.Context) {
		for workflow.Await(ctx, func() bool { return o.dirty && !e.settling }) == nil {
			o.upsertOpen(ctx)
		}
	})
	e.owned = o
	return nil
}

// start creates a build the event owns and runs it in a coroutine; the
// future resolves with its final record. The caller records the new
// builds' summaries (recordStarted) once per batch.
func (o *ownedBuilds) start(ctx workflow.Context, in BuildInput) (*ownedBuild, workflow.Future) {
	// It always leaves its lane through the event's next batch (or result).
	in.Slim = false
	ob := &ownedBuild{lanes: workflow.NewBufferedChannel(ctx, 64), by: workflow.NewBufferedChannel(ctx, 1)}
	ob.b = newBuild(ctx, in, ownedHost{o: o, ob: ob})
	if !in.Virtual {
		// What run sets first, so that the batch's memo says it.
		ob.b.state.Status, ob.b.state.Reason, ob.b.state.WaitCode = StatusQueued, laneWaitReason, WaitLaneOrder
		if !in.DispatchedAt.IsZero() {
			ob.b.state.Reason, ob.b.state.WaitCode, ob.b.state.QueuedTime = slotWaitReason(in.Queue), WaitSlotBusy, in.DispatchedAt
		}
	}
	o.byID[ob.b.state.ID] = ob
	o.order = append(o.order, ob)
	bctx, cancel := workflow.WithCancel(ctx)
	ob.cancel = cancel
	fut, set := workflow.NewFuture(ctx)
	workflow.Go(bctx, func(ctx workflow.Context) { set.Set(ob.b.run(ctx), nil) })
	return ob, fut
}

// recordStarted writes the summaries of builds just started, in one memo
// upsert, and their statuses to SAOpenBuilds, with the event's own pending
// memo fields and search attributes.
func (o *ownedBuilds) recordStarted(ctx workflow.Context, started []*ownedBuild) {
	if len(started) == 0 {
		return
	}
	memo := make(map[string]any, len(started))
	for _, ob := range started {
		if !ob.b.in.Virtual { // a virtual build's end writes its summary at once
			memo[OwnedBuildMemo(ob.b.state.ID)] = ob.summary(ob.b.summary())
		}
	}
	if memo = o.e.takeMemo(memo); len(memo) > 0 {
		_ = workflow.UpsertMemo(ctx, memo)
	}
	updates := o.e.withSHA()
	if u, changed := o.openUpdate(); changed {
		updates = append(updates, u)
	}
	if len(updates) > 0 {
		_ = workflow.UpsertTypedSearchAttributes(ctx, updates...)
	}
}

// openTokens is SAOpenBuilds for the builds now: one entry per status and
// queue of a build that has not ended.
func (o *ownedBuilds) openTokens() []string {
	var out []string
	for _, ob := range o.order {
		st := ob.b.state
		if ob.b.in.Virtual || st.Status.Final() {
			continue
		}
		if t := OpenBuildToken(st.Status, st.Queue); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// upsertOpen upserts SAOpenBuilds when it changed.
func (o *ownedBuilds) upsertOpen(ctx workflow.Context) {
	if u, changed := o.openUpdate(); changed {
		_ = workflow.UpsertTypedSearchAttributes(ctx, u)
	}
}

// openUpdate is the update of SAOpenBuilds to the builds now, when it
// changed (it is then taken as upserted).
func (o *ownedBuilds) openUpdate() (temporal.SearchAttributeUpdate, bool) {
	o.dirty = false
	open := o.openTokens()
	if slices.Equal(open, o.open) {
		return nil, false
	}
	o.open = open
	if len(open) == 0 {
		return SAOpenBuilds.ValueUnset(), true
	}
	return SAOpenBuilds.ValueSet(open), true
}

// deliver hands a lane message to a build the event owns; a build that
// ended, or that the event does not own, needs none (the pipeline hears
// of its end from the event).
func (o *ownedBuilds) deliver(ctx workflow.Context, id string, msg LaneMessage) {
	ob, ok := o.byID[id]
	if !ok || ob.b.state.Status.Final() {
		return
	}
	ob.lanes.Send(ctx, msg)
}

// states are the owned builds' records, in the order they were created.
func (o *ownedBuilds) states() []BuildState {
	out := make([]BuildState, 0, len(o.order))
	for _, ob := range o.order {
		out = append(out, ob.b.state)
	}
	return out
}

// find returns the build named id ("build/" prefix allowed).
func (o *ownedBuilds) find(id string) (*ownedBuild, error) {
	id = strings.TrimPrefix(id, "build/")
	if ob, ok := o.byID[id]; ok {
		return ob, nil
	}
	return nil, fmt.Errorf("event %s has no build %s", o.e.in.Event, id)
}

func (o *ownedBuilds) query(id string) (BuildState, error) {
	ob, err := o.find(id)
	if err != nil {
		return BuildState{}, err
	}
	return ob.b.state, nil
}

func (o *ownedBuilds) validateClaim(ctx workflow.Context, req ClaimRequest) error {
	if req.Build == "" {
		return errors.New("the claim names no build: this event runs its builds itself, so its executors must name the build they claim (upgrade the executor)")
	}
	ob, err := o.find(req.Build)
	if err != nil {
		return err
	}
	return ob.b.validateClaim(ctx, req)
}

func (o *ownedBuilds) claim(ctx workflow.Context, req ClaimRequest) error {
	ob, err := o.find(req.Build)
	if err != nil {
		return err
	}
	return ob.b.claim(ctx, req)
}

func (o *ownedBuilds) validateCancel(_ workflow.Context, req CancelBuildRequest) error {
	ob, err := o.find(req.Build)
	if err != nil {
		return err
	}
	if st := ob.b.state.Status; st.Final() {
		return fmt.Errorf("build %s already ended %s", ob.b.state.ID, st)
	}
	return nil
}

func (o *ownedBuilds) cancelBuild(_ workflow.Context, req CancelBuildRequest) error {
	ob, err := o.find(req.Build)
	if err != nil {
		return err
	}
	if req.By != "" {
		ob.by.SendAsync(CancelledBy{User: req.By})
	}
	ob.cancel()
	return nil
}

// summary completes a build's summary with what a build workflow's search
// attributes say (an owned build has none of its own).
func (ob *ownedBuild) summary(s BuildSummary) BuildSummary {
	st := ob.b.state
	s.Status, s.Queue, s.Priority, s.Cause, s.CreateTime = st.Status, st.Queue, st.Priority, st.Cause, st.CreateTime
	return s
}

// ownedHost hosts a build in the event that owns it: its summary is a key
// of the event's memo, its status an entry of the event's SAOpenBuilds,
// and it leaves its lane with the event's next batch.
type ownedHost struct {
	// The pipeline and the registry are told as a build workflow tells them.
	ownWorkflow
	o  *ownedBuilds
	ob *ownedBuild
}

var _ buildHost = ownedHost{}

func (h ownedHost) laneMessages(workflow.Context) workflow.ReceiveChannel { return h.ob.lanes }

func (h ownedHost) cancelledBy(workflow.Context) workflow.ReceiveChannel { return h.ob.by }

// upsert: the build's status is the one of its search attributes the
// event keeps (in SAOpenBuilds, upserted once per workflow task); the
// others are in its summary.
func (h ownedHost) upsert(workflow.Context, ...temporal.SearchAttributeUpdate) { h.o.dirty = true }

func (h ownedHost) summarize(ctx workflow.Context, s BuildSummary) {
	_ = workflow.UpsertMemo(ctx, map[string]any{OwnedBuildMemo(h.ob.b.state.ID): h.ob.summary(s)})
}

func (h ownedHost) leaveLane(_ workflow.Context, done BuildDone) error {
	h.o.e.pendingDone = append(h.o.e.pendingDone, done.Build)
	return nil
}

func (ownedHost) activityID(build string, dispatch int) string {
	return fmt.Sprintf("%s/%d", build, dispatch)
}

// settle: the event waits for its handlers when it ends.
func (ownedHost) settle(workflow.Context) {}
