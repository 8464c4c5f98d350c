package e2e

import (
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

// TestPrivateRepositoryWithPipelineToken: a repository that wants HTTP
// credentials, which the host does not have, is read with the pipeline's
// own SLUICE_GITHUB_TOKEN secret, for the event's spec and for the build's
// checkout. Without the secret the event fails saying which secret to set.
// The build's step sees the token neither in its environment nor through
// git (the checkout's configuration, a credential helper): a fetch from the
// step is refused.
func TestPrivateRepositoryWithPipelineToken(t *testing.T) {
	t.Parallel()
	const token = "ghp_PrivateCheckoutToken0077"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	// The step prints all it can find; the test looks for the token there
	// (it is no secret of the job's, so nothing masks it in the log).
	step := `export GIT_TERMINAL_PROMPT=0; env; git config --list --show-origin; ` +
		`printf 'protocol=http\nhost=%s\npath=acme.git\n\n' "$(git remote get-url origin | cut -d/ -f3)" | git credential fill; ` +
		`if git ls-remote origin >/dev/null 2>fetch.err; then echo FETCH-ALLOWED; else echo FETCH-REFUSED; cat fetch.err; fi`
	src := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\nparameters: {target: {value: staging}}\njobs:\n  main: {requires: [~commit], steps: [{look: '" + strings.ReplaceAll(step, "'", "''") + "'}]}\n"})
	root := t.TempDir()
	out, err := exec.CommandContext(ctx, "git", "clone", "--quiet", "--bare", src.Dir, filepath.Join(root, "acme.git")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	git, err := exec.LookPath("git")
	require.NoError(t, err)
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "x-access-token" || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	repo := srv.URL + "/acme.git"

	// Read at create, it cannot be: the error says how to go on.
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "private", Repo: repo})
	require.ErrorContains(t, err, "--private")
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "private", Repo: repo, Private: true})
	require.NoError(t, err)

	// No credentials: the event fails, naming the secret to set.
	started, err := e.StartEvent(ctx, "private", api.StartEventRequest{})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status, ev.Reason)
	require.Contains(t, ev.Reason, "cannot read the pipeline's repository")
	require.Contains(t, ev.Reason, "SLUICE_GITHUB_TOKEN")

	// With the pipeline's token: the spec is read and the build checks out.
	_, err = e.API.SetSecret(ctx, "private", "SLUICE_GITHUB_TOKEN", api.SetSecretRequest{Value: token})
	require.NoError(t, err)
	// An update reads the spec with the pipeline's token too (its answer
	// carries the spec's parameters).
	updated, err := e.API.UpdatePipeline(ctx, "private", api.UpdatePipelineRequest{Admins: &[]string{}})
	require.NoError(t, err)
	require.Len(t, updated.Parameters, 1, "%+v", updated)
	require.Equal(t, "target", updated.Parameters[0].Name)
	started, err = e.StartEvent(ctx, "private", api.StartEventRequest{})
	require.NoError(t, err)
	ev = e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	b, err := e.API.GetBuild(ctx, buildOf(t, ev, "main").ID)
	require.NoError(t, err)
	chunk, err := e.API.ReadLog(ctx, b.LogKey, "look", 0, 0)
	require.NoError(t, err)
	log := string(chunk.Data)
	require.Contains(t, log, "remote.origin.url="+repo, "the step ran in the checkout")
	require.Contains(t, log, "FETCH-REFUSED", "a fetch from the step has no credentials")
	require.NotContains(t, log, "FETCH-ALLOWED")
	require.NotContains(t, log, token, "the step saw the pipeline's token")
}
