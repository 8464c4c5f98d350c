package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// These tests drive sluice with the traffic a real repository sends: pull
// requests next to pushes, commits landing while a deploy waits, restarts of
// restarts, webhooks and schedules acting for the pipeline's owner.

// eventsOf lists a pipeline's events, oldest first.
func eventsOf(t *testing.T, e *testenv.Env, pipeline string) []api.Event {
	t.Helper()
	evs, err := e.API.ListEvents(e.Context(), pipeline, 100)
	require.NoError(t, err)
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs
}

// jobsRan lists the jobs of the recorded step runs of event, in start order.
func jobsRan(spans []span, event string) []string {
	var out []string
	for _, s := range spans {
		if s.Event == event {
			out = append(out, s.Job)
		}
	}
	return out
}

func createPipeline(t *testing.T, e *testenv.Env, name, spec string) *testenv.Repo {
	t.Helper()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(e.Context(), api.CreatePipelineRequest{Name: name, Repo: repo.Dir})
	require.NoError(t, err)
	return repo
}

func startEvent(t *testing.T, e *testenv.Env, pipeline string, req api.StartEventRequest) string {
	t.Helper()
	ev, err := e.StartEvent(e.Context(), pipeline, req)
	require.NoError(t, err)
	return ev.ID
}

// waitBuild waits until a build of the event reaches one of the statuses.
func waitBuild(t *testing.T, e *testenv.Env, id string, timeout time.Duration, statuses ...workflows.Status) api.Build {
	t.Helper()
	var b api.Build
	var lastErr error
	seen := func() string {
		if lastErr != nil {
			return "last read failed: " + lastErr.Error()
		}
		if b.ID == "" {
			return "never read"
		}
		return fmt.Sprintf("last seen %s (%s: %s; executor %q, %d attempts)", b.Status, b.WaitCode, b.Reason, b.Executor, b.Attempts)
	}
	deadline := time.Now().Add(timeout)
	for {
		got, err := e.API.GetBuild(e.Context(), id)
		lastErr = err
		if err == nil {
			b = got
			if slices.Contains(statuses, got.Status) {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for build %s to be %v: %s; %s", timeout, id, statuses, seen(), eventOf(e, id))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventOf describes the event of build id and its pipeline's lanes, for a
// test that timed out waiting for the build.
func eventOf(e *testenv.Env, id string) string {
	ref, err := workflows.ParseBuildRef(id)
	if err != nil {
		return err.Error()
	}
	out := "its event: "
	if ev, err := e.API.GetEvent(e.Context(), ref.EventRef().String()); err != nil {
		out += "read failed: " + err.Error()
	} else {
		out += fmt.Sprintf("%s (%s: %s), jobs %+v", ev.Status, ev.WaitCode, ev.Reason, ev.Jobs)
	}
	v, err := e.Client.QueryWorkflow(e.Context(), workflows.PipelineWorkflowID(ref.Pipeline), "", workflows.QueryPipeline)
	var p struct {
		Lanes json.RawMessage `json:"lanes"`
	}
	if err == nil {
		err = v.Get(&p)
	}
	if err != nil {
		return out + "; the pipeline's lanes: read failed: " + err.Error()
	}
	return out + "; the pipeline's lanes: " + string(p.Lanes)
}

// TestPullRequestRunsItsJobsOnly (defect 1): a pull request runs its ~pr
// jobs only, named PR-<n>:<job>; with chainPR it also runs their
// downstream jobs; neither fires remote triggers, which a push does.
func TestPullRequestRunsItsJobsOnly(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	rec := recordsFile(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
jobs:
  main:
    requires: [~pr, ~commit]
    steps: [{m: %q}]
  deploy:
    requires: [main]
    steps: [{d: %q}]
`, record(rec, "true"), record(rec, "true"))
	plain := createPipeline(t, e, "prplain", spec)
	chained := createPipeline(t, e, "prchain", "annotations:\n  screwdriver.cd/chainPR: true\n"+spec)
	createPipeline(t, e, "listener", `shared:
  image: alpine
jobs:
  listen:
    requires: [~sd@prplain:main, ~sd@prplain:deploy, ~sd@prchain:main, ~sd@prchain:deploy]
    steps: [{l: "true"}]
`)

	ev := e.WaitEvent(startEvent(t, e, "prplain", api.StartEventRequest{Type: "pr", PR: 7, Branch: "main", SHA: plain.Head()}), 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	require.Len(t, ev.Builds, 1)
	require.Equal(t, "prplain/PR-7:main/1", ev.Builds[0].ID)
	require.Equal(t, 7, ev.Builds[0].PR)
	require.Equal(t, []string{"main"}, jobsRan(readSpans(t, rec), ev.ID))

	ev = e.WaitEvent(startEvent(t, e, "prchain", api.StartEventRequest{Type: "pr", PR: 7, Branch: "main", SHA: chained.Head()}), 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	require.Equal(t, []string{"main", "deploy"}, jobsRan(readSpans(t, rec), ev.ID))
	require.Equal(t, "prchain/PR-7:deploy/1", buildOf(t, ev, "deploy").ID)

	// Findable by pull request (listing reads visibility, which may list
	// a build a moment after it started).
	var bs []api.Build
	e.WaitFor("both PR builds listed", time.Minute, func() bool {
		var err error
		bs, err = e.API.ListBuilds(e.Context(), api.BuildFilter{Pipeline: "prchain", PR: 7})
		return err == nil && len(bs) >= 2
	})
	require.Len(t, bs, 2)

	// Neither pull request fired a remote trigger; a push does.
	require.Empty(t, eventsOf(t, e, "listener"), "a pull request must not fire remote triggers")
	ev = e.WaitEvent(startEvent(t, e, "prplain", api.StartEventRequest{Type: "commit", Branch: "main"}), 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status)
	require.Equal(t, []string{"main", "deploy"}, jobsRan(readSpans(t, rec), ev.ID))
	e.WaitFor("the push to trigger the listener", time.Minute, func() bool { return len(eventsOf(t, e, "listener")) >= 1 })
}

// TestPullRequestLanes (defect 2): while the branch's builds of main wait
// behind a running one, pull requests 1 and 2 arrive: no commit build is
// collapsed into a pull request's; a second commit to pull request 1
// aborts its running build ("superseded by <sha>"); closing pull request 2
// aborts its build.
func TestPullRequestLanes(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	_, err := e.API.CreateQueue(e.Context(), api.QueueRequest{Name: "wide", Rules: []string{"run-on=executors,max-parallel=6"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "wide-1", Queues: []string{"wide"}})
	e.WaitExecutorLive("wide-1")
	rec := recordsFile(t)
	// Commit builds run until the gate opens; pull request builds until cancelled.
	gate := testenv.NewGate(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
  annotations: {screwdriver.cd/executor: wide}
jobs:
  main:
    requires: [~commit, ~pr]
    steps: [{m: %q}]
`, record(rec, `if [ -n "$SD_PULL_REQUEST" ]; then sleep 120; else `+gate.Wait()+`; fi`))
	repo := createPipeline(t, e, "lanes", spec)
	c1 := startEvent(t, e, "lanes", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "lanes/main/1", time.Minute, workflows.StatusRunning)
	c2 := startEvent(t, e, "lanes", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "lanes/main/2", time.Minute, workflows.StatusBlocked)

	pr1 := repo.Commit(map[string]string{"pr1": "a"}, "pull request 1")
	pr2 := repo.Commit(map[string]string{"pr2": "a"}, "pull request 2")
	p1 := startEvent(t, e, "lanes", api.StartEventRequest{Type: "pr", PR: 1, Branch: "main", SHA: pr1})
	p2 := startEvent(t, e, "lanes", api.StartEventRequest{Type: "pr", PR: 2, Branch: "main", SHA: pr2})
	// Both pull requests run at once: their lanes are their own.
	waitBuild(t, e, "lanes/PR-1:main/3", 2*time.Minute, workflows.StatusRunning)
	waitBuild(t, e, "lanes/PR-2:main/4", 2*time.Minute, workflows.StatusRunning)
	gate.Open()

	// The branch's builds ran in order, none collapsed into a pull request's.
	for _, id := range []string{c1, c2} {
		ev := e.WaitEvent(id, 2*time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, "event %s: %s", id, ev.Reason)
	}

	// A new commit to pull request 1 replaces its running build.
	pr1b := repo.Commit(map[string]string{"pr1": "b"}, "pull request 1, again")
	p1b := startEvent(t, e, "lanes", api.StartEventRequest{Type: "pr", PR: 1, Branch: "main", SHA: pr1b})
	old := waitBuild(t, e, "lanes/PR-1:main/3", time.Minute, workflows.StatusAborted)
	require.Equal(t, "superseded by "+pr1b[:12]+" (event 5)", old.Reason)
	require.Equal(t, workflows.StatusAborted, e.WaitEvent(p1, time.Minute).Status)
	waitBuild(t, e, "lanes/PR-1:main/5", time.Minute, workflows.StatusRunning)

	// Closing pull request 2 aborts its build; pull request 1 runs on.
	closed := startEvent(t, e, "lanes", api.StartEventRequest{Type: "pr-closed", PR: 2, Branch: "main", SHA: pr2})
	b2 := waitBuild(t, e, "lanes/PR-2:main/4", time.Minute, workflows.StatusAborted)
	require.Equal(t, "pull request #2 was closed", b2.Reason)
	require.Equal(t, workflows.StatusAborted, e.WaitEvent(p2, time.Minute).Status)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(closed, time.Minute).Status)
	b, err := e.API.GetBuild(e.Context(), "lanes/PR-1:main/5")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusRunning, b.Status)
	require.NoError(t, e.API.CancelEvent(e.Context(), p1b))
	e.WaitEvent(p1b, time.Minute)
}

// TestNoBuildRunsAfterANewerOne (defect 3): deploy/2 is granted before
// deploy/1 arrives (event 1's upstream is slower): deploy/1 ends COLLAPSED
// and never runs, as the executor's own step records show.
func TestNoBuildRunsAfterANewerOne(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	_, err := e.API.CreateQueue(e.Context(), api.QueueRequest{Name: "two", Rules: []string{"run-on=executors,max-parallel=4"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "order-1", Queues: []string{"two"}})
	e.WaitExecutorLive("order-1")
	rec := recordsFile(t)
	// up waits for the gate when the commit's file says so; builds of up
	// may overlap.
	gate := testenv.NewGate(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
  annotations: {screwdriver.cd/executor: two}
jobs:
  up:
    requires: [~commit]
    annotations: {screwdriver.cd/blockedBySameJob: false, screwdriver.cd/collapseBuilds: false}
    steps: [{u: %q}]
  deploy:
    requires: [up]
    steps: [{d: %q}]
`, record(rec, `if [ "$(cat delay)" = wait ]; then `+gate.Wait()+`; fi`), record(rec, "sleep 2"))
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec, "delay": "wait"})
	slow := repo.Head()
	fast := repo.Commit(map[string]string{"delay": "none"}, "fast")
	_, err = e.API.CreatePipeline(e.Context(), api.CreatePipelineRequest{Name: "order", Repo: repo.Dir})
	require.NoError(t, err)
	ev1 := startEvent(t, e, "order", api.StartEventRequest{Type: "commit", Branch: "main", SHA: slow})
	ev2 := startEvent(t, e, "order", api.StartEventRequest{Type: "commit", Branch: "main", SHA: fast})
	// Event 1's up ends only once event 2's deploy has its slot.
	waitBuild(t, e, "order/deploy/2", 2*time.Minute, workflows.StatusRunning, workflows.StatusSuccess)
	gate.Open()

	second := e.WaitEvent(ev2, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, second.Status, second.Reason)
	first := e.WaitEvent(ev1, 2*time.Minute)
	d1 := buildOf(t, first, "deploy")
	require.Equal(t, workflows.StatusCollapsed, d1.Status)
	require.Equal(t, "superseded by build order/deploy/2", d1.Reason)

	spans := readSpans(t, rec)
	require.Equal(t, []string{"up"}, jobsRan(spans, ev1), "deploy of the older commit never ran")
	require.Equal(t, []string{"up", "deploy"}, jobsRan(spans, ev2))
}

// signedPush is a GitHub push delivery for repo at sha, signed with secret.
func signedPush(t *testing.T, e *testenv.Env, secret, repoDir, sha, delivery string) api.WebhookResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000", "after": sha,
		"repository":  map[string]any{"full_name": "team/" + filepath.Base(repoDir), "clone_url": repoDir, "default_branch": "main"},
		"head_commit": map[string]any{"id": sha},
		"sender":      map[string]any{"login": "outsider"},
	})
	require.NoError(t, err)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(e.Context(), http.MethodPost, e.APIURL+"/webhooks/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var res api.WebhookResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%+v", res)
	return res
}

// TestIdentityOnEveryPath (defect 4): a queue restricted to role release.
// While the pipeline's owner lacks the role, a signed webhook and a remote
// trigger cannot run a build there, and no schedule is set up for a job
// there (a schedule acts for who set it up, checked then); once an owner
// with the role updates the pipeline, their push sets the schedule up and
// all three run. `pipeline create|update --queue` checks use too.
func TestIdentityOnEveryPath(t *testing.T) {
	t.Parallel()
	const (
		adminToken = "admin-token-identity-0123"
		devToken   = "dev-token-identity-0123"
		secret     = "webhook-secret"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Token: adminToken, GitHubSecret: secret, Tokens: `
tokens:
  - {user: rel, token: ` + adminToken + `, roles: [release], privileges: [define-queues, manage-executors, manage-pipelines]}
  - {user: dana, token: ` + devToken + `, roles: [dev]}
`})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "release", Rules: []string{"run-on=any,max-parallel=2"}, UseRoles: []string{"release"}})
	require.NoError(t, err)
	dana := api.NewClient(e.APIURL)
	dana.Token = devToken

	// dana may not make a restricted queue her pipeline's default.
	upRepo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  publish:\n    requires: [~commit]\n    steps: [{p: 'true'}]\n"})
	_, err = dana.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "lib", Repo: upRepo.Dir, Queue: "release"})
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, `user "dana" may not use queue release`)
	_, err = dana.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "lib", Repo: upRepo.Dir})
	require.NoError(t, err)

	shipSpec := `shared: {image: alpine}
jobs:
  ship:
    requires: [~commit, ~sd@lib:publish]
    annotations: {screwdriver.cd/executor: release}
    steps: [{s: 'echo shipped'}]
  nightly:
    annotations:
      screwdriver.cd/executor: release
      screwdriver.cd/buildPeriodically: "H H 1 1 *"
    steps: [{n: 'echo nightly'}]
`
	shipRepo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": shipSpec})
	_, err = dana.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "ship", Repo: shipRepo.Dir})
	require.NoError(t, err)
	p, err := e.API.GetPipeline(ctx, "ship")
	require.NoError(t, err)
	require.Equal(t, "dana", p.Owner)
	// A schedule acts for whoever set it up, checked then: dana may not
	// schedule a job on the release queue.
	e.WaitFor("the refused nightly schedule", time.Minute, func() bool {
		p, err := e.API.GetPipeline(ctx, "ship")
		return err == nil && strings.Contains(p.ScheduleError, `periodic builds not scheduled for dana: job nightly: user "dana" may not use queue release`)
	})
	p, err = e.API.GetPipeline(ctx, "ship")
	require.NoError(t, err)
	require.Empty(t, p.Periodic)

	// fire runs the three unattended paths and returns their events.
	known := map[string]bool{}
	newEvent := func(what string) {
		e.WaitFor(what, time.Minute, func() bool {
			found := false
			for _, ev := range eventsOf(t, e, "ship") {
				if !known[ev.ID] {
					known[ev.ID], found = true, true
				}
			}
			return found
		})
	}
	fire := func(delivery string, scheduled bool) []api.Event {
		res := signedPush(t, e, secret, shipRepo.Dir, shipRepo.Head(), delivery)
		require.Len(t, res.Events, 1, "%+v", res)
		newEvent("the push's event")
		if scheduled {
			// The push's event synced the spec as the owner, who sets the
			// schedule up.
			e.WaitFor("the nightly schedule", time.Minute, func() bool {
				p, err := e.API.GetPipeline(ctx, "ship")
				return err == nil && len(p.Periodic) == 1 && p.ScheduleError == ""
			})
			require.NoError(t, e.API.ScheduleAction(ctx, "ship", "nightly", "trigger"))
			newEvent("the schedule's event")
		}
		lib, err := e.StartEvent(ctx, "lib", api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		require.Equal(t, workflows.StatusSuccess, e.WaitEvent(lib.ID, time.Minute).Status)
		newEvent("the remote trigger's event")
		var out []api.Event
		for _, ev := range eventsOf(t, e, "ship") {
			out = append(out, e.WaitEvent(ev.ID, 2*time.Minute))
		}
		return out
	}
	refused := fire("d-1", false)
	require.Len(t, refused, 2)
	for _, ev := range refused {
		require.Equal(t, workflows.StatusFailure, ev.Status, "event %s (%s)", ev.ID, ev.Trigger.Kind)
		require.Contains(t, ev.Reason, `user "dana" may not use queue release`, "event %s", ev.ID)
		require.Empty(t, ev.Builds)
		require.Equal(t, "dana", ev.ActsFor)
	}
	kinds := []workflows.TriggerKind{refused[0].Trigger.Kind, refused[1].Trigger.Kind}
	require.ElementsMatch(t, []workflows.TriggerKind{workflows.TriggerCommit, workflows.TriggerRemote}, kinds)
	p, err = e.API.GetPipeline(ctx, "ship")
	require.NoError(t, err)
	require.Empty(t, p.Periodic, "dana's push did not set the schedule up either")
	require.Error(t, e.API.ScheduleAction(ctx, "ship", "nightly", "trigger"), "no schedule to trigger")

	// dana may not move the pipeline onto the restricted queue either.
	q := "release"
	_, err = dana.UpdatePipeline(ctx, "ship", api.UpdatePipelineRequest{Queue: &q})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)

	// rel (who holds the role) takes the pipeline over.
	_, err = e.API.UpdatePipeline(ctx, "ship", api.UpdatePipelineRequest{Queue: &q})
	require.NoError(t, err)
	// A new push (the same body again would be a replay of the first, which
	// the API deduplicates on the signed body).
	shipRepo.Commit(map[string]string{"CHANGELOG": "second push\n"}, "second push")
	all := fire("d-2", true)
	require.Len(t, all, 5)
	for _, ev := range all[2:] {
		require.Equal(t, workflows.StatusSuccess, ev.Status, "event %s (%s): %s", ev.ID, ev.Trigger.Kind, ev.Reason)
		require.Equal(t, "rel", ev.ActsFor)
		require.NotEmpty(t, ev.Builds)
	}
}

// counterStep fails until it has run n times (across events), counting in
// file: a restart at the same commit can fail, then succeed. It goes after a
// record(...) of the step, whose own exit status is always 0.
func counterStep(file string, n int) string {
	return fmt.Sprintf(`c=$(cat %[1]s 2>/dev/null || echo 0); c=$((c+1)); echo $c > %[1]s; [ $c -ge %[2]d ]`, file, n)
}

// TestRestartsAndRerun (defect 5): p succeeds and q fails; a restart from q
// fails again; a restart of that restart from q succeeds, and the join j
// runs (p's success is inherited along the chain). Then `event rerun` of an
// event where both join parents failed re-runs both and the join.
func TestRestartsAndRerun(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	dir := t.TempDir()
	rec := recordsFile(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
jobs:
  p:
    requires: [~commit]
    steps: [{p: %q}]
  q:
    requires: [~commit]
    steps: [{q: %q}]
  j:
    requires: [p, q]
    steps: [{j: %q}]
`, record(rec, "true"), record(rec, "true")+"; "+counterStep(filepath.Join(dir, "q"), 3), record(rec, "true"))
	createPipeline(t, e, "chain", spec)
	ev := e.WaitEvent(startEvent(t, e, "chain", api.StartEventRequest{Type: "commit", Branch: "main"}), 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	require.Equal(t, []string{"p"}, ev.Succeeded)

	restart := func(id string, from ...string) api.Event {
		started, err := e.API.RestartEvent(e.Context(), id, api.RestartEventRequest{From: from})
		require.NoError(t, err)
		return e.WaitEvent(started.ID, 2*time.Minute)
	}
	r1 := restart(ev.ID, "q")
	require.Equal(t, workflows.StatusFailure, r1.Status)
	require.Equal(t, []string{"p"}, r1.Succeeded, "the restart inherits p")
	r2 := restart(r1.ID, "q")
	require.Equal(t, workflows.StatusSuccess, r2.Status, r2.Reason)
	require.Equal(t, []string{"q", "j"}, jobsRan(readSpans(t, rec), r2.ID), "the join ran in the restart of the restart")
	require.Equal(t, 2, r2.Parent)

	// Two failed join parents, re-run together.
	spec2 := fmt.Sprintf(`shared:
  image: alpine
jobs:
  x:
    requires: [~commit]
    steps: [{x: %q}]
  y:
    requires: [~commit]
    steps: [{y: %q}]
  z:
    requires: [x, y]
    steps: [{z: %q}]
  ok:
    requires: [~commit]
    steps: [{o: %q}]
`, record(rec, "true")+"; "+counterStep(filepath.Join(dir, "x"), 2), record(rec, "true")+"; "+counterStep(filepath.Join(dir, "y"), 2),
		record(rec, "true"), record(rec, "true"))
	createPipeline(t, e, "rerun", spec2)
	ev = e.WaitEvent(startEvent(t, e, "rerun", api.StartEventRequest{Type: "commit", Branch: "main"}), 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	started, err := e.API.RerunEvent(e.Context(), ev.ID, api.RerunEventRequest{})
	require.NoError(t, err)
	rr := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, rr.Status, rr.Reason)
	require.True(t, rr.Rerun)
	require.ElementsMatch(t, []string{"x", "y", "z"}, jobsRan(readSpans(t, rec), rr.ID), "ok is inherited, not run again")
	require.ElementsMatch(t, []string{"x", "y", "z", "ok"}, rr.Succeeded)
	_, err = e.API.RerunEvent(e.Context(), rr.ID, api.RerunEventRequest{})
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Message, "has no failed or aborted job to re-run")
}

// TestManualStartDisabled (defect 6): a job with manualStartEnabled: false
// cannot be started by hand through start-from, restart or rerun.
func TestManualStartDisabled(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	spec := `shared:
  image: alpine
jobs:
  build:
    requires: [~commit]
    steps: [{b: 'exit 1'}]
  deploy:
    requires: [~commit]
    annotations: {screwdriver.cd/manualStartEnabled: false}
    steps: [{d: 'exit 1'}]
`
	createPipeline(t, e, "locked", spec)
	first := e.WaitEvent(startEvent(t, e, "locked", api.StartEventRequest{Type: "commit", Branch: "main"}), 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, first.Status)
	const why = "job deploy cannot be started by hand (screwdriver.cd/manualStartEnabled: false)"

	paths := map[string]func() (api.EventStarted, error){
		"start-from": func() (api.EventStarted, error) {
			return e.StartEvent(e.Context(), "locked", api.StartEventRequest{StartFrom: "deploy"})
		},
		"start-from on a commit": func() (api.EventStarted, error) {
			return e.StartEvent(e.Context(), "locked", api.StartEventRequest{Type: "commit", Branch: "main", StartFrom: "deploy"})
		},
		"restart": func() (api.EventStarted, error) {
			return e.API.RestartEvent(e.Context(), first.ID, api.RestartEventRequest{From: api.JobList{"deploy"}})
		},
		"rerun": func() (api.EventStarted, error) {
			return e.API.RerunEvent(e.Context(), first.ID, api.RerunEventRequest{})
		},
	}
	for name, start := range paths {
		started, err := start()
		require.NoError(t, err, name)
		ev := e.WaitEvent(started.ID, time.Minute)
		require.Equal(t, workflows.StatusFailure, ev.Status, name)
		require.Equal(t, why, ev.Reason, name)
		require.Empty(t, ev.Builds, "%s started a build", name)
	}
}

// windowAt is a freeze window covering exactly the UTC minute of t.
func windowAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d * * ?", t.Minute(), t.Hour())
}

// TestFreezeWindowAtClaim (defect 7): deploy is granted outside its freeze
// window but waits for the only slot of its queue; the slot frees inside the
// window, so the build goes back to FROZEN and starts after the window.
func TestFreezeWindowAtClaim(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	_, err := e.API.CreateQueue(e.Context(), api.QueueRequest{Name: "single", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "single-1", Queues: []string{"single"}})
	e.WaitExecutorLive("single-1")
	// The window is the next minute, at least 30 s away; the blocker holds
	// the slot until the window has begun.
	now := time.Now().UTC()
	if now.Second() > 30 {
		time.Sleep(time.Duration(61-now.Second()) * time.Second)
		now = time.Now().UTC()
	}
	windowStart := now.Truncate(time.Minute).Add(time.Minute)
	windowEnd := windowStart.Add(time.Minute)
	gate := testenv.NewGate(t)
	rec := recordsFile(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
  annotations: {screwdriver.cd/executor: single}
jobs:
  blocker:
    requires: [~commit]
    steps: [{b: %q}]
  deploy:
    requires: [~sd@other:job]
    freezeWindows: [%q]
    steps: [{d: %q}]
`, record(rec, gate.Wait()), windowAt(windowStart), record(rec, "true"))
	createPipeline(t, e, "thaw", spec)
	blocker := startEvent(t, e, "thaw", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "thaw/blocker/1", time.Minute, workflows.StatusRunning)
	deploy := startEvent(t, e, "thaw", api.StartEventRequest{StartFrom: "deploy"})
	// Granted before the window (no FROZEN yet): it waits for the slot.
	var b api.Build
	e.WaitFor("deploy to be granted and dispatched", time.Minute, func() bool {
		got, err := e.API.GetBuild(e.Context(), "thaw/deploy/2")
		b = got
		return err == nil && !got.QueuedTime.IsZero()
	})
	require.Equal(t, workflows.StatusQueued, b.Status, b.Reason)
	require.True(t, time.Now().Before(windowStart), "the test machine was too slow to grant before the window")
	time.Sleep(time.Until(windowStart.Add(2 * time.Second)))
	gate.Open()

	frozen := waitBuild(t, e, "thaw/deploy/2", 2*time.Minute, workflows.StatusFrozen)
	require.Contains(t, frozen.Reason, "frozen until "+windowEnd.Format(time.RFC3339))
	require.Contains(t, frozen.Reason, "it reached an executor inside the window")

	ev := e.WaitEvent(deploy, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(blocker, time.Minute).Status)
	d := spanOf(t, readSpans(t, rec), "deploy")
	require.False(t, d.Start.Before(windowEnd), "deploy started at %s, inside the window ending %s", d.Start, windowEnd)
	full, err := e.API.GetBuild(e.Context(), buildOf(t, ev, "deploy").ID)
	require.NoError(t, err)
	require.Len(t, full.AttemptList, 1, "the refused claim was not an attempt")
}

// TestCollapseReachesTheQueue (defect 8): the only slot is busy with a long
// build; three events arrive for a job on that queue, granted and waiting for
// the slot. When it frees, only the newest runs; the two older ones are
// COLLAPSED.
func TestCollapseReachesTheQueue(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	_, err := e.API.CreateQueue(e.Context(), api.QueueRequest{Name: "one", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "one-1", Queues: []string{"one"}})
	e.WaitExecutorLive("one-1")
	rec := recordsFile(t)
	gate := testenv.NewGate(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
  annotations: {screwdriver.cd/executor: one}
jobs:
  long:
    requires: [~commit]
    steps: [{l: %q}]
  j:
    requires: [~sd@elsewhere:job]
    steps: [{j: %q}]
`, record(rec, gate.Wait()), record(rec, "true"))
	createPipeline(t, e, "busy", spec)
	long := startEvent(t, e, "busy", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "busy/long/1", time.Minute, workflows.StatusRunning)
	var ids []string
	for range 3 {
		ids = append(ids, startEvent(t, e, "busy", api.StartEventRequest{StartFrom: "j"}))
	}
	// The newest waits for the slot; the older ones were replaced at once.
	waitBuild(t, e, "busy/j/4", time.Minute, workflows.StatusQueued)
	for _, id := range []string{"busy/j/2", "busy/j/3"} {
		b := waitBuild(t, e, id, time.Minute, workflows.StatusCollapsed)
		require.Contains(t, b.Reason, "collapsed into build busy/j/")
	}
	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(long, time.Minute).Status)
	newest := e.WaitEvent(ids[2], time.Minute)
	require.Equal(t, workflows.StatusSuccess, newest.Status, newest.Reason)
	for _, id := range ids[:2] {
		ev := e.WaitEvent(id, time.Minute)
		require.Equal(t, workflows.StatusCollapsed, buildOf(t, ev, "j").Status, "event %s", id)
	}
	spans := readSpans(t, rec)
	require.Equal(t, []string{"j"}, jobsRan(spans, ids[2]))
	require.Empty(t, jobsRan(spans, ids[0]))
	require.Empty(t, jobsRan(spans, ids[1]))
}

// TestForcedBuildNotCollapsedIntoFrozen (defect 9): a forced build waiting
// behind a running one is not collapsed by a newer frozen build: it runs
// when the job frees, and the frozen one keeps waiting.
func TestForcedBuildNotCollapsedIntoFrozen(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	rec := recordsFile(t)
	gate := testenv.NewGate(t)
	// The window never opens: only forced builds run.
	spec := fmt.Sprintf(`shared:
  image: alpine
jobs:
  deploy:
    requires: [~commit]
    freezeWindows: ["* * * * ?"]
    steps: [{d: %q}]
`, record(rec, gate.Wait()))
	createPipeline(t, e, "forced", spec)
	first := startEvent(t, e, "forced", api.StartEventRequest{Type: "commit", Branch: "main", Force: true})
	waitBuild(t, e, "forced/deploy/1", time.Minute, workflows.StatusRunning)
	second := startEvent(t, e, "forced", api.StartEventRequest{Type: "commit", Branch: "main", Force: true})
	waitBuild(t, e, "forced/deploy/2", time.Minute, workflows.StatusBlocked)
	third := startEvent(t, e, "forced", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "forced/deploy/3", time.Minute, workflows.StatusFrozen)

	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(first, time.Minute).Status)
	ev := e.WaitEvent(second, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "the forced build was collapsed: %s", ev.Reason)
	b, err := e.API.GetBuild(e.Context(), "forced/deploy/3")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusFrozen, b.Status)
	require.NoError(t, e.API.CancelEvent(e.Context(), third))
	require.Equal(t, workflows.StatusAborted, e.WaitEvent(third, time.Minute).Status)
	require.Equal(t, []string{first, second}, func() []string {
		var evs []string
		for _, s := range readSpans(t, rec) {
			evs = append(evs, s.Event)
		}
		return evs
	}())
}

// TestRerunSkipsCollapsedJobs (N13): event 2's lint failed and its deploy
// collapsed into event 3's, which deployed the newer commit. Re-running
// event 2's failed jobs runs lint again and not deploy: deploying event 2's
// older commit after event 3's would roll back.
func TestRerunSkipsCollapsedJobs(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	rec := recordsFile(t)
	gate := testenv.NewGate(t)
	spec := fmt.Sprintf(`shared:
  image: alpine
jobs:
  lint:
    requires: [~commit]
    steps: [{l: %q}]
  deploy:
    requires: [~commit]
    steps: [{d: %q}]
`, record(rec, "true")+`; test "$SD_EVENT_ID" != "rb/2"`, record(rec, gate.Wait()))
	createPipeline(t, e, "rb", spec)
	startEvent(t, e, "rb", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "rb/deploy/1", time.Minute, workflows.StatusRunning) // deploy 1 holds the gate
	ev2 := startEvent(t, e, "rb", api.StartEventRequest{Type: "commit", Branch: "main"})
	waiting := []workflows.Status{workflows.StatusBlocked, workflows.StatusCreated, workflows.StatusQueued}
	waitBuild(t, e, "rb/deploy/2", time.Minute, waiting...) // behind deploy 1
	// Event 2's lint fails before event 3 starts: a lint of event 3 that
	// arrived while lint 2 waited for its claim would collapse it (seen in
	// make test on a loaded machine).
	waitBuild(t, e, "rb/lint/2", time.Minute, workflows.StatusFailure)
	ev3 := startEvent(t, e, "rb", api.StartEventRequest{Type: "commit", Branch: "main"})
	waitBuild(t, e, "rb/deploy/3", time.Minute, waiting...)
	gate.Open()
	second := e.WaitEvent(ev2, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev3, 2*time.Minute).Status)
	require.Equal(t, workflows.StatusFailure, second.Status, "%+v", second.Jobs)
	require.Equal(t, workflows.StatusCollapsed, buildOf(t, second, "deploy").Status)

	started, err := e.API.RerunEvent(e.Context(), ev2, api.RerunEventRequest{})
	require.NoError(t, err)
	rr := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, []string{"lint"}, rr.StartJobs, "deploy is not re-run")
	require.Equal(t, []string{"lint"}, jobsRan(readSpans(t, rec), rr.ID))
}
