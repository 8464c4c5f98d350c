package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestSecrets: a secret set through the CLI (value on standard input)
// reaches the step of a job that lists it as an environment variable, run by
// an executor process that fetches it from the API; its value is masked in
// the build's log and appears in no workflow history of the namespace; a
// pull request's build gets only the secret allowed in pull requests; a job
// listing a secret that is not set fails, naming it; `secret list` shows
// names only.
func TestSecrets(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "sec", Rules: []string{"run-on=executors"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "sx", Queues: []string{"sec"}})
	e.WaitExecutorLive("sx")

	out := t.TempDir()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared:
  image: alpine
  annotations: {screwdriver.cd/executor: sec}
jobs:
  deploy:
    requires: [~commit, ~pr]
    secrets: [NPM_TOKEN, PR_OK]
    steps:
      - show: echo "token=$NPM_TOKEN pr_ok=$PR_OK"
      - save: printf '%s|%s' "${NPM_TOKEN:-}" "${PR_OK:-}" > ` + out + `/out-${SD_PULL_REQUEST:-push}
  ghostly:
    requires: [~commit]
    secrets: [GHOST]
    steps: [{never: 'echo never'}]
`})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "sec", Repo: repo.Dir})
	require.NoError(t, err)

	const token, prOK = "s3cr3t-v4lue-XYZ", "pr-allowed-value"
	cliEnv := []string{"SLUICE_API_URL=" + e.APIURL}
	set := exec.Command(testenv.Binary(t), "secret", "set", "sec", "NPM_TOKEN")
	set.Env = append(os.Environ(), cliEnv...)
	set.Stdin = strings.NewReader(token + "\n")
	outBytes, err := set.CombinedOutput()
	require.NoError(t, err, string(outBytes))
	require.Contains(t, string(outBytes), "set secret NPM_TOKEN of sec")
	valueFile := filepath.Join(t.TempDir(), "v")
	require.NoError(t, os.WriteFile(valueFile, []byte(prOK), 0o600))
	_, stderr, code := sluice(t, cliEnv, "secret", "set", "sec", "PR_OK", "--file", valueFile, "--allow-in-pr")
	require.Zero(t, code, stderr)
	_, stderr, code = sluice(t, cliEnv, "secret", "set", "sec", "bad-name")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `secret name "bad-name"`)

	list, _, code := sluice(t, cliEnv, "secret", "list", "sec", "-o", "json")
	require.Zero(t, code)
	require.NotContains(t, list, token)
	var secrets []api.Secret
	require.NoError(t, json.Unmarshal([]byte(list), &secrets))
	require.Len(t, secrets, 2)
	require.Equal(t, "NPM_TOKEN", secrets[0].Name)
	require.False(t, secrets[0].AllowInPR)
	require.True(t, secrets[1].AllowInPR)

	// A push: both secrets; the log masks them.
	ev, err := e.StartEvent(ctx, "sec", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	done := e.WaitEvent(ev.ID, 2*time.Minute)
	deploy := buildOf(t, done, "deploy")
	require.Equal(t, workflows.StatusSuccess, deploy.Status, deploy.Reason)
	got, err := os.ReadFile(filepath.Join(out, "out-push"))
	require.NoError(t, err)
	require.Equal(t, token+"|"+prOK, string(got), "the step sees the values")
	full, err := e.API.GetBuild(ctx, deploy.ID)
	require.NoError(t, err)
	chunk, err := e.API.ReadLog(ctx, full.LogKey, "show", 0, 0)
	require.NoError(t, err)
	require.Contains(t, string(chunk.Data), "token=*** pr_ok=***")
	require.NotContains(t, string(chunk.Data), token)

	ghostly := buildOf(t, done, "ghostly")
	require.Equal(t, workflows.StatusFailure, ghostly.Status)
	require.Contains(t, ghostly.Reason, "GHOST")
	require.Contains(t, ghostly.Reason, "is not set")

	// A pull request: only the secret allowed in pull requests.
	pr, err := e.StartEvent(ctx, "sec", api.StartEventRequest{Type: "pr", PR: 5, Branch: "main", SHA: repo.Head()})
	require.NoError(t, err)
	prDone := e.WaitEvent(pr.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, prDone.Status, "%+v", prDone.Builds)
	got, err = os.ReadFile(filepath.Join(out, "out-5"))
	require.NoError(t, err)
	require.Equal(t, "|"+prOK, string(got), "a pull request's build gets only PR_OK")

	// No workflow history holds the values.
	execs, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.Namespace, PageSize: 1000})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(execs.GetExecutions()), 4)
	for _, ex := range execs.GetExecutions() {
		h := history(t, e.Client, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
		raw, err := proto.Marshal(h)
		require.NoError(t, err)
		for _, v := range []string{token, prOK} {
			require.False(t, bytes.Contains(raw, []byte(v)), "history of %s holds a secret value", ex.GetExecution().GetWorkflowId())
		}
	}

	_, stderr, code = sluice(t, cliEnv, "secret", "delete", "sec", "NPM_TOKEN")
	require.Zero(t, code, stderr)
	_, stderr, code = sluice(t, cliEnv, "secret", "delete", "sec", "NPM_TOKEN")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "secret NPM_TOKEN of pipeline sec")

	// Deleting the pipeline deletes its logs and its secrets.
	require.NoError(t, e.API.DeletePipeline(ctx, "sec"))
	_, err = e.API.ReadLog(ctx, full.LogKey, "show", 0, 0)
	require.True(t, api.IsNotFound(err), "the pipeline's logs are gone: %v", err)
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "sec", Repo: repo.Dir})
	require.NoError(t, err)
	again, err := e.API.ListSecrets(ctx, "sec")
	require.NoError(t, err)
	require.Empty(t, again, "a pipeline created again under the name starts without the old secrets")
}
