package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestForkPullRequestAttack is the trust issue's attack in one piece: a
// fork's pull request whose head spec names a restricted queue, lists the
// pipeline's secrets, and reads its parent's environment, PID 1's and the
// executor's data directory gets no secret and no worker credential, and
// runs only where the base spec allows: on the default queue, on a
// container executor (never on the host executor beside it).
func TestForkPullRequestAttack(t *testing.T) {
	t.Parallel()
	testenv.Podman(t)
	const (
		hookSecret = "attack-webhook-secret"
		aliceToken = "alice-token-attack-0123"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: hookSecret, Token: aliceToken, Tokens: `
tokens:
  - {user: alice, token: ` + aliceToken + `, roles: [release], privileges: [define-queues, read-secrets]}
`})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "release-q", Rules: []string{"run-on=any,max-parallel=2"}, UseRoles: []string{"release"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "pod-atk", Queues: []string{"*"}, Env: []string{"SLUICE_EXECUTOR_RUNTIME=podman"}})
	e.WaitExecutorLive("pod-atk")
	dataDir := filepath.Join(e.Dir, "executors", "pod-atk")

	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: %s}
jobs:
  check:
    requires: [~pr]
    secrets: [PR_SECRET]
    steps: [{test: 'true'}]
`, testenv.TestImage)})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "target", Repo: repo.Dir})
	require.NoError(t, err)
	for name, inPR := range map[string]bool{"PR_SECRET": true, "DEPLOY_KEY": false} {
		_, err := e.API.SetSecret(ctx, "target", name, api.SetSecretRequest{Value: "value-of-" + name, AllowInPR: inPR})
		require.NoError(t, err)
	}
	repo.Git("checkout", "-q", "-b", "evil")
	head := repo.Commit(map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: %s}
jobs:
  check:
    requires: [~pr]
    annotations: {screwdriver.cd/executor: release-q}
    secrets: [PR_SECRET, DEPLOY_KEY]
    steps:
      - steal: >-
          echo "secret=${PR_SECRET:-none} deploy=${DEPLOY_KEY:-none}";
          echo "tokens=$(cat /proc/$PPID/environ /proc/1/environ 2>/dev/null | tr '\0' '\n' | grep -c SLUICE_TOKEN)";
          echo "env=$(env | grep -c SLUICE_)";
          ls %s >/dev/null 2>&1 && echo "datadir=readable" || echo "datadir=unreachable"
`, testenv.TestImage, dataDir)}, "a stranger's pull request")
	repo.Git("checkout", "-q", "main")

	res := deliverPR(t, e, hookSecret, repo, 13, head, "mallory/target", "attack-1")
	require.Len(t, res.Events, 1)
	ev := e.WaitEvent(res.Events[0].ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	b, err := e.API.GetBuild(ctx, buildOf(t, ev, "check").ID)
	require.NoError(t, err)
	require.True(t, b.Fork)
	require.Equal(t, "default", b.Queue, "the base spec's queue, not the head's release-q")
	require.Equal(t, "pod-atk", b.Executor, "a fork's build runs on a container executor only")
	require.Len(t, b.AttemptList, 1)
	require.Equal(t, []string{"PR_SECRET"}, b.Secrets, "the base spec's list")

	log := readStepLog(t, e, b.ID, 1, "steal")
	require.Contains(t, log, "secret=none deploy=none\n", "a fork gets no secret, even one allowed in pull requests")
	require.Contains(t, log, "tokens=0\n", "no worker credential in any environment the build can read")
	require.Contains(t, log, "env=0\n")
	require.Contains(t, log, "datadir=unreachable\n")
	require.NotContains(t, log, aliceToken)
	require.NotContains(t, log, "value-of-")
	require.Contains(t, strings.Join(ev.Warnings, "\n"), "not given to the pull request")
}
