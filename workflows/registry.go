package workflows

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/queue"
)

// Registry update and query names.
const (
	UpdateHeartbeat      = "heartbeat"
	UpdateDefineQueue    = "define-queue"
	UpdateDeleteQueue    = "delete-queue"
	UpdateSetMemberState = "set-member-state"
	// UpdateLeave marks a member down at once: a member that stops
	// gracefully sends it, so the queues' rules stop counting on it without
	// waiting for its lease to run out.
	UpdateLeave  = "leave"
	QueryQueues  = "queues"
	QueryMembers = "members"
	QueryMember  = "member"
	// QueryMemberGrant answers, for a member and a queue, what the last
	// heartbeat would answer now (no state changes): an executor asks it
	// before it claims a build, so a poll that was in flight when the queue's
	// active rule changed does not run a build the rule no longer gives it.
	QueryMemberGrant = "member-grant"
	// QueryMemberView answers a member with what a heartbeat would answer
	// now (MemberView), without renewing its lease: members read their
	// grants with it between lease renewals, which costs the registry no
	// history.
	QueryMemberView = "member-view"
)

// changeLeaseClock: the registry wakes itself when a member's lease runs
// out (a timer), so that grants read by query see a silent member dead as
// soon as its lease ends, however rarely the other members renew theirs.
const changeLeaseClock = "registry-lease-clock"

// PrivilegeManageExecutors lets a user activate, deactivate and drain executors.
const PrivilegeManageExecutors = "manage-executors"

// forgetMembersAfter drops members silent this long from the registry.
const forgetMembersAfter = 24 * time.Hour

// Registry errors.
var (
	ErrNoSuchQueue  = errors.New("no such queue")
	ErrQueueExists  = errors.New("queue already exists")
	ErrNoSuchMember = errors.New("no such executor")
)

// RegistryInput starts the RegistryWorkflow; State carries over continue-as-new.
type RegistryInput struct {
	// Liveness: a member silent this long is not live.
	Liveness time.Duration  `json:"liveness"`
	State    *RegistryState `json:"state,omitempty"`
}

// RegistryState is the queues and members.
type RegistryState struct {
	Queues  map[string]queue.Queue   `json:"queues"`
	Members map[string]*queue.Member `json:"members"`
	// Losses are, per member, when it lost builds within the last
	// LossWindow (SignalBuildLost): LossesToDrain of them drain it.
	Losses map[string][]time.Time `json:"losses,omitempty"`
	// Deleted are the queues deleted within the last DeletedQueueMemory,
	// with when: controllers refuse the builds still dispatched to them
	// (N9: a build created just after the delete's sweep would wait
	// forever on a task queue nobody polls).
	Deleted map[string]time.Time `json:"deleted,omitempty"`
}

// DeletedQueueMemory is how long the registry remembers a deleted queue
// for its controllers to refuse the builds still sent to it.
const DeletedQueueMemory = time.Hour

// SignalBuildLost carries a BuildLost from a build to the registry.
const SignalBuildLost = "build-lost"

// BuildLost reports that a build's claimed attempt was lost with its
// executor (it stopped heartbeating, or the attempt failed without a result).
type BuildLost struct {
	Member string `json:"member"`
	Build  string `json:"build"`
}

// An executor that loses LossesToDrain builds within LossWindow is drained
// automatically: it finishes what it runs and takes nothing new until an
// operator activates it again.
const (
	LossesToDrain = 3
	LossWindow    = 10 * time.Minute
)

// Heartbeat is a member's periodic report (UpdateHeartbeat).
type Heartbeat struct {
	Member queue.Member `json:"member"`
}

// MemberView is the registry's answer to a heartbeat: what the member may do.
type MemberView struct {
	State queue.MemberState `json:"state"`
	// Slots maps each queue the member serves to its allowance.
	Slots map[string]SlotGrant `json:"slots"`
	// Untrusted maps each queue the member serves to its allowance of the
	// queue's untrusted builds (pull requests from forks, on the queue's
	// UntrustedTaskQueue; see queue.EvaluateUntrusted). A queue is left out
	// when the member may not run them (a controller, a host-runtime
	// executor, unless a rule says untrusted-on-host). Both allowances share
	// the member's slots for the queue.
	Untrusted map[string]SlotGrant `json:"untrusted,omitempty"`
	// DeletedQueues, for controllers, are the recently deleted queues
	// whose task queues they poll to refuse the builds still sent there.
	DeletedQueues []string `json:"deleted_queues,omitempty"`
	// Renew, in an answer to QueryMemberView, asks the member to renew its
	// lease now: the registry does not know it, or holds it down (it lost a
	// build, or left).
	Renew bool `json:"renew,omitempty"`
	// Lease is the registry's liveness timeout: a member that does not
	// renew within it is not live. Members renew at two thirds of it (see
	// workers.RegistryLink); zero (a registry from before leases) means at
	// every heartbeat.
	Lease time.Duration `json:"lease,omitempty"`
}

// LeaveRequest is UpdateLeave's argument.
type LeaveRequest struct {
	Member string `json:"member"`
}

// MemberGrant is a member's registry entry and its current grant on one
// queue (QueryMemberGrant).
type MemberGrant struct {
	Member queue.Member `json:"member"`
	Grant  SlotGrant    `json:"grant"`
	// Untrusted is the grant for the queue's untrusted builds.
	Untrusted SlotGrant `json:"untrusted"`
}

// SlotGrant is how many builds of a queue a member may run, and the gap
// each slot keeps after a build ends.
type SlotGrant struct {
	Allowed int           `json:"allowed"`
	MinGap  time.Duration `json:"min_gap"`
	Why     string        `json:"why,omitempty"`
}

// DefineQueueMode says whether UpdateDefineQueue creates, updates or either.
type DefineQueueMode string

// Define modes.
const (
	DefineCreate DefineQueueMode = "create"
	DefineUpdate DefineQueueMode = "update"
)

// DefineQueueRequest is UpdateDefineQueue's argument.
type DefineQueueRequest struct {
	Identity queue.Identity  `json:"identity"`
	Mode     DefineQueueMode `json:"mode"`
	Queue    queue.Queue     `json:"queue"`
}

// DeleteQueueRequest is UpdateDeleteQueue's argument.
type DeleteQueueRequest struct {
	Identity queue.Identity `json:"identity"`
	Name     string         `json:"name"`
}

// SetMemberStateRequest is UpdateSetMemberState's argument.
type SetMemberStateRequest struct {
	Identity queue.Identity    `json:"identity"`
	Name     string            `json:"name"`
	State    queue.MemberState `json:"state"`
}

type registry struct {
	liveness time.Duration
	st       RegistryState
	// clockDirty asks leaseClock to look for the next lease end again: set
	// when a member may have become live, and when the timer fired. Each run
	// starts with it set.
	clockDirty bool
	// plans caches the queues' evaluation between changes (see plansAt).
	plans *registryPlans
}

// registryPlans is what queue.Evaluate and queue.EvaluateUntrusted say of
// the queues at one time over the members as they are. Members read their
// grants by query every few seconds, and between two changes of the
// registry (and within one workflow time: a query sees the time of the
// last task) every answer is the same: 500 members would otherwise
// evaluate every queue over every member at each check-in, O(members log
// members) each, which is where a loaded controller spent its time
// (docs/performance.md, "registry"). Every update and every lost build
// drops it (changed); queries only read.
type registryPlans struct {
	now       time.Time
	members   []queue.Member        // as members() returned them
	trusted   map[string]queue.Plan // by queue name
	untrusted map[string]queue.Plan
}

// changed drops the cached plans: members or queues changed.
func (r *registry) changed() { r.plans = nil }

// changing is update handler h, dropping the cached plans first.
func changing[Req, Resp any](r *registry, h func(workflow.Context, Req) (Resp, error)) func(workflow.Context, Req) (Resp, error) {
	return func(ctx workflow.Context, req Req) (Resp, error) {
		r.changed()
		return h(ctx, req)
	}
}

// plansAt is the cache for time now, made afresh when the registry changed
// or the time moved.
func (r *registry) plansAt(now time.Time) *registryPlans {
	if r.plans == nil || !r.plans.now.Equal(now) {
		r.plans = &registryPlans{now: now, members: r.members(), trusted: map[string]queue.Plan{}, untrusted: map[string]queue.Plan{}}
	}
	return r.plans
}

// plan is queue.Evaluate (untrusted: EvaluateUntrusted) of q at p.now.
func (r *registry) plan(p *registryPlans, q queue.Queue, untrusted bool) queue.Plan {
	cache, evaluate := p.trusted, queue.Evaluate
	if untrusted {
		cache, evaluate = p.untrusted, queue.EvaluateUntrusted
	}
	if plan, ok := cache[q.Name]; ok {
		return plan
	}
	plan := evaluate(q, p.members, p.now, r.liveness)
	cache[q.Name] = plan
	return plan
}

// RegistryWorkflow holds the queue definitions and the executor registry.
// Members heartbeat into it and get back how many builds of each queue they
// may run (queue.Evaluate picks the active rule), so a change to a queue or
// to the cluster reaches every member within one heartbeat.
func RegistryWorkflow(ctx workflow.Context, in RegistryInput) error {
	r := &registry{liveness: in.Liveness, clockDirty: true}
	if r.liveness <= 0 {
		r.liveness = 15 * time.Second
	}
	if in.State != nil {
		r.st = *in.State
	}
	if r.st.Queues == nil {
		r.st.Queues = map[string]queue.Queue{}
	}
	if r.st.Members == nil {
		r.st.Members = map[string]*queue.Member{}
	}
	if _, ok := r.st.Queues[queue.DefaultQueueName]; !ok {
		r.st.Queues[queue.DefaultQueueName] = queue.DefaultQueue()
	}

	handlers := []struct {
		name     string
		handler  any
		validate any
	}{
		// Every update changes members or queues: each drops the cached
		// plans before it runs.
		{UpdateHeartbeat, changing(r, r.heartbeat), r.validateHeartbeat},
		{UpdateDefineQueue, changing(r, r.defineQueue), r.validateDefine},
		{UpdateDeleteQueue, changing(r, r.deleteQueue), r.validateDelete},
		{UpdateSetMemberState, changing(r, r.setMemberState), r.validateMemberState},
		{UpdateLeave, changing(r, r.leave), r.validateLeave},
	}
	for _, h := range handlers {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.handler, workflow.UpdateHandlerOptions{Validator: h.validate}); err != nil {
			return fmt.Errorf("register %s update: %w", h.name, err)
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryQueues, func() ([]queue.Queue, error) { return r.queues(), nil }); err != nil {
		return fmt.Errorf("register queues query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryMembers, func() ([]queue.Member, error) { return r.members(), nil }); err != nil {
		return fmt.Errorf("register members query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryMember, func(name string) (queue.Member, error) {
		m, ok := r.st.Members[name]
		if !ok {
			return queue.Member{}, fmt.Errorf("%w: %s", ErrNoSuchMember, name)
		}
		return *m, nil
	}); err != nil {
		return fmt.Errorf("register member query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryMemberGrant, func(name, queueName string) (MemberGrant, error) {
		m, ok := r.st.Members[name]
		if !ok {
			return MemberGrant{}, fmt.Errorf("%w: %s", ErrNoSuchMember, name)
		}
		out := MemberGrant{Member: *m}
		q, ok := r.st.Queues[queueName]
		switch {
		case !ok:
			out.Grant.Why = fmt.Sprintf("queue %s does not exist", queueName)
		case !m.Serves(queueName):
			out.Grant.Why = fmt.Sprintf("%s does not serve queue %s", name, queueName)
		default:
			p := r.plansAt(workflow.Now(ctx))
			out.Grant = r.grant(p, q, m.Name)
			out.Untrusted, _ = r.untrustedGrant(p, q, *m)
		}
		return out, nil
	}); err != nil {
		return fmt.Errorf("register member grant query: %w", err)
	}

	if err := workflow.SetQueryHandler(ctx, QueryMemberView, func(name string) (MemberView, error) {
		m, ok := r.st.Members[name]
		if !ok {
			return MemberView{State: queue.StateActive, Renew: true}, nil
		}
		view := r.view(m, workflow.Now(ctx))
		view.Renew = !m.DownSince.IsZero()
		return view, nil
	}); err != nil {
		return fmt.Errorf("register member view query: %w", err)
	}
	if workflow.GetVersion(ctx, changeLeaseClock, workflow.DefaultVersion, 1) >= 1 {
		workflow.Go(ctx, r.leaseClock)
	}

	// Lost builds arrive as signals (a workflow cannot send an update).
	lostCh := workflow.GetSignalChannel(ctx, SignalBuildLost)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var l BuildLost
			lostCh.Receive(gctx, &l)
			r.noteLoss(gctx, l)
		}
	})

	// Everything else happens in update handlers; the main coroutine only
	// decides when to continue as new.
	err := workflow.Await(ctx, func() bool {
		info := workflow.GetInfo(ctx)
		return info.GetCurrentHistoryLength() > continueAsNewAfter || info.GetContinueAsNewSuggested()
	})
	if err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	for {
		var l BuildLost
		if !lostCh.ReceiveAsync(&l) {
			break
		}
		r.noteLoss(ctx, l)
	}
	st := r.st
	return workflow.NewContinueAsNewError(ctx, RegistryWorkflow, RegistryInput{Liveness: r.liveness, State: &st})
}

func (r *registry) queues() []queue.Queue {
	// Collected, then sorted by name (the map's key).
	//workflowcheck:ignore
	out := slices.Collect(maps.Values(r.st.Queues))
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *registry) members() []queue.Member {
	out := make([]queue.Member, 0, len(r.st.Members))
	// Collected, then sorted by name (the map's key).
	//workflowcheck:ignore
	for _, m := range r.st.Members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *registry) validateHeartbeat(_ workflow.Context, hb Heartbeat) error {
	m := hb.Member
	if m.Name == "" {
		return errors.New("heartbeat names no member")
	}
	if m.Role != queue.RoleController && m.Role != queue.RoleExecutor {
		return fmt.Errorf("member %s: unknown role %q (want controller or executor)", m.Name, m.Role)
	}
	switch m.Runtime {
	case "", queue.RuntimeHost, queue.RuntimeContainer:
	default:
		return fmt.Errorf("member %s: unknown runtime %q (want %s or %s)", m.Name, m.Runtime, queue.RuntimeHost, queue.RuntimeContainer)
	}
	if old, ok := r.st.Members[m.Name]; ok && old.Role != m.Role {
		return fmt.Errorf("member name %s is taken by a %s", m.Name, old.Role)
	}
	return nil
}

func (r *registry) heartbeat(ctx workflow.Context, hb Heartbeat) (MemberView, error) {
	now := workflow.Now(ctx)
	m, ok := r.st.Members[hb.Member.Name]
	if !ok {
		m = &queue.Member{Name: hb.Member.Name, Role: hb.Member.Role, State: queue.StateActive}
		r.st.Members[m.Name] = m
	}
	m.Host, m.Labels, m.Queues, m.Running, m.Runtime = hb.Member.Host, hb.Member.Labels, hb.Member.Queues, hb.Member.Running, hb.Member.Runtime
	m.LastSeen = now
	m.DownSince, m.DownWhy = time.Time{}, ""
	r.clockDirty = true
	if m.State == queue.StateDraining && running(m) == 0 {
		m.State = queue.StateInactive
	}
	// Order-independent: every member silent for too long goes.
	//workflowcheck:ignore
	for name, other := range r.st.Members {
		if now.Sub(other.LastSeen) > forgetMembersAfter {
			delete(r.st.Members, name)
		}
	}
	return r.view(m, now), nil
}

// view is what member m may do now (the answer to its heartbeat).
func (r *registry) view(m *queue.Member, now time.Time) MemberView {
	p := r.plansAt(now)
	view := MemberView{State: m.State, Slots: map[string]SlotGrant{}, Lease: r.liveness}
	if m.Role == queue.RoleController {
		view.DeletedQueues = r.deletedQueues(now)
	}
	for _, q := range r.queues() {
		if !m.Serves(q.Name) {
			continue
		}
		view.Slots[q.Name] = r.grant(p, q, m.Name)
		if g, ok := r.untrustedGrant(p, q, *m); ok {
			if view.Untrusted == nil {
				view.Untrusted = map[string]SlotGrant{}
			}
			view.Untrusted[q.Name] = g
		}
	}
	return view
}

// leaseClock wakes the registry when the earliest lease of a live member
// runs out. Members renew their leases rarely and read their grants by
// query, and a query sees the workflow's time as of its last task: without
// this timer a member that went silent would stay live in the queries' eyes
// until some other member's renewal moved the clock. A renewal only moves a
// lease later, and a member that joins gets a lease ending after every
// other, so the timer armed for the earliest lease is never late and need
// not be moved; when it fires early (that member renewed meanwhile) it is
// armed again. The wait is on a flag, not on the members: an update
// handler's coroutine makes the SDK evaluate every blocked condition again,
// and 500 members joining at once in one task would make an O(members)
// condition O(members³).
func (r *registry) leaseClock(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return r.clockDirty }); err != nil {
			return
		}
		r.clockDirty = false
		now := workflow.Now(ctx)
		next := r.nextLeaseEnd(now)
		if next.IsZero() {
			continue
		}
		// Just past the end: Live's bound is inclusive.
		if err := workflow.Sleep(ctx, next.Sub(now)+time.Millisecond); err != nil {
			return
		}
		r.clockDirty = true
	}
}

// nextLeaseEnd is the earliest time at which a member live now stops being
// live, or zero when no member is live.
func (r *registry) nextLeaseEnd(now time.Time) time.Time {
	var next time.Time
	// Order-independent: a minimum.
	//workflowcheck:ignore
	for _, m := range r.st.Members {
		if !m.Live(now, r.liveness) {
			continue
		}
		end := m.LastSeen.Add(r.liveness)
		if end.Before(now) { // a LastSeen in the future counts as live; wait for it
			end = now
		}
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

// untrustedGrant is what member m may run of q's untrusted builds now; ok is
// false when no rule of q lets m run them at all (then it must not poll
// the untrusted task queue), so the plan is not even computed.
func (r *registry) untrustedGrant(p *registryPlans, q queue.Queue, m queue.Member) (SlotGrant, bool) {
	if !q.AllowsUntrusted(m) {
		return SlotGrant{Why: fmt.Sprintf("%s: %s", m.Name, queue.UntrustedReason)}, false
	}
	plan := r.plan(p, q, true)
	g := SlotGrant{Allowed: plan.Allowed[m.Name], Why: plan.Why}
	if plan.Active() {
		g.MinGap = plan.Rule.MinGap
	}
	return g, true
}

// grant is what member may run of queue q now.
func (r *registry) grant(p *registryPlans, q queue.Queue, member string) SlotGrant {
	plan := r.plan(p, q, false)
	g := SlotGrant{Allowed: plan.Allowed[member], Why: plan.Why}
	if plan.Active() {
		g.MinGap = plan.Rule.MinGap
	}
	return g
}

func running(m *queue.Member) int {
	n := 0
	// Order-independent: a sum.
	//workflowcheck:ignore
	for _, c := range m.Running {
		n += c
	}
	return n
}

func (r *registry) validateDefine(_ workflow.Context, req DefineQueueRequest) error {
	if err := queue.CanDefine(req.Identity); err != nil {
		return err
	}
	if err := req.Queue.Validate(); err != nil {
		return err
	}
	_, exists := r.st.Queues[req.Queue.Name]
	switch req.Mode {
	case DefineCreate:
		if exists {
			return fmt.Errorf("%w: %s (use `sluice queue update`)", ErrQueueExists, req.Queue.Name)
		}
	case DefineUpdate:
		if !exists {
			return fmt.Errorf("%w: %s (use `sluice queue create`)", ErrNoSuchQueue, req.Queue.Name)
		}
	default:
		return fmt.Errorf("unknown define mode %q", req.Mode)
	}
	return nil
}

func (r *registry) defineQueue(_ workflow.Context, req DefineQueueRequest) (queue.Queue, error) {
	r.st.Queues[req.Queue.Name] = req.Queue
	delete(r.st.Deleted, req.Queue.Name)
	return req.Queue, nil
}

func (r *registry) validateDelete(_ workflow.Context, req DeleteQueueRequest) error {
	if err := queue.CanDefine(req.Identity); err != nil {
		return err
	}
	if req.Name == queue.DefaultQueueName {
		return fmt.Errorf("the %s queue cannot be deleted (update its rules instead)", queue.DefaultQueueName)
	}
	if _, ok := r.st.Queues[req.Name]; !ok {
		return fmt.Errorf("%w: %s", ErrNoSuchQueue, req.Name)
	}
	return nil
}

func (r *registry) deleteQueue(ctx workflow.Context, req DeleteQueueRequest) (string, error) {
	delete(r.st.Queues, req.Name)
	if r.st.Deleted == nil {
		r.st.Deleted = map[string]time.Time{}
	}
	r.st.Deleted[req.Name] = workflow.Now(ctx)
	return req.Name, nil
}

// deletedQueues lists the queues deleted within DeletedQueueMemory, sorted,
// and forgets older ones.
func (r *registry) deletedQueues(now time.Time) []string {
	var out []string
	// Collected, then sorted.
	//workflowcheck:ignore
	for name, at := range r.st.Deleted {
		if now.Sub(at) > DeletedQueueMemory {
			delete(r.st.Deleted, name)
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (r *registry) validateMemberState(_ workflow.Context, req SetMemberStateRequest) error {
	if !req.Identity.Has(PrivilegeManageExecutors) {
		return fmt.Errorf("%w: user %q lacks the %s privilege", queue.ErrForbidden, req.Identity.User, PrivilegeManageExecutors)
	}
	if _, ok := r.st.Members[req.Name]; !ok {
		return fmt.Errorf("%w: %s", ErrNoSuchMember, req.Name)
	}
	switch req.State {
	case queue.StateActive, queue.StateInactive, queue.StateDraining:
	default:
		return fmt.Errorf("unknown executor state %q (want active, inactive or draining)", req.State)
	}
	return nil
}

// setMemberState changes a member's state. A draining member turns inactive
// on its next heartbeat that reports no running build: the counts the
// registry holds may predate a build that just started.
func (r *registry) setMemberState(_ workflow.Context, req SetMemberStateRequest) (queue.Member, error) {
	m := r.st.Members[req.Name]
	m.State, m.StateReason = req.State, ""
	delete(r.st.Losses, req.Name) // an operator's word starts the count again
	return *m, nil
}

func (r *registry) validateLeave(_ workflow.Context, req LeaveRequest) error {
	if _, ok := r.st.Members[req.Member]; !ok {
		return fmt.Errorf("%w: %s", ErrNoSuchMember, req.Member)
	}
	return nil
}

// leave marks a member down until its next heartbeat: it stopped.
func (r *registry) leave(ctx workflow.Context, req LeaveRequest) (string, error) {
	m := r.st.Members[req.Member]
	now := workflow.Now(ctx)
	m.DownSince, m.DownWhy = now, "left at "+now.UTC().Format(time.RFC3339)
	return m.Name, nil
}

// noteLoss marks the member down until its next heartbeat (a live member
// renews at once when asked to, a dead one stops counting for the queues'
// rules now rather than when its lease runs out), records the loss and
// drains an executor once it lost LossesToDrain builds within LossWindow.
func (r *registry) noteLoss(ctx workflow.Context, l BuildLost) {
	r.changed()
	m, ok := r.st.Members[l.Member]
	if !ok {
		return
	}
	now := workflow.Now(ctx)
	if m.DownSince.IsZero() {
		m.DownSince, m.DownWhy = now, "lost build "+l.Build
	}
	if m.Role != queue.RoleExecutor {
		return
	}
	if r.st.Losses == nil {
		r.st.Losses = map[string][]time.Time{}
	}
	kept := r.st.Losses[l.Member][:0]
	for _, at := range r.st.Losses[l.Member] {
		if now.Sub(at) < LossWindow {
			kept = append(kept, at)
		}
	}
	kept = append(kept, now)
	r.st.Losses[l.Member] = kept
	if len(kept) < LossesToDrain || m.State != queue.StateActive {
		return
	}
	m.State = queue.StateDraining
	m.StateReason = fmt.Sprintf("drained automatically at %s: lost %d builds in %s (the last: %s); activate it again once it is healthy",
		now.UTC().Format(time.RFC3339), len(kept), LossWindow, l.Build)
	delete(r.st.Losses, l.Member)
	workflow.GetLogger(ctx).Warn("executor_drained_for_losses", "member", l.Member, "losses", len(kept), "window", LossWindow.String(), "last_build", l.Build)
}
