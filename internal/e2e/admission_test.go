package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
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
// answers with the numbers (GET /pipelines/{name}/admissions/{id}).
// `sluice event start`, answered pending, waits for the number and prints
// the event's ID (with --wait, then waits for the event).
func TestAdmissionWhileThePipelineCannotAnswer(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{NoController: true})
	ctx := e.Context()
	// A spec whose only job does not start on a commit: the events end at
	// once, successfully.
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, "screwdriver.yaml"),
		[]byte("jobs:\n  main: {image: alpine, requires: [~pr], steps: [{a: 'true'}]}\n"), 0o644))
	cfg := workflows.PipelineConfig{Name: "adm", Repo: repo, Branch: "main"}
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

	// The API says pending for each, and refuses what is no admission ID.
	for _, id := range admitted {
		ev, err := e.API.Admission(ctx, "adm", id)
		require.NoError(t, err)
		require.True(t, ev.Pending, "%+v", ev)
		require.Equal(t, id, ev.Admission)
	}
	_, err = e.API.Admission(ctx, "adm", "adm-nope")
	require.ErrorContains(t, err, `admission "adm-nope": want the admission ID a 202 answer gave`)
	_, err = e.API.Admission(ctx, "ghost", admitted[0])
	require.ErrorContains(t, err, "ghost")

	// The CLI, answered pending, waits for the number, prints the event's
	// ID, then (--wait) waits for the event.
	type result struct {
		stdout, stderr string
		code           int
	}
	cliDone := make(chan result, 1)
	cli := exec.CommandContext(ctx, testenv.Binary(t), "event", "start", "adm", "--type", "commit", "--branch", "main", "--wait")
	cli.Env = append(os.Environ(), "SLUICE_API_URL="+e.APIURL)
	var cliOut, cliErr bytes.Buffer
	cli.Stdout, cli.Stderr = &cliOut, &cliErr
	go func() {
		_ = cli.Run() // its exit code is checked below
		cliDone <- result{cliOut.String(), cliErr.String(), cli.ProcessState.ExitCode()}
	}()
	e.WaitFor("the CLI's start admitted (the fifth admission signal)", time.Minute, func() bool {
		n := 0
		it := e.Client.GetWorkflowHistory(ctx, workflows.PipelineWorkflowID("adm"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalAdmitEvents {
				n++
			}
		}
		return n == 5
	})

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
	var res result
	select {
	case res = <-cliDone:
	case <-time.After(2 * time.Minute):
		t.Fatal("sluice event start --wait did not end")
	}
	require.Zero(t, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	require.Regexp(t, `^adm/4\n`, res.stdout, "the CLI prints the event's ID once numbered")
	require.Regexp(t, `pipeline adm is busy: the start is admitted as adm-[0-9a-f]{24}; waiting for its number`, res.stderr)
	require.Regexp(t, `admitted as adm-[0-9a-f]{24}, numbered adm/4`, res.stderr)

	// A start now is numbered within the wait, after the four.
	ev, err := e.Service.StartEvent(ctx, admin, "adm", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	if !ev.Pending { // a slow machine may still answer pending; the number is checked below either way
		require.Equal(t, 5, ev.Number)
	}
	e.WaitFor("five events, no more", time.Minute, func() bool {
		v, err := e.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID("adm"), "", workflows.QueryPipeline)
		require.NoError(t, err)
		var info workflows.PipelineInfo
		require.NoError(t, v.Get(&info))
		require.LessOrEqual(t, info.Events, 5)
		return info.Events == 5
	})
}
