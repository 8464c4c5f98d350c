package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
)

// changePRBase: a pull request's events take their security-relevant
// settings from the base branch's spec, act for the pull-request identity
// when nobody started them by hand, and wait for approval when the base
// spec's screwdriver.cd/restrictPR holds them back.
const changePRBase = "pr-base-spec"

// UpdateApproveEvent approves an event that waits for approval
// (screwdriver.cd/restrictPR); its argument is an ApproveRequest.
const UpdateApproveEvent = "approve"

// PullRequestUser is the identity a pull request's event acts for when no
// person started it (a webhook): it holds no privilege and only the role
// PullRequestRole, so it may use a queue only when the queue allows every
// user or lists that role.
const PullRequestUser = "pull-request"

// PullRequestRole is the one role of the pull-request identity: a queue
// that lists it in its use roles takes pull requests' builds.
const PullRequestRole = "pull-request"

// PullRequestIdentity is the unprivileged identity of a pull request that
// no person started.
func PullRequestIdentity() queue.Identity {
	return queue.Identity{User: PullRequestUser, Roles: []string{PullRequestRole}}
}

// SignalPRSuperseded carries a PRSuperseded from a pipeline to a pull
// request's event when a newer commit of the pull request, or its close,
// arrives: an event still waiting for approval ends.
const SignalPRSuperseded = "pr-superseded"

// PRSuperseded says why a pull request's event was superseded.
type PRSuperseded struct {
	// Closed: the pull request was closed (else a newer commit arrived).
	Closed bool   `json:"closed,omitempty"`
	Reason string `json:"reason"`
}

// ApprovalWait bounds how long an event waits for approval before it ends
// ABORTED (a newer commit of the pull request usually replaces it sooner).
const ApprovalWait = 7 * 24 * time.Hour

// ErrNotAwaitingApproval is the error of an approve naming an event that is not waiting for
// approval (never restricted, already approved, or ended).
var ErrNotAwaitingApproval = errors.New("not waiting for approval")

// Approval is an event's approval, when it needed one.
type Approval struct {
	// Required says which restriction holds the event back.
	Required string `json:"required"`
	// ApprovedBy is who approved it ("" while it waits).
	ApprovedBy string    `json:"approved_by,omitempty"`
	ApprovedAt time.Time `json:"approved_at,omitzero"`
}

// ApproveRequest is UpdateApproveEvent's argument.
type ApproveRequest struct {
	// User is who approves (checked by the API: a pipeline admin).
	User string `json:"user"`
}

// registerApprove lets a pipeline admin approve the event while it waits.
func (e *eventRun) registerApprove(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateApproveEvent,
		func(ctx workflow.Context, r ApproveRequest) (Approval, error) {
			e.state.Approval.ApprovedBy, e.state.Approval.ApprovedAt = r.User, workflow.Now(ctx)
			return *e.state.Approval, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, r ApproveRequest) error {
			if r.User == "" {
				return errors.New("approve: name the user who approves")
			}
			if e.state.Approval == nil || e.state.Approval.ApprovedBy != "" || e.state.Status.Final() {
				return e.notAwaiting()
			}
			return nil
		}})
}

// notAwaiting says why the event cannot be approved.
func (e *eventRun) notAwaiting() error {
	switch {
	case e.state.Approval != nil && e.state.Approval.ApprovedBy != "":
		return fmt.Errorf("event %s is %w: %s approved it already", e.in.Event, ErrNotAwaitingApproval, e.state.Approval.ApprovedBy)
	case e.state.Status.Final():
		return fmt.Errorf("event %s is %w: it ended %s", e.in.Event, ErrNotAwaitingApproval, e.state.Status)
	}
	return fmt.Errorf("event %s is %w: it is %s and needs none", e.in.Event, ErrNotAwaitingApproval, e.state.Status)
}

// restriction says why the base spec's restrictPR holds this event back,
// or "" when it runs at once: only a pull request's event that no person
// started (it acts for the pull-request identity) is held back.
func (e *eventRun) restriction() (string, error) {
	restrict, err := e.spec.RestrictPR()
	if err != nil {
		return "", err
	}
	t := e.in.Trigger
	if e.identity().User != PullRequestUser || !pipeline.RestrictsPR(restrict, t.Fork) {
		return "", nil
	}
	from := "a branch of the pipeline's repository"
	if t.Fork {
		from = "a fork"
	}
	return fmt.Sprintf("pull request #%d from %s (%s: %s)", t.PR, from, pipeline.AnnotationRestrictPR, restrict), nil
}

// awaitApproval holds a restricted pull request's event until a pipeline
// admin approves it. It returns false with the event's end when the event
// must not go on (cancelled, not approved in time, bad restrictPR).
func (e *eventRun) awaitApproval(ctx workflow.Context) (bool, EventState) {
	why, err := e.restriction()
	if err != nil {
		return false, e.end(ctx, StatusFailure, err.Error())
	}
	if why == "" {
		return true, EventState{}
	}
	e.state.Approval = &Approval{Required: why}
	e.state.Status = StatusBlocked
	e.state.Reason = fmt.Sprintf("waiting for approval: %s; a pipeline admin runs: sluice event approve %s", why, e.in.Event)
	e.state.WaitCode = WaitApproval
	// Lists show the event waiting.
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAStatus.ValueSet(string(StatusBlocked)))
	// Nothing of this event runs until it is approved: later events need
	// not wait for it.
	e.enqueue(ctx)
	var superseded *PRSuperseded
	workflow.Go(ctx, func(ctx workflow.Context) {
		var msg PRSuperseded
		if workflow.GetSignalChannel(ctx, SignalPRSuperseded).Receive(ctx, &msg) {
			superseded = &msg
		}
	})
	approved, err := workflow.AwaitWithTimeout(ctx, ApprovalWait, func() bool {
		return e.state.Approval.ApprovedBy != "" || superseded != nil
	})
	switch {
	case err != nil || ctx.Err() != nil:
		e.cancelled = true
		return false, e.end(ctx, StatusAborted, "event cancelled while waiting for approval")
	case superseded != nil && e.state.Approval.ApprovedBy == "":
		status := StatusCollapsed
		if superseded.Closed {
			status = StatusAborted
		}
		return false, e.end(ctx, status, fmt.Sprintf("not approved before it was superseded: %s", superseded.Reason))
	case !approved:
		return false, e.end(ctx, StatusAborted, fmt.Sprintf("not approved within %d days: %s", ApprovalWait/(24*time.Hour), why))
	}
	e.state.Status, e.state.Reason, e.state.WaitCode = StatusRunning, "", ""
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAStatus.ValueSet(string(StatusRunning)))
	return true, EventState{}
}
