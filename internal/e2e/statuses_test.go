package e2e

import (
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

// statusSpec is A → B → C where B fails; A runs for 3 s, and A also runs
// for pull requests.
var statusSpec = gatedStatusSpec("sleep 3")

// gatedStatusSpec is statusSpec with A's step given.
func gatedStatusSpec(a string) string {
	return fmt.Sprintf(`
shared: {image: alpine}
jobs:
  A:
    requires: [~commit, ~pr]
    steps: [{a: %q}]
  B:
    requires: [A]
    steps: [{b: "exit 1"}]
  C:
    requires: [B]
    steps: [{c: "true"}]
`, a)
}

// statusEnv is an installation whose controller posts statuses to a fake
// GitHub and a fake GitLab.
func statusEnv(t *testing.T) (*testenv.Env, *testenv.FakeSCM, *testenv.FakeSCM) {
	t.Helper()
	gh := testenv.NewFakeGitHub(t, "gh-token")
	gl := testenv.NewFakeGitLab(t, "gl-token")
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Env: map[string]string{
		"SLUICE_GITHUB_TOKEN": "gh-token", "SLUICE_GITHUB_API_URL": gh.URL(),
		"SLUICE_GITLAB_TOKEN": "gl-token", "SLUICE_GITLAB_URL": gl.Server.URL,
	}})
	return e, gh, gl
}

// byContext groups the statuses of sha by context, in the order posted.
func byContext(ps []testenv.PostedStatus, sha string) map[string][]testenv.PostedStatus {
	out := map[string][]testenv.PostedStatus{}
	for _, p := range ps {
		if p.SHA == sha {
			out[p.Context] = append(out[p.Context], p)
		}
	}
	return out
}

// waitFinal waits until every context has a final status on fake.
func waitFinal(t *testing.T, e *testenv.Env, fake *testenv.FakeSCM, sha string, final func(string) bool, contexts ...string) map[string][]testenv.PostedStatus {
	t.Helper()
	var got map[string][]testenv.PostedStatus
	defer func() {
		if t.Failed() {
			for c, s := range got {
				t.Logf("%s: %s", c, descriptions(s))
			}
		}
	}()
	e.WaitFor(fmt.Sprintf("final %s statuses of %v", fake.Provider, contexts), 2*time.Minute, func() bool {
		got = byContext(fake.Statuses(), sha)
		for _, c := range contexts {
			s := got[c]
			if len(s) == 0 || !final(s[len(s)-1].State) {
				return false
			}
		}
		return true
	})
	return got
}

// checkSequence: a context starts pending and ends with exactly one final
// status: nothing follows a final one.
func checkSequence(t *testing.T, c string, s []testenv.PostedStatus, final func(string) bool) {
	t.Helper()
	require.NotEmpty(t, s, c)
	require.Equal(t, "pending", s[0].State, "%s starts pending: %+v", c, s)
	checkFinalLast(t, c, s, final)
}

// checkFinalLast: one final status, last.
func checkFinalLast(t *testing.T, c string, s []testenv.PostedStatus, final func(string) bool) {
	t.Helper()
	for i, p := range s {
		if final(p.State) {
			require.Equal(t, len(s)-1, i, "%s: nothing after the final %s: %+v", c, p.State, s)
		}
	}
}

func githubFinal(s string) bool { return s != "pending" }
func gitlabFinal(s string) bool { return s != "pending" && s != "running" }

func descriptions(s []testenv.PostedStatus) string {
	parts := make([]string, len(s))
	for i, p := range s {
		parts[i] = p.State + " " + p.Description
	}
	return strings.Join(parts, " | ")
}

// TestCommitStatuses: for A → B → C where B fails, GitHub and GitLab get,
// per job, pending → (running) → final in order; C says it did not run
// because B failed; each status links to the build's page; a pull
// request's statuses carry the PR job contexts.
func TestCommitStatuses(t *testing.T) {
	t.Parallel()
	e, gh, gl := statusEnv(t)
	ctx := e.Context()
	// A runs until both providers were told it runs.
	gate := testenv.NewGate(t)
	spec := gatedStatusSpec(gate.Wait())
	ghRepo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "gh", Repo: ghRepo.Dir, Statuses: "github:octo/app"})
	require.NoError(t, err)
	glRepo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "gl", Repo: glRepo.Dir, Statuses: "gitlab:group/sub/app"})
	require.NoError(t, err)
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "bad", Repo: glRepo.Dir, Statuses: "bitbucket:a/b"})
	require.ErrorContains(t, err, `unknown provider "bitbucket"`)

	ghID := startEvent(t, e, "gh", api.StartEventRequest{Type: "commit", Branch: "main", SHA: ghRepo.Head()})
	glID := startEvent(t, e, "gl", api.StartEventRequest{Type: "commit", Branch: "main", SHA: glRepo.Head()})
	running := func(fake *testenv.FakeSCM, sha, context string) bool {
		for _, p := range byContext(fake.Statuses(), sha)[context] {
			if strings.Contains(p.Description, "running on local") {
				return true
			}
		}
		return false
	}
	e.WaitFor("A's running status on GitHub and GitLab", 2*time.Minute, func() bool {
		return running(gh, ghRepo.Head(), "sluice/gh/A") && running(gl, glRepo.Head(), "sluice/gl/A")
	})
	gate.Open()
	ghEv := e.WaitEvent(ghID, 2*time.Minute)
	glEv := e.WaitEvent(glID, 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ghEv.Status)
	require.Equal(t, "github:octo/app", ghEv.Statuses)
	require.Equal(t, "gitlab:group/sub/app", glEv.Statuses)

	got := waitFinal(t, e, gh, ghRepo.Head(), githubFinal, "sluice/gh/A", "sluice/gh/B", "sluice/gh/C")
	for c, s := range got {
		checkSequence(t, c, s, githubFinal)
		require.Equal(t, "octo/app", s[0].Repo)
	}
	a, b, c := got["sluice/gh/A"], got["sluice/gh/B"], got["sluice/gh/C"]
	require.Equal(t, "success", a[len(a)-1].State, descriptions(a))
	require.Equal(t, e.APIURL+"/ui/builds/gh/A/"+fmt.Sprint(ghEv.Number), a[len(a)-1].TargetURL)
	require.Contains(t, descriptions(a), "running on local", "A was seen running: %s", descriptions(a))
	require.Equal(t, "failure", b[len(b)-1].State, descriptions(b))
	require.Equal(t, "error", c[len(c)-1].State, descriptions(c))
	require.Equal(t, "not run: requires B, which ended FAILURE", c[len(c)-1].Description)
	require.Equal(t, "waiting for B", c[0].Description)
	require.Empty(t, gh.Problems())

	got = waitFinal(t, e, gl, glRepo.Head(), gitlabFinal, "sluice/gl/A", "sluice/gl/B", "sluice/gl/C")
	for c, s := range got {
		checkSequence(t, c, s, gitlabFinal)
		require.Equal(t, "group/sub/app", s[0].Repo)
	}
	a, b, c = got["sluice/gl/A"], got["sluice/gl/B"], got["sluice/gl/C"]
	require.Equal(t, "success", a[len(a)-1].State, descriptions(a))
	require.Contains(t, descriptions(a), "running running on local", "GitLab has a running state: %s", descriptions(a))
	require.Equal(t, "failed", b[len(b)-1].State, descriptions(b))
	require.Equal(t, "skipped", c[len(c)-1].State, descriptions(c))
	require.Equal(t, "not run: requires B, which ended FAILURE", c[len(c)-1].Description)
	require.Empty(t, gl.Problems())

	// A pull request: its jobs post under the PR contexts.
	prSHA := ghRepo.Commit(map[string]string{"f": "pr"}, "pr change")
	pr := e.WaitEvent(startEvent(t, e, "gh", api.StartEventRequest{Type: "pr", PR: 7, Branch: "main", SHA: prSHA}), 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, pr.Status)
	got = waitFinal(t, e, gh, prSHA, githubFinal, "sluice/gh/PR:A")
	require.Len(t, got, 1, "a pull request runs its ~pr jobs only: %v", got)
	checkSequence(t, "sluice/gh/PR:A", got["sluice/gh/PR:A"], githubFinal)
	pa := got["sluice/gh/PR:A"]
	require.Equal(t, "success", pa[len(pa)-1].State)
	require.Equal(t, e.APIURL+"/ui/builds/gh/PR-7:A/"+fmt.Sprint(pr.Number), pa[len(pa)-1].TargetURL)

	// pipeline show says where the statuses went.
	p, err := e.API.GetPipeline(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, "github:octo/app", p.Statuses)
	require.Contains(t, p.StatusesNote, "github:octo/app (event gh/")
}

// TestCommitStatusesOutage: a provider answering 500, then 403 with
// rate-limit headers, for a while: the builds are unaffected, and the
// statuses arrive afterwards, still in order.
func TestCommitStatusesOutage(t *testing.T) {
	t.Parallel()
	e, gh, _ := statusEnv(t)
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": statusSpec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "out", Repo: repo.Dir, Statuses: "github:octo/app"})
	require.NoError(t, err)

	for _, tt := range []struct {
		name      string
		code      int
		rateLimit bool
	}{
		{"500", http.StatusInternalServerError, false},
		{"403 rate limited", http.StatusForbidden, true},
	} {
		outage := 20 * time.Second
		sha := repo.Commit(map[string]string{"f": tt.name}, tt.name)
		gh.FailFor(outage, tt.code, tt.rateLimit)
		refusedBefore := gh.Refused()
		begin := time.Now()
		ev := e.WaitEvent(startEvent(t, e, "out", api.StartEventRequest{Type: "commit", Branch: "main", SHA: sha}), 2*time.Minute)
		took := time.Since(begin)
		require.Equal(t, workflows.StatusFailure, ev.Status, "%s: the builds ran as always (B fails)", tt.name)
		require.Equal(t, workflows.StatusSuccess, buildOf(t, ev, "A").Status)
		require.Empty(t, byContext(gh.Statuses(), sha), "%s: nothing got through during the outage", tt.name)
		require.Greater(t, gh.Refused(), refusedBefore, "%s: sluice tried during the outage", tt.name)
		t.Logf("%s: the event ended %s after it started, during the provider's %s outage", tt.name, took.Round(time.Second), outage)

		got := waitFinal(t, e, gh, sha, githubFinal, "sluice/out/A", "sluice/out/B", "sluice/out/C")
		for c, s := range got {
			// Statuses that changed during the outage post their latest
			// state only (the one in flight, A's first pending, posts too).
			checkFinalLast(t, c, s, githubFinal)
			require.False(t, s[0].At.Before(begin.Add(outage)), "%s: posted after the outage", c)
		}
		require.Equal(t, "success", got["sluice/out/A"][len(got["sluice/out/A"])-1].State)
		require.Equal(t, "failure", got["sluice/out/B"][len(got["sluice/out/B"])-1].State)
		require.Equal(t, "error", got["sluice/out/C"][len(got["sluice/out/C"])-1].State)
		t.Logf("%s: statuses arrived %s after the outage ended", tt.name, time.Since(begin.Add(outage)).Round(time.Second))
	}
	require.Empty(t, gh.Problems())
}

// TestCommitStatusesOff: without credentials nothing is posted and
// pipeline show says why.
func TestCommitStatusesOff(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": statusSpec})
	_, err := e.API.CreatePipeline(e.Context(), api.CreatePipelineRequest{Name: "quiet", Repo: repo.Dir, Statuses: "github:octo/app"})
	require.NoError(t, err)
	ev := e.WaitEvent(startEvent(t, e, "quiet", api.StartEventRequest{Type: "commit", Branch: "main", SHA: repo.Head()}), 2*time.Minute)
	require.Contains(t, ev.Statuses, "off: no GitHub credentials")
	p, err := e.API.GetPipeline(e.Context(), "quiet")
	require.NoError(t, err)
	require.Contains(t, p.StatusesNote, "off: no GitHub credentials (set SLUICE_GITHUB_TOKEN")
}

// TestCommitStatusesPipelineToken: a pipeline's own token (the pipeline
// secret SLUICE_GITHUB_TOKEN) posts its statuses when the controllers have
// no global GitHub credentials; without it, pipeline show says why.
func TestCommitStatusesPipelineToken(t *testing.T) {
	t.Parallel()
	gh := testenv.NewFakeGitHub(t, "pipeline-own-token")
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Env: map[string]string{"SLUICE_GITHUB_API_URL": gh.URL()}})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  A: {requires: [~commit], steps: [{a: 'true'}]}\n"})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "own", Repo: repo.Dir, Statuses: "github:octo/own"})
	require.NoError(t, err)

	ev := e.WaitEvent(startEvent(t, e, "own", api.StartEventRequest{Type: "commit", Branch: "main", SHA: repo.Head()}), 2*time.Minute)
	require.Contains(t, ev.Statuses, "off: no GitHub credentials")
	require.Contains(t, ev.Statuses, "nor the pipeline secret SLUICE_GITHUB_TOKEN")

	_, err = e.API.SetSecret(ctx, "own", "SLUICE_GITHUB_TOKEN", api.SetSecretRequest{Value: "pipeline-own-token"})
	require.NoError(t, err)
	sha := repo.Commit(map[string]string{"f": "2"}, "second")
	ev = e.WaitEvent(startEvent(t, e, "own", api.StartEventRequest{Type: "commit", Branch: "main", SHA: sha}), 2*time.Minute)
	require.Equal(t, "github:octo/own", ev.Statuses)
	got := waitFinal(t, e, gh, sha, githubFinal, "sluice/own/A")
	checkSequence(t, "sluice/own/A", got["sluice/own/A"], githubFinal)
	require.Empty(t, gh.Problems(), "posted with the pipeline's token")
}
