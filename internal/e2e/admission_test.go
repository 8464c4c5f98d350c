package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// TestAdmissionWhileThePipelineCannotAnswer: an event start is admitted
// and answered while nothing runs the pipeline workflow (its controller is
// down: the extreme of a busy pipeline). The answer is pending, with an
// admission ID, after the admit wait; nothing is lost: once a controller
// runs, the pipeline numbers the admitted events in the order they came,
// a second signal of the same admission starts nothing, and the API
// answers with the numbers.
func TestAdmissionWhileThePipelineCannotAnswer(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{NoController: true})
	ctx := e.Context()
	cfg := workflows.PipelineConfig{Name: "adm", Repo: t.TempDir(), Branch: "main"}
	_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.PipelineWorkflowID("adm"), TaskQueue: workflows.ControllerTaskQueue,
	}, workflows.PipelineWorkflow, workflows.PipelineInput{Config: cfg})
	require.NoError(t, err)

	e.Service.AdmitWait = 200 * time.Millisecond
	admin := queue.Identity{User: "admin", Roles: []string{"admin"}}
	var admitted []string
	for range 3 {
		ev, err := e.Service.StartEvent(ctx, admin, "adm", api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		require.True(t, ev.Pending, "nothing runs the pipeline: %+v", ev)
		require.Zero(t, ev.Number)
		require.NotEmpty(t, ev.Admission)
		admitted = append(admitted, ev.Admission)
	}
	// The same admission signalled again (a client retrying) starts nothing.
	require.NoError(t, e.Client.SignalWorkflow(ctx, workflows.PipelineWorkflowID("adm"), "", workflows.SignalAdmitEvents,
		workflows.AdmitEvents{Requests: []workflows.StartEventRequest{{Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "main"}, Admission: admitted[0]}}}))

	// A controller comes.
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		local := func(key, _ string) runner.LogSink { return e.Logs.Sink(key) }
		_ = workers.RunController(cctx, workers.Options{Client: e.Client, Config: e.Config, Logger: e.Logger, Logs: local, Name: "controller"})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	for i, id := range admitted {
		var got int
		e.WaitFor("admission "+id+" numbered", time.Minute, func() bool {
			ev, err := e.Service.Admission(ctx, "adm", id)
			require.NoError(t, err)
			got = ev.Number
			return !ev.Pending
		})
		require.Equal(t, i+1, got, "numbered in the order admitted")
	}
	// A start now is numbered within the wait, after the three.
	ev, err := e.Service.StartEvent(ctx, admin, "adm", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	if !ev.Pending { // a slow machine may still answer pending; the number is checked below either way
		require.Equal(t, 4, ev.Number)
	}
	e.WaitFor("four events, no more", time.Minute, func() bool {
		v, err := e.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID("adm"), "", workflows.QueryPipeline)
		require.NoError(t, err)
		var info workflows.PipelineInfo
		require.NoError(t, v.Get(&info))
		require.LessOrEqual(t, info.Events, 4)
		return info.Events == 4
	})
}
