package api

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseListTime(t *testing.T) {
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"2030-01-02T03:04:05Z": time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		"2030-01-02T03:04":     time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC),
		"2030-01-02":           time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC),
		"2h":                   now.Add(-2 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
	} {
		got, err := ParseListTime("since", in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %s, want %s", in, got, want)
	}
	for _, bad := range []string{"yesterday", "-2h", "0d", "1.5d", "07d", "2030-13-01"} {
		_, err := ParseListTime("since", bad, now)
		require.ErrorIs(t, err, ErrInvalid, bad)
		require.Contains(t, err.Error(), "since")
	}
}

func TestNarrowQuery(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	q, err := narrow([]string{"x"}, "main", "exec-1", since, since.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{
		"x", "SluiceBranch = 'main'", "SluiceExecutor = 'exec-1'",
		"StartTime >= '2030-01-01T00:00:00Z'", "StartTime < '2030-01-01T01:00:00Z'",
	}, q)
	q, err = narrow(nil, "it's", "", time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, []string{"SluiceBranch = 'its'"}, q, "a quote cannot leave the string")
	_, err = narrow(nil, "", "", since, since)
	require.ErrorIs(t, err, ErrInvalid, "an empty time range")
}

func TestEventQuery(t *testing.T) {
	f, err := eventQuery(url.Values{"branch": {"main"}, "pr": {"7"}, "trigger": {"PR"}, "page": {"abc"}}, 10)
	require.NoError(t, err)
	require.Equal(t, EventFilter{Branch: "main", PR: 7, Trigger: "pr", Page: "abc", Limit: 10}, f)
	for _, bad := range []url.Values{{"pr": {"x"}}, {"pr": {"0"}}, {"nope": {"1"}}} {
		_, err := eventQuery(bad, 10)
		require.ErrorIs(t, err, ErrInvalid, "%v", bad)
	}
}
