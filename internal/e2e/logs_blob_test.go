package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/fakes3"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// Two `sluice api` replicas with data directories of their own and one S3
// bucket (SLUICE_BLOB_URL): an executor ships a build's logs to the first,
// and the second serves them while the step runs (live chunks flushed to
// the bucket) and once finished (the archive). Before the blob store, the
// second answered 404: replicas needed a shared volume; before live
// chunks, it answered 404 until the log was finished.
func TestAPIReplicasServeFinishedLogsFromTheBlobStore(t *testing.T) {
	t.Parallel()
	s3 := fakes3.Start(t, "sluice")
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	blobEnv := append(fakes3.Env(), "SLUICE_BLOB_URL="+s3.BucketURL("sluice"))

	replica := func(name string) *api.Client {
		port := freePort(t)
		env := append([]string{
			"TEMPORAL_ADDRESS=" + e.Server.Address(),
			"TEMPORAL_NAMESPACE=" + e.Namespace,
			"SLUICE_API_ADDR=127.0.0.1:" + strconv.Itoa(port),
			"SLUICE_DATA_DIR=" + filepath.Join(e.Dir, name),
			"SLUICE_LOCAL_REPOS=/",
			"SLUICE_API_TOKENS_FILE=",
			"SLUICE_DB=",
		}, blobEnv...)
		startProc(t, name, env, "api")
		c := api.NewClient("http://localhost:" + strconv.Itoa(port))
		e.WaitFor(name+" to answer", time.Minute, func() bool {
			resp, err := http.Get("http://localhost:" + strconv.Itoa(port) + "/healthz") //nolint:noctx // a health probe
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		return c
	}
	a, b := replica("api-a"), replica("api-b")

	// Only the executor process runs the build (no controller fallback),
	// so the logs reach replica a.
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "replq", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "logs-exec", Queues: []string{"replq"}, Env: append(blobEnv, "SLUICE_API_URL="+a.BaseURL)})
	e.WaitExecutorLive("logs-exec")
	gate := testenv.NewGate(t)
	spec := fmt.Sprintf("shared: {image: node:20, annotations: {screwdriver.cd/executor: replq}}\njobs:\n  main:\n    requires: [~commit]\n    steps:\n      - hello: %q\n",
		"echo hello from replica a; "+gate.Wait())
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err = a.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "replicalogs", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := a.StartEvent(ctx, "replicalogs", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev, err = a.Numbered(ctx, ev, 100*time.Millisecond) // answered pending past SLUICE_ADMIT_WAIT under load
	require.NoError(t, err)

	// While the step runs, replica b (which receives nothing) serves its
	// log from the chunks replica a flushes to the bucket every second.
	buildID := fmt.Sprintf("replicalogs/main/%d", ev.Number)
	e.WaitFor("replica b to serve the running step's log", 2*time.Minute, func() bool {
		running, err := b.GetBuild(ctx, buildID)
		if err != nil || running.LogKey == "" {
			return false
		}
		chunk, err := b.ReadLog(ctx, running.LogKey, "hello", 0, 0)
		return err == nil && strings.Contains(string(chunk.Data), "hello from replica a\n") && !chunk.Complete
	})
	running, err := b.GetBuild(ctx, buildID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusRunning, running.Status, "read while the step runs")
	// The build page's log viewer on replica b follows it too.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.BaseURL+"/ui/builds/"+buildID+"/log-follow", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	require.Contains(t, string(page), `"t": "hello from replica a"`)
	gate.Open()
	build := buildOf(t, e.WaitEvent(ev.ID, 2*time.Minute), "main")
	require.Equal(t, workflows.StatusSuccess, build.Status, build.Reason)
	require.Equal(t, "logs-exec", build.Executor)
	key := activities.LogKey(build.ID, 1)

	// The result reaches Temporal once the logs are shipped and finished.
	for name, c := range map[string]*api.Client{"a": a, "b": b} {
		steps, err := c.LogSteps(context.Background(), key)
		require.NoError(t, err, "replica %s", name)
		require.NotEmpty(t, steps)
		for _, s := range steps {
			require.True(t, s.Complete, "step %s", s.Name)
		}
		chunk, err := c.ReadLog(context.Background(), key, "hello", 0, 0)
		require.NoError(t, err)
		require.Contains(t, string(chunk.Data), "\nhello from replica a\n", "replica %s", name)
		require.True(t, chunk.Complete)
	}
}
