package cliout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFinal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"SUCCESS", "failure", "ABORTED", "COLLAPSED", "SKIPPED"} {
		require.True(t, Final(s), s)
	}
	for _, s := range []string{"", "CREATED", "QUEUED", "BLOCKED", "FROZEN", "RUNNING"} {
		require.False(t, Final(s), s)
	}
}

func TestRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
		want []Row
	}{
		{
			name: "empty",
			ev:   Event{ID: "app/1"},
		},
		{
			name: "builds in job order, skipped job last in order",
			ev: Event{
				Jobs: []Job{
					{Name: "build", Status: "SUCCESS", Builds: []string{"app/build/1"}},
					{Name: "test", Status: "FAILURE", Builds: []string{"app/test/1"}},
					{Name: "deploy", Status: "SKIPPED", Reason: "not run: requires test, which ended FAILURE"},
				},
				Builds: []Build{
					{ID: "app/test/1", Job: "test", Status: "FAILURE", Reason: "step test exited 1"},
					{ID: "app/build/1", Job: "build", Status: "SUCCESS"},
				},
			},
			want: []Row{
				{Label: "build", Build: Build{ID: "app/build/1", Job: "build", Status: "SUCCESS"}},
				{Label: "test", Build: Build{ID: "app/test/1", Job: "test", Status: "FAILURE", Reason: "step test exited 1"}},
				{Label: "deploy", Build: Build{Job: "deploy", Status: "SKIPPED", Reason: "not run: requires test, which ended FAILURE"}},
			},
		},
		{
			name: "build not listed yet shows the job's status",
			ev: Event{
				Jobs: []Job{{Name: "lint", Status: "QUEUED", Reason: "waiting", Builds: []string{"app/lint/2"}}},
			},
			want: []Row{{Label: "lint", Build: Build{ID: "app/lint/2", Job: "lint", Status: "QUEUED", Reason: "waiting"}}},
		},
		{
			name: "lagging build status takes the job's final status",
			ev: Event{
				Jobs:   []Job{{Name: "lint", Status: "SUCCESS", Builds: []string{"app/lint/2"}}},
				Builds: []Build{{ID: "app/lint/2", Job: "lint", Status: "RUNNING", Reason: "step lint", Executor: "local"}},
			},
			want: []Row{{Label: "lint", Build: Build{ID: "app/lint/2", Job: "lint", Status: "SUCCESS", Executor: "local"}}},
		},
		{
			name: "matrix builds and builds the event does not name",
			ev: Event{
				Jobs: []Job{{Name: "test", Status: "RUNNING", Builds: []string{"app/test/3.1"}}},
				Builds: []Build{
					{ID: "app/other/3", Job: "other", Status: "QUEUED"},
					{ID: "app/test/3.2", Job: "test", Status: "RUNNING"},
					{ID: "app/test/3.1", Job: "test", Status: "SUCCESS"},
				},
			},
			want: []Row{
				{Label: "test.1", Build: Build{ID: "app/test/3.1", Job: "test", Status: "SUCCESS"}},
				{Label: "test.2", Build: Build{ID: "app/test/3.2", Job: "test", Status: "RUNNING"}},
				{Label: "other", Build: Build{ID: "app/other/3", Job: "other", Status: "QUEUED"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Rows(tt.ev))
		})
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ev       Event
		wantCode int
		wantSum  string
	}{
		{
			name: "success",
			ev:   Event{ID: "app/1", Status: "SUCCESS", Builds: []Build{{ID: "app/a/1", Job: "a", Status: "SUCCESS"}}},
		},
		{
			name: "success without builds",
			ev:   Event{ID: "app/1", Status: "SUCCESS", Reason: "no job starts on tag v1"},
		},
		{
			name: "failing builds with reasons, skipped jobs left out",
			ev: Event{
				ID: "app/2", Status: "FAILURE",
				Jobs: []Job{
					{Name: "a", Status: "SUCCESS", Builds: []string{"app/a/2"}},
					{Name: "b", Status: "FAILURE", Builds: []string{"app/b/2"}},
					{Name: "c", Status: "ABORTED", Reason: "cancelled", Builds: []string{"app/c/2"}},
					{Name: "d", Status: "SKIPPED", Reason: "not run: requires b"},
				},
				Builds: []Build{
					{ID: "app/a/2", Job: "a", Status: "SUCCESS"},
					{ID: "app/b/2", Job: "b", Status: "FAILURE", Reason: "step test\nexited 2"},
				},
			},
			wantCode: 1,
			wantSum:  "event app/2 FAILURE: app/b/2 FAILURE (step test exited 2); app/c/2 ABORTED (cancelled)",
		},
		{
			name:     "failure without builds says the event's reason",
			ev:       Event{ID: "app/3", Status: "FAILURE", Reason: "cannot read the pipeline's repository"},
			wantCode: 1,
			wantSum:  "event app/3 FAILURE: cannot read the pipeline's repository",
		},
		{
			name:     "collapsed build",
			ev:       Event{ID: "app/4", Status: "COLLAPSED", Builds: []Build{{ID: "app/a/4", Job: "a", Status: "COLLAPSED", Reason: "collapsed into build app/a/5"}}},
			wantCode: 1,
			wantSum:  "event app/4 COLLAPSED: app/a/4 COLLAPSED (collapsed into build app/a/5)",
		},
		{
			name:     "no reason at all",
			ev:       Event{ID: "app/5", Status: "ABORTED"},
			wantCode: 1,
			wantSum:  "event app/5 ABORTED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, sum := Outcome(tt.ev)
			require.Equal(t, tt.wantCode, code)
			require.Equal(t, tt.wantSum, sum)
		})
	}
}

func TestRowsKeepsTimes(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := Rows(Event{Builds: []Build{{ID: "p/j/1", Job: "j", Start: start}}})
	require.Len(t, rows, 1)
	require.Equal(t, start, rows[0].Start)
}
