package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// drainBaseline is the scale figure's baseline: n bare comparable runs
// (checkout + sh, see baseline.go) queued with no activity worker, so that
// their tasks wait in matching's persisted backlog as the queued builds did,
// then workers activity workers of slots each started (the executors'
// count and slots). It returns runs per second from the workers' start to
// the last run's close.
func drainBaseline(ctx context.Context, b *bench, s *stack, work checkoutWork, n, workers, slots int) (float64, error) {
	bl, err := startBaseline(s.Client, work, 0, 0)
	if err != nil {
		return 0, err
	}
	defer bl.stop()
	b.progress("scale: baseline: queueing %d bare comparable runs with no activity worker", n)
	const prefix = "drain-comparable"
	runs, err := bl.startRuns(ctx, comparableBaseline, prefix, n)
	if err != nil {
		return 0, err
	}
	if err := waitScheduled(ctx, s.Client, runs); err != nil {
		return 0, err
	}
	b.progress("scale: baseline: %d activities queued; starting %d activity workers × %d slots", n, workers, slots)
	start := time.Now()
	if err := bl.addActivityWorkers(comparableBaseline, workers, slots); err != nil {
		return 0, err
	}
	if err := waitRuns(ctx, comparableBaseline, runs); err != nil {
		return 0, err
	}
	last, err := bl.lastClose(ctx, prefix, n)
	if err != nil {
		return 0, err
	}
	return float64(n) / last.Sub(start).Seconds(), nil
}

// waitScheduled waits until every run's workflow has scheduled its activity
// (its description lists the activity as pending). Each pass describes only
// the runs not seen scheduled yet, 16 at a time.
func waitScheduled(ctx context.Context, c client.Client, runs []client.WorkflowRun) error {
	left := runs
	return waitFor(ctx, fmt.Sprintf("%d bare activities to be scheduled", len(runs)), 10*time.Minute, func() (bool, error) {
		var mu sync.Mutex
		var still []client.WorkflowRun
		err := parallel(len(left), 16, func(i int) error {
			d, err := c.DescribeWorkflowExecution(ctx, left[i].GetID(), left[i].GetRunID())
			if err != nil {
				return fmt.Errorf("describe %s: %w", left[i].GetID(), err)
			}
			if len(d.GetPendingActivities()) == 0 {
				mu.Lock()
				still = append(still, left[i])
				mu.Unlock()
			}
			return nil
		})
		left = still
		return err == nil && len(left) == 0, err
	})
}
