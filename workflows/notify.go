package workflows

import (
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
)

// Notifications (a job's "settings": email and slack). When a build ends
// with a status its job's settings list, the event starts a NotifyWorkflow
// (abandoned: it outlives the event) that sends each message through a
// retried activity. The event waits only for that workflow to start, so a
// mail server or Slack outage delays the message and never a build or the
// event.

// changeNotifications versions events since they send notifications; it is
// asked only when a build ends that its job's settings want notified.
const changeNotifications = "notifications"

// NotifyWorkflowID is the ID of the workflow notifying build b's end.
func NotifyWorkflowID(b string) string { return "notify/" + b }

// NotifyInput is the messages about one build's end.
type NotifyInput struct {
	Messages []activities.NotifyInput `json:"messages"`
}

// NotifyReport is what a NotifyWorkflow sent, and what it gave up on.
type NotifyReport struct {
	Sent   int      `json:"sent"`
	Failed []string `json:"failed,omitempty"`
}

// NotifyWorkflow sends messages, each retried on its own for up to a day.
func NotifyWorkflow(ctx workflow.Context, in NotifyInput) (NotifyReport, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              ControllerTaskQueue,
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeNotifyRefused},
		},
		Summary: "send a notification",
	})
	futs := make([]workflow.Future, len(in.Messages))
	for i, m := range in.Messages {
		futs[i] = workflow.ExecuteActivity(actx, a.SendNotification, m)
	}
	var rep NotifyReport
	for i, f := range futs {
		if err := f.Get(ctx, nil); err != nil {
			m := in.Messages[i]
			to := m.Channel
			if m.Kind == activities.NotifyEmail {
				to = strings.Join(m.Addresses, ", ")
			}
			rep.Failed = append(rep.Failed, string(m.Kind)+" "+to+": "+rootMessage(err))
			workflow.GetLogger(ctx).Warn("notification_failed", "build", m.Build, "kind", m.Kind, "error", rootMessage(err))
			continue
		}
		rep.Sent++
	}
	return rep, nil
}

// notifyBuild starts the NotifyWorkflow of a build that ended with a
// status its job's settings want notified.
func (e *eventRun) notifyBuild(ctx workflow.Context, job string, st BuildState) {
	spec := e.spec.Jobs[job]
	if spec == nil || len(spec.Notifications) == 0 {
		return
	}
	n := spec.NotifySettings()
	status := string(st.Status)
	if !n.Email.Wants(status) && !n.Slack.Wants(status) {
		return
	}
	if workflow.GetVersion(ctx, changeNotifications, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	id := st.ID
	if id == "" {
		id = st.Build.String()
	}
	base := activities.NotifyInput{
		Pipeline: e.in.Event.Pipeline, Job: job, Build: id, Status: status, Reason: st.Reason,
		Branch: eventBranch(e.in.Config, e.in.Trigger), SHA: e.state.SHA, PR: st.Build.PR, Page: BuildPage(id),
	}
	var in NotifyInput
	if n.Email.Wants(status) {
		m := base
		m.Kind, m.Addresses, m.Subject = activities.NotifyEmail, n.Email.Addresses, n.Email.Subject
		in.Messages = append(in.Messages, m)
	}
	if n.Slack.Wants(status) {
		for _, ch := range n.Slack.Channels {
			m := base
			m.Kind, m.Channel, m.Minimized = activities.NotifySlack, ch, n.Slack.Minimized
			in.Messages = append(in.Messages, m)
		}
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        NotifyWorkflowID(id),
		TaskQueue:         ControllerTaskQueue,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:     "notify the end of build " + id,
	})
	e.notifies = append(e.notifies, workflow.ExecuteChildWorkflow(cctx, NotifyWorkflow, in).GetChildWorkflowExecution())
}

// notifiesStarted waits until the notifications' workflows started (not
// until they sent anything), so that ending the event does not lose them.
func (e *eventRun) notifiesStarted(ctx workflow.Context) {
	for _, f := range e.notifies {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("notifications_not_started", "event", e.in.Event.String(), "error", err)
		}
	}
	e.notifies = nil
}
