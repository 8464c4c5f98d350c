package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// changeLaneOrder versions the workflows' behaviour since lanes keep the
// order of granted builds, pull requests have lanes of their own, spec syncs
// are ordered and periodic fires wait for their build (workflow.GetVersion).
const changeLaneOrder = "lane-order"

// changeRestartIsByHand: restarting or re-running a periodic event is a
// person's start, so manualStartEnabled: false refuses it (N8).
const changeRestartIsByHand = "restart-is-by-hand"

// PeriodicInput names the periodic job a schedule fires.
type PeriodicInput struct {
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
}

// PeriodicDone is SignalPeriodicDone's payload.
type PeriodicDone struct {
	// Event is the event the fire started (empty when none started).
	Event string `json:"event,omitempty"`
	// Status is how the job's builds ended.
	Status Status `json:"status,omitempty"`
	// Reason says why nothing started, or how the job ended.
	Reason string `json:"reason,omitempty"`
}

// PeriodicResult is what a PeriodicWorkflow returns.
type PeriodicResult struct {
	Done PeriodicDone `json:"done"`
	// TimedOut is set when the build did not end within periodicWaitLimit.
	TimedOut bool `json:"timed_out,omitempty"`
}

// periodicWaitLimit bounds how long a fire waits for its build: a build that
// takes longer no longer holds the schedule's next fire back.
const periodicWaitLimit = 24 * time.Hour

// PeriodicWorkflow is the action of a periodic job's Temporal Schedule: it
// asks the pipeline to start an event from the job and waits until the job's
// builds end. The schedule's overlap policy (buffer one) therefore applies to
// the builds: while a periodic build waits or runs, the next fire is buffered
// and later ones are skipped, whatever the job's collapseBuilds says, as in
// Screwdriver.
func PeriodicWorkflow(ctx workflow.Context, in PeriodicInput) (PeriodicResult, error) {
	wait := workflow.GetVersion(ctx, changeLaneOrder, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	req := StartEventRequest{
		Trigger:   Trigger{Kind: TriggerPeriodic, Sender: "schedule"},
		StartFrom: in.Job,
		Creator:   "schedule",
	}
	if wait {
		req.Notify = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	if err := workflow.SignalExternalWorkflow(ctx, PipelineWorkflowID(in.Pipeline), "", SignalStartEvent, req).Get(ctx, nil); err != nil {
		return PeriodicResult{}, fmt.Errorf("start periodic event of %s/%s: %w", in.Pipeline, in.Job, err)
	}
	var res PeriodicResult
	if !wait {
		return res, nil
	}
	ch := workflow.GetSignalChannel(ctx, SignalPeriodicDone)
	ok, _ := ch.ReceiveWithTimeout(ctx, periodicWaitLimit, &res.Done)
	res.TimedOut = !ok
	return res, nil
}
