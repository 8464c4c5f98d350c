package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStringHash(t *testing.T) {
	t.Parallel()
	// Values of the npm "string-hash" algorithm, evaluated with JavaScript numbers.
	tests := []struct {
		in   string
		want uint32
	}{
		{"", 5381},
		{"1", 177556},
		{"42", 5859395},
		{"123", 193361109},
		{"sluice/main", 2078538244},
		{"my-org/repo:main/nightly", 3442908182},
		{"日本語", 160570738},
		{"a😀b", 2104677531}, // surrogate pair: hashed as two UTF-16 units
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, StringHash(tt.in))
		})
	}
}

func TestExpandCron(t *testing.T) {
	t.Parallel()
	// Screwdriver's own cron tests use job id "123": minutes H -> 9, hours H -> 21,
	// H(0-5) -> 3 (string-hash("123") = 193361109).
	tests := []struct {
		name    string
		expr    string
		seed    string
		want    string
		wantErr string
	}{
		{name: "H minute", expr: "H * * * *", seed: "123", want: "9 * * * *"},
		{name: "H step in hours", expr: "* H/2 * * *", seed: "123", want: "9 21/2 * * *"},
		{name: "H range in hours", expr: "* H(0-5) * * *", seed: "123", want: "9 3 * * *"},
		{name: "minute forced to H", expr: "0 4 * * *", seed: "123", want: "9 4 * * *"},
		{name: "every field", expr: "H H H H H", seed: "123", want: "9 21 5 10 4"},
		{name: "lists keep other values", expr: "H 1,H * * 1-5", seed: "123", want: "9 1,21 * * 1-5"},
		{name: "sluice seed", expr: "H H * * *", seed: PeriodicSeed("sluice", "main"), want: "4 4 * * *"},
		{name: "question mark", expr: "H 3 ? * MON", seed: "1", want: "16 3 ? * MON"},
		{name: "extra spaces", expr: "  H   H * * *  ", seed: "42", want: "35 11 * * *"},
		{name: "six fields", expr: "1 2 3 4 5 6", seed: "123", wantErr: "1 2 3 4 5 6 does not have exactly 5 fields"},
		{name: "four fields", expr: "1 2 3 4", seed: "123", wantErr: "does not have exactly 5 fields"},
		{name: "range outside field", expr: "H H(0-30) * * *", seed: "123", wantErr: "H(0-30) has an invalid range, expected range 0-23"},
		{name: "reversed range", expr: "H H(5-1) * * *", seed: "123", wantErr: "invalid range"},
		{name: "bad value", expr: "H 25 * * *", seed: "123", wantErr: "above maximum"},
		{name: "garbage", expr: "H x * * *", seed: "123", wantErr: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ExpandCron(tt.expr, tt.seed)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPeriodicSeed(t *testing.T) {
	t.Parallel()
	require.Equal(t, "org/repo:main/nightly", PeriodicSeed("org/repo:main", "nightly"))
	require.Equal(t, "nightly", PeriodicSeed("", "nightly"))
	spec, err := ParseWithOptions([]byte(sharedHeaderSpaces+`
jobs:
    nightly:
        annotations:
            screwdriver.cd/buildPeriodically: H H * * *
`), Options{Pipeline: "sluice"})
	require.NoError(t, err)
	require.Equal(t, "H H * * *", spec.Jobs["nightly"].Settings.BuildPeriodically)
	want, err := ExpandCron("H H * * *", "sluice/nightly")
	require.NoError(t, err)
	require.Equal(t, want, spec.Jobs["nightly"].Settings.PeriodicCron)
}

const sharedHeaderSpaces = `
shared:
    image: node:20
    steps:
        - run: make
`

// TestScheduleCrons: the Temporal cron expressions fire at exactly the times
// the classic expression fires (checked over a year with robfig/cron, whose
// day semantics equal Temporal's AND whenever one day field is "*", which the
// translation guarantees), and contain no "?".
func TestScheduleCrons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want []string
	}{
		{"17 3 ? * MON", []string{"17 3 * * MON"}},
		{"17 3 * * *", []string{"17 3 * * *"}},
		{"17 3 1 * ?", []string{"17 3 1 * *"}},
		{"5 4 1,15 * MON", []string{"5 4 1,15 * *", "5 4 * * MON"}},
		{"5 4 */2 * 1-5", []string{"5 4 */2 * *", "5 4 * * 1-5"}},
		{"5 4 *,3 * 1-5", []string{"5 4 *,3 * 1-5"}},
		{"0 */6 13 * FRI", []string{"0 */6 13 * *", "0 */6 * * FRI"}},
	}
	from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	until := from.AddDate(1, 0, 0)
	fires := func(t *testing.T, expr string) map[time.Time]bool {
		sched, err := cronParser.Parse(expr)
		require.NoError(t, err, expr)
		got := map[time.Time]bool{}
		for at := sched.Next(from); at.Before(until); at = sched.Next(at) {
			got[at] = true
		}
		return got
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			got := ScheduleCrons(tt.expr)
			require.Equal(t, tt.want, got)
			union := map[time.Time]bool{}
			for _, e := range got {
				require.NotContains(t, e, "?")
				for at := range fires(t, e) {
					union[at] = true
				}
			}
			want := fires(t, tt.expr)
			require.NotEmpty(t, want)
			require.Equal(t, want, union)
		})
	}
}
