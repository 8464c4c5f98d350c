package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// N9: a build sent to a queue after the queue's delete swept the waiting
// builds (an event that had checked the queue just before) no longer waits
// forever on a task queue nobody polls: a controller refuses it, saying so.
// The race itself is a matter of milliseconds, so a probe workflow plays
// the late build: it dispatches RunBuild to the deleted queue's task queue.
func TestBuildsSentToADeletedQueueAreRefused(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "gone", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	require.NoError(t, e.API.DeleteQueue(ctx, "gone"))

	const probeQueue = "probe-deleted-queue"
	w := worker.New(e.Client, probeQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: workflows.QueueTaskQueue("gone"), StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 2 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		return workflow.ExecuteActivity(ctx, "RunBuild", activities.RunBuildInput{BuildID: "late/job/1"}).Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "late-build"})
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: probeQueue}, "late-build")
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app, "%v", err)
	require.Equal(t, activities.ErrTypeQueueDeleted, app.Type())
	require.Contains(t, app.Error(), "queue gone was deleted while build late/job/1 waited for it")
}
