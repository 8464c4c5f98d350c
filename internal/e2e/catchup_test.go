package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// TestScheduleCatchupAfterOutage: periodic schedules are created with the
// configured catch-up window, so a fire missed while the Temporal server was
// down for longer than the window is skipped, not replayed when it comes
// back (Temporal's default window is a year). The schedule fires every
// minute (sluice's own buildPeriodically is at most hourly; the adapter
// takes any expanded cron), the server is down for more than a minute, and
// the schedule's own counters say what happened.
func TestScheduleCatchupAfterOutage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tport := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(tport)
	start := func() *proc {
		p := startProc(t, "temporal", []string{
			"SLUICE_DATA_DIR=" + filepath.Join(dir, "temporal"), "SLUICE_TEMPORAL_PORT=" + strconv.Itoa(tport), "SLUICE_UI_PORT=0",
		}, "temporal")
		require.Eventually(t, func() bool { return strings.Contains(p.output(), "Temporal is running") }, time.Minute, 100*time.Millisecond,
			"sluice temporal did not start")
		return p
	}
	server := start()

	cfg, err := config.Load(func(k string) string {
		return map[string]string{"SLUICE_SCHEDULE_CATCHUP_WINDOW": "10s"}[k]
	})
	require.NoError(t, err)
	ctx := context.Background()
	c, err := workers.Dial(ctx, cfg, addr, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer c.Close()
	adapter := workers.Temporal{Client: c, Namespace: cfg.TemporalNamespace, ScheduleCatchup: cfg.ScheduleCatchup}
	require.NoError(t, adapter.SyncSchedules(ctx, "outage", map[string]string{"minutely": "* * * * *"}, nil))
	handle := c.ScheduleClient().GetHandle(ctx, workflows.PeriodicScheduleID("outage", "minutely"))
	d, err := handle.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, d.Schedule.Policy.CatchupWindow)

	// Down from 5 s after a minute starts until 75 s later: the next
	// minute's fire falls inside the outage and is 15 s late when the
	// server is back, beyond the 10 s window.
	now := time.Now()
	down := now.Truncate(time.Minute).Add(time.Minute + 5*time.Second)
	if down.Sub(now) > 70*time.Second {
		down = down.Add(-time.Minute)
	}
	time.Sleep(time.Until(down))
	server.kill()
	time.Sleep(75 * time.Second)
	start()

	require.Eventually(t, func() bool {
		d, err = handle.Describe(ctx)
		return err == nil && d.Info.NumActionsMissedCatchupWindow >= 1
	}, time.Minute, time.Second, "the fire missed during the outage is counted as beyond the catch-up window: %+v", d.Info)
	for _, a := range d.Info.RecentActions {
		require.Less(t, a.ActualTime.Sub(a.ScheduleTime), 10*time.Second+5*time.Second,
			"no action ran far beyond the catch-up window: scheduled %s, ran %s", a.ScheduleTime, a.ActualTime)
	}
}

// TestScheduleSyncRightAfterCreate (N14): a schedule created moments ago is
// not yet in the (visibility-backed) schedule list; changing its cron then
// updates it instead of leaving the old one, and removing the job deletes
// it, found through the jobs the pipeline scheduled before.
func TestScheduleSyncRightAfterCreate(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{NoController: true})
	ctx := e.Context()
	adapter := workers.Temporal{Client: e.Client, Namespace: e.Namespace, ScheduleCatchup: time.Minute}
	handle := e.Client.ScheduleClient().GetHandle(ctx, workflows.PeriodicScheduleID("quick", "nightly"))
	require.NoError(t, adapter.SyncSchedules(ctx, "quick", map[string]string{"nightly": "0 1 * * *"}, nil))
	// At once, before visibility lists it: a new cron.
	require.NoError(t, adapter.SyncSchedules(ctx, "quick", map[string]string{"nightly": "0 2 * * *"}, []string{"nightly"}))
	require.Equal(t, 2, scheduleHour(t, handle), "the cron was updated")
	// Also without the previous jobs (a create that finds it exists updates).
	require.NoError(t, adapter.SyncSchedules(ctx, "quick", map[string]string{"nightly": "0 3 * * *"}, nil))
	require.Equal(t, 3, scheduleHour(t, handle))
	// Removed from the spec: deleted, listed or not.
	require.NoError(t, adapter.SyncSchedules(ctx, "quick", nil, []string{"nightly"}))
	_, err := handle.Describe(ctx)
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf)
}

// scheduleHour is the hour a daily schedule fires at.
func scheduleHour(t *testing.T, h client.ScheduleHandle) int {
	t.Helper()
	d, err := h.Describe(t.Context())
	require.NoError(t, err)
	spec := d.Schedule.Spec
	require.NotNil(t, spec)
	for _, c := range spec.Calendars {
		if len(c.Hour) > 0 {
			return c.Hour[0].Start
		}
	}
	for _, c := range spec.CronExpressions {
		var m, hr int
		if _, err := fmt.Sscanf(c, "%d %d", &m, &hr); err == nil {
			return hr
		}
	}
	t.Fatalf("no hour in %+v", spec)
	return -1
}
