package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestGitHubWebhook: a push delivered to /webhooks/github starts an event at
// the pushed commit in the pipeline using that repository; a redelivery of
// the same delivery starts nothing new; a ping is ignored.
func TestGitHubWebhook(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main:\n    requires: [~commit]\n    steps: [{hi: 'echo $SD_SHA'}]\n"})
	sha := repo.Commit(map[string]string{"README": "hello"}, "second")
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "hooked", Repo: repo.Dir})
	require.NoError(t, err)

	payload, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000", "after": sha,
		"repository":  map[string]any{"full_name": "me/hooked", "clone_url": repo.Dir, "default_branch": "main"},
		"head_commit": map[string]any{"id": sha},
		"commits":     []map[string]any{{"id": sha, "added": []string{"README"}, "modified": []string{}, "removed": []string{}}},
		"sender":      map[string]any{"login": "octocat"},
	})
	require.NoError(t, err)
	deliver := func(event, delivery string, body []byte) (int, api.WebhookResult) {
		req, err := http.NewRequest(http.MethodPost, e.APIURL+"/webhooks/github", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var res api.WebhookResult
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		return resp.StatusCode, res
	}
	code, res := deliver("push", "delivery-1", payload)
	require.Equal(t, http.StatusAccepted, code, "%+v", res)
	require.Len(t, res.Events, 1)
	require.Equal(t, "hooked", res.Events[0].Pipeline)
	ev := e.WaitEvent(res.Events[0].ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status)
	require.Equal(t, sha, ev.SHA)
	require.Equal(t, workflows.TriggerCommit, ev.Trigger.Kind)

	code, again := deliver("push", "delivery-1", payload)
	require.Equal(t, http.StatusAccepted, code)
	require.Len(t, again.Events, 1)
	require.True(t, again.Events[0].Duplicate, "a redelivery starts nothing new")
	require.Equal(t, res.Events[0].ID, again.Events[0].ID)

	code, ping := deliver("ping", "delivery-2", []byte(`{"zen":"Keep it logically awesome."}`))
	require.Equal(t, http.StatusAccepted, code)
	require.NotEmpty(t, ping.Ignored)
	require.Empty(t, ping.Events)
}

// TestRemoteTrigger: when job publish of pipeline upstream succeeds, the
// pipeline whose spec requires ~sd@upstream:publish gets an event that runs
// the requiring job.
func TestRemoteTrigger(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	up := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  publish:\n    requires: [~commit]\n    steps: [{pub: 'echo published'}]\n"})
	down := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  consume:\n    requires: [~sd@upstream:publish]\n    steps: [{use: 'echo consumed'}]\n  own:\n    requires: [~commit]\n    steps: [{x: 'true'}]\n"})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "downstream", Repo: down.Dir})
	require.NoError(t, err)
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "upstream", Repo: up.Dir})
	require.NoError(t, err)
	e.WaitFor("downstream to subscribe", 30*time.Second, func() bool {
		p, err := e.API.GetPipeline(ctx, "downstream")
		return err == nil && len(p.Subscriptions) == 1 && p.Subscriptions[0] == "sd@upstream:publish"
	})

	ev, err := e.StartEvent(ctx, "upstream", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev.ID, time.Minute).Status)
	var remote api.Event
	e.WaitFor("the remote event in downstream", time.Minute, func() bool {
		evs, err := e.API.ListEvents(ctx, "downstream", 10)
		if err != nil || len(evs) == 0 {
			return false
		}
		remote, err = e.API.GetEvent(ctx, evs[0].ID)
		return err == nil && remote.Status.Final()
	})
	require.Equal(t, workflows.StatusSuccess, remote.Status)
	require.Equal(t, workflows.TriggerRemote, remote.Trigger.Kind)
	require.Equal(t, "sd@upstream:publish", remote.Trigger.Remote)
	require.Len(t, remote.Builds, 1)
	require.Equal(t, "consume", remote.Builds[0].Job)
}

// TestPriority: a priority-1 build dispatched after four priority-5 builds
// leaves the queue before them.
func TestPriority(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "one", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	rec := recordsFile(t)
	pipelineWith := func(name string, jobs, priority int) string {
		spec := "shared: {image: alpine}\njobs:\n"
		for i := range jobs {
			spec += fmt.Sprintf("  %s%d:\n    requires: [~commit]\n    annotations: {screwdriver.cd/executor: one, sluice.dev/priority: %d}\n    steps: [{run: %q}]\n",
				name, i, priority, record(rec, "sleep 0.2"))
		}
		repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
		_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: name, Repo: repo.Dir})
		require.NoError(t, err)
		ev, err := e.StartEvent(ctx, name, api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		return ev.ID
	}
	// Everything waits in the queue's backlog first: no executor yet.
	low := pipelineWith("low", 4, 5)
	waitDispatched(t, e, low, 4)
	high := pipelineWith("high", 1, 1)
	waitDispatched(t, e, high, 1)
	e.StartExecutor(testenv.ExecutorOptions{Name: "one-1", Queues: []string{"one"}})
	for _, id := range []string{low, high} {
		require.Equal(t, workflows.StatusSuccess, e.WaitEvent(id, 2*time.Minute).Status)
	}
	spans := readSpans(t, rec)
	require.Len(t, spans, 5)
	require.Equal(t, "high0", spans[0].Job, "the priority-1 build leaves the queue first: %+v", spans)
}

// TestDrainAndDeactivate: draining an executor lets its running build finish
// and takes no new ones; the executor then turns inactive. Activating it
// again runs the waiting build. Deactivating stops new builds at once.
func TestDrainAndDeactivate(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "dq", Rules: []string{"run-on=executors,max-parallel=2"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "dq-1", Queues: []string{"dq"}})
	e.WaitExecutorLive("dq-1")
	rec := recordsFile(t)
	long := startParallel(t, e, "drained", 1, "dq", rec, "sleep 4")
	e.WaitFor("the long build to run", 30*time.Second, func() bool {
		b, err := e.API.GetBuild(ctx, "drained/j0/"+strconv.Itoa(long.Number))
		return err == nil && b.Status == workflows.StatusRunning
	})
	x, err := e.API.ExecutorAction(ctx, "dq-1", "drain")
	require.NoError(t, err)
	require.Equal(t, "draining", x.State)

	next := startParallel(t, e, "after-drain", 1, "dq", rec, "true")
	waiting := waitDispatched(t, e, next.ID, 1)
	require.Contains(t, waiting[0].Reason, "no live member")
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(long.ID, time.Minute).Status, "the running build finishes")
	e.WaitFor("the drained executor to turn inactive", 30*time.Second, func() bool {
		es, err := e.API.ListExecutors(ctx)
		if err != nil {
			return false
		}
		for _, x := range es {
			if x.Name == "dq-1" {
				return x.State == "inactive"
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	b, err := e.API.GetBuild(ctx, waiting[0].ID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusQueued, b.Status, "a drained executor takes no new build")

	_, err = e.API.ExecutorAction(ctx, "dq-1", "activate")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(next.ID, time.Minute).Status)

	// Deactivated moments after the registry said yes to a build: the
	// executor acts on that yes for its next builds for a second
	// (queue.GrantStands), and the command answers only once it
	// lapsed, so a build started after the answer still waits.
	after := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": parallelSpec(1, "dq", rec, "true")})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "after-deactivate", Repo: after.Dir})
	require.NoError(t, err)
	busy := startParallel(t, e, "before-deactivate", 1, "dq", rec, "sleep 3")
	e.WaitFor("the build before the deactivation to run", 30*time.Second, func() bool {
		b, err := e.API.GetBuild(ctx, "before-deactivate/j0/"+strconv.Itoa(busy.Number))
		return err == nil && b.Status == workflows.StatusRunning
	})
	_, err = e.API.ExecutorAction(ctx, "dq-1", "deactivate")
	require.NoError(t, err)
	stopped, err := e.StartEvent(ctx, "after-deactivate", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	waitDispatched(t, e, stopped.ID, 1)
	time.Sleep(3 * time.Second)
	bs, err := e.API.ListBuilds(ctx, api.BuildFilter{Event: stopped.ID})
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, workflows.StatusQueued, bs[0].Status, "a deactivated executor takes no build")
	_, err = e.API.ExecutorAction(ctx, "dq-1", "activate")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(stopped.ID, time.Minute).Status)
}

// TestPeriodicSchedule: a job with buildPeriodically gets a Temporal Schedule
// when the pipeline is created; triggering it starts a periodic event that
// runs the job; pause and unpause work.
func TestPeriodicSchedule(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  main: {requires: [~commit], steps: [{x: 'true'}]}
  nightly:
    annotations: {screwdriver.cd/buildPeriodically: H 4 * * *}
    steps: [{cron: 'echo nightly'}]
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "cron", Repo: repo.Dir})
	require.NoError(t, err)
	var p api.Pipeline
	e.WaitFor("the periodic job to be registered", 30*time.Second, func() bool {
		p, err = e.API.GetPipeline(ctx, "cron")
		return err == nil && p.Periodic["nightly"] != ""
	})
	require.Regexp(t, `^\d+ 4 \* \* \*$`, p.Periodic["nightly"], "H expanded, minute hashed")
	require.NoError(t, e.API.ScheduleAction(ctx, "cron", "nightly", "pause"))
	require.NoError(t, e.API.ScheduleAction(ctx, "cron", "nightly", "unpause"))
	require.NoError(t, e.API.ScheduleAction(ctx, "cron", "nightly", "trigger"))
	var ev api.Event
	e.WaitFor("the periodic event", time.Minute, func() bool {
		evs, err := e.API.ListEvents(ctx, "cron", 5)
		if err != nil || len(evs) == 0 {
			return false
		}
		ev, err = e.API.GetEvent(ctx, evs[0].ID)
		return err == nil && ev.Status.Final()
	})
	require.Equal(t, workflows.StatusSuccess, ev.Status)
	require.Equal(t, workflows.TriggerPeriodic, ev.Trigger.Kind)
	require.Len(t, ev.Builds, 1)
	require.Equal(t, "nightly", ev.Builds[0].Job)
	require.Error(t, e.API.ScheduleAction(ctx, "cron", "main", "trigger"), "a job without buildPeriodically has no schedule")
}

// TestPeriodicScheduleMeansTheCron: what the spec check accepts is what the
// Temporal Schedule fires, read back from the real server's next action
// times: "H 3 ? * MON" (Quartz's "?", which Temporal's own parser rejects)
// fires on Mondays at 03:xx; "H 5 1 * MON" fires on the 1st of a month and
// on Mondays (classic cron ORs restricted day fields, Temporal ANDs them);
// and the catch-up window is the configured one, not Temporal's year.
func TestPeriodicScheduleMeansTheCron(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  main: {requires: [~commit], steps: [{x: 'true'}]}
  weekly:
    annotations: {screwdriver.cd/buildPeriodically: "H 3 ? * MON"}
    steps: [{cron: 'echo weekly'}]
  either:
    annotations: {screwdriver.cd/buildPeriodically: "H 5 1 * MON"}
    steps: [{cron: 'echo either'}]
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "crons", Repo: repo.Dir})
	require.NoError(t, err)
	var p api.Pipeline
	e.WaitFor("both periodic jobs to be scheduled", 30*time.Second, func() bool {
		p, err = e.API.GetPipeline(ctx, "crons")
		return err == nil && len(p.Periodic) == 2
	})
	require.Empty(t, p.ScheduleError)

	next := func(job string) ([]time.Time, time.Duration) {
		d, err := e.Client.ScheduleClient().GetHandle(ctx, workflows.PeriodicScheduleID("crons", job)).Describe(ctx)
		require.NoError(t, err, job)
		require.NotEmpty(t, d.Info.NextActionTimes, job)
		return d.Info.NextActionTimes, d.Schedule.Policy.CatchupWindow
	}
	weekly, catchup := next("weekly")
	require.Equal(t, e.Config.ScheduleCatchup, catchup)
	require.Equal(t, 5*time.Minute, catchup, "the documented default")
	for _, at := range weekly {
		at = at.UTC()
		require.Equal(t, time.Monday, at.Weekday(), "weekly fires on Mondays: %s", at)
		require.Equal(t, 3, at.Hour(), at.String())
	}
	either, _ := next("either")
	sawFirst, sawMonday := false, false
	for _, at := range either {
		at = at.UTC()
		require.True(t, at.Day() == 1 || at.Weekday() == time.Monday, "either fires on the 1st or a Monday: %s", at)
		require.Equal(t, 5, at.Hour(), at.String())
		sawFirst = sawFirst || (at.Day() == 1 && at.Weekday() != time.Monday)
		sawMonday = sawMonday || (at.Weekday() == time.Monday && at.Day() != 1)
	}
	require.True(t, sawMonday, "Mondays that are not the 1st fire: %v", either)
	// Ten fires span ten weeks at most, so a 1st that is no Monday is among them.
	require.True(t, sawFirst, "a 1st that is no Monday fires: %v", either)
}

// TestFairness: on a queue with one slot, a pipeline that queues 8 builds
// does not starve another pipeline that queues 2 after it: the fairness key
// (the pipeline) interleaves them instead of first-come-first-served.
func TestFairness(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "shared", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	rec := recordsFile(t)
	busy := startParallel(t, e, "busy", 8, "shared", rec, "sleep 0.3")
	waitDispatched(t, e, busy.ID, 8)
	quiet := startParallel(t, e, "quiet", 2, "shared", rec, "sleep 0.3")
	waitDispatched(t, e, quiet.ID, 2)
	// Only now does an executor appear: every build is in the backlog.
	e.StartExecutor(testenv.ExecutorOptions{Name: "fair-1", Queues: []string{"shared"}})
	for _, id := range []string{busy.ID, quiet.ID} {
		require.Equal(t, workflows.StatusSuccess, e.WaitEvent(id, 2*time.Minute).Status)
	}
	spans := readSpans(t, rec)
	require.Len(t, spans, 10)
	firstQuiet := -1
	for i, s := range spans {
		if s.Event == quiet.ID {
			firstQuiet = i
			break
		}
	}
	t.Logf("order: %v", func() []string {
		var o []string
		for _, s := range spans {
			o = append(o, s.Event)
		}
		return o
	}())
	require.Less(t, firstQuiet, 4, "the quiet pipeline's first build runs among the first few, not after all 8 of the busy one")
}
