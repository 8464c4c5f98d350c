package cliout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"zero", 0, "0.0s"},
		{"negative", -time.Second, "0.0s"},
		{"millis", 430 * time.Millisecond, "0.4s"},
		{"truncates tenths", 9990 * time.Millisecond, "9.9s"},
		{"ten seconds", 10 * time.Second, "10s"},
		{"under a minute", 59*time.Second + 999*time.Millisecond, "59s"},
		{"minutes", 3*time.Minute + 4*time.Second, "3m04s"},
		{"hours", 2*time.Hour + 5*time.Minute + 59*time.Second, "2h05m"},
		{"days", 3*24*time.Hour + 4*time.Hour + 30*time.Minute, "3d04h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Duration(tt.d))
		})
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"zero", time.Time{}, "never"},
		{"now", t0, "just now"},
		{"sub-second", t0.Add(-500 * time.Millisecond), "just now"},
		{"seconds", t0.Add(-5 * time.Second), "5s ago"},
		{"minutes", t0.Add(-3*time.Minute - 50*time.Second), "3m ago"},
		{"hours", t0.Add(-2 * time.Hour), "2h ago"},
		{"days", t0.Add(-50 * time.Hour), "2d ago"},
		{"future", t0.Add(90 * time.Second), "in 1m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Ago(tt.t, t0))
		})
	}
	require.Equal(t, Dash, AgoOr(time.Time{}, t0))
}

func TestElapsed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		start, end time.Time
		want       string
	}{
		{"never started", time.Time{}, time.Time{}, Dash},
		{"running", t0.Add(-90 * time.Second), time.Time{}, "1m30s"},
		{"ended", t0.Add(-time.Hour), t0.Add(-time.Hour + 2500*time.Millisecond), "2.5s"},
		{"end before start", t0, t0.Add(-time.Second), "0.0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ElapsedText(tt.start, tt.end, t0))
		})
	}
}

func TestSmallFormatters(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SUCCESS", Status("success"))
	require.Equal(t, Dash, Status(""))
	require.Equal(t, "abcdef1", ShortSHA("abcdef1234567890"))
	require.Equal(t, "abc", ShortSHA("abc"))
	require.Equal(t, Dash, ShortSHA(""))
	require.Equal(t, "a b c", OneLine("a\n b\tc "))
	require.Equal(t, "héll…", Truncate("héllo world", 5))
	require.Equal(t, "hello", Truncate("hello", 5))
	require.Equal(t, "hello", Truncate("hello", 0))
	require.Equal(t, "a=1,b=2", Pairs(map[string]int{"b": 2, "a": 1}))
	require.Equal(t, Dash, Pairs(map[string]string{}))
	require.Equal(t, Dash, List(nil))
	require.Equal(t, "x,y", List([]string{"x", "y"}))
	require.Equal(t, "2026-05-01T11:59:00Z (1m ago)", Timestamp(t0.Add(-time.Minute), t0))
	require.Equal(t, Dash, Timestamp(time.Time{}, t0))
	require.Equal(t, "no attempts", Plural(0, "attempt"))
	require.Equal(t, "1 attempt", Plural(1, "attempt"))
	require.Equal(t, "3 attempts", Plural(3, "attempt"))
	require.Equal(t, map[string]int{"gpu": 2}, NonZero(map[string]int{"default": 0, "gpu": 2}))
	require.Nil(t, NonZero(map[string]int{"default": 0}))
}

func TestJoinOr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"none", nil, ""},
		{"one", []string{"a"}, "a"},
		{"two", []string{"a", "b"}, "a or b"},
		{"many", []string{"a", "b", "c"}, "a, b or c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, JoinOr(tt.in))
		})
	}
}

func TestTriggerString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Trigger
		want string
	}{
		{"empty", Trigger{}, Dash},
		{"commit", Trigger{Kind: "commit", Branch: "main"}, "commit on main"},
		{"pr", Trigger{Kind: "pr", PR: 12, Ref: "feature", Branch: "main"}, "pr #12 (feature → main)"},
		{"pr without head", Trigger{Kind: "pr-closed", PR: 3, Branch: "main"}, "pr-closed #3 (→ main)"},
		{"tag", Trigger{Kind: "tag", Ref: "v1.2"}, "tag v1.2"},
		{"remote", Trigger{Kind: "remote", Remote: "sd@lib:publish"}, "remote sd@lib:publish"},
		{"manual by", Trigger{Kind: "manual", Sender: "ann"}, "manual by ann"},
		{"periodic", Trigger{Kind: "periodic", Sender: "schedule"}, "periodic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.in.String())
		})
	}
}
