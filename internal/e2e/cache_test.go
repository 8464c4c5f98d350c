package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/internal/fakes3"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// cacheSpec has a job cache and a pipeline cache; its step says whether
// the job cache came back, and fills it when it did not.
const cacheSpec = `
cache:
  pipeline: [shared]
  job:
    warm: [deps]
jobs:
  warm:
    requires: [~commit]%s
    steps:
      - use: if [ -f deps/marker ]; then echo "found $(cat deps/marker)"; else echo cold; mkdir -p deps shared && echo v1 > deps/marker && echo s > shared/s; fi
`

// runCacheScenario runs two events of a pipeline with caches on one
// executor whose blob store is an S3 bucket served by this test process:
// the first misses and saves, the second hits and finds the file; another
// pipeline with the same job and paths misses.
func runCacheScenario(t *testing.T, e *testenv.Env, s3 *fakes3.Server, name, image string) {
	t.Helper()
	ctx := e.Context()
	extra := "\n    image: node:20" // not used on the host runtime
	if image != "" {
		extra = "\n    image: " + image
	}
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(cacheSpec, extra)})
	for _, p := range []string{name, name + "-other"} {
		_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: p, Repo: repo.Dir})
		require.NoError(t, err)
	}
	event := func(pipeline string) api.Build {
		ev, err := e.StartEvent(ctx, pipeline, api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		b := buildOf(t, e.WaitEvent(ev.ID, 2*time.Minute), "warm")
		require.Equal(t, workflows.StatusSuccess, b.Status, b.Reason)
		require.Equal(t, pipeline+"/warm/"+strconv.Itoa(ev.Number), b.ID)
		return b
	}

	first := event(name)
	setup := readStepLog(t, e, first.ID, 1, "sd-setup-cache")
	require.Contains(t, setup, "cache miss: pipeline cache shared")
	require.Contains(t, setup, "cache miss: job cache deps")
	require.Contains(t, readStepLog(t, e, first.ID, 1, "use"), "cold")
	saved := readStepLog(t, e, first.ID, 1, "sd-teardown-cache")
	require.Contains(t, saved, "cache saved: pipeline cache shared")
	require.Contains(t, saved, "cache saved: job cache deps")

	// The archives are in the S3 bucket, under the pipeline.
	bucket, err := blobstore.Open(context.Background(), s3.AnonymousURL("sluice"))
	require.NoError(t, err)
	defer func() { _ = bucket.Close() }()
	objs, err := bucket.List(ctx, "caches/"+name+"/")
	require.NoError(t, err)
	require.Len(t, objs, 2, "%v", objs)

	second := event(name)
	setup = readStepLog(t, e, second.ID, 1, "sd-setup-cache")
	require.Contains(t, setup, "cache hit: pipeline cache shared")
	require.Contains(t, setup, "cache hit: job cache deps")
	require.Equal(t, "found v1\n", readStepLog(t, e, second.ID, 1, "use"), "the restored file is in the workspace")

	// Another pipeline, same job name and paths: nothing of the first's.
	other := event(name + "-other")
	setup = readStepLog(t, e, other.ID, 1, "sd-setup-cache")
	require.Contains(t, setup, "cache miss: pipeline cache shared")
	require.Contains(t, setup, "cache miss: job cache deps")
	require.Contains(t, readStepLog(t, e, other.ID, 1, "use"), "cold")
}

func cacheEnv(t *testing.T) (*testenv.Env, *fakes3.Server, []string) {
	t.Helper()
	s3 := fakes3.Start(t, "sluice")
	e := server.NewEnv(t, testenv.Options{})
	env := append(fakes3.Env(), "SLUICE_BLOB_URL="+s3.BucketURL("sluice"), "SLUICE_CACHE_MAX=10MiB")
	return e, s3, env
}

func TestCacheHostRuntimeOnS3(t *testing.T) {
	t.Parallel()
	e, s3, env := cacheEnv(t)
	e.StartExecutor(testenv.ExecutorOptions{Name: "cache-host", Env: env})
	e.WaitExecutorLive("cache-host")
	runCacheScenario(t, e, s3, "cachehost", "")
}

func TestCacheContainerRuntimeOnS3(t *testing.T) {
	t.Parallel()
	testenv.Podman(t)
	e, s3, env := cacheEnv(t)
	e.StartExecutor(testenv.ExecutorOptions{Name: "cache-pod", Env: append(env, "SLUICE_EXECUTOR_RUNTIME=podman")})
	e.WaitExecutorLive("cache-pod")
	runCacheScenario(t, e, s3, "cachepod", testenv.TestImage)
}

// A store outage never fails a build: it says so in the log.
func TestCacheOutageDoesNotFailTheBuild(t *testing.T) {
	t.Parallel()
	e, s3, env := cacheEnv(t)
	e.StartExecutor(testenv.ExecutorOptions{Name: "cache-down", Env: env})
	e.WaitExecutorLive("cache-down")
	s3.SetDown(true)
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(cacheSpec, "\n    image: node:20")})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "cachedown", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "cachedown", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	b := buildOf(t, e.WaitEvent(ev.ID, 3*time.Minute), "warm")
	require.Equal(t, workflows.StatusSuccess, b.Status, b.Reason)
	require.Contains(t, readStepLog(t, e, b.ID, 1, "sd-setup-cache"), "cache unavailable: job cache deps: ")
	require.Contains(t, readStepLog(t, e, b.ID, 1, "sd-teardown-cache"), "cache unavailable: job cache deps: ")
}
