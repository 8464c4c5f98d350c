package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestBuildMetaBetweenJobs: a real executor process puts `meta` on the
// steps' PATH; what `build` sets, `test` (downstream, same event) reads,
// together with the event's own metadata (`event start --meta`); `build
// show` and the API show it; a restart from `test` starts with the meta of
// the `build` it inherits; another pipeline reads it with `meta get
// --external`; and a build's credential reaches no other route.
func TestBuildMetaBetweenJobs(t *testing.T) {
	t.Parallel()
	const rootToken, userToken = "root-token-0123456789", "user-token-0123456789"
	e := server.NewEnv(t, testenv.Options{Token: rootToken, Tokens: `
tokens:
  - {user: root, token: ` + rootToken + `, privileges: [manage-pipelines, read-secrets, manage-executors, define-queues]}
  - {user: uma, token: ` + userToken + `}
`})
	ctx := e.Context()
	e.StartExecutor(testenv.ExecutorOptions{Name: "meta-1", Env: []string{"SLUICE_ARTIFACT_MAX=1KiB"}})
	e.WaitExecutorLive("meta-1")

	spec := `
shared: {image: alpine}
jobs:
  build:
    requires: [~commit]
    steps:
      - set: meta set version 1.2.3 && meta set deploy.region eu && meta set deploy.targets '["a","b"]' --json-value
      - dist: mkdir -p $SD_ARTIFACTS_DIR/dist && printf 'app-binary-v1.2.3' > $SD_ARTIFACTS_DIR/dist/app && head -c 2000 /dev/zero > $SD_ARTIFACTS_DIR/zz-big.bin
      - other-route: |
          code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Sluice-Build: $SD_BUILD_ID" -H "X-Sluice-Attempt-Credential: $SD_BUILD_CREDENTIAL" "${SD_API_URL}api/v1/pipelines")
          echo "pipelines route with the build credential: $code"
          echo "credential: $SD_BUILD_CREDENTIAL"
  test:
    requires: [build]
    steps:
      - get: echo "version=$(meta get version) region=$(meta get deploy.region) targets=$(meta get deploy.targets) channel=$(meta get release.channel) missing=$(meta get nope)"
      - fetch: sluice artifact get --job build dist/app && echo "artifact=$(cat dist/app)"
`
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "metaapp", Repo: testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec}).Dir})
	require.NoError(t, err)
	started, err := e.StartEvent(ctx, "metaapp", api.StartEventRequest{Meta: map[string]string{"release.channel": "beta"}})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	build, test := buildOf(t, ev, "build"), buildOf(t, ev, "test")

	require.Contains(t, readStepLog(t, e, test.ID, 1, "fetch"), "artifact=app-binary-v1.2.3", "test gets build's artifact")
	upload := readStepLog(t, e, build.ID, 1, "sd-teardown-artifacts")
	require.Contains(t, upload, "artifact dist/app (17 bytes) uploaded")
	require.Contains(t, upload, "SKIPPED, over the cap of 1024 bytes per build (SLUICE_ARTIFACT_MAX): zz-big.bin (2000 bytes)")
	env := []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + userToken}
	stdout, stderr, code := sluice(t, env, "build", "artifacts", build.ID)
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "dist/app")
	require.Contains(t, stdout, "17")
	require.NotContains(t, stdout, "zz-big.bin")
	dl := filepath.Join(t.TempDir(), "app")
	_, stderr, code = sluice(t, env, "build", "artifacts", build.ID, "dist/app", "--out", dl)
	require.Zero(t, code, stderr)
	got, err := os.ReadFile(dl)
	require.NoError(t, err)
	require.Equal(t, "app-binary-v1.2.3", string(got))
	// An outsider (no token) cannot list or download them.
	for _, p := range []string{"/artifacts", "/artifacts/dist/app"} {
		resp, err := http.Get(e.APIURL + "/api/v1/builds/" + url.PathEscape(build.ID) + p) //nolint:noctx // a test
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, p)
	}

	out := readStepLog(t, e, test.ID, 1, "get")
	require.Contains(t, out, `version=1.2.3 region=eu targets=["a","b"] channel=beta missing=null`)
	other := readStepLog(t, e, build.ID, 1, "other-route")
	require.Contains(t, other, "pipelines route with the build credential: 403", "a build's credential reaches only the routes for builds")
	require.Contains(t, other, "credential: ***", "the log never shows the build's credential")

	shown, err := e.API.GetBuild(ctx, build.ID)
	require.NoError(t, err)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(shown.Meta, &meta))
	require.Equal(t, "1.2.3", meta["version"], "GET /api/v1/builds/{id} shows the meta the build ended with")
	stdout, stderr, code = sluice(t, env, "build", "show", test.ID)
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "meta:")
	require.Contains(t, stdout, `"version": "1.2.3"`)
	require.Contains(t, stdout, `"buildId": "`+test.ID+`"`, "each build's own build.* keys")

	// A restart from test inherits build's success, and its metadata.
	restarted, err := e.API.RestartEvent(ctx, ev.ID, api.RestartEventRequest{From: api.JobList{"test"}})
	require.NoError(t, err)
	ev2 := e.WaitEvent(restarted.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev2.Status, ev2.Reason)
	require.Contains(t, readStepLog(t, e, buildOf(t, ev2, "test").ID, 1, "get"), "version=1.2.3 region=eu")
	require.Contains(t, readStepLog(t, e, buildOf(t, ev2, "test").ID, 1, "fetch"), "artifact=app-binary-v1.2.3", "and its artifacts")

	// Another pipeline reads the last successful build of metaapp:build.
	ext := `
shared: {image: alpine}
jobs:
  read:
    requires: [~commit]
    steps:
      - ext: echo "external=$(meta get version --external sd@metaapp:build)"
      - steal: |
          code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Sluice-Build: $SD_BUILD_ID" -H "X-Sluice-Attempt-Credential: $SD_BUILD_CREDENTIAL" "${SD_API_URL}api/v1/builds/metaapp%2Fbuild%2F1/artifacts/dist/app")
          echo "another event's artifact: $code"
`
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "reader", Repo: testenv.NewRepo(t, map[string]string{"screwdriver.yaml": ext}).Dir})
	require.NoError(t, err)
	started, err = e.StartEvent(ctx, "reader", api.StartEventRequest{})
	require.NoError(t, err)
	ev3 := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev3.Status, ev3.Reason)
	require.Contains(t, readStepLog(t, e, buildOf(t, ev3, "read").ID, 1, "ext"), "external=1.2.3")
	require.Contains(t, readStepLog(t, e, buildOf(t, ev3, "read").ID, 1, "steal"), "another event's artifact: 403", "a build reads only its own event's artifacts")

	// Outside a build, a made-up credential is refused.
	c := api.NewClient(e.APIURL)
	c.Build, c.BuildCredential = build.ID, "not-the-credential"
	_, err = c.JobMeta(ctx, "metaapp", "build")
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.Status, ae.Message)
	require.Contains(t, ae.Message, "not that of build")
}

// TestBuildMetaInContainers: in a podman container (the executor's own
// binary mounted read-only), meta set and meta get work, the next job's
// container starts with the metadata, and artifacts leave the container.
func TestBuildMetaInContainers(t *testing.T) {
	t.Parallel()
	requireStaticBinary(t)
	e := containerEnv(t)
	ctx := e.Context()
	spec := fmt.Sprintf(`
shared:
  image: %s
  annotations: {screwdriver.cd/executor: pod}
jobs:
  build:
    requires: [~commit]
    steps:
      - set: meta set version 1.2.3 && echo "own=$(meta get version)"
      - dist: mkdir -p $SD_ARTIFACTS_DIR/dist && printf 'from-the-container' > $SD_ARTIFACTS_DIR/dist/app
  test:
    requires: [build]
    steps:
      - get: echo "version=$(meta get version) path=$SD_META_PATH"
`, testenv.TestImage)
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "ctrmeta", Repo: testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec}).Dir})
	require.NoError(t, err)
	started, err := e.StartEvent(ctx, "ctrmeta", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	build, test := buildOf(t, ev, "build"), buildOf(t, ev, "test")
	require.Equal(t, "pod-1", build.Executor)
	require.Contains(t, readStepLog(t, e, build.ID, 1, "set"), "own=1.2.3")
	require.Contains(t, readStepLog(t, e, test.ID, 1, "get"), "version=1.2.3 path=/sd/meta/meta.json")
	list, err := e.API.ListArtifacts(ctx, build.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"dist/app"}, artifactPaths(list))
	var buf bytes.Buffer
	_, err = e.API.DownloadArtifact(ctx, build.ID, "dist/app", &buf)
	require.NoError(t, err)
	require.Equal(t, "from-the-container", buf.String())
}

func artifactPaths(l api.ArtifactList) []string {
	out := make([]string, 0, len(l.Artifacts))
	for _, a := range l.Artifacts {
		out = append(out, a.Path)
	}
	return out
}

// requireStaticBinary fails unless the sluice binary under test is static:
// builds in a busybox container run it as their meta and sluice commands
// (make build and testenv build it with CGO_ENABLED=0).
func requireStaticBinary(t *testing.T) {
	t.Helper()
	if f, err := elf.Open(testenv.Binary(t)); err == nil {
		dynamic := false
		for _, p := range f.Progs {
			dynamic = dynamic || p.Type == elf.PT_INTERP
		}
		_ = f.Close()
		require.False(t, dynamic, "the sluice binary is dynamically linked: build it with CGO_ENABLED=0 (make build does) to run its meta command in a busybox container")
	}
}

// TestStartMetaInTheTask: a build whose metadata is all its own and its
// trigger's gets it with its task (the API is not asked), and it is what
// the API would have answered; a build with an upstream job is not handed
// any and reads it from the API, its upstream's included.
func TestStartMetaInTheTask(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	e.StartExecutor(testenv.ExecutorOptions{Name: "taskmeta-1"})
	e.WaitExecutorLive("taskmeta-1")
	spec := `
shared: {image: alpine}
jobs:
  first:
    requires: [~commit]
    steps:
      - show: echo "meta=$(tr -d '\n' < "$SD_META_PATH")" && meta set from.first yes
  second:
    requires: [first]
    steps:
      - show: echo "meta=$(tr -d '\n' < "$SD_META_PATH")"
`
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "taskmeta", Repo: testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec}).Dir})
	require.NoError(t, err)
	started, err := e.StartEvent(ctx, "taskmeta", api.StartEventRequest{})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	first, second := buildOf(t, ev, "first"), buildOf(t, ev, "second")

	seen := func(b api.Build) map[string]any {
		t.Helper()
		out := readStepLog(t, e, b.ID, 1, "show")
		_, doc, ok := strings.Cut(out, "meta=")
		require.True(t, ok, out)
		doc, _, _ = strings.Cut(doc, "\n")
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(doc), &m), doc)
		return m
	}
	// The API's answer for first, made the way it answers an executor.
	record, err := e.API.GetBuild(ctx, first.ID)
	require.NoError(t, err)
	fromAPI, err := e.Service.StartMeta(ctx, record)
	require.NoError(t, err)
	require.NotEmpty(t, fromAPI["build"])
	require.Equal(t, fromAPI, seen(first), "the task's metadata is the API's")
	metaAt := func(doc map[string]any, key string) any {
		t.Helper()
		v, _, err := buildmeta.Get(doc, key)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, "yes", metaAt(seen(second), "from.first"), "second starts with what first saved")
	require.Equal(t, second.ID, metaAt(seen(second), "build.buildId"))

	// Which builds the event's workflow handed their metadata.
	handed := map[string]bool{}
	it := e.Client.GetWorkflowHistory(ctx, workflows.EventRef{Pipeline: "taskmeta", Number: ev.Number}.WorkflowID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		he, err := it.Next()
		require.NoError(t, err)
		at := he.GetActivityTaskScheduledEventAttributes()
		if at.GetActivityType().GetName() != "RunBuild" {
			continue
		}
		var in activities.RunBuildInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(at.GetInput(), &in))
		handed[in.Job] = in.StartMeta != nil
	}
	require.Equal(t, map[string]bool{"first": true, "second": false}, handed)
}
