package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseFreezeWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		expr    string
		wantErr string
	}{
		{name: "day of week", expr: "* * ? * 1"},
		{name: "day of month", expr: "0-59 0-23 * 1 ?"},
		{name: "names", expr: "* 9-17 ? * MON-FRI"},
		{name: "both question marks", expr: "* * ? DEC ?"},
		{name: "no question mark", expr: "* * * * *", wantErr: "must be \"?\""},
		{name: "six fields", expr: "* * * ? * *", wantErr: "exactly 5 fields"},
		{name: "out of range", expr: "* 24 ? * *", wantErr: "above maximum"},
		{name: "garbage", expr: "a b ? c d", wantErr: "failed to parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := ParseFreezeWindow(tt.expr)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.expr, w.Expr)
		})
	}
}

func TestFreezeWindows(t *testing.T) {
	t.Parallel()
	// 2026-11-23 is a Monday.
	tests := []struct {
		name     string
		windows  []string
		at       string
		frozen   bool
		wantOpen string // "" means "at" itself is open
		wantErr  error
	}{
		{name: "no windows", windows: nil, at: "2026-11-23 10:00"},
		{name: "outside hour range", windows: []string{"* 0-6 ? * *"}, at: "2026-11-23 07:00"},
		{name: "hour range", windows: []string{"* 0-6 ? * *"}, at: "2026-11-23 03:15", frozen: true, wantOpen: "2026-11-23 07:00"},
		{name: "minute range", windows: []string{"0-29 * ? * *"}, at: "2026-11-23 10:05", frozen: true, wantOpen: "2026-11-23 10:30"},
		{name: "minute list", windows: []string{"0,1,2 * ? * *"}, at: "2026-11-23 10:01", frozen: true, wantOpen: "2026-11-23 10:03"},
		{name: "minute step", windows: []string{"*/2 * ? * *"}, at: "2026-11-23 10:04", frozen: true, wantOpen: "2026-11-23 10:05"},
		{name: "hour step", windows: []string{"* */2 ? * *"}, at: "2026-11-23 10:59", frozen: true, wantOpen: "2026-11-23 11:00"},
		{name: "day of week whole Monday", windows: []string{"* * ? * 1"}, at: "2026-11-23 12:00", frozen: true, wantOpen: "2026-11-24 00:00"},
		{name: "weekend by names", windows: []string{"* * ? * SAT,SUN"}, at: "2026-11-28 09:00", frozen: true, wantOpen: "2026-11-30 00:00"},
		{name: "weekday range", windows: []string{"* * ? * MON-FRI"}, at: "2026-11-25 09:00", frozen: true, wantOpen: "2026-11-28 00:00"},
		{name: "month", windows: []string{"* * ? 12 *"}, at: "2026-12-24 18:00", frozen: true, wantOpen: "2027-01-01 00:00"},
		{name: "month by name, not inside", windows: []string{"* * ? DEC *"}, at: "2026-11-30 23:59"},
		{name: "day of month range", windows: []string{"* * 24-26 12 ?"}, at: "2026-12-25 08:00", frozen: true, wantOpen: "2026-12-27 00:00"},
		{name: "fixture window: every minute of January", windows: []string{"0-59 0-23 * 1 ?"}, at: "2027-01-31 23:59", frozen: true, wantOpen: "2027-02-01 00:00"},
		{name: "business hours on weekdays", windows: []string{"* 9-16 ? * MON-FRI"}, at: "2026-11-27 16:30", frozen: true, wantOpen: "2026-11-27 17:00"},
		{
			name:    "overlapping windows chain",
			windows: []string{"* 0-6 ? * *", "* 5-9 ? * *", "0-29 10 ? * *"},
			at:      "2026-11-23 01:00", frozen: true, wantOpen: "2026-11-23 10:30",
		},
		{
			name:    "adjacent minute windows split across windows",
			windows: []string{"0-29 * ? * *", "30-59 * ? * MON"},
			at:      "2026-11-23 22:10", frozen: true, wantOpen: "2026-11-24 00:30",
		},
		{
			name:    "seconds inside a free minute are kept",
			windows: []string{"0 10 ? * *"},
			at:      "2026-11-23 10:01", frozen: false,
		},
		{name: "all time", windows: []string{"* * ? * *"}, at: "2026-11-23 10:00", frozen: true, wantErr: ErrAlwaysFrozen},
		{
			name:    "all time by two windows",
			windows: []string{"* * ? * 0-3", "* * ? * 4-6"},
			at:      "2026-11-23 10:00", frozen: true, wantErr: ErrAlwaysFrozen,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws, err := ParseFreezeWindows(tt.windows)
			require.NoError(t, err)
			at := utc(tt.at)
			require.Equal(t, tt.frozen, ws.Contains(at))
			got, err := ws.NextOpen(at)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.wantOpen == "" {
				require.Equal(t, at, got)
				return
			}
			require.Equal(t, utc(tt.wantOpen), got)
			require.False(t, ws.Contains(got))
			require.True(t, ws.Contains(got.Add(-time.Minute)), "the minute before is frozen")
		})
	}
}

func TestNextOpenKeepsSecondsAndConvertsToUTC(t *testing.T) {
	t.Parallel()
	ws, err := ParseFreezeWindows([]string{"* 0-6 ? * *"})
	require.NoError(t, err)
	tokyo := time.FixedZone("JST", 9*3600)
	at := time.Date(2026, 11, 23, 12, 30, 45, 0, tokyo) // 03:30:45 UTC
	got, err := ws.NextOpen(at)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC), got)

	free := time.Date(2026, 11, 23, 8, 0, 45, 0, time.UTC)
	got, err = ws.NextOpen(free)
	require.NoError(t, err)
	require.Equal(t, free, got)

	got, err = NextUnfrozen([]string{"* 0-6 ? * *"}, at)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC), got)
	_, err = NextUnfrozen([]string{"bad"}, at)
	require.Error(t, err)
}

func TestFreezeWindowAllTime(t *testing.T) {
	t.Parallel()
	all, err := ParseFreezeWindow("* * ? * *")
	require.NoError(t, err)
	require.True(t, all.AllTime())
	some, err := ParseFreezeWindow("* * ? * 1")
	require.NoError(t, err)
	require.False(t, some.AllTime())
}
