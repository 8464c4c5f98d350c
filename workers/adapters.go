package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Temporal implements the activities' ports on a Temporal client.
type Temporal struct {
	Client    client.Client
	Namespace string
	// ScheduleCatchup is the periodic schedules' catch-up window: a fire
	// missed while the Temporal server was down runs only if it is at most
	// this late (zero leaves Temporal's default of one year).
	ScheduleCatchup time.Duration
}

var (
	_ activities.Claimer       = Temporal{}
	_ activities.QueueLister   = Temporal{}
	_ activities.RemoteStarter = Temporal{}
	_ activities.Scheduler     = Temporal{}
)

// Claim sends the claim update to the workflow that owns the build, with
// the hash of the attempt's credential (never the credential).
func (t Temporal) Claim(ctx context.Context, c activities.Claim) error {
	h, err := t.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   c.WorkflowID,
		UpdateName:   workflows.UpdateClaim,
		Args:         []any{claimRequest(c)},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("claim %s: %w", c.WorkflowID, err)
	}
	if err := h.Get(ctx, nil); err != nil {
		return fmt.Errorf("claim %s: %w", c.WorkflowID, err)
	}
	return nil
}

// claimRequest is the claim update's argument for c.
func claimRequest(c activities.Claim) workflows.ClaimRequest {
	return workflows.ClaimRequest{
		Build: c.Build, Attempt: c.Attempt, Executor: c.Executor, Dispatch: c.Dispatch,
		CredentialHash: c.CredentialHash, StepCredentialHash: c.StepHash,
	}
}

// ListQueues reads the queue definitions from the registry.
func (t Temporal) ListQueues(ctx context.Context) ([]queue.Queue, error) {
	v, err := t.Client.QueryWorkflow(ctx, workflows.RegistryID, "", workflows.QueryQueues)
	if err != nil {
		return nil, fmt.Errorf("query the registry: %w", err)
	}
	var qs []queue.Queue
	if err := v.Get(&qs); err != nil {
		return nil, fmt.Errorf("decode queues: %w", err)
	}
	return qs, nil
}

// StartRemote starts an event in every running pipeline subscribed to remote.
// The delivery ID makes a retried activity start each event once.
func (t Temporal) StartRemote(ctx context.Context, remote, fromEvent string) ([]string, error) {
	query := fmt.Sprintf("WorkflowType = 'PipelineWorkflow' AND ExecutionStatus = 'Running' AND %s = '%s'",
		workflows.SASubscriptions.GetName(), strings.ReplaceAll(remote, "'", ""))
	var started []string
	var errs []error
	var token []byte
	for {
		resp, err := t.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: t.Namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return started, fmt.Errorf("list subscribers of %s: %w", remote, err)
		}
		for _, ex := range resp.GetExecutions() {
			name := strings.TrimPrefix(ex.GetExecution().GetWorkflowId(), "pipeline/")
			res, err := StartEvent(ctx, t.Client, name, workflows.StartEventRequest{
				Trigger: workflows.Trigger{
					Kind: workflows.TriggerRemote, Remote: remote, Sender: fromEvent,
					DeliveryID: "remote:" + fromEvent + ":" + remote,
				},
				Creator: fromEvent,
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("pipeline %s: %w", name, err))
				continue
			}
			started = append(started, res.Event.String())
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	sort.Strings(started)
	return started, errors.Join(errs...)
}

// StartEvent asks a pipeline to start an event and returns its reference.
func StartEvent(ctx context.Context, c client.Client, pipeline string, req workflows.StartEventRequest) (workflows.StartEventResult, error) {
	var res workflows.StartEventResult
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.PipelineWorkflowID(pipeline),
		UpdateName:   workflows.UpdateStartEvent,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return res, err
	}
	err = h.Get(ctx, &res)
	return res, err
}

// jsonArg passes JSON already encoded as an update's argument (a []byte
// would travel as binary, which the workflow cannot decode).
type jsonArg struct{ json.RawMessage }

// UpdatePipeline sends pipeline's workflow the update name with arg and
// waits for its answer.
func (t Temporal) UpdatePipeline(ctx context.Context, pipeline, updateID, name string, arg json.RawMessage) (json.RawMessage, error) {
	h, err := t.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.PipelineWorkflowID(pipeline),
		UpdateID:     updateID,
		UpdateName:   name,
		Args:         []any{jsonArg{arg}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := h.Get(ctx, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SyncSchedules makes the pipeline's periodic schedules match periodic.
// previous are the jobs the pipeline scheduled before: with the listed ones
// (visibility may lag a schedule created moments ago) they are the
// schedules that may exist (N14).
func (t Temporal) SyncSchedules(ctx context.Context, pipelineName string, periodic map[string]string, previous []string) error {
	sc := t.Client.ScheduleClient()
	prefix := workflows.PeriodicScheduleID(pipelineName, "")
	existing := map[string]bool{}
	for _, job := range previous {
		existing[job] = true
	}
	it, err := sc.List(ctx, client.ScheduleListOptions{PageSize: 100})
	if err != nil {
		return fmt.Errorf("list schedules: %w", err)
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return fmt.Errorf("list schedules: %w", err)
		}
		if job, ok := strings.CutPrefix(e.ID, prefix); ok {
			existing[job] = true
		}
	}
	var errs []error
	for job, cron := range periodic {
		id := workflows.PeriodicScheduleID(pipelineName, job)
		spec := client.ScheduleSpec{CronExpressions: pipeline.ScheduleCrons(cron)}
		update := func() error {
			return sc.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
				DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
					in.Description.Schedule.Spec = &spec
					if in.Description.Schedule.Policy == nil {
						in.Description.Schedule.Policy = &client.SchedulePolicies{}
					}
					in.Description.Schedule.Policy.CatchupWindow = t.ScheduleCatchup
					in.Description.Schedule.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE
					return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
				},
			})
		}
		if existing[job] {
			err := update()
			var nf *serviceerror.NotFound
			if err == nil || !errors.As(err, &nf) {
				if err != nil {
					errs = append(errs, fmt.Errorf("update schedule %s: %w", id, err))
				}
				continue
			}
			// Listed or remembered but gone: create it below.
		}
		_, err := sc.Create(ctx, client.ScheduleOptions{
			ID:            id,
			Spec:          spec,
			Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
			CatchupWindow: t.ScheduleCatchup,
			Action: &client.ScheduleWorkflowAction{
				ID:        id,
				Workflow:  workflows.PeriodicWorkflow,
				Args:      []any{workflows.PeriodicInput{Pipeline: pipelineName, Job: job}},
				TaskQueue: workflows.ControllerTaskQueue,
			},
			Note: fmt.Sprintf("screwdriver.cd/buildPeriodically of %s/%s", pipelineName, job),
		})
		var exists *serviceerror.AlreadyExists
		if errors.As(err, &exists) {
			// Created moments ago and not listed yet: update it.
			err = update()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("create or update schedule %s: %w", id, err))
		}
	}
	for job := range existing {
		if _, keep := periodic[job]; keep {
			continue
		}
		id := workflows.PeriodicScheduleID(pipelineName, job)
		var nf *serviceerror.NotFound
		if err := sc.GetHandle(ctx, id).Delete(ctx); err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("delete schedule %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
