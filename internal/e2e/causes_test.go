package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// Every ended build carries a machine-readable cause next to its reason,
// in the API, in `build show -o json`, and as a `build list --cause`
// filter; a cancel names who cancelled.
func TestBuildEndCauses(t *testing.T) {
	t.Parallel()
	const danaToken = "dana-token-0123456789"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Token: danaToken, Tokens: fmt.Sprintf(`
tokens:
  - {user: dana, token: %s, privileges: [manage-pipelines, read-secrets, manage-executors]}
`, danaToken)})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  ok: {requires: [~commit], steps: [{pass: "true"}]}
  bad: {requires: [~commit], steps: [{first: "true"}, {boom: "exit 3"}]}
  slow: {requires: [~commit], steps: [{wait: "sleep 600"}]}
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "causes", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "causes", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	n := strconv.Itoa(ev.Number)
	e.WaitFor("the slow build to run", time.Minute, func() bool {
		b, err := e.API.GetBuild(ctx, "causes/slow/"+n)
		return err == nil && b.Status == workflows.StatusRunning
	})
	require.NoError(t, e.API.CancelBuild(ctx, "causes/slow/"+n))
	e.WaitEvent(ev.ID, time.Minute)

	for id, want := range map[string]struct {
		cause workflows.Cause
		info  *workflows.CauseInfo
	}{
		"causes/ok/" + n:   {workflows.CauseSucceeded, nil},
		"causes/bad/" + n:  {workflows.CauseFailed, &workflows.CauseInfo{Step: "boom", ExitCode: 3}},
		"causes/slow/" + n: {workflows.CauseCancelled, &workflows.CauseInfo{By: "dana"}},
	} {
		b, err := e.API.GetBuild(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want.cause, b.Cause, "%s: %s", id, b.Reason)
		require.Equal(t, want.info, b.CauseInfo, id)

		env := []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + danaToken}
		out, stderr, code := sluice(t, env, "build", "show", id, "-o", "json")
		require.Zero(t, code, stderr)
		var shown map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &shown))
		require.Equal(t, string(want.cause), shown["cause"], "%s -o json: %s", id, out)
	}

	listed, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "causes", Cause: workflows.CauseFailed})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, "causes/bad/"+n, listed[0].ID)
	require.Equal(t, workflows.CauseFailed, listed[0].Cause)

	env := []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + danaToken}
	out, stderr, code := sluice(t, env, "build", "list", "--pipeline", "causes", "--cause", "cancelled")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "causes/slow/"+n)
	require.NotContains(t, out, "causes/bad/"+n)
	out, stderr, code = sluice(t, env, "build", "show", "causes/bad/"+n)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "failed (step boom, exit code 3)")
	require.Regexp(t, `temporal workflow:\s+event/causes/`+n+`\n`, out, "a build inside its event names the event's workflow")

	_, stderr, code = sluice(t, env, "build", "list", "--cause", "exploded")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--cause "exploded": want succeeded, failed, cancelled, superseded, executor-lost, timed-out or refused`)
	_, err = e.API.ListBuilds(ctx, api.BuildFilter{Cause: "exploded"})
	require.ErrorContains(t, err, `cause "exploded": want one of succeeded, failed`)
	require.True(t, strings.HasPrefix(string(workflows.CauseExecutorLost), "executor-"))
}
