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
// workflows (a pipeline that starts a build workflow per build, as those
// created before events ran their builds, or with
// SLUICE_BUILDS_IN_EVENTS=false; TestOwnedEventCostBudget for the default)
// to their budget of history events, workflow tasks and
// visibility writes — the server work a build costs, counted from the
// histories as `make bench`'s history figure counts it
// (docs/performance.md). Unlike CPU these do not move with the machine, so
// a change that adds one says so here, and one that saves some lowers the
// budget. The pipeline's share is left out: how its tasks batch depends on
// timing.
func TestOneJobEventCostBudget(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, BuildWorkflows: true})
	createPipeline(t, e, "cost", oneJobSpec)

	for range 2 { // the second event: nothing of the pipeline's first start left in it
		event, builds := costedEvent(t, e, "cost", "main")
		build := builds[0]
		// The event: its start; a workflow task that reads the commit and
		// spec and asks the lanes (two markers), upserts its commit and
		// queues and its commit statuses' memo, and starts the build; one
		// for the build's start; one for its end, with the remote triggers'
		// marker and the final status.
		requireWithin(t, event, histcost.Cost{Events: 20, Tasks: 3, Visibility: 4}, "the event workflow")
		// The build: its start (dispatched), the run's activity, the
		// executor's claim (an update: status, executor and memo), the
		// activity's result and its end.
		requireWithin(t, build, histcost.Cost{Events: 20, Tasks: 3, Visibility: 4}, "the build workflow")
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
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, BuildWorkflows: true})
	createPipeline(t, e, "chain", `
shared: {image: alpine}
jobs:
  a: {requires: [~commit], steps: [{run: 'true'}]}
  b: {requires: [a], steps: [{run: 'true'}]}
  c: {requires: [b], steps: [{run: 'true'}]}
`)
	jobs := []string{"a", "b", "c"}
	event, builds := costedEvent(t, e, "chain", jobs...)
	for i, build := range builds {
		requireWithin(t, build, histcost.Cost{Events: 20, Tasks: 3, Visibility: 4}, "build "+jobs[i])
	}
	const more = 2 // builds after the first
	requireWithin(t, event, histcost.Cost{Events: 20 + 11*more, Tasks: 3 + 2*more, Visibility: 4}, "the event workflow")
}

// oneJobSpec is a pipeline of one job that does nothing.
const oneJobSpec = `
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    steps: [{run: 'true'}]
`

// costedEvent starts a commit event of pipeline, waits for its success and
// returns the cost of its event workflow and of its jobs' build workflows.
func costedEvent(t *testing.T, e *testenv.Env, pipeline string, jobs ...string) (histcost.Cost, []histcost.Cost) {
	t.Helper()
	ctx := e.Context()
	started, err := e.StartEvent(ctx, pipeline, api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "event %s: %s", ev.ID, ev.Reason)
	ref, err := workflows.ParseEventRef(started.ID)
	require.NoError(t, err)
	event, err := histcost.Run(ctx, e.Client, ref.WorkflowID(), "")
	require.NoError(t, err)
	t.Logf("event %s: event workflow %+v", ref, event)
	builds := make([]histcost.Cost, len(jobs))
	for i, job := range jobs {
		builds[i], err = histcost.Run(ctx, e.Client, workflows.BuildRef{Pipeline: pipeline, Job: job, Event: ref.Number}.WorkflowID(), "")
		require.NoError(t, err)
		t.Logf("build %s: %+v", job, builds[i])
	}
	return event, builds
}

// requireWithin fails unless got is within budget, count by count.
func requireWithin(t *testing.T, got, budget histcost.Cost, what string) {
	t.Helper()
	require.LessOrEqual(t, got.Events, budget.Events, "history events of %s", what)
	require.LessOrEqual(t, got.Tasks, budget.Tasks, "workflow tasks of %s", what)
	require.LessOrEqual(t, got.Visibility, budget.Visibility, "visibility writes of %s", what)
}
