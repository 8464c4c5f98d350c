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

// TestChainedBuildCostBudget is TestOneJobEventCostBudget for the builds of
// a chain (a → b → c): each build workflow keeps its budget, and each build
// after the first adds to the event's only its child start (the initiated
// and started events and their workflow task), its end (the completed event
// and its workflow task), the marker of the lanes' batch that starts it and
// that of the remote triggers of the job before it: 11 history events, 2
// workflow tasks and no visibility write.
func TestChainedBuildCostBudget(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  a: {requires: [~commit], steps: [{run: 'true'}]}
  b: {requires: [a], steps: [{run: 'true'}]}
  c: {requires: [b], steps: [{run: 'true'}]}
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "chain", Repo: repo.Dir})
	require.NoError(t, err)
	started, err := e.StartEvent(ctx, "chain", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "event %s: %s", ev.ID, ev.Reason)

	ref, err := workflows.ParseEventRef(started.ID)
	require.NoError(t, err)
	event, err := histcost.Run(ctx, e.Client, ref.WorkflowID(), "")
	require.NoError(t, err)
	t.Logf("event %s: event workflow %+v", ref, event)
	for _, job := range []string{"a", "b", "c"} {
		build, err := histcost.Run(ctx, e.Client, workflows.BuildRef{Pipeline: "chain", Job: job, Event: ref.Number}.WorkflowID(), "")
		require.NoError(t, err)
		t.Logf("build %s: %+v", job, build)
		require.LessOrEqual(t, build.Events, 20, "history events of build %s", job)
		require.LessOrEqual(t, build.Tasks, 3, "workflow tasks of build %s", job)
		require.LessOrEqual(t, build.Visibility, 4, "visibility writes of build %s", job)
	}
	const more = 2 // builds after the first
	require.LessOrEqual(t, event.Events, 20+11*more, "history events of the event workflow")
	require.LessOrEqual(t, event.Tasks, 3+2*more, "workflow tasks of the event workflow")
	require.LessOrEqual(t, event.Visibility, 4, "visibility writes of the event workflow")
}
