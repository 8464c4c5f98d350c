package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

// ---- events -------------------------------------------------------------

// StartEvent validates a request and starts an event.
func (s *Service) StartEvent(ctx context.Context, id queue.Identity, name string, req StartEventRequest) (EventStarted, error) {
	if err := workflows.ValidatePipelineName(name); err != nil {
		return EventStarted{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	kind := workflows.TriggerKind(req.Type)
	if req.Type == "" {
		kind = workflows.TriggerManual
		if req.StartFrom == "" && (req.SHA != "" || req.Branch != "") {
			kind = workflows.TriggerCommit
		}
	}
	switch kind {
	case workflows.TriggerCommit, workflows.TriggerPR, workflows.TriggerPRClosed, workflows.TriggerRelease, workflows.TriggerTag, workflows.TriggerManual:
	default:
		return EventStarted{}, invalid("type %q: want commit, pr, pr-closed, release, tag or manual", req.Type)
	}
	if req.SHA != "" && !reSHA.MatchString(req.SHA) {
		return EventStarted{}, invalid("sha %q: want 4 to 64 hex digits", req.SHA)
	}
	if req.Branch != "" && !reBranch.MatchString(req.Branch) {
		return EventStarted{}, invalid("branch %q: not a valid branch name", req.Branch)
	}
	if req.StartFrom != "" && !reJob.MatchString(req.StartFrom) {
		return EventStarted{}, invalid("start_from %q: not a job name", req.StartFrom)
	}
	if req.PR < 0 {
		return EventStarted{}, invalid("pr %d: must be positive", req.PR)
	}
	if (kind == workflows.TriggerPR || kind == workflows.TriggerPRClosed) && req.PR == 0 {
		return EventStarted{}, invalid("pr: a %s event needs the pull request number", kind)
	}
	if (kind == workflows.TriggerTag || kind == workflows.TriggerRelease) && req.Ref == "" {
		return EventStarted{}, invalid("ref: a %s event needs the tag or release name", kind)
	}
	if req.Ref != "" && !reBranch.MatchString(req.Ref) {
		return EventStarted{}, invalid("ref %q: not a valid tag or branch name", req.Ref)
	}
	if len(req.Parameters) > 0 {
		if err := s.checkParameters(ctx, name, kind, req); err != nil {
			return EventStarted{}, err
		}
	}
	metaRef, err := s.NewEventMeta(ctx, name, req.Meta)
	if err != nil {
		return EventStarted{}, err
	}
	ident := id
	r := workflows.StartEventRequest{
		Trigger:   workflows.Trigger{Kind: kind, Branch: req.Branch, Ref: req.Ref, SHA: req.SHA, PR: req.PR, Sender: id.User, MetaRef: metaRef},
		StartFrom: req.StartFrom, Force: req.Force, Creator: id.User, Identity: &ident, Parameters: req.Parameters,
	}
	started, err := s.startEvent(ctx, name, r)
	if err == nil && !started.Duplicate && !started.Pending {
		// A pending start's pipeline is busy: no query would answer soon.
		started.Warnings = s.startWarnings(ctx, name, started.queue)
	}
	return started, err
}

// checkParameters refuses, before anything starts, parameters the spec the
// event will read does not accept: an unknown name, a value outside a
// parameter's choices. It reads the spec where the event will (the given
// commit, tag or branch, else the pipeline's branch); the event checks again
// at the commit it resolves.
func (s *Service) checkParameters(ctx context.Context, name string, kind workflows.TriggerKind, req StartEventRequest) error {
	if len(req.Parameters) > pipeline.MaxParameters {
		return invalid("parameters: %d given; the limit is %d", len(req.Parameters), pipeline.MaxParameters)
	}
	p, location, err := s.getPipeline(ctx, name)
	if err != nil {
		return err
	}
	ref := req.SHA
	switch {
	case ref != "":
	case p.RepoKind == scm.KindDir:
		// A directory has no branches: its current content.
	case kind == workflows.TriggerTag || kind == workflows.TriggerRelease:
		ref = req.Ref
	case req.Branch != "":
		ref = req.Branch
	default:
		ref = p.Branch
	}
	spec, err := s.specAt(ctx, location, name, ref)
	if err != nil {
		return invalid("parameters: cannot read the pipeline's spec to check them: %v", err)
	}
	if _, err := spec.ResolveParameters(req.Parameters); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// startEvent admits the start (durably, at once) and answers with the
// event's number, or pending with the admission ID when the pipeline did not
// number it within AdmitWait.
func (s *Service) startEvent(ctx context.Context, name string, r workflows.StartEventRequest) (EventStarted, error) {
	s.batches.setWait(s.AdmitWait)
	res, pending, err := s.batches.admit(ctx, s.Client, name, r)
	if err != nil {
		return EventStarted{}, updateError(err, "pipeline "+name)
	}
	if pending != "" {
		return EventStarted{Pipeline: name, Admission: pending, Pending: true}, nil
	}
	return EventStarted{ID: res.Event.String(), Pipeline: name, Number: res.Event.Number, Duplicate: res.Duplicate, queue: res.Queue}, nil
}

// admissionQueryFor bounds Admission's query: a pipeline too busy to
// answer it (or with no controller running it) has not numbered the start
// either, as far as anyone can tell.
const admissionQueryFor = 2 * time.Second

// Admission returns what pipeline made of an admitted start: the event's
// number once numbered (Pending while not yet, and while the pipeline
// cannot answer within admissionQueryFor).
func (s *Service) Admission(ctx context.Context, pipeline, admission string) (EventStarted, error) {
	// Shared with the other questions to the pipeline (admissions.go).
	a, err := s.asks.ask(ctx, pipeline, admission, queryAdmissions(s.Client, pipeline))
	var deadline *serviceerror.DeadlineExceeded
	switch {
	case err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline)):
		return EventStarted{Pipeline: pipeline, Admission: admission, Pending: true}, nil
	case err != nil:
		return EventStarted{}, translate(err, "pipeline "+pipeline)
	case a.Error != "":
		return EventStarted{}, updateError(startRefused(a.Error), "pipeline "+pipeline)
	case a.Event > 0:
		ref := workflows.EventRef{Pipeline: pipeline, Number: a.Event}
		return EventStarted{ID: ref.String(), Pipeline: pipeline, Number: a.Event, Duplicate: a.Duplicate, Admission: admission}, nil
	}
	return EventStarted{Pipeline: pipeline, Admission: admission, Pending: true}, nil
}

// inherited are the jobs an event's restart counts as succeeded: those that
// succeeded in it or along its own restart chain.
func inherited(st workflows.EventState) []string {
	if st.Succeeded != nil {
		return st.Succeeded
	}
	var out []string // an event recorded before Succeeded existed
	for _, j := range st.Jobs {
		if j.Status == workflows.StatusSuccess {
			out = append(out, j.Job)
		}
	}
	return out
}

// eventState reads a running event's progress or a closed event's result.
func (s *Service) eventState(ctx context.Context, ref workflows.EventRef) (workflows.EventState, error) {
	var st workflows.EventState
	open, err := s.queryOpen(ctx, ref.WorkflowID(), workflows.QueryEvent, &st)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && s.eventNumbered(ctx, ref) {
		// Admitted in a burst (UpdateStartEvents): numbered, workflow not
		// started yet.
		return workflows.EventState{Event: ref, Status: workflows.StatusCreated, Reason: "starting: admitted in a burst, its workflow starts in a moment"}, nil
	}
	if err != nil {
		return st, translate(err, "event "+ref.String())
	}
	if open {
		return st, nil
	}
	if err := s.Client.GetWorkflow(ctx, ref.WorkflowID(), "").Get(ctx, &st); err != nil {
		st = workflows.EventState{Event: ref, Status: workflows.StatusAborted, Reason: "event workflow ended without a result: " + err.Error()}
	}
	return st, nil
}

// eventNumbered reports whether the pipeline has handed out ref's number.
func (s *Service) eventNumbered(ctx context.Context, ref workflows.EventRef) bool {
	v, err := s.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID(ref.Pipeline), "", workflows.QueryPipeline)
	if err != nil {
		return false
	}
	var info workflows.PipelineInfo
	return v.Get(&info) == nil && ref.Number <= info.Events
}

// GetEvent returns an event with its builds.
func (s *Service) GetEvent(ctx context.Context, ref workflows.EventRef) (Event, error) {
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return Event{}, err
	}
	var builds []Build
	if len(st.Builds) > 0 {
		// The event runs its builds: its state has every record, fresher
		// than visibility.
		builds = make([]Build, 0, len(st.Builds))
		for _, b := range st.Builds {
			builds = append(builds, ownedBuildOf(b.Build, b))
		}
	} else {
		builds, err = s.ListBuilds(ctx, BuildFilter{Event: ref.String(), Limit: 5000})
		if err != nil {
			return Event{}, err
		}
		builds = s.freshBuilds(ctx, st, builds)
	}
	sort.Slice(builds, func(i, j int) bool {
		if !builds[i].CreateTime.Equal(builds[j].CreateTime) {
			return builds[i].CreateTime.Before(builds[j].CreateTime)
		}
		return builds[i].ID < builds[j].ID
	})
	// Waiting builds get the same detailed reason as `build show`.
	ptrs := make([]*Build, len(builds))
	for i := range builds {
		ptrs[i] = &builds[i]
	}
	if err := s.liveReasons(ctx, ptrs); err != nil {
		s.Logger.DebugContext(ctx, "live_reason_failed", "event", ref.String(), "error", err)
	}
	st.Warnings = append(slices.Clone(st.Warnings), neverServedWarnings(builds)...)
	return Event{
		ID: ref.String(), Pipeline: ref.Pipeline, Number: ref.Number, SHA: st.SHA, Status: st.Status, Reason: st.Reason, WaitCode: st.WaitCode,
		Trigger: st.Trigger, StartFrom: st.StartFrom, StartJobs: st.StartJobs, Rerun: st.Rerun, Parent: st.Parent,
		ActsFor: st.ActsFor, Succeeded: st.Succeeded, Jobs: shownJobs(st.Jobs, builds), Builds: builds,
		Warnings: st.Warnings, StartTime: st.StartTime, EndTime: st.EndTime, Statuses: st.Statuses,
		BaseSHA: st.BaseSHA, Approval: st.Approval, Parameters: st.Parameters, Commit: st.Commit,
	}, nil
}

// maxFreshBuilds bounds the builds one GetEvent reads from their workflows
// rather than from visibility.
const maxFreshBuilds = 64

// freshBuilds corrects what visibility, which trails the workflows by up to
// a second or more on a busy server, says about an event's builds: a build
// the event names but visibility does not list yet is added, and a build
// visibility still shows waiting or running is read from its workflow (its
// search attributes and memo as of now). Otherwise an event that has ended
// could show a build still QUEUED that was collapsed a moment before.
// Builds that visibility shows ended are final and need no second look.
func (s *Service) freshBuilds(ctx context.Context, st workflows.EventState, builds []Build) []Build {
	listed := make(map[string]int, len(builds))
	for i, b := range builds {
		listed[b.ID] = i
	}
	var stale []string
	for _, b := range builds {
		if !b.Status.Final() {
			stale = append(stale, b.ID)
		}
	}
	for _, j := range st.Jobs {
		for _, id := range j.Builds {
			if _, ok := listed[id]; !ok {
				stale = append(stale, id)
				listed[id] = -1
			}
		}
	}
	if len(stale) > maxFreshBuilds {
		stale = stale[:maxFreshBuilds]
	}
	fresh := make([]*Build, len(stale))
	var g errgroup.Group
	g.SetLimit(8)
	for i, id := range stale {
		g.Go(func() error {
			ref, err := workflows.ParseBuildRef(id)
			if err != nil {
				return nil
			}
			desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
			if err != nil {
				s.Logger.DebugContext(ctx, "describe_build_failed", "build", id, "error", err)
				return nil
			}
			if b, ok := buildFromVisibility(desc.GetWorkflowExecutionInfo()); ok {
				fresh[i] = &b
			}
			return nil
		})
	}
	_ = g.Wait()
	for i, b := range fresh {
		if b == nil {
			continue
		}
		if at := listed[stale[i]]; at >= 0 {
			builds[at] = *b
		} else {
			builds = append(builds, *b)
		}
	}
	return builds
}

// ListEvents lists a pipeline's most recent events.
func (s *Service) ListEvents(ctx context.Context, name string, limit int) ([]Event, error) {
	evs, _, err := s.ListEventsPage(ctx, name, EventFilter{Limit: limit})
	return evs, err
}

// CancelEvent cancels every build of the event.
//
// An event the pipeline numbered a moment ago may have no workflow yet (a
// start is answered once numbered; its workflow starts right after): the
// cancel then waits for it, eventStartWait at most, rather than saying the
// event it just reported does not exist.
func (s *Service) CancelEvent(ctx context.Context, ref workflows.EventRef) error {
	err := s.Client.CancelWorkflow(ctx, ref.WorkflowID(), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && s.eventNumbered(ctx, ref) {
		deadline := time.Now().Add(eventStartWait)
		for delay := 10 * time.Millisecond; errors.As(err, &nf) && time.Now().Before(deadline); delay = min(2*delay, 500*time.Millisecond) {
			select {
			case <-ctx.Done():
				return translate(ctx.Err(), "event "+ref.String())
			case <-time.After(delay):
			}
			err = s.Client.CancelWorkflow(ctx, ref.WorkflowID(), "")
		}
	}
	return translate(err, "event "+ref.String())
}

// eventStartWait bounds how long a cancel waits for a numbered event's
// workflow to start.
const eventStartWait = 10 * time.Second

// ApproveEvent lets an event that waits for approval
// (screwdriver.cd/restrictPR) start its builds, recording id as who
// approved it. An event that does not wait for approval is a conflict.
func (s *Service) ApproveEvent(ctx context.Context, id queue.Identity, ref workflows.EventRef) (workflows.Approval, error) {
	var out workflows.Approval
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return out, err
	}
	if st.Approval == nil || st.Approval.ApprovedBy != "" || st.Status.Final() {
		why := fmt.Sprintf("it is %s and needs no approval", st.Status)
		switch {
		case st.Approval != nil && st.Approval.ApprovedBy != "":
			why = st.Approval.ApprovedBy + " approved it already"
		case st.Status.Final():
			why = fmt.Sprintf("it ended %s", st.Status)
		}
		return out, fmt.Errorf("%w: event %s is not waiting for approval: %s", ErrConflict, ref, why)
	}
	err = s.update(ctx, ref.WorkflowID(), workflows.UpdateApproveEvent, workflows.ApproveRequest{User: id.User}, &out)
	var done *serviceerror.NotFound
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &done) || strings.Contains(err.Error(), "not waiting for approval") ||
		strings.Contains(err.Error(), "already completed"):
		// It ended, or someone approved it, since it was read.
		return out, fmt.Errorf("%w: event %s is not waiting for approval: %s", ErrConflict, ref, rootCause(err))
	}
	return out, updateError(err, "event "+ref.String())
}

// rootCause is the innermost message of err.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// RestartEvent starts a new event from one or more jobs, reusing the
// event's commit; every success along the event's restart chain counts for
// joins, except the jobs restarted.
func (s *Service) RestartEvent(ctx context.Context, id queue.Identity, ref workflows.EventRef, req RestartEventRequest) (EventStarted, error) {
	if len(req.From) == 0 {
		return EventStarted{}, invalid("from: name the job (or jobs) to restart from")
	}
	for _, j := range req.From {
		if !reJob.MatchString(j) {
			return EventStarted{}, invalid("from %q: not a job name; name the job (or jobs) to restart from", j)
		}
	}
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return EventStarted{}, err
	}
	if st.SHA == "" {
		return EventStarted{}, invalid("event %s never resolved a commit (%s); start a new event instead", ref, st.Reason)
	}
	from := slices.Compact(slices.Clone(req.From))
	return s.startFrom(ctx, id, ref, st, from, req.Force, false)
}

// RerunEvent starts a new event at the event's commit that runs exactly the
// jobs that failed, were aborted or collapsed (and, through the graph, the
// jobs that did not run because of them), with every success inherited: two
// failed branches of a join are re-run together and the join follows.
func (s *Service) RerunEvent(ctx context.Context, id queue.Identity, ref workflows.EventRef, req RerunEventRequest) (EventStarted, error) {
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return EventStarted{}, err
	}
	if !st.Status.Final() {
		return EventStarted{}, fmt.Errorf("%w: event %s is still %s; re-run it once it has ended", ErrConflict, ref, st.Status)
	}
	if st.SHA == "" {
		return EventStarted{}, invalid("event %s never resolved a commit (%s); start a new event instead", ref, st.Reason)
	}
	// COLLAPSED jobs are not re-run: a newer commit's build replaced them,
	// and running the old commit after it would roll back (a deploy).
	var jobs []string
	for _, j := range st.Jobs {
		switch j.Status {
		case workflows.StatusFailure, workflows.StatusAborted:
			jobs = append(jobs, j.Job)
		}
	}
	if len(jobs) == 0 {
		if len(st.Jobs) == 0 {
			return EventStarted{}, invalid("event %s ran no job (%s); start a new event instead", ref, st.Reason)
		}
		return EventStarted{}, invalid("event %s has no failed or aborted job to re-run (collapsed jobs are not re-run: a newer commit replaced them)", ref)
	}
	return s.startFrom(ctx, id, ref, st, jobs, req.Force, true)
}

// startFrom starts an event at jobs of event ref (state st), inheriting its
// successes.
func (s *Service) startFrom(ctx context.Context, id queue.Identity, ref workflows.EventRef, st workflows.EventState, jobs []string, force, rerun bool) (EventStarted, error) {
	var succeeded []string
	for _, j := range inherited(st) {
		if !slices.Contains(jobs, j) {
			succeeded = append(succeeded, j)
		}
	}
	t := st.Trigger
	t.SHA, t.DeliveryID, t.Sender = st.SHA, "", id.User
	ident := id
	r := workflows.StartEventRequest{
		Trigger: t, StartFrom: jobs[0], Force: force, Parent: ref.Number, ParentSucceeded: succeeded,
		Creator: id.User, Identity: &ident, Rerun: rerun,
		// The restart runs with the parameters the event ran with.
		Parameters: st.Parameters,
	}
	if len(jobs) > 1 || rerun {
		r.StartJobs = jobs
	}
	return s.startEvent(ctx, ref.Pipeline, r)
}
