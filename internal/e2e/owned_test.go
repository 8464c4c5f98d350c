package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/histcost"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestBuildsInEvents runs pipelines whose events run their builds
// themselves (PipelineConfig.BuildsInEvents, docs/option-b.md) on a real
// server with a real executor: the executor claims each build from its
// event, writes its logs and metadata with the attempt's credential
// (checked against the build's record in the event), the API shows the
// builds through the event, a waiting build is found in visibility by
// SluiceOpenBuilds and cancelled by name, and no build workflow starts.
func TestBuildsInEvents(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	e.StartExecutor(testenv.ExecutorOptions{Name: "exec-a", Queues: []string{"default"}})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "idle", Rules: []string{"run-on=executors"}})
	require.NoError(t, err)
	repo := createPipeline(t, e, "owned", `
shared: {image: alpine}
jobs:
  a: {requires: [~commit], steps: [{hello: 'echo hello from a; meta set greeting hi'}]}
  b: {requires: [a], steps: [{check: 'test "$(meta get greeting)" = hi'}]}
  c: {requires: [b], steps: [{run: 'true'}]}
  wait:
    requires: [~pr]
    annotations: {screwdriver.cd/executor: idle}
    steps: [{run: 'true'}]
`)

	t.Run("a chain runs inside its event", func(t *testing.T) {
		started, err := e.StartEvent(ctx, "owned", api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		ev := e.WaitEvent(started.ID, 2*time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
		require.Len(t, ev.Builds, 3)
		for _, b := range ev.Builds {
			require.Equal(t, workflows.StatusSuccess, b.Status, "%s: %s", b.ID, b.Reason)
			require.Equal(t, "exec-a", b.Executor)
		}
		a, err := e.API.GetBuild(ctx, ev.Builds[0].ID)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusSuccess, a.Status)
		require.Equal(t, workflows.CauseSucceeded, a.Cause)
		require.Len(t, a.AttemptList, 1)
		chunk, err := e.API.ReadLog(ctx, a.LogKey, "hello", 0, 1<<16)
		require.NoError(t, err)
		require.Contains(t, string(chunk.Data), "hello from a", "the executor wrote the step's log with its credential")

		// build list reads them from the event's memo.
		e.WaitFor("build list to show the event's builds", 30*time.Second, func() bool {
			all, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "owned", Event: ev.ID})
			if err != nil || len(all) != 3 {
				return false
			}
			a, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "owned", Job: "a", Status: workflows.StatusSuccess})
			return err == nil && len(a) == 1 && a[0].ID == ev.Builds[0].ID && a[0].Executor == "exec-a"
		})
		none, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "owned", Status: workflows.StatusFailure})
		require.NoError(t, err)
		require.Empty(t, none)

		n, err := e.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: e.Namespace, Query: "WorkflowType = 'BuildWorkflow' AND SluicePipeline = 'owned'",
		})
		require.NoError(t, err)
		require.Zero(t, n.GetCount(), "no build workflow")
	})

	t.Run("a waiting build is found and cancelled", func(t *testing.T) {
		started, err := e.StartEvent(ctx, "owned", api.StartEventRequest{Type: "pr", Branch: "main", PR: 4, SHA: repo.Head()})
		require.NoError(t, err)
		ref, err := workflows.ParseEventRef(started.ID)
		require.NoError(t, err)
		query := workflows.SAOpenBuilds.GetName() + " = '" + workflows.OpenBuildToken(workflows.StatusQueued, "idle") + "'"
		id := workflows.BuildRef{Pipeline: "owned", Job: "wait", Event: ref.Number, PR: 4}.String()
		require.Eventually(t, func() bool {
			b, err := e.API.GetBuild(ctx, id)
			return err == nil && b.Status == workflows.StatusQueued
		}, 30*time.Second, 100*time.Millisecond, "build %s waits for a slot", id)
		require.Eventually(t, func() bool {
			res, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.Namespace, Query: query})
			return err == nil && len(res.GetExecutions()) == 1 && res.GetExecutions()[0].GetExecution().GetWorkflowId() == ref.WorkflowID()
		}, 30*time.Second, 100*time.Millisecond, "the event is found by its waiting build (%s)", query)
		// /metrics counts it from its event's memo, as autoscalers read it.
		e.WaitFor("the waiting build in /metrics", 30*time.Second, func() bool {
			m := scrape(t, e.APIURL+"/metrics")
			byCode := 0.0
			for k, v := range m {
				if strings.HasPrefix(k, `sluice_queue_builds_waiting_by_code{queue="idle",`) {
					byCode += v
				}
			}
			return m[`sluice_queue_builds_waiting{queue="idle",status="QUEUED"}`] == 1 && byCode == 1
		})
		b, err := e.API.GetBuild(ctx, id)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusQueued, b.Status)
		require.Contains(t, b.Reason, "idle")
		require.Equal(t, 1, b.Position, "first in line")

		// A second pull request's build waits behind it: queue status and
		// the place in line count both, from their events' memos.
		later, err := e.StartEvent(ctx, "owned", api.StartEventRequest{Type: "pr", Branch: "main", PR: 5, SHA: repo.Head()})
		require.NoError(t, err)
		laterRef, err := workflows.ParseEventRef(later.ID)
		require.NoError(t, err)
		second := workflows.BuildRef{Pipeline: "owned", Job: "wait", Event: laterRef.Number, PR: 5}.String()
		e.WaitFor("two builds waiting on queue idle", 30*time.Second, func() bool {
			st, err := e.API.QueueStatus(ctx, "idle")
			return err == nil && st.Backlog == 2 && st.Oldest == id
		})
		b2, err := e.API.GetBuild(ctx, second)
		require.NoError(t, err)
		require.Equal(t, 2, b2.Position, "behind %s", id)
		require.NoError(t, e.API.CancelEvent(ctx, later.ID))

		require.NoError(t, e.API.CancelBuild(ctx, id))
		ev := e.WaitEvent(started.ID, time.Minute)
		require.Equal(t, workflows.StatusAborted, ev.Status, ev.Reason)
		b, err = e.API.GetBuild(ctx, id)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusAborted, b.Status)
		require.Equal(t, workflows.CauseCancelled, b.Cause)
		require.ErrorContains(t, e.API.CancelBuild(ctx, id), "already ended")
		require.Eventually(t, func() bool {
			res, err := e.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: e.Namespace, Query: query})
			return err == nil && res.GetCount() == 0
		}, 30*time.Second, 100*time.Millisecond, "no event waits any more")
	})
}

// TestOwnedEventCostBudget is TestOneJobEventCostBudget for an event that
// runs its build itself: the event and the build together cost less than
// the event alone and its build workflow did — one workflow's start, close
// and tasks fewer, the build's search attributes folded into the event's.
func TestOwnedEventCostBudget(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	createPipeline(t, e, "cost", oneJobSpec)
	for range 2 {
		event, _ := costedEvent(t, e, "cost")
		// Its start; a workflow task that reads the commit and spec, asks
		// the lanes (two markers), upserts the queues, its commit and the
		// build's status (one upsert), the commit statuses' and the
		// build's summaries (one memo) and schedules the run; the run's
		// activity; the executor's claim (an update: status and summary);
		// a task for the run's end: its summary, the remote triggers'
		// marker, the final status.
		requireWithin(t, event, histcost.Cost{Events: 25, Tasks: 3, Visibility: 6}, "the event workflow")
	}
}
