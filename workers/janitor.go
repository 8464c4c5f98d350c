package workers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// N9: a queue deleted while an event that had checked it was still
// creating builds leaves builds dispatched to a task queue no executor
// polls any more; they would wait forever. Controllers poll the task
// queues of the queues deleted within workflows.DeletedQueueMemory (the
// registry lists them in a controller's heartbeat answer) and refuse what
// they find: the build ends FAILURE, cause refused, saying so.

// applyDeletedQueues starts a janitor for each newly deleted queue and
// stops the janitors of queues the registry no longer lists (forgotten,
// or defined again). Called with ag.mu held.
func (ag *Agent) applyDeletedQueues(names []string) error {
	for _, name := range names {
		if _, ok := ag.janitors[name]; ok {
			continue
		}
		var ws []worker.Worker
		for _, tq := range []string{workflows.QueueTaskQueue(name), workflows.UntrustedTaskQueue(name)} {
			w := worker.New(ag.opts.Client, tq, worker.Options{
				Identity:                           ag.Name(),
				MaxConcurrentActivityExecutionSize: 10,
				MaxConcurrentActivityTaskPollers:   1,
				DisableWorkflowWorker:              true, // builds are activities
			})
			w.RegisterActivityWithOptions(refuseDeleted(ag.opts.Client, name), activity.RegisterOptions{Name: "RunBuild"})
			if err := w.Start(); err != nil {
				for _, started := range ws {
					started.Stop()
				}
				return fmt.Errorf("deleted queue %s: start its janitor: %w", name, err)
			}
			ws = append(ws, w)
		}
		ag.janitors[name] = ws
		ag.log.Info("deleted_queue_janitor_started", "queue", name)
	}
	for name, ws := range ag.janitors {
		if slices.Contains(names, name) {
			continue
		}
		for _, w := range ws {
			go w.Stop()
		}
		delete(ag.janitors, name)
		ag.log.Info("deleted_queue_janitor_stopped", "queue", name)
	}
	return nil
}

// refuseDeleted is RunBuild on a deleted queue's task queue: it refuses
// the build, unless the queue has been defined again since (then it hands
// the build back, to be dispatched again to the queue's executors).
func refuseDeleted(c client.Client, name string) func(context.Context, activities.RunBuildInput) (activities.RunBuildResult, error) {
	return func(ctx context.Context, in activities.RunBuildInput) (activities.RunBuildResult, error) {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var qs []queue.Queue
		v, err := c.QueryWorkflow(qctx, workflows.RegistryID, "", workflows.QueryQueues)
		if err == nil {
			err = v.Get(&qs)
		}
		if err != nil {
			return activities.RunBuildResult{}, fmt.Errorf("deleted queue %s: read the registry: %w", name, err)
		}
		if slices.ContainsFunc(qs, func(q queue.Queue) bool { return q.Name == name }) {
			return activities.RunBuildResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("queue %s was defined again: dispatch build %s again", name, in.BuildID), activities.ErrTypeDeclined, nil)
		}
		return activities.RunBuildResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("queue %s was deleted while build %s waited for it", name, in.BuildID), activities.ErrTypeQueueDeleted, nil)
	}
}
