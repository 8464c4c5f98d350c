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
	"github.com/sluice-ci/sluice/logstore"
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
	return deliverPRTo(t, e, secret, repo, "acme/"+name, number, repo.Head(), headRepo, delivery).Events[0].ID
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
	started, err := e.StartEvent(ctx, "scoped", api.StartEventRequest{Type: "commit", Branch: "main"})
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
	// The right names and attempt are not enough either: only the executor
	// holding the attempt's credential gets them (TestAttemptCredential).
	_, err = e.API.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Attempt: 1, Names: []string{"LISTED"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, "secrets need the attempt's credential")

	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(started.ID, time.Minute).Status)
	_, err = e.API.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Attempt: 1, Names: []string{"LISTED"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status, "an ended build gets nothing")
}

// TestAttemptCredentialScopesSecretsAndLogs: a build runs on an executor
// process; another holder of a read-secrets token (as every worker in
// compose is) can neither resolve the build's secrets nor write, inject
// into or cut short its logs, while the build itself gets its secret and
// its complete log (review findings 5 and 7).
func TestAttemptCredentialScopesSecretsAndLogs(t *testing.T) {
	t.Parallel()
	const rootToken, workerToken, malloryToken = "root-token-0123456789", "worker-token-0123456789", "mallory-token-0123456789"
	e := server.NewEnv(t, testenv.Options{Token: rootToken, Tokens: `
tokens:
  - {user: root, token: ` + rootToken + `, privileges: [manage-pipelines, manage-secrets, read-secrets, read-scm-tokens, manage-executors, define-queues]}
  - {user: worker, token: ` + workerToken + `, privileges: [read-secrets]}
  - {user: mallory, token: ` + malloryToken + `, privileges: [read-secrets]}
`})
	ctx := e.Context()
	e.StartExecutor(testenv.ExecutorOptions{Name: "cred-1", Env: []string{"SLUICE_TOKEN=" + workerToken}})
	e.WaitExecutorLive("cred-1")
	gate := testenv.NewGate(t)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    secrets: [LISTED]
    steps:
      - check: '[ "$LISTED" = value-of-LISTED ] && echo secret arrived'
      - hold: 'echo before; %s; echo after'
`, gate.Wait())})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "cred", Repo: repo.Dir})
	require.NoError(t, err)
	_, err = e.API.SetSecret(ctx, "cred", "LISTED", api.SetSecretRequest{Value: "value-of-LISTED"})
	require.NoError(t, err)
	started, err := e.StartEvent(ctx, "cred", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	build := "cred/main/" + strings.TrimPrefix(started.ID, "cred/")
	var b api.Build
	e.WaitFor("the build to run its hold step", time.Minute, func() bool {
		b, err = e.API.GetBuild(ctx, build)
		if err != nil || b.Status != workflows.StatusRunning || b.LogKey == "" {
			return false
		}
		steps, err := e.Logs.Steps(b.LogKey)
		return err == nil && len(steps) == 2
	})
	require.Equal(t, "cred-1", b.Executor)

	mallory := api.NewClient(e.APIURL)
	mallory.Token = malloryToken
	var ae *api.Error
	for _, c := range []string{"", "guessed-credential"} {
		_, err = mallory.ResolveSecrets(ctx, api.ResolveSecretsRequest{Build: build, Attempt: 1, Names: []string{"LISTED"}, Credential: c})
		require.ErrorAs(t, err, &ae)
		require.Equal(t, http.StatusForbidden, ae.Status, "credential %q: %s", c, ae.Message)
		require.Contains(t, ae.Message, "build "+build+" attempt 1")
	}
	// Writing the build's log: appending, injecting a step, finishing (cutting
	// the running step's log short).
	write := func(token, url string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("All checks passed.\n"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return resp.StatusCode, body.String()
	}
	for _, token := range []string{malloryToken, workerToken, rootToken} {
		for _, url := range []string{
			logstore.LogsURL(e.APIURL, b.LogKey, "hold") + "?offset=0",
			logstore.LogsURL(e.APIURL, b.LogKey, "audit") + "?offset=0",
			logstore.LogsURL(e.APIURL, b.LogKey, "hold") + "/finish",
		} {
			status, body := write(token, url)
			require.Equal(t, http.StatusForbidden, status, "%s: %s", url, body)
			require.Contains(t, body, "log writes need the attempt's credential")
		}
	}
	status, body := write(malloryToken, logstore.LogsURL(e.APIURL, "cred/nothing/1/1", "x")+"?offset=0")
	require.Equal(t, http.StatusNotFound, status, "no log for a build that does not exist: %s", body)

	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(started.ID, time.Minute).Status)
	status, body = write(malloryToken, logstore.LogsURL(e.APIURL, b.LogKey, "teardown")+"?offset=0")
	require.Equal(t, http.StatusForbidden, status, "an ended build's log: %s", body)

	// The build got its secret and its whole log, nothing else.
	e.WaitFor("the logs to be complete", time.Minute, func() bool {
		steps, err := e.Logs.Steps(b.LogKey)
		if err != nil {
			return false
		}
		for _, s := range steps {
			if !s.Complete {
				return false
			}
		}
		return len(steps) == 2
	})
	steps, err := e.Logs.Steps(b.LogKey)
	require.NoError(t, err)
	// Logs ship from the executor in the background: the store may index
	// the second step before the first's first bytes arrive.
	require.ElementsMatch(t, []string{"check", "hold"}, []string{steps[0].Name, steps[1].Name})
	check, err := e.Logs.Read(b.LogKey, "check", 0, 0)
	require.NoError(t, err)
	require.Contains(t, string(check.Data), "secret arrived\n")
	require.NotContains(t, string(check.Data), "All checks passed")
	hold, err := e.Logs.Read(b.LogKey, "hold", 0, 0)
	require.NoError(t, err)
	require.Equal(t, "before\nafter\n", string(hold.Data))
}

// deliverPR sends a signed GitHub pull_request delivery for repo: the pull
// request's head is headSHA in headRepo ("acme/<name>" is the pipeline's
// own repository, anything else a fork), its base is main.
func deliverPR(t *testing.T, e *testenv.Env, secret string, repo *testenv.Repo, number int, headSHA, headRepo, delivery string) api.WebhookResult {
	t.Helper()
	return deliverPRTo(t, e, secret, repo, "acme/app", number, headSHA, headRepo, delivery)
}

// deliverPRTo sends a signed GitHub pull_request delivery for the
// repository named base ("acme/<name>"), whose head is headSHA in headRepo.
func deliverPRTo(t *testing.T, e *testenv.Env, secret string, repo *testenv.Repo, base string, number int, headSHA, headRepo, delivery string) api.WebhookResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"action": "opened", "number": number,
		"pull_request": map[string]any{
			"number": number,
			"head":   map[string]any{"ref": "feature", "sha": headSHA, "repo": map[string]any{"full_name": headRepo, "clone_url": repo.Dir}},
			"base":   map[string]any{"ref": "main", "repo": map[string]any{"full_name": base, "clone_url": repo.Dir}},
		},
		"repository": map[string]any{"full_name": base, "clone_url": repo.Dir, "default_branch": "main"},
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
	return res
}

// TestPullRequestRunsWithTheBaseSpecSettings (review finding 1): a pull
// request whose spec names a restricted queue and asks for a secret its
// job does not get on the base branch runs on the base spec's queue, acts
// for the pull-request identity, and gets no such secret; its steps are
// its own.
func TestPullRequestRunsWithTheBaseSpecSettings(t *testing.T) {
	t.Parallel()
	const (
		secret     = "pr-base-webhook-secret"
		aliceToken = "alice-token-prbase-0123"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: secret, Token: aliceToken, Tokens: `
tokens:
  - {user: alice, token: ` + aliceToken + `, roles: [release], privileges: [define-queues]}
`})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "release-q", Rules: []string{"run-on=any,max-parallel=2"}, UseRoles: []string{"release"}})
	require.NoError(t, err)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  check:
    requires: [~pr]
    secrets: [PR_OK]
    steps: [{show: 'echo "pr=${PR_OK:+set}"'}]
`})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo.Dir})
	require.NoError(t, err)
	for _, name := range []string{"PR_OK", "DEPLOY_KEY"} {
		_, err := e.API.SetSecret(ctx, "app", name, api.SetSecretRequest{Value: "value-of-" + name, AllowInPR: true})
		require.NoError(t, err)
	}
	repo.Git("checkout", "-q", "-b", "feature")
	head := repo.Commit(map[string]string{"screwdriver.yaml": `
annotations: {screwdriver.cd/chainPR: true}
shared: {image: alpine}
jobs:
  check:
    requires: [~pr]
    annotations: {screwdriver.cd/executor: release-q}
    secrets: [PR_OK, DEPLOY_KEY]
    steps: [{show: 'echo "head-step pr=${PR_OK:+set} deploy=${DEPLOY_KEY:+set}"'}]
`}, "the pull request asks for the release queue and the deploy key")
	repo.Git("checkout", "-q", "main")

	res := deliverPR(t, e, secret, repo, 5, head, "acme/app", "pr-base-1")
	ev := e.WaitEvent(res.Events[0].ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	require.Equal(t, workflows.PullRequestUser, ev.ActsFor, "a webhook's pull request acts for the pull-request identity, not the owner")
	require.Equal(t, strings.TrimSpace(repo.Git("rev-parse", "main")), ev.BaseSHA)
	b := buildOf(t, ev, "check")
	require.Equal(t, "default", b.Queue, "the base spec names no queue: the pipeline's default, not the head's release-q")
	got, err := e.API.GetBuild(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"PR_OK"}, got.Secrets)
	chunk, err := e.API.ReadLog(ctx, got.LogKey, "show", 0, 1<<16)
	require.NoError(t, err)
	require.Contains(t, string(chunk.Data), "\nhead-step pr=set deploy=\n", "the head's steps run, without the secret the base does not give the job")
	require.Contains(t, strings.Join(ev.Warnings, "\n"), "jobs.check.secrets: secrets DEPLOY_KEY are not given to the pull request")

	// An event that never waited for approval cannot be approved.
	_, err = e.API.ApproveEvent(ctx, ev.ID)
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)
	require.Contains(t, ae.Message, "is not waiting for approval")
}

// TestForkPullRequestWaitsForApproval: with screwdriver.cd/restrictPR: fork
// on the base branch, a fork's pull request starts no build until a
// pipeline admin approves it; an outsider may not approve; once approved
// it runs and records who approved it. A branch pull request runs at once.
func TestForkPullRequestWaitsForApproval(t *testing.T) {
	t.Parallel()
	const (
		secret       = "restrict-pr-webhook-secret"
		aliceToken   = "alice-token-restrict-0123"
		malloryToken = "mallory-token-restrict-0123"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: secret, Token: aliceToken, Tokens: `
tokens:
  - {user: alice, token: ` + aliceToken + `, privileges: [define-queues]}
  - {user: mallory, token: ` + malloryToken + `}
`})
	ctx := e.Context()
	// Forks' pull requests run only on container executors unless a rule
	// opts in; this test is about approval, so the host executor may run
	// them (TestForkPullRequestRunsOnlyOnContainerExecutors has the rest).
	_, err := e.API.UpdateQueue(ctx, api.QueueRequest{Name: "default", Rules: []string{
		"run-on=executors,max-parallel=2,untrusted-on-host=true", "run-on=controller,max-parallel=1",
	}})
	require.NoError(t, err)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
annotations: {screwdriver.cd/restrictPR: fork}
shared: {image: alpine}
jobs:
  check: {requires: [~pr], steps: [{c: 'echo checked'}]}
`})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo.Dir})
	require.NoError(t, err)
	repo.Git("checkout", "-q", "-b", "feature")
	// The fork's head lifts the restriction for itself: the base decides.
	head := repo.Commit(map[string]string{"screwdriver.yaml": `
annotations: {screwdriver.cd/restrictPR: none}
shared: {image: alpine}
jobs:
  check: {requires: [~pr], steps: [{c: 'echo fork code'}]}
`}, "fork change")
	repo.Git("checkout", "-q", "main")

	res := deliverPR(t, e, secret, repo, 9, head, "mallory/app", "fork-restricted-1")
	id := res.Events[0].ID
	var ev api.Event
	e.WaitFor("the fork's event to wait for approval", time.Minute, func() bool {
		ev, err = e.API.GetEvent(ctx, id)
		return err == nil && ev.Status == workflows.StatusBlocked
	})
	require.Equal(t, "waiting for approval: pull request #9 from a fork (screwdriver.cd/restrictPR: fork); a pipeline admin runs: sluice event approve "+id, ev.Reason)
	require.NotNil(t, ev.Approval)
	require.Empty(t, ev.Approval.ApprovedBy)
	require.Empty(t, ev.Builds, "nothing runs before the approval")
	listed, err := e.API.ListEvents(ctx, "app", 10)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, workflows.StatusBlocked, listed[0].Status, "the event list shows it waiting")

	mallory := api.NewClient(e.APIURL)
	mallory.Token = malloryToken
	_, err = mallory.ApproveEvent(ctx, id)
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status, "an outsider may not approve")
	_, stderr, code := sluice(t, []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + malloryToken}, "event", "approve", id)
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, `user "mallory" is not an admin of pipeline app`)
	ev, err = e.API.GetEvent(ctx, id)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusBlocked, ev.Status, "the refused approves changed nothing")

	asAlice := []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + aliceToken}
	out, stderr, code := sluice(t, asAlice, "event", "show", id)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "approval")
	require.Contains(t, out, "needed: pull request #9 from a fork (screwdriver.cd/restrictPR: fork)")
	out, stderr, code = sluice(t, asAlice, "event", "approve", id)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "approved event "+id+"\n", out)
	ev = e.WaitEvent(id, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	require.Equal(t, "alice", ev.Approval.ApprovedBy)
	require.False(t, ev.Approval.ApprovedAt.IsZero())
	require.Len(t, ev.Builds, 1)

	out, _, code = sluice(t, asAlice, "event", "show", id, "-o", "json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"approved_by": "alice"`)
	_, err = e.API.ApproveEvent(ctx, id)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status, "approving twice is a conflict")
	require.Contains(t, ae.Message, "is not waiting for approval: alice approved it already")

	// A pull request from a branch of the repository is not restricted.
	res = deliverPR(t, e, secret, repo, 10, head, "acme/app", "branch-1")
	ev = e.WaitEvent(res.Events[0].ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	require.Nil(t, ev.Approval)

	// A newer commit of a waiting pull request ends the older event's wait.
	res = deliverPR(t, e, secret, repo, 11, head, "mallory/app", "fork-restricted-2")
	older := res.Events[0].ID
	e.WaitFor("the fork event to wait", time.Minute, func() bool {
		ev, err = e.API.GetEvent(ctx, older)
		return err == nil && ev.Status == workflows.StatusBlocked
	})
	repo.Git("checkout", "-q", "feature")
	newer := repo.Commit(map[string]string{"more": "1"}, "fork pushes again")
	repo.Git("checkout", "-q", "main")
	res = deliverPR(t, e, secret, repo, 11, newer, "mallory/app", "fork-restricted-3")
	id = res.Events[0].ID
	ev = e.WaitEvent(older, time.Minute)
	require.Equal(t, workflows.StatusCollapsed, ev.Status)
	require.Contains(t, ev.Reason, "not approved before it was superseded: superseded by "+newer[:12])

	// A waiting event can be cancelled.
	e.WaitFor("the newer fork event to wait", time.Minute, func() bool {
		ev, err = e.API.GetEvent(ctx, id)
		return err == nil && ev.Status == workflows.StatusBlocked
	})
	require.NoError(t, e.API.CancelEvent(ctx, id))
	ev = e.WaitEvent(id, time.Minute)
	require.Equal(t, workflows.StatusAborted, ev.Status)
	require.Equal(t, "event cancelled while waiting for approval", ev.Reason)
	require.Empty(t, ev.Builds)
}
