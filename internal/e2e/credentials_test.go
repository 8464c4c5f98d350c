package e2e

import (
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestRepositoryCredentialsRedacted: a pipeline whose repository URL holds a
// user and password builds (the checkout gets them), while the API's JSON,
// the pages, the workflow's summary in Temporal and the build's log never
// show the password; an update that sends the repository back as shown
// (redacted) keeps the real one (review finding 14).
func TestRepositoryCredentialsRedacted(t *testing.T) {
	t.Parallel()
	const pass = "ghp_PipelineRepoSecret0042"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	src := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main: {requires: [~commit], steps: [{show: 'git remote -v; echo built'}]}\n"})
	root := t.TempDir()
	out, err := exec.CommandContext(ctx, "git", "clone", "--quiet", "--bare", src.Dir, filepath.Join(root, "acme.git")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	git, err := exec.LookPath("git")
	require.NoError(t, err)
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ci-bot" || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := "http://ci-bot:" + pass + "@" + host + "/acme.git"
	shown := "http://ci-bot:xxxxx@" + host + "/acme.git"

	p, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "private", Repo: repo})
	require.NoError(t, err)
	require.Equal(t, shown, p.Repo)
	build := func() api.Event {
		t.Helper()
		started, err := e.StartEvent(ctx, "private", api.StartEventRequest{})
		require.NoError(t, err)
		ev := e.WaitEvent(started.ID, time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
		return ev
	}
	b, err := e.API.GetBuild(ctx, buildOf(t, build(), "main").ID)
	require.NoError(t, err)
	key := b.LogKey

	got, err := e.API.GetPipeline(ctx, "private")
	require.NoError(t, err)
	require.Equal(t, shown, got.Repo)
	list, err := e.API.ListPipelines(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, shown, list[0].Repo)

	for _, path := range []string{"/api/v1/pipelines/private", "/api/v1/pipelines", "/ui/", "/ui/pipelines/private", "/ui/pipelines/private/events/1", "/ui/builds/private/main/1", "/api/v1/events/private/1"} {
		resp, err := http.Get(e.APIURL + path) //nolint:noctx // a test
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		require.NotContains(t, string(body), pass, path)
	}
	chunk, err := e.API.ReadLog(ctx, key, "show", 0, 0)
	require.NoError(t, err)
	require.Contains(t, string(chunk.Data), "built")
	require.NotContains(t, string(chunk.Data), pass, "the build's log")
	desc, err := e.Client.DescribeWorkflowExecution(ctx, workflows.PipelineWorkflowID("private"), "")
	require.NoError(t, err)
	require.Contains(t, desc.String(), "acme.git", "the summary names the repository")
	require.NotContains(t, desc.String(), pass, "Temporal's summary of the pipeline")

	// Sending back what the API shows keeps the repository (and its
	// password): the next event still checks out.
	_, err = e.API.UpdatePipeline(ctx, "private", api.UpdatePipelineRequest{Repo: &shown})
	require.NoError(t, err)
	build()

	// A wrong password fails with an error that does not show it.
	wrong := "http://ci-bot:wrong-" + pass + "@" + host + "/acme.git"
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "wrong", Repo: wrong})
	require.Error(t, err)
	require.NotContains(t, err.Error(), pass)
	require.Contains(t, err.Error(), "ci-bot:xxxxx@")
}
