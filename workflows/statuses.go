package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/scm"
)

// Commit statuses. Each event whose pipeline reports to GitHub or GitLab
// starts a StatusWorkflow (abandoned when the event ends) that owns the
// event's statuses: the event and its builds signal it what each status
// should be, and it posts them one at a time through an activity with
// retries. A provider outage therefore delays statuses but never a build,
// and, per context, a final state is never followed by a pending one.
const (
	// SignalCommitStatus carries a StatusBatch to a StatusWorkflow.
	SignalCommitStatus = "commit-status"
	// QueryStatuses returns a StatusWorkflow's StatusReport.
	QueryStatuses = "statuses"
	// statusHistoryLimit continues a StatusWorkflow as new past this many
	// history events (a large matrix event posts many statuses).
	statusHistoryLimit = 10000
)

// StatusWorkflowID is the ID of an event's StatusWorkflow.
func StatusWorkflowID(ev EventRef) string { return "statuses/" + ev.String() }

// StatusContext is the status context of a job: "sluice/<pipeline>/<job>",
// or "sluice/<pipeline>/PR:<job>" for a pull request's builds (one name for
// every pull request, so branch protection can require it).
func StatusContext(pipelineName, job string, pr bool) string {
	if pr {
		return "sluice/" + pipelineName + "/PR:" + job
	}
	return "sluice/" + pipelineName + "/" + job
}

// EventStatusContext is the context of a status about the event as a whole
// (a spec that cannot be read).
func EventStatusContext(pipelineName string) string { return "sluice/" + pipelineName }

// BuildPage is a build's web page, relative to the API's public URL.
func BuildPage(b string) string { return "/ui/builds/" + b }

// EventPage is an event's web page, relative to the API's public URL.
func EventPage(ev EventRef) string {
	return fmt.Sprintf("/ui/pipelines/%s/events/%d", ev.Pipeline, ev.Number)
}

// StatusUpdate is what one status should become.
type StatusUpdate struct {
	Context     string `json:"context"`
	State       string `json:"state"`
	Description string `json:"description,omitempty"`
	// Page is the web page the status links to, relative to the public URL.
	Page string `json:"page,omitempty"`
	// At orders updates from different senders: an older non-final update
	// never replaces a newer one.
	At time.Time `json:"at"`
}

func (u StatusUpdate) final() bool {
	return u.State != scm.StatePending && u.State != scm.StateRunning
}

// StatusBatch is SignalCommitStatus's payload; Done says the event ended
// and nothing more will come.
type StatusBatch struct {
	Updates []StatusUpdate `json:"updates,omitempty"`
	Done    bool           `json:"done,omitempty"`
}

// StatusInput starts (or continues) a StatusWorkflow.
type StatusInput struct {
	Event  EventRef         `json:"event"`
	Target scm.StatusTarget `json:"target"`
	SHA    string           `json:"sha"`
	// Contexts carries the state over continue-as-new (and the initial
	// updates at start), in the order contexts were first seen.
	Contexts []StatusContextState `json:"contexts"`
	Done     bool                 `json:"done,omitempty"`
}

// StatusContextState is one context's wanted and posted states.
type StatusContextState struct {
	Want   StatusUpdate  `json:"want"`
	Posted *StatusUpdate `json:"posted,omitempty"`
	// Error is why the last wanted state could not be posted.
	Error string `json:"error,omitempty"`
}

// StatusReport is QueryStatuses's answer.
type StatusReport struct {
	Target   string               `json:"target"`
	SHA      string               `json:"sha"`
	Contexts []StatusContextState `json:"contexts"`
	Done     bool                 `json:"done"`
}

type statusReporter struct {
	in    StatusInput
	index map[string]int
}

// accept applies one update: a final state is never replaced, and a
// non-final update older than the wanted state is dropped.
func (r *statusReporter) accept(u StatusUpdate) {
	i, ok := r.index[u.Context]
	if !ok {
		r.index[u.Context] = len(r.in.Contexts)
		r.in.Contexts = append(r.in.Contexts, StatusContextState{Want: u})
		return
	}
	c := &r.in.Contexts[i]
	switch {
	case c.Want.final():
		return
	case !u.final() && u.At.Before(c.Want.At):
		return
	}
	c.Want = u
	c.Error = ""
}

func (r *statusReporter) apply(b StatusBatch) {
	for _, u := range b.Updates {
		r.accept(u)
	}
	if b.Done {
		r.in.Done = true
	}
}

// next is the first context whose wanted state is not posted yet (-1: none).
func (r *statusReporter) next() int {
	for i, c := range r.in.Contexts {
		if c.Error != "" {
			continue
		}
		if c.Posted == nil || !samePost(*c.Posted, c.Want) {
			return i
		}
	}
	return -1
}

func samePost(a, b StatusUpdate) bool {
	return a.State == b.State && a.Description == b.Description && a.Page == b.Page
}

// StatusWorkflow posts one event's commit statuses in order.
func StatusWorkflow(ctx workflow.Context, in StatusInput) (StatusReport, error) {
	r := &statusReporter{in: in, index: map[string]int{}}
	for i, c := range in.Contexts {
		r.index[c.Want.Context] = i
	}
	report := func() StatusReport {
		return StatusReport{Target: r.in.Target.String(), SHA: r.in.SHA, Contexts: slices.Clone(r.in.Contexts), Done: r.in.Done}
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatuses, func() (StatusReport, error) { return report(), nil }); err != nil {
		return StatusReport{}, fmt.Errorf("register statuses query: %w", err)
	}
	ch := workflow.GetSignalChannel(ctx, SignalCommitStatus)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              ControllerTaskQueue,
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeStatusRefused},
		},
		Summary: "post a commit status",
	})
	for {
		for {
			var b StatusBatch
			if !ch.ReceiveAsync(&b) {
				break
			}
			r.apply(b)
		}
		i := r.next()
		if i < 0 {
			if r.in.Done {
				return report(), nil
			}
			if workflow.GetInfo(ctx).GetCurrentHistoryLength() > statusHistoryLimit {
				return report(), workflow.NewContinueAsNewError(ctx, StatusWorkflow, r.in)
			}
			var b StatusBatch
			ch.Receive(ctx, &b)
			r.apply(b)
			continue
		}
		want := r.in.Contexts[i].Want
		err := workflow.ExecuteActivity(actx, a.PostCommitStatus, activities.PostStatusInput{
			Pipeline: r.in.Event.Pipeline, Target: r.in.Target, SHA: r.in.SHA, Page: want.Page,
			Status: scm.CommitStatus{State: want.State, Context: want.Context, Description: want.Description},
		}).Get(ctx, nil)
		c := &r.in.Contexts[i]
		if err != nil {
			// Refused, or still failing after a day: give this state up (a
			// newer one for the context is tried again).
			c.Error = rootMessage(err)
			workflow.GetLogger(ctx).Warn("commit_status_failed", "context", want.Context, "state", want.State, "error", c.Error)
			var canceled *temporal.CanceledError
			if errors.As(err, &canceled) {
				return report(), err
			}
			continue
		}
		posted := want
		c.Posted = &posted
	}
}

// statusChildOptions starts an event's StatusWorkflow: it outlives the
// event (it may still be posting when the event ends).
func statusChildOptions(ev EventRef) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:        StatusWorkflowID(ev),
		TaskQueue:         ControllerTaskQueue,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:     "commit statuses of event " + ev.String(),
	}
}

// changeCommitStatuses versions events since they report commit statuses.
const changeCommitStatuses = "commit-statuses"

// MemoStatuses is the memo key of an event's commit status target, or of
// why it posts none ("off: ...").
const MemoStatuses = "statuses"

// eventStatuses is an event's side of its commit statuses.
type eventStatuses struct {
	target  scm.StatusTarget
	started bool
	// jobs are the jobs given a pending status at the start, in order.
	jobs []string
	// finals holds each context's final update once the event sent it.
	finals map[string]StatusUpdate
	done   bool
	// sent are the signals not yet known delivered: the server drops a
	// signal whose sender has closed, so the event waits for them.
	sent []workflow.Future
}

// id is the reporter's workflow ID for builds ("" when none runs).
func (e *eventRun) statusesID() string {
	if e.statuses == nil || !e.statuses.started {
		return ""
	}
	return StatusWorkflowID(e.in.Event)
}

func (e *eventRun) statusContext(job string) string {
	return StatusContext(e.in.Event.Pipeline, job, e.prEvent())
}

// statusesResolved records where the event's statuses go, or why nowhere.
func (e *eventRun) statusesResolved(ctx workflow.Context, res activities.ResolveEventResult) {
	if res.Statuses != nil {
		e.statuses = &eventStatuses{target: *res.Statuses, finals: map[string]StatusUpdate{}}
		e.state.Statuses = res.Statuses.String()
	} else {
		e.state.Statuses = "off: " + res.StatusesOff
	}
	e.upsertMemo(ctx, map[string]any{MemoStatuses: e.state.Statuses})
}

// startReporter starts the event's StatusWorkflow with its first statuses.
func (e *eventRun) startReporter(ctx workflow.Context, initial []StatusUpdate, done bool) {
	in := StatusInput{Event: e.in.Event, Target: e.statuses.target, SHA: e.state.SHA, Done: done}
	for _, u := range initial {
		in.Contexts = append(in.Contexts, StatusContextState{Want: u})
	}
	cctx := workflow.WithChildOptions(ctx, statusChildOptions(e.in.Event))
	fut := workflow.ExecuteChildWorkflow(cctx, StatusWorkflow, in)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("commit_statuses_not_started", "event", e.in.Event.String(), "error", err)
		e.state.Warnings = append(e.state.Warnings, "commit statuses: "+rootMessage(err))
		return
	}
	e.statuses.started = true
	e.statuses.done = done
}

// reportEventFailure posts one failure status for an event that could not
// start its jobs (a spec that does not parse, a queue it may not use).
func (e *eventRun) reportEventFailure(ctx workflow.Context, reason string) {
	if e.statuses == nil || e.state.SHA == "" {
		return
	}
	e.startReporter(ctx, []StatusUpdate{{
		Context: EventStatusContext(e.in.Event.Pipeline), State: scm.StateFailure,
		Description: reason, Page: EventPage(e.in.Event), At: workflow.Now(ctx),
	}}, true)
}

// startStatuses starts the reporter with a pending status for every job
// the event may run: a required check shows up at once, and a job that
// never runs ends with a status saying why.
func (e *eventRun) startStatuses(ctx workflow.Context, starts []string) {
	if e.statuses == nil {
		return
	}
	now := workflow.Now(ctx)
	var initial []StatusUpdate
	for _, job := range e.reachable(starts) {
		desc := "waiting to be queued"
		if !slices.Contains(starts, job) {
			var parents []string
			for _, r := range e.spec.Jobs[job].Requires {
				parents = append(parents, strings.TrimPrefix(r, "~"))
			}
			desc = "waiting for " + strings.Join(parents, ", ")
		}
		e.statuses.jobs = append(e.statuses.jobs, job)
		initial = append(initial, StatusUpdate{Context: e.statusContext(job), State: scm.StatePending, Description: desc, Page: EventPage(e.in.Event), At: now})
	}
	e.startReporter(ctx, initial, false)
}

// finalState maps a job's outcome onto a commit status state.
func finalState(s Status) string {
	switch s {
	case StatusSuccess:
		return scm.StateSuccess
	case StatusFailure:
		return scm.StateFailure
	case StatusSkipped:
		return scm.StateSkipped
	default: // aborted, collapsed (or still running when the event ended)
		return scm.StateError
	}
}

// jobStatus sends a job's final status once its last build ended.
func (e *eventRun) jobStatus(ctx workflow.Context, jr *jobRun) {
	if e.statusesID() == "" || e.statuses.done {
		return
	}
	u := StatusUpdate{
		Context: e.statusContext(jr.name), State: finalState(jr.status), Description: jr.reason,
		Page: EventPage(e.in.Event), At: workflow.Now(ctx),
	}
	if len(jr.results) == 1 {
		r := jr.results[0]
		u.Page = BuildPage(r.ID)
		if r.CollapsedInto != "" {
			u.Page = BuildPage(r.CollapsedInto)
		}
	}
	if jr.status == StatusSuccess {
		u.Description = "succeeded"
		if len(jr.results) == 1 && !jr.results[0].StartTime.IsZero() && !jr.results[0].EndTime.IsZero() {
			u.Description += " in " + jr.results[0].EndTime.Sub(jr.results[0].StartTime).Round(time.Second).String()
		}
	}
	e.statuses.finals[u.Context] = u
	e.statuses.sent = append(e.statuses.sent,
		workflow.SignalExternalWorkflow(ctx, StatusWorkflowID(e.in.Event), "", SignalCommitStatus, StatusBatch{Updates: []StatusUpdate{u}}))
}

// statusesDone sends every job's final status, including the jobs that did
// not run and why, and tells the reporter the event ended.
func (e *eventRun) statusesDone(ctx workflow.Context) {
	if e.statusesID() == "" || e.statuses.done {
		return
	}
	e.statuses.done = true
	now := workflow.Now(ctx)
	outcome := map[string]JobOutcome{}
	for _, o := range e.state.Jobs {
		outcome[o.Job] = o
	}
	var batch StatusBatch
	for _, job := range e.statuses.jobs {
		c := e.statusContext(job)
		if u, ok := e.statuses.finals[c]; ok {
			batch.Updates = append(batch.Updates, u)
			continue
		}
		u := StatusUpdate{Context: c, State: scm.StateSkipped, Description: "not run in this event", Page: EventPage(e.in.Event), At: now}
		if o, ok := outcome[job]; ok {
			u.State, u.Description = finalState(o.Status), o.Reason
			if o.Status == StatusRunning {
				u.Description = "event ended: " + e.state.Reason
			}
		}
		batch.Updates = append(batch.Updates, u)
	}
	batch.Done = true
	e.statuses.sent = append(e.statuses.sent, workflow.SignalExternalWorkflow(ctx, StatusWorkflowID(e.in.Event), "", SignalCommitStatus, batch))
	for _, f := range e.statuses.sent {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("commit_status_signal_failed", "event", e.in.Event.String(), "error", err)
		}
	}
}
