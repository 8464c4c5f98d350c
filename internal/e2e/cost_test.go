package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/histcost"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestOneJobEventCostBudget holds a 1-job event's event and build
// workflows to their budget of history events, workflow tasks and
// visibility writes — the server work a build costs, counted from the
// histories as `make bench`'s history figure counts it
// (docs/performance.md). Unlike CPU these do not move with the machine, so
// a change that adds one says so here, and one that saves some lowers the
// budget. The pipeline's share is left out: how its tasks batch depends on
// timing.
func TestOneJobEventCostBudget(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    steps: [{run: 'true'}]
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "cost", Repo: repo.Dir})
	require.NoError(t, err)

	for range 2 { // the second event: nothing of the pipeline's first start left in it
		started, err := e.StartEvent(ctx, "cost", api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		ev := e.WaitEvent(started.ID, time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, "event %s: %s", ev.ID, ev.Reason)

		ref, err := workflows.ParseEventRef(started.ID)
		require.NoError(t, err)
		event, err := histcost.Run(ctx, e.Client, ref.WorkflowID(), "")
		require.NoError(t, err)
		build, err := histcost.Run(ctx, e.Client, workflows.BuildRef{Pipeline: "cost", Job: "main", Event: ref.Number}.WorkflowID(), "")
		require.NoError(t, err)
		t.Logf("event %s: event workflow %+v, build workflow %+v", ref, event, build)

		// The event: its start; a workflow task that reads the commit and
		// spec and asks the lanes (two markers), upserts its commit and
		// queues and its commit statuses' memo, and starts the build; one
		// for the build's start; one for its end, with the remote triggers'
		// marker and the final status.
		require.LessOrEqual(t, event.Events, 20, "history events of the event workflow")
		require.LessOrEqual(t, event.Tasks, 3, "workflow tasks of the event workflow")
		require.LessOrEqual(t, event.Visibility, 4, "visibility writes of the event workflow")
		// The build: its start (dispatched), the run's activity, the
		// executor's claim (an update: status, executor and memo), the
		// activity's result and its end.
		require.LessOrEqual(t, build.Events, 20, "history events of the build workflow")
		require.LessOrEqual(t, build.Tasks, 3, "workflow tasks of the build workflow")
		require.LessOrEqual(t, build.Visibility, 4, "visibility writes of the build workflow")
	}
}
