package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestWaitNeverServedAndMaxWait: a pipeline whose queue no executor ever
// served is warned about at its event's start (API answer and CLI), its
// build waits with wait code never-served and says so in `build show` and
// `event show`, and is not dropped; on a queue with max-wait, a build no
// executor takes ends FAILURE with cause refused and that reason.
func TestWaitNeverServedAndMaxWait(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "nowhere", Rules: []string{"run-on=executors,max-parallel=1,labels=pool=nowhere"}})
	require.NoError(t, err)
	brief, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "brief", Rules: []string{"run-on=executors,max-parallel=1,labels=pool=brief"}, MaxWait: "2s"})
	require.NoError(t, err)
	require.Equal(t, "2s", brief.MaxWait)
	_, err = e.API.CreateQueue(ctx, api.QueueRequest{Name: "bad", Rules: []string{"run-on=executors,max-parallel=1"}, MaxWait: "soon"})
	require.ErrorContains(t, err, `max-wait "soon": want a duration`)
	_, err = e.API.CreateQueue(ctx, api.QueueRequest{Name: "bad", Rules: []string{"run-on=executors,max-parallel=1"}, MaxWait: "-1m"})
	require.ErrorContains(t, err, "max-wait must not be negative")

	spec := "jobs:\n  main:\n    requires: [~commit]\n    image: alpine\n    steps:\n      - run: echo never\n"
	for _, p := range []struct{ name, queue string }{{"ns", "nowhere"}, {"ns-api", "nowhere"}, {"mw", "brief"}} {
		repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
		_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: p.name, Repo: repo.Dir, Queue: p.queue})
		require.NoError(t, err)
	}

	// The warning at start: in the API's answer, and on the CLI's stderr.
	viaAPI, err := e.StartEvent(ctx, "ns-api", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.Len(t, viaAPI.Warnings, 1)
	require.Contains(t, viaAPI.Warnings[0], "queue nowhere has never been served")
	cli := []string{"SLUICE_API_URL=" + e.APIURL}
	out, stderr, code := sluice(t, cli, "event", "start", "ns", "--type", "commit", "--branch", "main")
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "sluice: warning: the pipeline's queue nowhere has never been served")
	started := api.EventStarted{ID: strings.TrimSpace(out)}

	// The build waits, never-served, and says so.
	bs := waitDispatched(t, e, started.ID, 1)
	b, err := e.API.GetBuild(ctx, bs[0].ID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusQueued, b.Status)
	require.Equal(t, workflows.WaitNeverServed, b.WaitCode)
	require.Contains(t, b.Reason, "never served")
	require.True(t, b.EstimatedStart.IsZero())
	require.Equal(t, "no executor that serves the queue has ever registered", b.EstimateNote)
	require.Positive(t, b.Position)
	out, stderr, code = sluice(t, cli, "build", "show", b.ID, "-o", "json")
	require.Zero(t, code, stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	require.Equal(t, "never-served", raw["wait_code"], "the field name in -o json: %s", out)
	out, stderr, code = sluice(t, cli, "build", "show", b.ID)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "never-served")
	ev, err := e.API.GetEvent(ctx, started.ID)
	require.NoError(t, err)
	require.Contains(t, ev.Warnings, "job main waits on queue nowhere, which no executor has ever served (wait code never-served)")

	// max-wait: nobody serves queue brief, so its build ends refused.
	mw, err := e.StartEvent(ctx, "mw", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	final := e.WaitEvent(mw.ID, time.Minute)
	require.Len(t, final.Builds, 1)
	fb := final.Builds[0]
	require.Equal(t, workflows.StatusFailure, fb.Status)
	require.Equal(t, workflows.CauseRefused, fb.Cause)
	require.Equal(t, "refused: no executor took it within queue brief's max-wait of 2s", fb.Reason)
	require.Empty(t, fb.WaitCode)

	// The never-served build was not dropped: it still waits.
	b, err = e.API.GetBuild(ctx, bs[0].ID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusQueued, b.Status)
}

// TestWaitSlotBusyEstimate: builds waiting for the one slot of a queue
// carry slot-busy, their place in line and an estimated start counted from
// the queue's recent build; /metrics counts them by wait code.
func TestWaitSlotBusyEstimate(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "one", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "one-1", Queues: []string{"one"}})
	e.WaitExecutorLive("one-1")
	rec := recordsFile(t)
	warm := startParallel(t, e, "warm", 1, "one", rec, "true")
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(warm.ID, time.Minute).Status)

	gate := testenv.NewGate(t)
	ev := startParallel(t, e, "busy", 3, "one", rec, gate.Wait())
	waitDispatched(t, e, ev.ID, 2)
	var got api.Event
	e.WaitFor("the event's two waiting builds to show slot-busy", 30*time.Second, func() bool {
		got, err = e.API.GetEvent(ctx, ev.ID)
		if err != nil {
			return false
		}
		n := 0
		for _, b := range got.Builds {
			if b.WaitCode == workflows.WaitSlotBusy {
				n++
			}
		}
		return n == 2
	})
	for _, b := range got.Builds {
		if b.WaitCode != workflows.WaitSlotBusy {
			continue
		}
		// The place in line is the reason's count of builds ahead, plus one.
		require.Positive(t, b.Position)
		if b.Position != 1 || !strings.Contains(b.Reason, "next in line") {
			require.Contains(t, b.Reason, fmt.Sprintf("%d ahead", b.Position-1))
		}
		require.False(t, b.EstimatedStart.IsZero(), "build %s has an estimate (%s)", b.ID, b.EstimateNote)
		require.Empty(t, b.EstimateNote)
		full, err := e.API.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, workflows.WaitSlotBusy, full.WaitCode)
		require.False(t, full.EstimatedStart.IsZero())
	}
	e.WaitFor("/metrics to count the two slot-busy builds", 30*time.Second, func() bool {
		m := scrape(t, e.APIURL+"/metrics")
		return m[`sluice_queue_builds_waiting_by_code{queue="one",wait_code="slot-busy"}`] == 2 &&
			m[`sluice_queue_builds_waiting_by_code{queue="one",wait_code="never-served"}`] == 0
	})
	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev.ID, 2*time.Minute).Status)
}
