package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/internal/fakes3"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// handoffSpec is what a team moving from Screwdriver hands between jobs:
// build sets meta, leaves an artifact and fills a job cache; test reads
// both; deploy runs with a parameter and tells Slack and email it shipped.
// %s is the image, %s the file only the image has.
const handoffSpec = `
parameters:
  target: [staging, production]
cache:
  job:
    build: [deps]
shared:
  image: %s
jobs:
  build:
    requires: [~commit]
    steps:
      - where: if [ -f %s ]; then echo in-image; else echo on-host; fi
      - restore: if [ -f deps/warm ]; then echo "warm from $(cat deps/warm)"; else echo cold; mkdir -p deps && echo "$SD_BUILD_ID" > deps/warm; fi
      - version: meta set version 1.2.3
      - dist: mkdir -p "$SD_ARTIFACTS_DIR/dist" && printf 'app-v1.2.3' > "$SD_ARTIFACTS_DIR/dist/app"
  test:
    requires: [build]
    steps:
      - get: echo "version=$(meta get version)"
      - fetch: sluice artifact get --job build dist/app && echo "artifact=$(cat dist/app)"
  deploy:
    requires: [test]
    steps:
      - ship: echo "deploying $(meta get version) to $SD_PARAM_TARGET (meta $(meta get parameters.target.value))"
    settings:
      email: {addresses: [ops@example.com], statuses: [SUCCESS]}
      slack: {channels: ['#deploys'], statuses: [SUCCESS]}
`

// TestHandoffBetweenJobs is issue #23's scenario, on the host runtime and
// in podman containers, with the default file:// blob store and with an
// s3:// bucket served by this test process: metadata, an artifact, a job
// cache, a parameter and both notifications, then a second event that
// restores the cache.
func TestHandoffBetweenJobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		podman, s bool
	}{
		{name: "host", podman: false, s: false},
		{name: "host-s3", podman: false, s: true},
		{name: "podman", podman: true, s: false},
		{name: "podman-s3", podman: true, s: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runHandoff(t, tc.podman, tc.s)
		})
	}
}

func runHandoff(t *testing.T, podman, onS3 bool) {
	t.Helper()
	if podman {
		testenv.Podman(t)
		requireStaticBinary(t)
	}
	// A real SMTP server and a Slack Web API, both in this process.
	box := &mailbox{}
	mail := smtp.NewServer(box)
	mail.Domain = "localhost"
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = mail.Serve(ml) }()
	t.Cleanup(func() { _ = mail.Close() })
	slack, postsTo := slackAPI(t)
	deploysPosts := func() []slackPost { return postsTo("#deploys") }

	serverEnv := map[string]string{
		"SLUICE_SMTP_URL":      "smtp://" + ml.Addr().String() + "?from=ci@example.com",
		"SLUICE_SLACK_API_URL": slack.URL + "/api/",
	}
	execEnv := []string{"SLUICE_CACHE_MAX=10MiB"}
	var s3 *fakes3.Server
	if onS3 {
		s3 = fakes3.Start(t, "sluice")
		// The API (in this process) and the executor share the bucket.
		serverEnv["SLUICE_BLOB_URL"] = s3.AnonymousURL("sluice")
		execEnv = append(execEnv, fakes3.Env()...)
		execEnv = append(execEnv, "SLUICE_BLOB_URL="+s3.BucketURL("sluice"))
	}
	e := server.NewEnv(t, testenv.Options{Env: serverEnv})
	ctx := e.Context()
	image, name := "node:20", "handoff-host" // the host runtime does not use the image
	if podman {
		image, name = testenv.TestImage, "handoff-pod"
		execEnv = append(execEnv, "SLUICE_EXECUTOR_RUNTIME=podman", "SLUICE_BUILD_API_URL="+containerAPIURL(t, e.APIURL))
	}
	if onS3 {
		name += "-s3"
	}
	e.StartExecutor(testenv.ExecutorOptions{Name: name, Env: execEnv})
	e.WaitExecutorLive(name)

	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(handoffSpec, image, testenv.TestImageMarker)})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: name, Repo: repo.Dir})
	require.NoError(t, err)
	_, err = e.API.SetSecret(ctx, name, "SLUICE_SLACK_TOKEN", api.SetSecretRequest{Value: "xoxb-handoff"})
	require.NoError(t, err)

	// The first event: a parameter given at start, a cold cache.
	started, err := e.StartEvent(ctx, name, api.StartEventRequest{Parameters: map[string]string{"target": "production"}})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	build, test, deploy := buildOf(t, ev, "build"), buildOf(t, ev, "test"), buildOf(t, ev, "deploy")
	where := "on-host\n"
	if podman {
		where = "in-image\n"
	}
	// (The first step of a host build also says the image is not used.)
	require.Contains(t, readStepLog(t, e, build.ID, 1, "where"), where, "the runtime under test ran the build")
	require.Equal(t, "cold\n", readStepLog(t, e, build.ID, 1, "restore"))
	require.Contains(t, readStepLog(t, e, build.ID, 1, "sd-setup-cache"), "cache miss: job cache deps")
	require.Contains(t, readStepLog(t, e, build.ID, 1, "sd-teardown-cache"), "cache saved: job cache deps")
	require.Contains(t, readStepLog(t, e, build.ID, 1, "sd-teardown-artifacts"), "artifact dist/app (10 bytes) uploaded")
	require.Contains(t, readStepLog(t, e, test.ID, 1, "get"), "version=1.2.3\n", "test reads the version build set")
	require.Contains(t, readStepLog(t, e, test.ID, 1, "fetch"), "artifact=app-v1.2.3", "test downloads build's artifact")
	require.Contains(t, readStepLog(t, e, deploy.ID, 1, "ship"), "deploying 1.2.3 to production (meta production)\n",
		"deploy runs with the parameter given at start, as SD_PARAM_TARGET and as meta")

	// Both notifications of deploy's success arrive, with its page.
	page := e.APIURL + "/ui/builds/" + deploy.ID
	e.WaitFor("the Slack message and the email", time.Minute, func() bool {
		return len(deploysPosts()) > 0 && len(box.to("ops@example.com")) > 0
	})
	sl := deploysPosts()
	require.Len(t, sl, 1)
	require.Equal(t, "Bearer xoxb-handoff", sl[0].auth)
	require.Contains(t, sl[0].text, "SUCCESS")
	require.Contains(t, sl[0].text, page)
	em := box.to("ops@example.com")
	require.Len(t, em, 1)
	require.Contains(t, em[0].data, "Status: SUCCESS")
	require.Contains(t, em[0].data, "Build page: "+page)

	// The second event restores the cache build filled (and takes the
	// parameter's default).
	started, err = e.StartEvent(ctx, name, api.StartEventRequest{})
	require.NoError(t, err)
	ev2 := e.WaitEvent(started.ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev2.Status, ev2.Reason)
	build2 := buildOf(t, ev2, "build")
	require.Contains(t, readStepLog(t, e, build2.ID, 1, "sd-setup-cache"), "cache hit: job cache deps")
	require.Equal(t, "warm from "+build.ID+"\n", readStepLog(t, e, build2.ID, 1, "restore"))
	require.Contains(t, readStepLog(t, e, buildOf(t, ev2, "deploy").ID, 1, "ship"), "deploying 1.2.3 to staging (meta staging)\n")
	e.WaitFor("the second deploy's Slack message", time.Minute, func() bool { return len(deploysPosts()) == 2 })

	if onS3 {
		// The cache and the artifacts are in the S3 bucket.
		bucket, err := blobstore.Open(context.Background(), s3.AnonymousURL("sluice"))
		require.NoError(t, err)
		defer func() { _ = bucket.Close() }()
		caches, err := bucket.List(ctx, "caches/"+name+"/")
		require.NoError(t, err)
		require.NotEmpty(t, caches, "the job cache is in the bucket")
		arts, err := bucket.List(ctx, "artifacts/")
		require.NoError(t, err)
		require.Len(t, arts, 2, "dist/app of each event's build: %v", arts)
	}
	require.Equal(t, name+"/build/"+strconv.Itoa(ev2.Number), build2.ID)
}

// containerAPIURL serves the installation's API on every interface and
// returns its address as a podman container reaches the host
// (SLUICE_BUILD_API_URL).
func containerAPIURL(t *testing.T, apiURL string) string {
	t.Helper()
	target, err := url.Parse(apiURL)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target) // and the Host: the API answers its own address
	}}
	l, err := net.Listen("tcp", "0.0.0.0:0") //nolint:gosec // containers reach the host on its bridge address
	require.NoError(t, err)
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	return "http://host.containers.internal:" + port
}
