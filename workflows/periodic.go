package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// PeriodicInput names the periodic job a schedule fires.
type PeriodicInput struct {
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
}

// PeriodicWorkflow is the action of a periodic job's Temporal Schedule: it
// asks the pipeline to start an event from the job and ends. A periodic build
// still waiting when the next one fires collapses into it, as in Screwdriver.
func PeriodicWorkflow(ctx workflow.Context, in PeriodicInput) error {
	req := StartEventRequest{
		Trigger:   Trigger{Kind: TriggerPeriodic, Sender: "schedule"},
		StartFrom: in.Job,
		Creator:   "schedule",
	}
	if err := workflow.SignalExternalWorkflow(ctx, PipelineWorkflowID(in.Pipeline), "", SignalStartEvent, req).Get(ctx, nil); err != nil {
		return fmt.Errorf("start periodic event of %s/%s: %w", in.Pipeline, in.Job, err)
	}
	return nil
}
