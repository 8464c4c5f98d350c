package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/workflows"
)

// TestAccountOccurrences: every due time is accounted for: the event a
// fire started, or skipped and why (frozen, the overlap policy, paused),
// or missed with no record; a frozen and an overlapping occurrence are
// both listed as skipped with their reasons.
func TestAccountOccurrences(t *testing.T) {
	t.Parallel()
	at := func(h, m int) time.Time { return time.Date(2026, 11, 23, h, m, 0, 0, time.UTC) }
	done := func(ev string, s workflows.Status, why string) workflows.PeriodicResult {
		return workflows.PeriodicResult{Done: workflows.PeriodicDone{Event: ev, Status: s, Reason: why}}
	}
	due := []time.Time{at(8, 0), at(9, 0), at(10, 0), at(11, 0), at(12, 0), at(13, 0), at(14, 0), at(15, 0)}
	runs := []periodicRun{
		// 09:00 ran; 10:00 was refused by the pipeline.
		{scheduled: at(9, 0), start: at(9, 0), close: at(9, 5), result: done("p/1", workflows.StatusSuccess, "ran"), resultKnown: true},
		{scheduled: at(10, 0), start: at(10, 0), close: at(10, 0), result: done("", "", "pipeline p was deleted"), resultKnown: true},
		// 11:00's build waited in a freeze window until it was cancelled
		// at 12:40: 12:00 was buffered behind it, 13:00 skipped.
		{scheduled: at(11, 0), start: at(11, 0), close: at(12, 40), result: done("p/2", workflows.StatusAborted, "cancelled while frozen"), resultKnown: true},
		{scheduled: at(12, 0), start: at(12, 40), close: at(12, 45), result: done("p/3", workflows.StatusSuccess, ""), resultKnown: true},
		// 15:00 is paused; 14:00 still runs.
		{scheduled: at(14, 0), start: at(14, 0), running: true},
	}
	got := accountOccurrences(due, runs, at(14, 30))
	require.Len(t, got, len(due))
	want := []Occurrence{
		{Due: at(15, 0), Outcome: OccurrenceSkipped, Reason: "paused: the schedule was paused at 2026-11-23T14:30:00Z"},
		{Due: at(14, 0), Outcome: OccurrenceRunning, Reason: "started 2026-11-23T14:00:00Z; it waits for its event's job to end"},
		{Due: at(13, 0), Outcome: OccurrenceMissed, Reason: "no run and no record: the server was down at the due time and came back after the catch-up window"},
		{Due: at(12, 0), Outcome: OccurrenceStarted, Event: "p/3", Status: workflows.StatusSuccess},
		{Due: at(11, 0), Outcome: OccurrenceSkipped, Event: "p/2", Status: workflows.StatusAborted, Reason: "frozen: cancelled while frozen"},
		{Due: at(10, 0), Outcome: OccurrenceSkipped, Reason: "the pipeline started no event: pipeline p was deleted"},
		{Due: at(9, 0), Outcome: OccurrenceStarted, Event: "p/1", Status: workflows.StatusSuccess, Reason: "ran"},
		{Due: at(8, 0), Outcome: OccurrenceMissed, Reason: "no run and no record: the server was down at the due time and came back after the catch-up window"},
	}
	// Had the frozen 11:00 run still gone at 13:00 (12:00 buffered behind
	// it), 13:00 would be skipped by the overlap policy.
	require.Equal(t, want, got)
	runs[2].close = at(13, 10)
	runs[3].start, runs[3].close = at(13, 10), at(13, 15)
	got = accountOccurrences(due, runs, time.Time{})
	require.Equal(t, Occurrence{
		Due: at(13, 0), Outcome: OccurrenceSkipped,
		Reason: "overlap policy: the fire due 2026-11-23T11:00:00Z was still running (one later fire waits, the rest are skipped)",
	}, got[2])
	require.Equal(t, Occurrence{
		Due: at(15, 0), Outcome: OccurrenceSkipped,
		Reason: "overlap policy: the fire due 2026-11-23T14:00:00Z was still running (one later fire waits, the rest are skipped)",
	}, got[0],
		"not paused: 15:00 is skipped behind the 14:00 run that still goes")
}

func TestDueTimes(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	got, err := dueTimes("17 3 * * *", from, from.Add(72*time.Hour), 2)
	require.NoError(t, err)
	require.Equal(t, []time.Time{time.Date(2026, 11, 24, 3, 17, 0, 0, time.UTC), time.Date(2026, 11, 25, 3, 17, 0, 0, time.UTC)}, got, "the last 2 of the 3 in the window")
	_, err = dueTimes("nonsense", from, from, 2)
	require.ErrorContains(t, err, `cron "nonsense"`)
}
