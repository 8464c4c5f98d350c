package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestRecordedHistoriesReplay runs an event through most of sluice's
// workflow paths (matrix, join, stage with teardown after a failure, a
// cancelled build, a cancelled event) and replays every resulting history against
// the current workflow code. With SLUICE_RECORD_HISTORIES=1 it also saves
// them to workflows/testdata/histories, where TestReplayRecordedHistories
// replays them on every run: a change to workflow code that breaks running
// workflows fails there. Any other value than 1 names a generation: the files
// get it as a prefix (SLUICE_RECORD_HISTORIES=v3 writes v3_*.json), so the
// histories of older workflow code stay and keep being replayed. It runs
// twice: with build workflows, and with builds inside their events
// (SLUICE_BUILDS_IN_EVENTS), whose recorded files add "owned_" after the
// generation.
func TestRecordedHistoriesReplay(t *testing.T) {
	t.Parallel()
	for _, owned := range []bool{false, true} {
		name := "build workflows"
		if owned {
			name = "builds in events"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			recordedHistoriesReplay(t, owned)
		})
	}
}

func recordedHistoriesReplay(t *testing.T, owned bool) {
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, BuildWorkflows: !owned})
	ctx := e.Context()
	spec := `
stages:
  ship:
    requires: [check]
    jobs: [deploy]
shared: {image: alpine}
jobs:
  unit:
    requires: [~commit]
    matrix: {GO: ["1.25", "1.26"]}
    steps: [{test: 'echo go $GO'}]
  lint:
    requires: [~commit]
    steps: [{lint: 'sleep 1'}]
  check:
    requires: [unit, lint]
    steps: [{check: 'echo ok'}]
  deploy:
    steps: [{deploy: 'exit 1'}]
  slow:
    requires: [~commit]
    annotations: {sluice.dev/delay: 1s}
    steps: [{wait: 'sleep 30'}]
`
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "replay", Repo: repo.Dir})
	require.NoError(t, err)
	_, err = e.API.CreateQueue(ctx, api.QueueRequest{Name: "extra", Rules: []string{"run-on=executors,max-parallel=1,min-gap=1s"}})
	require.NoError(t, err)

	first, err := e.StartEvent(ctx, "replay", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := e.API.GetBuild(ctx, fmt.Sprintf("replay/slow/%d", first.Number))
		if err == nil && b.Status == workflows.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			ev, _ := e.API.GetEvent(ctx, first.ID)
			for _, b := range ev.Builds {
				t.Logf("%s %s %s", b.ID, b.Status, b.Reason)
			}
			t.Fatalf("the first slow build did not run: %v %+v", err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A second push, cancelled at once: its builds end ABORTED while waiting
	// or cancelled. It starts once the first slow build runs: a second push
	// that reaches the lanes while that build still waits (its delay)
	// collapses it, and how far the second event got before its cancel is
	// a matter of timing.
	second, err := e.StartEvent(ctx, "replay", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.NoError(t, e.API.CancelEvent(ctx, second.ID))
	require.NoError(t, e.API.CancelBuild(ctx, fmt.Sprintf("replay/slow/%d", first.Number)))
	ev := e.WaitEvent(first.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	require.Equal(t, workflows.StatusFailure, buildOf(t, ev, "deploy").Status)
	require.Equal(t, workflows.StatusAborted, buildOf(t, ev, "slow").Status)
	e.WaitEvent(second.ID, time.Minute)

	histories := map[string]*historypb.History{}
	execs, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.Namespace, PageSize: 1000})
	require.NoError(t, err)
	for _, ex := range execs.GetExecutions() {
		id := ex.GetExecution().GetWorkflowId()
		if ex.GetStatus().String() == "Running" && !strings.HasPrefix(id, "pipeline/") && id != workflows.RegistryID {
			continue
		}
		histories[id] = history(t, e.Client, id, ex.GetExecution().GetRunId())
	}
	// The pipeline, the registry, two events and, with build workflows,
	// each build's.
	want := 10
	if owned {
		want = 4
	}
	require.GreaterOrEqual(t, len(histories), want)

	replayer := worker.NewWorkflowReplayer()
	workflows.Register(replayer)
	for id, h := range histories {
		require.NoError(t, replayer.ReplayWorkflowHistory(nil, h), "replay %s", id)
	}

	generation := os.Getenv("SLUICE_RECORD_HISTORIES")
	if generation == "" {
		return
	}
	prefix := ""
	if generation != "1" {
		prefix = generation + "_"
	}
	if owned {
		prefix += "owned_"
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "workflows", "testdata", "histories")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for id, h := range histories {
		data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
		require.NoError(t, err)
		name := prefix + strings.NewReplacer("/", "_", "@", "_", ":", "_").Replace(id) + ".json"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	t.Logf("recorded %d histories in %s", len(histories), dir)
}

func history(t *testing.T, c client.Client, id, run string) *historypb.History {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, run, false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}
