package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/fakegithub"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// executorAgent is the executor process's git user agent: it tells the
// executor's requests to the fake GitHub from the controller's.
const executorAgent = "git/sluice-e2e-executor"

// executorRequests are the git requests the executor process made.
func executorRequests(gh *fakegithub.Server) []fakegithub.GitRequest {
	var out []fakegithub.GitRequest
	for _, r := range gh.GitRequests() {
		if r.UserAgent == executorAgent {
			out = append(out, r)
		}
	}
	return out
}

// TestPrivateRepositoryWithGitHubAppToken: with a GitHub App configured on
// the controller and the API (SLUICE_GITHUB_APP_ID, its key) and a
// pipeline without credentials of its own, the API's read at create, the
// event's spec read and the build's checkout on an executor process (which has no App key) read a
// private repository with installation tokens: the fake GitHub verifies
// each JWT against the App's key and mints tokens scoped to the one
// repository, contents: read; its git accepts only those. The step sees
// no token. A pipeline's own SLUICE_GITHUB_TOKEN then wins: no token is
// minted.
func TestPrivateRepositoryWithGitHubAppToken(t *testing.T) {
	t.Parallel()
	gh := fakegithub.New(t, true)
	step := `export GIT_TERMINAL_PROMPT=0; env; git config --list --show-origin; ` +
		`if git ls-remote origin >/dev/null 2>fetch.err; then echo FETCH-ALLOWED; else echo FETCH-REFUSED; fi`
	src := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main: {requires: [~commit], steps: [{look: '" + strings.ReplaceAll(step, "'", "''") + "'}]}\n"})
	repo := gh.AddRepo(t, src.Dir, "acme/app")
	gh.Install("acme/app", 42)
	e := server.NewEnv(t, testenv.Options{Env: gh.Env()})
	ctx := e.Context()
	_, err := e.API.UpdateQueue(ctx, api.QueueRequest{Name: "default", Rules: []string{"run-on=executors,max-parallel=2"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "remote-1", Env: []string{"GIT_HTTP_USER_AGENT=" + executorAgent}})
	e.WaitExecutorLive("remote-1")
	// The API reads the repository at create with the App's token: no
	// --private needed.
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "private", Repo: repo, Statuses: "off"})
	require.NoError(t, err)
	require.Len(t, gh.Mints(), 1, "the API's read at create")

	started, err := e.StartEvent(ctx, "private", api.StartEventRequest{})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	b, err := e.API.GetBuild(ctx, buildOf(t, ev, "main").ID)
	require.NoError(t, err)
	require.Equal(t, "remote-1", b.Executor)

	mints := gh.Mints()
	require.GreaterOrEqual(t, len(mints), 3, "the create, the spec read and the checkout each minted a token")
	minted := map[string]bool{}
	for _, m := range mints {
		require.Equal(t, []string{"app"}, m.Repositories, "scoped to the one repository")
		require.Equal(t, map[string]string{"contents": "read"}, m.Permissions, "read only")
		require.Equal(t, int64(42), m.Installation)
		minted[m.Token] = true
	}
	// The executor's checkout fetched with a token the API minted for it,
	// not the controller's (which reads with its own mirror).
	var controllerTokens, executorTokens []string
	for _, r := range gh.GitRequests() {
		if r.Refused || r.Token == "" {
			continue
		}
		require.True(t, minted[r.Token], "git was given only minted tokens")
		if r.UserAgent == executorAgent {
			executorTokens = append(executorTokens, r.Token)
		} else {
			controllerTokens = append(controllerTokens, r.Token)
		}
	}
	require.NotEmpty(t, executorTokens, "the executor's checkout used an installation token")
	require.NotEmpty(t, controllerTokens, "the controller's spec read used an installation token")
	for _, tok := range executorTokens {
		require.NotContains(t, controllerTokens, tok, "each read mints its own token")
	}

	chunk, err := e.API.ReadLog(ctx, b.LogKey, "look", 0, 0)
	require.NoError(t, err)
	log := string(chunk.Data)
	require.Contains(t, log, "remote.origin.url="+repo, "the step ran in the checkout")
	require.Contains(t, log, "FETCH-REFUSED", "a fetch from the step has no credentials")
	require.NotContains(t, log, "FETCH-ALLOWED")
	for tok := range minted {
		require.NotContains(t, log, tok, "the step saw an installation token")
	}
	require.NotContains(t, log, "SLUICE_GITHUB_APP", "the step saw the App's configuration")

	// The pipeline's own token wins over the App: nothing is minted.
	const own = "ghp_PipelineOwnOverApp0042"
	gh.Accept(own)
	_, err = e.API.SetSecret(ctx, "private", "SLUICE_GITHUB_TOKEN", api.SetSecretRequest{Value: own})
	require.NoError(t, err)
	before, seen := len(gh.Mints()), len(gh.GitRequests())
	started, err = e.StartEvent(ctx, "private", api.StartEventRequest{})
	require.NoError(t, err)
	ev = e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	require.Len(t, gh.Mints(), before, "a pipeline with its own token gets no App token")
	usedOwn := false
	for _, r := range gh.GitRequests()[seen:] {
		usedOwn = usedOwn || (r.Token == own && !r.Refused)
	}
	require.True(t, usedOwn, "the pipeline's own token read the repository")
}

// apiMints counts the installation tokens the API minted (for executors'
// checkouts; the controller's spec reads mint their own).
type apiMints struct {
	activities.AppTokens
	mu sync.Mutex
	n  int
}

func (m *apiMints) RepoToken(ctx context.Context, location string) (string, time.Time, bool, error) {
	token, exp, ok, err := m.AppTokens.RepoToken(ctx, location)
	if ok {
		m.mu.Lock()
		m.n++
		m.mu.Unlock()
	}
	return token, exp, ok, err
}

func (m *apiMints) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// TestForkPullRequestGetsNoGitHubAppToken: the App's installation token is
// a credential the pipeline did not opt in for forks (docs/security.md:
// a fork's pull request gets no secret unless set with
// --allow-in-fork-pr, and the App's token has no such setting), so the API
// mints none for the checkout of a fork's pull request of a public
// repository, which fetches with no credentials at all; a pull request
// from a branch of the repository gets one for its checkout.
func TestForkPullRequestGetsNoGitHubAppToken(t *testing.T) {
	t.Parallel()
	const hookSecret = "app-fork-webhook-secret"
	gh := fakegithub.New(t, false)
	src := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  check: {requires: [~pr], steps: [{hello: 'echo checked out'}]}\n"})
	repo := gh.AddRepo(t, src.Dir, "acme/app")
	gh.Install("acme/app", 7)
	mints := &apiMints{}
	e := server.NewEnv(t, testenv.Options{GitHubSecret: hookSecret, Env: gh.Env(), WrapAPIAppTokens: func(a activities.AppTokens) activities.AppTokens {
		mints.AppTokens = a
		return mints
	}})
	ctx := e.Context()
	// Forks' pull requests run only on container executors unless a rule
	// opts in; this test is about credentials, so the host executor may.
	_, err := e.API.UpdateQueue(ctx, api.QueueRequest{Name: "default", Rules: []string{"run-on=executors,max-parallel=2,untrusted-on-host=true"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "remote-1", Env: []string{"GIT_HTTP_USER_AGENT=" + executorAgent}})
	e.WaitExecutorLive("remote-1")
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo, Statuses: "off"})
	require.NoError(t, err)
	head := src.Head()
	source := &testenv.Repo{Dir: repo}

	before := mints.count()
	res := deliverPRTo(t, e, hookSecret, source, "acme/app", 7, head, "mallory/app", "app-fork-1")
	ev := e.WaitEvent(res.Events[0].ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	b, err := e.API.GetBuild(ctx, buildOf(t, ev, "check").ID)
	require.NoError(t, err)
	require.True(t, b.Fork, "the build is a fork's")
	require.Equal(t, "remote-1", b.Executor)
	require.Equal(t, before, mints.count(), "the API minted a token for a fork's checkout")
	fetched := executorRequests(gh)
	require.NotEmpty(t, fetched, "the fork's checkout fetched from the repository")
	for _, r := range fetched {
		require.Empty(t, r.Token, "the fork's checkout sent a credential: %+v", r)
	}

	before = mints.count()
	res = deliverPRTo(t, e, hookSecret, source, "acme/app", 8, head, "acme/app", "app-branch-1")
	ev = e.WaitEvent(res.Events[0].ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	b, err = e.API.GetBuild(ctx, buildOf(t, ev, "check").ID)
	require.NoError(t, err)
	require.False(t, b.Fork)
	require.Equal(t, before+1, mints.count(), "a pull request from a branch of the repository gets a token for its checkout")
}
