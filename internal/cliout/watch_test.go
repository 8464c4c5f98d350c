package cliout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func runningEvent() Event {
	return Event{
		ID: "app/7", Status: "RUNNING", SHA: "0123456789abcdef", Start: t0.Add(-30 * time.Second),
		Trigger: Trigger{Kind: "commit", Branch: "main"},
		Jobs: []Job{
			{Name: "build", Status: "SUCCESS", Builds: []string{"app/build/7"}},
			{Name: "test", Status: "RUNNING", Builds: []string{"app/test/7"}},
			{Name: "lint", Status: "RUNNING", Builds: []string{"app/lint/7"}},
			{Name: "deploy", Status: "QUEUED", Builds: []string{"app/deploy/7"}},
		},
		Builds: []Build{
			{ID: "app/build/7", Job: "build", Status: "SUCCESS", Start: t0.Add(-30 * time.Second), End: t0.Add(-20 * time.Second)},
			{ID: "app/test/7", Job: "test", Status: "RUNNING", Executor: "local", Start: t0.Add(-10 * time.Second)},
			{ID: "app/lint/7", Job: "lint", Status: "RUNNING", Executor: "local", Start: t0.Add(-5 * time.Second)},
			{ID: "app/deploy/7", Job: "deploy", Status: "QUEUED", Reason: "waiting for a slot on queue default: 1/1 busy"},
		},
	}
}

func TestWatchRender(t *testing.T) {
	t.Parallel()
	v := Watch(runningEvent(), WatchOptions{Now: t0, Frame: 1, Typical: map[string]time.Duration{"test": 40 * time.Second}})
	want := []string{
		"event app/7  RUNNING  0123456  commit on main  30s",
		"JOB     STATUS   TIME  PROGRESS                    DETAIL",
		"build   SUCCESS  10s   [####################]",
		"test    RUNNING  10s   [#####---------------] 25%  on local",
		"lint    RUNNING  5.0s  [ ===                ]      on local",
		"deploy  QUEUED   -     [                    ]      waiting for a slot on queue default: 1/1 busy",
	}
	require.Equal(t, want, v.Lines)
}

func TestWatchFinishedAndEmpty(t *testing.T) {
	t.Parallel()
	ev := Event{
		ID: "app/8", Status: "FAILURE", Reason: "test FAILURE", Start: t0.Add(-time.Minute), End: t0,
		Jobs: []Job{{Name: "deploy", Status: "SKIPPED", Reason: "not run: requires test"}},
		Builds: []Build{{
			ID: "app/test/8", Job: "test", Status: "FAILURE", Reason: "step t exited 1",
			Start: t0.Add(-time.Minute), End: t0,
		}},
	}
	v := Watch(ev, WatchOptions{Now: t0.Add(time.Hour)})
	require.Equal(t, "event app/8  FAILURE  -  -  1m00s  (test FAILURE)", v.Lines[0])
	require.Contains(t, v.Lines[2], "deploy  SKIPPED  -      [                    ]  not run: requires test")
	require.Contains(t, v.Lines[3], "test    FAILURE  1m00s  [####################]  step t exited 1")

	empty := Watch(Event{ID: "app/9", Status: "RUNNING"}, WatchOptions{Now: t0})
	require.Len(t, empty.Lines, 3)
	require.True(t, strings.HasPrefix(empty.Lines[2], "(no builds yet)"))
}

func TestWatchTruncatesToWidth(t *testing.T) {
	t.Parallel()
	v := Watch(runningEvent(), WatchOptions{Now: t0, Width: 30})
	for _, l := range v.Lines {
		require.LessOrEqual(t, len([]rune(l)), 30, l)
	}
}

func TestWatchChanged(t *testing.T) {
	t.Parallel()
	base := runningEvent()
	prev := Watch(base, WatchOptions{Now: t0, Frame: 0})
	tests := []struct {
		name   string
		mutate func(ev *Event)
		later  time.Duration
		want   bool
	}{
		{name: "only the clock moved", later: 5 * time.Second, want: false},
		{name: "a status changed", mutate: func(ev *Event) { ev.Builds[1].Status = "SUCCESS" }, want: true},
		{name: "a reason changed", mutate: func(ev *Event) { ev.Builds[3].Reason = "waiting: 2 ahead" }, want: true},
		{name: "a build appeared", mutate: func(ev *Event) {
			ev.Builds = append(ev.Builds, Build{ID: "app/x/7", Job: "x", Status: "CREATED"})
		}, want: true},
		{name: "the event ended", mutate: func(ev *Event) { ev.Status = "SUCCESS" }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := runningEvent()
			ev.Builds = append([]Build(nil), ev.Builds...)
			if tt.mutate != nil {
				tt.mutate(&ev)
			}
			next := Watch(ev, WatchOptions{Now: t0.Add(tt.later), Frame: 3})
			require.Equal(t, tt.want, next.Changed(prev))
		})
	}
}

func TestRedraw(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		prev  int
		lines []string
		want  string
	}{
		{"first frame", 0, []string{"a", "b"}, "\x1b[2Ka\n\x1b[2Kb\n\x1b[J"},
		{"over a taller frame", 3, []string{"a"}, "\x1b[3A\r\x1b[2Ka\n\x1b[J"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			n, err := Redraw(&b, tt.prev, tt.lines)
			require.NoError(t, err)
			require.Equal(t, len(tt.lines), n)
			require.Equal(t, tt.want, b.String())
		})
	}
}
