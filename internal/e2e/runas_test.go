package e2e

import (
	"os"
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

// TestHostExecutorRunAs: an executor started with SLUICE_EXECUTOR_RUN_AS=65534
// runs its host builds as that uid. A build trying to read the executor's
// environment (/proc/$PPID/environ, its token) and its data directory gets
// nothing, while a normal build (checkout, writes in its workspace and HOME)
// passes. An executor running as root on the host runtime with no setting
// refuses to start, naming it (review finding 1, "host builds read worker
// credentials").
func TestHostExecutorRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("running builds as another uid needs root; this test runs as uid %d", os.Geteuid())
	}
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()

	// As root with no setting: refused, naming the setting.
	refused := exec.CommandContext(ctx, testenv.Binary(t), "worker", "--role", "executor")
	refused.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.Server.Address(), "TEMPORAL_NAMESPACE="+e.Namespace,
		"SLUICE_EXECUTOR_NAME=refused", "SLUICE_EXECUTOR_RUNTIME=host", "SLUICE_EXECUTOR_RUN_AS=",
		"SLUICE_DATA_DIR="+filepath.Join(e.Dir, "refused"), "SLUICE_API_URL="+e.APIURL)
	out, err := refused.CombinedOutput()
	require.Error(t, err, "a root executor on the host runtime with no SLUICE_EXECUTOR_RUN_AS started:\n%s", out)
	require.Contains(t, string(out), "SLUICE_EXECUTOR_RUN_AS")
	require.Contains(t, string(out), "runs as root on the host runtime")

	// Workspaces outside the data directory, on a path uid 65534 can enter.
	work, err := os.MkdirTemp("", "sluice-e2e-runas-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	require.NoError(t, os.Chmod(work, 0o711))
	data := filepath.Join(e.Dir, "executors", "isolated")
	const probe = "executor-only-value-0123456789"
	_, err = e.API.CreateQueue(ctx, api.QueueRequest{Name: "iso", Rules: []string{"run-on=executors,max-parallel=2"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "isolated", Queues: []string{"iso"}, Env: []string{
		"SLUICE_EXECUTOR_RUN_AS=65534", "SLUICE_WORK_DIR=" + filepath.Join(work, "ws"), "SLUICE_PROBE=" + probe,
	}})
	e.WaitExecutorLive("isolated")
	fi, err := os.Stat(data)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the executor's data directory")

	spec := `shared: {image: alpine, annotations: {screwdriver.cd/executor: iso}, environment: {DATA: "` + data + `"}}
jobs:
  pry:
    requires: [~commit]
    steps:
      - who: id -u
      - environ: 'cat /proc/$PPID/environ 2>/dev/null | tr "\0" "\n" | grep -c SLUICE_ || true; echo "token=${SLUICE_TOKEN:-none} probe=${SLUICE_PROBE:-none}"'
      - data: 'ls -a "$DATA" 2>/dev/null; cat "$DATA"/*/* "$DATA"/*/*/* 2>/dev/null | head -c 100; echo data-end'
      - tools: 'd=$(dirname "$(command -v meta)"); touch "$d/x" 2>/dev/null && echo wrote; rm -f "$d/meta" 2>/dev/null && echo removed; ln -sf /bin/sh "$d/sluice" 2>/dev/null && echo replaced; echo "tools-end $(basename "$(dirname "$d")")"'
  normal:
    requires: [~commit]
    steps:
      - build: 'git rev-parse HEAD > out.txt && mkdir -p target && cp out.txt target/ && touch "$HOME/.cache" && echo built'
      - meta: 'meta set isolated yes && meta get isolated'
`
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "isolated", Repo: repo.Dir})
	require.NoError(t, err)
	started, err := e.StartEvent(ctx, "isolated", api.StartEventRequest{})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)

	logOf := func(job, step string) string {
		t.Helper()
		b, err := e.API.GetBuild(ctx, buildOf(t, ev, job).ID)
		require.NoError(t, err)
		require.Equal(t, "isolated", b.Executor)
		chunk, err := e.API.ReadLog(ctx, b.LogKey, step, 0, 0)
		require.NoError(t, err)
		// Without the first step's notice that the image is not used.
		if _, log, ok := strings.Cut(string(chunk.Data), "runs steps in a shell on its host (requested)\n"); ok {
			return log
		}
		return string(chunk.Data)
	}
	require.Equal(t, "65534\n", logOf("pry", "who"))
	environ := logOf("pry", "environ")
	require.Equal(t, "0\ntoken=none probe=none\n", environ, "the build read the executor's environment")
	require.NotContains(t, environ, probe)
	require.Equal(t, "data-end\n", logOf("pry", "data"), "the build read the executor's data directory")
	// The meta and sluice commands are the executor's, shared by its
	// builds: a build runs them and cannot change them.
	require.Equal(t, "tools-end .sluice-tools\n", logOf("pry", "tools"), "the build changed the executor's commands")
	require.Equal(t, "built\n", logOf("normal", "build"))
	require.Equal(t, "yes\n", logOf("normal", "meta"))
}
