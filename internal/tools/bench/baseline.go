package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The bare baseline: one workflow that runs one no-op activity, the
// activity on its own worker and task queue — Temporal's floor for "start
// something, then run a task somewhere else".
const (
	bareWorkflowQueue = "bare-workflows"
	bareActivityQueue = "bare-activities"
)

// BareInput names the activity task queue.
type BareInput struct {
	ActivityQueue string `json:"activity_queue"`
}

// BareWorkflow runs BareActivity once.
func BareWorkflow(ctx workflow.Context, in BareInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           in.ActivityQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(ctx, bareActivityName).Get(ctx, nil)
}

const bareActivityName = "BareActivity"

// bareActivities notes when each workflow's activity started.
type bareActivities struct {
	started sync.Map // workflow ID -> time.Time
}

func (a *bareActivities) run(ctx context.Context) error {
	a.started.Store(activity.GetInfo(ctx).WorkflowExecution.ID, time.Now())
	return nil
}

// baseline runs the bare workflow's workers: one for workflows, and
// activityWorkers for the activity with slots each.
type baseline struct {
	c       client.Client
	acts    *bareActivities
	workers []worker.Worker
}

func startBaseline(c client.Client, activityWorkers, slots int) (*baseline, error) {
	bl := &baseline{c: c, acts: &bareActivities{}}
	ww := worker.New(c, bareWorkflowQueue, worker.Options{})
	ww.RegisterWorkflow(BareWorkflow)
	bl.workers = append(bl.workers, ww)
	for range activityWorkers {
		aw := worker.New(c, bareActivityQueue, worker.Options{MaxConcurrentActivityExecutionSize: slots})
		aw.RegisterActivityWithOptions(bl.acts.run, activity.RegisterOptions{Name: bareActivityName})
		bl.workers = append(bl.workers, aw)
	}
	for _, w := range bl.workers {
		if err := w.Start(); err != nil {
			bl.stop()
			return nil, fmt.Errorf("start baseline worker: %w", err)
		}
	}
	return bl, nil
}

func (bl *baseline) stop() {
	for _, w := range bl.workers {
		w.Stop()
	}
}

// once starts one bare workflow and waits for it; it returns the time from
// the start call to the activity's start.
func (bl *baseline) once(ctx context.Context, id string) (time.Duration, error) {
	t0 := time.Now()
	run, err := bl.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareWorkflowQueue},
		BareWorkflow, BareInput{ActivityQueue: bareActivityQueue})
	if err != nil {
		return 0, fmt.Errorf("start bare workflow %s: %w", id, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return 0, fmt.Errorf("bare workflow %s: %w", id, err)
	}
	v, ok := bl.acts.started.Load(id)
	if !ok {
		return 0, fmt.Errorf("bare workflow %s ended without its activity", id)
	}
	t, _ := v.(time.Time)
	return t.Sub(t0), nil
}

// burst starts n bare workflows at once and returns runs per second from
// the first start call to the last close.
func (bl *baseline) burst(ctx context.Context, prefix string, n int) (float64, error) {
	start := time.Now()
	runs := make([]client.WorkflowRun, n)
	err := parallel(n, 64, func(i int) error {
		id := fmt.Sprintf("%s-%d", prefix, i)
		run, err := bl.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareWorkflowQueue},
			BareWorkflow, BareInput{ActivityQueue: bareActivityQueue})
		if err != nil {
			return fmt.Errorf("start bare workflow %s: %w", id, err)
		}
		runs[i] = run
		return nil
	})
	if err != nil {
		return 0, err
	}
	err = parallel(n, 64, func(i int) error {
		if err := runs[i].Get(ctx, nil); err != nil {
			return fmt.Errorf("bare workflow %s: %w", runs[i].GetID(), err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	_, last, err := closedSpan(ctx, bl.c, fmt.Sprintf("WorkflowType = 'BareWorkflow' AND WorkflowId STARTS_WITH '%s-'", prefix), n)
	if err != nil {
		return 0, err
	}
	return float64(n) / last.Sub(start).Seconds(), nil
}
