package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/runner"
)

// fakeSecrets answers every resolve with values and withheld, and records
// what it was asked.
type fakeSecrets struct {
	values   map[string]string
	withheld []string

	mu    sync.Mutex
	asked []activities.SecretRequest
}

func (f *fakeSecrets) ResolveSecrets(_ context.Context, req activities.SecretRequest) (map[string]string, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, req)
	return f.values, f.withheld, nil
}

// A build's secrets reach its steps' environment, win over the job's own
// environment (the documented order: job environment, then secrets, then
// SD_* variables), never reach its log, and a withheld one is simply
// absent. The tests review's M6a (no masking), M6e (environment over
// secrets) and M6f (secrets not in the env) survived the unit tests.
func TestRunBuildGivesItsSecrets(t *testing.T) {
	t.Parallel()
	const value = "s3cr3t-value-of-the-token"
	r := setupRepo(t)
	h := setup(t)
	src := &fakeSecrets{values: map[string]string{"NPM_TOKEN": value}, withheld: []string{"DEPLOY_KEY"}}
	h.acts.Secrets = src
	out := t.TempDir()
	in := buildInput(r, step("use", `echo "token=$NPM_TOKEN"; printf %s "$NPM_TOKEN" > `+out+`/token; printf %s "${DEPLOY_KEY-absent}" > `+out+`/deploy`))
	in.Secrets = []string{"NPM_TOKEN", "DEPLOY_KEY"}
	in.Environment = map[string]string{"NPM_TOKEN": "from-the-job", "SD_SHA": "forged"}
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)

	require.Equal(t, value, readFile(t, filepath.Join(out, "token")), "the secret wins over the job's environment")
	require.Equal(t, "absent", readFile(t, filepath.Join(out, "deploy")), "a withheld secret is not set")
	chunk, err := h.logs.Read(res.LogKey, "use", 0, 0)
	require.NoError(t, err)
	require.Contains(t, string(chunk.Data), "token=***")
	require.NotContains(t, string(chunk.Data), value)

	require.Len(t, src.asked, 1)
	require.Equal(t, in.BuildID, src.asked[0].Build)
	require.Equal(t, in.Attempt, src.asked[0].Attempt)
	require.Equal(t, []string{"NPM_TOKEN", "DEPLOY_KEY"}, src.asked[0].Names)
}

// The executor that lost a build's previous attempt declines its next
// dispatch for a while, so another live executor takes it first; after
// that it may run it again.
func TestRunBuildAvoidsTheExecutorThatLostIt(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	run := func(avoid string, until time.Time) (activities.RunBuildResult, error, bool) {
		t.Helper()
		h := setup(t)
		out := t.TempDir()
		in := buildInput(r, step("mark", "touch "+out+"/ran"))
		in.Avoid, in.AvoidUntil = avoid, until
		res, err := h.runBuild(t, in)
		_, statErr := os.Stat(out + "/ran")
		return res, err, statErr == nil
	}
	_, err, ran := run("exec-t", time.Now().Add(time.Hour))
	app := requireAppError(t, err, activities.ErrTypeDeclined)
	require.Contains(t, app.Error(), "executor exec-t declined build app/main/7: it lost the build's previous attempt, so another executor gets it first")
	require.False(t, ran)

	res, err, ran := run("exec-t", time.Now().Add(-time.Second))
	require.NoError(t, err, "after the window the executor may run it again")
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.True(t, ran)

	res, err, ran = run("exec-other", time.Now().Add(time.Hour))
	require.NoError(t, err, "only the executor that lost it declines")
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.True(t, ran)
}
