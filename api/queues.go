package api

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// registry reads the queues and members.
func (s *Service) registry(ctx context.Context) ([]queue.Queue, []queue.Member, error) {
	var qs []queue.Queue
	var ms []queue.Member
	v, err := s.Client.QueryWorkflow(ctx, workflows.RegistryID, "", workflows.QueryQueues)
	if err != nil {
		return nil, nil, translate(err, "the registry (is a controller running?)")
	}
	if err := v.Get(&qs); err != nil {
		return nil, nil, fmt.Errorf("decode queues: %w", err)
	}
	v, err = s.Client.QueryWorkflow(ctx, workflows.RegistryID, "", workflows.QueryMembers)
	if err != nil {
		return nil, nil, translate(err, "the registry")
	}
	if err := v.Get(&ms); err != nil {
		return nil, nil, fmt.Errorf("decode members: %w", err)
	}
	return qs, ms, nil
}

// requireUsableQueue checks that queue name exists and that id may use it
// (a pipeline's default queue is checked like a job's).
func (s *Service) requireUsableQueue(ctx context.Context, id queue.Identity, name string) error {
	qs, _, err := s.registry(ctx)
	if err != nil {
		return err
	}
	q, ok := findQueue(qs, name)
	if !ok {
		return invalid("queue %q does not exist", name)
	}
	return queue.CanUse(id, q)
}

func (s *Service) queueView(q queue.Queue, members []queue.Member, now time.Time) Queue {
	plan := queue.Evaluate(q, members, now, s.Liveness)
	v := Queue{
		Name: q.Name, Description: q.Description, UseRoles: q.UseRoles, ActiveRule: plan.RuleIndex,
		Why: plan.Why, Slots: plan.Slots, Busy: plan.Busy,
		UntrustedWhy: queue.EvaluateUntrusted(q, members, now, s.Liveness).Why,
	}
	for _, r := range q.Rules {
		v.Rules = append(v.Rules, r.String())
	}
	if q.MaxWait > 0 {
		v.MaxWait = q.MaxWait.String()
	}
	return v
}

// ListQueues lists the queues with their active rule and slots.
func (s *Service) ListQueues(ctx context.Context) ([]Queue, error) {
	qs, ms, err := s.registry(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]Queue, 0, len(qs))
	for _, q := range qs {
		out = append(out, s.queueView(q, ms, now))
	}
	return out, nil
}

// parseQueue turns a request into a queue, reporting every problem.
func parseQueue(req QueueRequest) (queue.Queue, error) {
	q := queue.Queue{Name: req.Name, Description: req.Description, UseRoles: req.UseRoles}
	var problems []string
	if req.MaxWait != "" {
		d, err := time.ParseDuration(req.MaxWait)
		if err != nil {
			problems = append(problems, fmt.Sprintf("max-wait %q: want a duration such as 30m or 2h (%v)", req.MaxWait, err))
		}
		q.MaxWait = d
	}
	if len(req.Rules) == 0 {
		problems = append(problems, "rules: at least one rule is required, e.g. run-on=executors,max-parallel=2")
	}
	for i, raw := range req.Rules {
		r, err := queue.ParseRule(raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("rule %d (%q): %v", i+1, raw, err))
			continue
		}
		q.Rules = append(q.Rules, r)
	}
	if len(problems) > 0 {
		return q, invalid("queue %q: %s", req.Name, joinLines(problems))
	}
	if err := q.Validate(); err != nil {
		return q, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return q, nil
}

func joinLines(ps []string) string {
	if len(ps) == 1 {
		return ps[0]
	}
	out := ""
	for _, p := range ps {
		out += "\n  " + p
	}
	return out
}

// DefineQueue creates (create=true) or updates a queue.
func (s *Service) DefineQueue(ctx context.Context, id queue.Identity, req QueueRequest, create bool) (Queue, error) {
	if err := queue.CanDefine(id); err != nil {
		return Queue{}, err
	}
	q, err := parseQueue(req)
	if err != nil {
		return Queue{}, err
	}
	mode := workflows.DefineUpdate
	if create {
		mode = workflows.DefineCreate
	}
	var saved queue.Queue
	if err := s.update(ctx, workflows.RegistryID, workflows.UpdateDefineQueue, workflows.DefineQueueRequest{Identity: id, Mode: mode, Queue: q}, &saved); err != nil {
		return Queue{}, updateError(err, "queue "+req.Name)
	}
	// An update may take a member out of the queue's active rule or a
	// person off its use list, and events resolved within the last
	// second may have read the queues before a new one was made.
	if err := grantsLapse(ctx); err != nil {
		return Queue{}, err
	}
	_, ms, err := s.registry(ctx)
	if err != nil {
		return Queue{}, err
	}
	return s.queueView(saved, ms, s.now()), nil
}

// DeleteQueue deletes a queue that no build waits on and that no running
// event can reach. A build of the queue that appears anyway (an event that
// read the queue list just before the delete) fails at once, saying so.
func (s *Service) DeleteQueue(ctx context.Context, id queue.Identity, name string) error {
	if err := queue.CanDefine(id); err != nil {
		return err
	}
	n, err := s.count(ctx, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s",
		workflows.SAQueue.GetName(), quote(name)))
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: queue %s has %d unfinished builds; cancel them or let them finish first", ErrConflict, name, n)
	}
	events, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND ExecutionStatus = 'Running' AND %s = %s",
		workflows.SAQueues.GetName(), quote(name)), 20)
	if err != nil {
		return err
	}
	if len(events) > 0 {
		var ids []string
		for _, ex := range events {
			ids = append(ids, strings.TrimPrefix(ex.GetExecution().GetWorkflowId(), "event/"))
		}
		return fmt.Errorf("%w: queue %s can still be reached by running events (%s); cancel them or let them finish first",
			ErrConflict, name, strings.Join(ids, ", "))
	}
	var deleted string
	if err := s.update(ctx, workflows.RegistryID, workflows.UpdateDeleteQueue, workflows.DeleteQueueRequest{Identity: id, Name: name}, &deleted); err != nil {
		return updateError(err, "queue "+name)
	}
	s.failBuildsOf(ctx, name)
	return grantsLapse(ctx)
}

// grantsLapse waits, after a change of a member's state or of the queues,
// until every answer the registry gave before it has lapsed
// (queue.GrantStands): once the change is reported done, no build
// starts on an older yes of the registry and no event resolves with older
// queue definitions.
func grantsLapse(ctx context.Context) error {
	t := time.NewTimer(queue.GrantStands)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the change is made; executors may still start builds on the registry's answers from before it for up to %s: %w",
			queue.GrantStands, ctx.Err())
	}
}

// failBuildsOf fails the builds still waiting on a deleted queue: nobody
// polls its task queue any more.
func (s *Service) failBuildsOf(ctx context.Context, name string) {
	execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s",
		workflows.SAQueue.GetName(), quote(name)), 1000)
	if err != nil {
		s.Logger.WarnContext(ctx, "deleted_queue_sweep_failed", "queue", name, "error", err)
		return
	}
	msg := workflows.LaneMessage{
		Kind: workflows.LaneFail, Status: workflows.StatusFailure,
		Reason: fmt.Sprintf("queue %s was deleted while the build waited for it", name),
	}
	for _, ex := range execs {
		if err := s.Client.SignalWorkflow(ctx, ex.GetExecution().GetWorkflowId(), "", workflows.SignalLane, msg); err != nil {
			s.Logger.WarnContext(ctx, "deleted_queue_build_not_failed", "build", ex.GetExecution().GetWorkflowId(), "error", err)
		}
	}
	if !s.BuildsInEvents {
		return
	}
	// Events that run their builds fail those on the queue that no
	// executor took yet.
	events, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND ExecutionStatus = 'Running' AND %s = %s",
		workflows.SAQueues.GetName(), quote(name)), 1000)
	if err != nil {
		s.Logger.WarnContext(ctx, "deleted_queue_sweep_failed", "queue", name, "error", err)
		return
	}
	for _, ex := range events {
		id := ex.GetExecution().GetWorkflowId()
		if err := s.Client.SignalWorkflow(ctx, id, "", workflows.SignalQueueDeleted, workflows.QueueDeleted{Queue: name, Reason: msg.Reason}); err != nil {
			s.Logger.WarnContext(ctx, "deleted_queue_event_not_told", "event", id, "error", err)
		}
	}
}

// QueueStatus explains a queue: rules, the active rule and why, members and
// their slots, the backlog and the oldest waiting build.
func (s *Service) QueueStatus(ctx context.Context, name string) (QueueStatus, error) {
	qs, ms, err := s.registry(ctx)
	if err != nil {
		return QueueStatus{}, err
	}
	q, ok := findQueue(qs, name)
	if !ok {
		return QueueStatus{}, fmt.Errorf("%w: queue %s", ErrNotFound, name)
	}
	now := s.now()
	st := QueueStatus{Queue: s.queueView(q, ms, now)}
	plan := queue.Evaluate(q, ms, now, s.Liveness)
	for _, m := range ms {
		if !m.Serves(q.Name) {
			continue
		}
		slots := plan.Allowed[m.Name]
		used := m.Running[q.Name]
		if slots == 0 && used == 0 && !m.Live(now, s.Liveness) {
			continue
		}
		st.Members = append(st.Members, QueueMember{
			Name: m.Name, Role: string(m.Role), State: string(m.State),
			Live: m.Live(now, s.Liveness), Used: used, Slots: slots, Free: max(0, slots-used),
		})
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].Name < st.Members[j].Name })
	base := fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s", workflows.SAQueue.GetName(), quote(name))
	if st.Backlog, err = s.count(ctx, base+fmt.Sprintf(" AND %s = 'QUEUED' AND %s IS NOT NULL", workflows.SAStatus.GetName(), workflows.SADispatchedAt.GetName())); err != nil {
		return st, err
	}
	if st.Waiting, err = s.count(ctx, base+fmt.Sprintf(" AND %s IN ('CREATED', 'BLOCKED', 'FROZEN')", workflows.SAStatus.GetName())); err != nil {
		return st, err
	}
	oldest := func(b Build) {
		if wait := now.Sub(b.QueuedTime); wait > st.OldestWait {
			st.Oldest, st.OldestWait = b.ID, wait
		}
	}
	if st.Backlog > 0 {
		execs, err := s.list(ctx, base+fmt.Sprintf(" AND %s = 'QUEUED'", workflows.SAStatus.GetName()), 2000)
		if err != nil {
			return st, err
		}
		for _, ex := range execs {
			if b, ok := buildFromVisibility(ex); ok && !b.QueuedTime.IsZero() {
				oldest(b)
			}
		}
	}
	if s.BuildsInEvents {
		// Builds run inside their events, from the events' memos.
		owned, err := s.ownedWaiting(ctx, name, 2000)
		if err != nil {
			return st, err
		}
		for _, b := range owned {
			switch {
			case b.Status == workflows.StatusQueued && !b.QueuedTime.IsZero():
				st.Backlog++
				oldest(b)
			case b.Status == workflows.StatusCreated, b.Status == workflows.StatusBlocked, b.Status == workflows.StatusFrozen:
				st.Waiting++
			}
		}
	}
	return st, nil
}

// ListExecutors lists registered members.
func (s *Service) ListExecutors(ctx context.Context) ([]Executor, error) {
	_, ms, err := s.registry(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]Executor, 0, len(ms))
	for _, m := range ms {
		out = append(out, executorOf(m, now, s.Liveness))
	}
	return out, nil
}

// SetExecutorState activates, deactivates or drains a member.
func (s *Service) SetExecutorState(ctx context.Context, id queue.Identity, name string, state queue.MemberState) (Executor, error) {
	var m queue.Member
	err := s.update(ctx, workflows.RegistryID, workflows.UpdateSetMemberState,
		workflows.SetMemberStateRequest{Identity: id, Name: name, State: state}, &m)
	if err != nil {
		return Executor{}, updateError(err, "executor "+name)
	}
	if state != queue.StateActive {
		if err := grantsLapse(ctx); err != nil {
			return Executor{}, err
		}
	}
	return executorOf(m, s.now(), s.Liveness), nil
}

// ScheduleAction pauses, unpauses or triggers a periodic job's schedule.
func (s *Service) ScheduleAction(ctx context.Context, pipeline, job, action string) error {
	switch action {
	case "pause", "unpause", "trigger":
	default:
		return invalid("schedule action %q: want pause, unpause or trigger", action)
	}
	h := s.Client.ScheduleClient().GetHandle(ctx, workflows.PeriodicScheduleID(pipeline, job))
	var err error
	switch action {
	case "pause":
		err = h.Pause(ctx, client.SchedulePauseOptions{Note: pauseNote(s.now())})
	case "unpause":
		err = h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: "unpaused with sluice"})
	case "trigger":
		err = h.Trigger(ctx, client.ScheduleTriggerOptions{})
	default:
		return invalid("schedule action %q: want pause, unpause or trigger", action)
	}
	return translate(err, fmt.Sprintf("periodic schedule of %s/%s", pipeline, job))
}
