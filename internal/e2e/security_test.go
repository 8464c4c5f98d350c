package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestForkPullRequestGetsNoSecrets: a pull request opened from a fork (its
// head repository is not the pipeline's) gets no secret, not even one
// allowed in pull requests, unless the secret is allowed in fork pull
// requests; the same pull request from a branch of the repository gets the
// --allow-in-pr one. The deliveries are signed; an unsigned one is refused.
func TestForkPullRequestGetsNoSecrets(t *testing.T) {
	t.Parallel()
	const hookSecret = "fork-test-webhook-secret"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: hookSecret})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  check:
    requires: [~pr]
    secrets: [PLAIN, PR_OK, FORK_OK]
    steps:
      - show: 'echo "plain=${PLAIN:+set} pr=${PR_OK:+set} fork=${FORK_OK:+set}"'
`})
	head := repo.Head()
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "forked", Repo: repo.Dir})
	require.NoError(t, err)
	// Forks' pull requests run only on container executors unless a rule
	// opts in; this test is about secrets, so the host executor may run them.
	_, err = e.API.UpdateQueue(ctx, api.QueueRequest{Name: "default", Rules: []string{
		"run-on=executors,max-parallel=2,untrusted-on-host=true", "run-on=controller,max-parallel=1",
	}})
	require.NoError(t, err)
	for name, req := range map[string]api.SetSecretRequest{
		"PLAIN":   {Value: "plain-value"},
		"PR_OK":   {Value: "pr-value", AllowInPR: true},
		"FORK_OK": {Value: "fork-value", AllowInForkPR: true},
	} {
		_, err := e.API.SetSecret(ctx, "forked", name, req)
		require.NoError(t, err)
	}

	deliver := func(number int, headRepo, delivery string, sign bool) (int, api.WebhookResult) {
		t.Helper()
		body, err := json.Marshal(map[string]any{
			"action": "opened", "number": number,
			"pull_request": map[string]any{
				"number": number,
				"head":   map[string]any{"ref": "feature", "sha": head, "repo": map[string]any{"full_name": headRepo, "clone_url": repo.Dir}},
				"base":   map[string]any{"ref": "main", "repo": map[string]any{"full_name": "acme/forked", "clone_url": repo.Dir}},
			},
			"repository": map[string]any{"full_name": "acme/forked", "clone_url": repo.Dir, "default_branch": "main"},
			"sender":     map[string]any{"login": "mallory"},
		})
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.APIURL+"/webhooks/github", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("Content-Type", "application/json")
		if sign {
			mac := hmac.New(sha256.New, []byte(hookSecret))
			mac.Write(body)
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var res api.WebhookResult
		_ = json.NewDecoder(resp.Body).Decode(&res)
		return resp.StatusCode, res
	}

	code, _ := deliver(7, "mallory/forked", "unsigned-1", false)
	require.Equal(t, http.StatusUnauthorized, code, "an unsigned delivery is refused when a secret is set")

	logOf := func(res api.WebhookResult) (api.Build, string) {
		t.Helper()
		require.Len(t, res.Events, 1, "%+v", res)
		ev := e.WaitEvent(res.Events[0].ID, 2*time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
		b := buildOf(t, ev, "check")
		got, err := e.API.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		chunk, err := e.API.ReadLog(ctx, got.LogKey, "show", 0, 1<<16)
		require.NoError(t, err)
		return got, string(chunk.Data)
	}

	code, res := deliver(7, "mallory/forked", "fork-1", true)
	require.Equal(t, http.StatusAccepted, code, "%+v", res)
	b, out := logOf(res)
	require.True(t, b.Fork, "the build is marked as a fork's")
	require.Contains(t, out, "\nplain= pr= fork=set\n", "a fork gets only the secret allowed in fork pull requests")

	code, res = deliver(8, "acme/forked", "branch-1", true)
	require.Equal(t, http.StatusAccepted, code, "%+v", res)
	b, out = logOf(res)
	require.False(t, b.Fork)
	require.Contains(t, out, "\nplain= pr=set fork=set\n", "a pull request from a branch of the repository gets --allow-in-pr secrets")
}

// deliverPullRequest delivers a signed GitHub pull_request "opened" event of
// repo's head commit from headRepo to the pipeline of repository
// acme/<name>, and returns the event it started.
func deliverPullRequest(t *testing.T, e *testenv.Env, secret string, repo *testenv.Repo, name string, number int, headRepo, delivery string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"action": "opened", "number": number,
		"pull_request": map[string]any{
			"number": number,
			"head":   map[string]any{"ref": "feature", "sha": repo.Head(), "repo": map[string]any{"full_name": headRepo, "clone_url": repo.Dir}},
			"base":   map[string]any{"ref": "main", "repo": map[string]any{"full_name": "acme/" + name, "clone_url": repo.Dir}},
		},
		"repository": map[string]any{"full_name": "acme/" + name, "clone_url": repo.Dir, "default_branch": "main"},
		"sender":     map[string]any{"login": "mallory"},
	})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(e.Context(), http.MethodPost, e.APIURL+"/webhooks/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("Content-Type", "application/json")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var res api.WebhookResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%+v", res)
	require.Len(t, res.Events, 1, "%+v", res)
	return res.Events[0].ID
}

// TestForkPullRequestRunsOnlyOnContainerExecutors: with only a host-runtime
// executor and the controller (whose fallback rule the default queue has), a
// pull request from a fork is never run: its build waits, saying why, while
// the same pull request from a branch of the repository runs on the host
// executor. A container executor serving the queue then runs it.
func TestForkPullRequestRunsOnlyOnContainerExecutors(t *testing.T) {
	t.Parallel()
	const hookSecret = "fork-placement-webhook-secret"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: hookSecret})
	ctx := e.Context()
	// The step would print the executor's credentials on the host.
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: %s}
jobs:
  check:
    requires: [~pr]
    steps:
      - peek: 'cat /proc/$PPID/environ >/dev/null 2>&1; echo ran'
`, testenv.TestImage)})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "placed", Repo: repo.Dir})
	require.NoError(t, err)

	es, err := e.API.ListExecutors(ctx)
	require.NoError(t, err)
	runtimes := map[string]string{}
	for _, x := range es {
		runtimes[x.Name] = x.Runtime
	}
	require.Equal(t, map[string]string{"local": "host", "controller": "host"}, runtimes, "controllers count as host")

	fork := deliverPullRequest(t, e, hookSecret, repo, "placed", 7, "mallory/placed", "placed-fork-1")
	var waiting api.Build
	e.WaitFor("the fork's build to wait for a container executor", time.Minute, func() bool {
		bs, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "placed", Event: fork})
		require.NoError(t, err)
		for _, b := range bs {
			if b.Status == workflows.StatusQueued && strings.Contains(b.Reason, "pull requests from forks run only on container executors") {
				waiting = b
				return true
			}
		}
		return false
	})
	require.Contains(t, waiting.Reason, "queue default", "the reason names the queue")
	require.True(t, waiting.Fork)

	branch := deliverPullRequest(t, e, hookSecret, repo, "placed", 8, "acme/placed", "placed-branch-1")
	ev := e.WaitEvent(branch, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	b := buildOf(t, ev, "check")
	require.False(t, b.Fork)
	require.Equal(t, "local", b.Executor, "a pull request from a branch of the repository runs like a branch build")

	// The fork's build was not run meanwhile, by the host executor nor by
	// the controller.
	got, err := e.API.GetBuild(ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusQueued, got.Status, "%+v", got)
	require.Zero(t, got.Attempts, "%+v", got)
	require.Contains(t, got.Reason, "pull requests from forks run only on container executors")
	st, err := e.API.QueueStatus(ctx, "default")
	require.NoError(t, err)
	require.Contains(t, st.UntrustedWhy, "no live member for any rule", "queue status says where forks' builds may run")

	// A container executor serving the queue runs it.
	testenv.Podman(t)
	e.StartExecutor(testenv.ExecutorOptions{Name: "pod-1", Queues: []string{"default"}, Env: []string{"SLUICE_EXECUTOR_RUNTIME=podman"}})
	ev = e.WaitEvent(fork, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	got, err = e.API.GetBuild(ctx, buildOf(t, ev, "check").ID)
	require.NoError(t, err)
	require.True(t, got.Fork)
	require.Equal(t, "pod-1", got.Executor, "%+v", got)
	require.Len(t, got.AttemptList, 1, "no attempt ran anywhere else: %+v", got.AttemptList)
	require.Equal(t, "ran\n", readStepLog(t, e, got.ID, 1, "peek"))
	st, err = e.API.QueueStatus(ctx, "default")
	require.NoError(t, err)
	require.Contains(t, st.UntrustedWhy, "pod-1")
	es, err = e.API.ListExecutors(ctx)
	require.NoError(t, err)
	for _, x := range es {
		if x.Name == "pod-1" {
			require.Equal(t, "container", x.Runtime)
		}
	}
}

// TestPushOfACommitNotOnItsBranch: a signed push that names a commit which
// is not on the branch it pushes (here a commit only on another branch, as
// a fork's pull request head is only under refs/pull/*) starts an event
// that fails with the reason, running nothing; a push of the branch's own
// commit builds.
func TestPushOfACommitNotOnItsBranch(t *testing.T) {
	t.Parallel()
	const secret = "push-check-secret"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: secret})
	ctx := e.Context()
	spec := "shared: {image: alpine}\njobs:\n  main: {requires: [~commit], steps: [{a: 'echo built'}]}\n"
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "pushed", Repo: repo.Dir})
	require.NoError(t, err)
	mainHead := repo.Head()
	repo.Git("checkout", "-q", "-b", "elsewhere")
	other := repo.Commit(map[string]string{"x": "1"}, "not on main")
	repo.Git("checkout", "-q", "main")

	res := signedPush(t, e, secret, repo.Dir, other, "push-1")
	require.Len(t, res.Events, 1)
	ev := e.WaitEvent(res.Events[0].ID, time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	require.Contains(t, ev.Reason, "is not on branch main")
	require.Empty(t, ev.Builds)

	res = signedPush(t, e, secret, repo.Dir, mainHead, "push-2")
	require.Len(t, res.Events, 1)
	ev = e.WaitEvent(res.Events[0].ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
}

// TestResolveGivesOnlyTheJobsSecrets: the API gives a running build only the
// secrets its job lists, and only to its current attempt (review finding
// 5: read-secrets used to resolve any secret of any running build).
func TestResolveGivesOnlyTheJobsSecrets(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	gate := testenv.NewGate(t)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    secrets: [LISTED]
    steps: [{hold: %q}]
`, gate.Wait())})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "scoped", Repo: repo.Dir})
	require.NoError(t, err)
	for _, name := range []string{"LISTED", "OTHER"} {
		_, err := e.API.SetSecret(ctx, "scoped", name, api.SetSecretRequest{Value: "value-of-" + name})
		require.NoError(t, err)
	}
	started, err := e.API.StartEvent(ctx, "scoped", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	build := "scoped/main/" + strings.TrimPrefix(started.ID, "scoped/")
	e.WaitFor("the build to run", time.Minute, func() bool {
		b, err := e.API.GetBuild(ctx, build)
		return err == nil && b.Status == workflows.StatusRunning
	})

	var ae *api.Error
	_, err = e.API.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Names: []string{"OTHER"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, "does not list secret OTHER")
	_, err = e.API.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Attempt: 2, Names: []string{"LISTED"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)
	require.Contains(t, ae.Message, "is not on attempt 2")
	got, err := e.API.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Attempt: 1, Names: []string{"LISTED"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"LISTED": "value-of-LISTED"}, got.Values)

	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(started.ID, time.Minute).Status)
	_, err = e.API.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Attempt: 1, Names: []string{"LISTED"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status, "an ended build gets nothing")
}
