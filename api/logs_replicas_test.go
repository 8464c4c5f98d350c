package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/workflows"
)

// Two API replicas with directories of their own over one blob store: an
// executor ships a running build's step log to replica a (through the
// route and credential check it uses in production); replica b, which
// received nothing, lists and reads it while the step still runs, then
// reads it finished. Before live flushing, b answered 404 until the log
// was finished and archived.
func TestRunningBuildLogReadThroughTheOtherReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u, err := blobstore.DefaultURL(t.TempDir())
	require.NoError(t, err)
	bucket, err := blobstore.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	replica := func() *logstore.Store {
		s, err := logstore.Open(t.TempDir())
		require.NoError(t, err)
		s.SetArchive(bucket, func(err error) { t.Errorf("archive: %v", err) })
		go s.FlushLive(ctx, 20*time.Millisecond, func(err error) { t.Errorf("flush: %v", err) })
		return s
	}
	storeA, storeB := replica(), replica()

	// Build app/deploy/7 runs attempt 2 (credential2) on exec-a.
	c := newMockClient(t)
	wid := attemptRef.WorkflowID()
	answerQuery(t, c, wid, workflows.QueryBuild, attemptState(workflows.StatusRunning, true), 0)
	a := httptest.NewServer(newHandler(t, api.Deps{Service: newService(t, c), Logs: storeA, Authenticate: readSecretsOnly}))
	t.Cleanup(a.Close)
	b := httptest.NewServer(newHandler(t, api.Deps{Logs: storeB, Authenticate: readSecretsOnly}))
	t.Cleanup(b.Close)

	const key = "app/deploy/7/2"
	sink := logstore.NewRemoteSink(a.URL, key, nil, logstore.RemoteOptions{Credential: credential2, FlushInterval: 10 * time.Millisecond})
	w, err := sink.Open("unit")
	require.NoError(t, err)
	_, err = io.WriteString(w, "\x1b[32mstarted\x1b[0m\n")
	require.NoError(t, err)

	readB := api.NewClient(b.URL)
	// waitB polls replica b until its copy of the log is want.
	waitB := func(want string, complete bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ch, err := readB.ReadLog(ctx, key, "unit", 0, 0)
			if err == nil && string(ch.Data) == want && ch.Complete == complete {
				return
			}
			require.True(t, time.Now().Before(deadline), "replica b never read %q (complete %v): last %q, %v", want, complete, ch.Data, err)
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitB("\x1b[32mstarted\x1b[0m\n", false)
	steps, err := readB.LogSteps(ctx, key)
	require.NoError(t, err)
	require.Equal(t, []logstore.StepInfo{{Name: "unit", Size: 17}}, steps, "listed, running")
	_, err = storeB.Stat(key, "unit")
	require.NoError(t, err)
	require.NoDirExists(t, storeB.Dir()+"/app", "replica b holds nothing locally")

	_, err = io.WriteString(w, "second line\n")
	require.NoError(t, err)
	waitB("\x1b[32mstarted\x1b[0m\nsecond line\n", false)
	require.NoError(t, w.Close())
	waitB("\x1b[32mstarted\x1b[0m\nsecond line\n", true)

	// The raw log through b is the stored log, byte for byte.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL+"/api/v1/builds/app%2Fdeploy%2F7%2F2/logs/unit/raw", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	local, err := storeA.Read(key, "unit", 0, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(local.Data, raw))
}
