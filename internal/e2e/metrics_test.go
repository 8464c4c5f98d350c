package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// scrape reads a Prometheus text page and returns the value of each sample,
// keyed by its name and labels as printed ("name{a="x",b="y"}").
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the test's own server
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

// TestMetrics: while one build runs on a one-slot queue and two wait, the
// API's /metrics shows the queue depth and the slots as `queue status`
// does, and the executor's shows its slots, its running build and the
// queue-wait histogram; when the event ends, the builds finished by status.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "mq", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	mport := freePort(t)
	e.StartExecutor(testenv.ExecutorOptions{Name: "m-1", Queues: []string{"mq"}, Env: []string{"SLUICE_METRICS_ADDR=127.0.0.1:" + strconv.Itoa(mport)}})
	e.WaitExecutorLive("m-1")
	rec := recordsFile(t)
	gate := testenv.NewGate(t) // holds the running build while the figures are read
	ev := startParallel(t, e, "metered", 3, "mq", rec, gate.Wait())
	waitDispatched(t, e, ev.ID, 2)

	var st api.QueueStatus
	var m map[string]float64
	e.WaitFor("the API's metrics to match queue status", 30*time.Second, func() bool {
		st, err = e.API.QueueStatus(ctx, "mq")
		if err != nil {
			return false
		}
		m = scrape(t, e.APIURL+"/metrics")
		return m[`sluice_queue_builds_waiting{queue="mq",status="QUEUED"}`] == float64(st.Backlog) &&
			m[`sluice_queue_slots{kind="busy",member="m-1",queue="mq"}`] == 1
	})
	require.Equal(t, 2, st.Backlog)
	require.InDelta(t, 1.0, m[`sluice_queue_slots{kind="total",member="m-1",queue="mq"}`], 0)
	require.InDelta(t, 1.0, m[`sluice_queue_live_members{queue="mq"}`], 0)
	require.InDelta(t, 0.0, m["sluice_queue_metrics_error"], 0)
	require.Positive(t, m[`sluice_api_request_duration_seconds_count{code="200",method="GET",route="GET /api/v1/queues/{name}/status"}`])

	execURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	// The health checks of docker-compose.yml: the API's /readyz by
	// default, a worker's metrics endpoint.
	out, stderr, code := sluice(t, []string{"SLUICE_API_URL=" + e.APIURL}, "health")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "/readyz: 200 OK")
	_, stderr, code = sluice(t, nil, "health", execURL)
	require.Zero(t, code, stderr)
	_, _, code = sluice(t, nil, "health", e.APIURL+"/nope")
	require.Equal(t, 1, code, "a non-2xx answer")
	x := scrape(t, execURL)
	require.InDelta(t, 1.0, x[`sluice_executor_slots{queue="mq"}`], 0)
	require.InDelta(t, 1.0, x[`sluice_executor_builds_running{queue="mq"}`], 0)
	require.GreaterOrEqual(t, x[`sluice_queue_wait_seconds_count{queue="mq"}`], 1.0)

	gate.Open()
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev.ID, 2*time.Minute).Status)
	// A build's result is reported before its activity returns, and the
	// SDK counts the activity when it returns: read until both are in.
	var runs float64
	e.WaitFor("the executor's metrics to count the three builds", 30*time.Second, func() bool {
		x = scrape(t, execURL)
		runs = 0
		for k, v := range x {
			if strings.HasPrefix(k, "temporal_activity_execution_latency_seconds_count{") && strings.Contains(k, `activity_type="RunBuild"`) {
				runs += v
			}
		}
		return x[`sluice_builds_finished_total{queue="mq",status="success"}`] == 3 && runs == 3
	})
	require.InDelta(t, 3.0, x[`sluice_queue_wait_seconds_count{queue="mq"}`], 0)
	require.Positive(t, x[`sluice_queue_wait_seconds_sum{queue="mq"}`], "the two later builds waited for the slot")
	// The Temporal SDK's own metrics come along on the same endpoint.
	require.InDelta(t, 3.0, runs, 0, "the SDK counted the executor's three RunBuild activities")
}
