package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
)

// TestScheduleShow: `schedule show` reads a real Temporal Schedule: its
// cron, paused state with the time the pause took effect, and its due
// times (none yet for a schedule created moments ago, whose first due time
// is hours away); a job that is not periodic is named.
func TestScheduleShow(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  main: {requires: [~commit], steps: [{x: 'true'}]}
  nightly:
    annotations: {screwdriver.cd/buildPeriodically: H 4 * * *}
    steps: [{cron: 'echo nightly'}]
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "sched", Repo: repo.Dir})
	require.NoError(t, err)
	var v api.ScheduleView
	e.WaitFor("the schedule to exist", 30*time.Second, func() bool {
		v, err = e.API.Schedule(ctx, "sched", "nightly")
		return err == nil
	})
	require.Regexp(t, `^\d+ 4 \* \* \*$`, v.Cron)
	require.False(t, v.Paused)
	for _, o := range v.Occurrences {
		require.NotEmpty(t, o.Outcome, "every due time says what became of it")
	}
	require.NoError(t, e.API.ScheduleAction(ctx, "sched", "nightly", "pause"))
	v, err = e.API.Schedule(ctx, "sched", "nightly")
	require.NoError(t, err)
	require.True(t, v.Paused)
	require.True(t, strings.HasPrefix(v.Note, "paused with sluice at "), v.Note)

	out, stderr, code := sluice(t, []string{"SLUICE_API_URL=" + e.APIURL}, "schedule", "show", "sched", "nightly")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "paused")
	require.Contains(t, out, "DUE")

	// The pipeline page lists the periodic job's due times too.
	resp, err := http.Get(e.APIURL + "/ui/pipelines/sched") //nolint:gosec,noctx // the test's own server
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	require.Contains(t, string(page), "Periodic jobs")
	require.Contains(t, string(page), `id="schedule-nightly"`)

	_, err = e.API.Schedule(ctx, "sched", "main")
	require.ErrorContains(t, err, "job main of pipeline sched is not periodic")
}
