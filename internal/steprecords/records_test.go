package steprecords

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		records  string
		expected []string
		check    func(t *testing.T, v Verdict)
	}{
		{
			name: "every build once",
			records: `p/a/1 1 start 100 e1
p/a/1 1 end 200 e1
p/b/1 1 start 300 e2
p/b/1 1 end 400 e2
`,
			expected: []string{"p/a/1", "p/b/1"},
			check: func(t *testing.T, v Verdict) {
				require.True(t, v.OK())
				require.Equal(t, 2, v.Completed)
				require.Zero(t, v.Interrupted)
				require.Zero(t, v.Retried)
			},
		},
		{
			name: "a lost attempt writes after the build was dispatched again",
			records: `p/a/1 1 start 100 e1
p/a/1 2 start 900 e2
p/a/1 1 end 950 e1
p/a/1 2 end 1000 e2
`,
			expected: []string{"p/a/1"},
			check: func(t *testing.T, v Verdict) {
				require.False(t, v.OK())
				require.Len(t, v.LateWrites, 1)
				require.Contains(t, v.LateWrites[0], `p/a/1: attempt 1 on e1 wrote "end"`)
			},
		},
		{
			name: "interrupted then completed elsewhere",
			records: `p/a/1 1 start 100 e1
p/a/1 2 start 900 e2
p/a/1 2 end 1000 e2
`,
			expected: []string{"p/a/1"},
			check: func(t *testing.T, v Verdict) {
				require.True(t, v.OK())
				require.Equal(t, 1, v.Interrupted)
				require.Equal(t, 1, v.Retried)
			},
		},
		{
			name: "lost, double, unexpected and overlapping",
			records: `p/a/1 1 start 100 e1
p/a/1 1 end 500 e1
p/a/1 2 start 400 e2
p/a/1 2 end 800 e2
p/c/9 1 start 100 e1
p/b/1 1 start 100 e3
`,
			expected: []string{"p/a/1", "p/b/1"},
			check: func(t *testing.T, v Verdict) {
				require.False(t, v.OK())
				require.Equal(t, []string{"p/b/1"}, v.Lost)
				require.Len(t, v.Double, 1)
				require.Contains(t, v.Double[0], "p/a/1: attempt 1 on e1, attempt 2 on e2 (e1 was not killed")
				require.Equal(t, []string{"p/c/9"}, v.Unexpected)
				require.Len(t, v.Overlaps, 1)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			recs, err := Parse(strings.NewReader(tt.records))
			require.NoError(t, err)
			tt.check(t, Judge(recs, tt.expected, Evidence{}))
		})
	}
}

func TestParseRecordsRejectsTornLines(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("p/a/1 1 start 100 e1\np/a/1 1 en"))
	require.ErrorContains(t, err, "line 2")
}

// The documented window, and what lies outside it.
func TestJudgeExcusesOnlyTheDocumentedWindow(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	recs := func(firstEnd int) string {
		return "p/a/1 1 start 100000000 e1\np/a/1 1 end " + strconv.Itoa(firstEnd*1e6) + " e1\n" +
			"p/a/1 2 start 30000000000 e2\np/a/1 2 end 30100000000 e2\n"
	}
	tests := []struct {
		name    string
		records string
		ev      Evidence
		excused bool
		why     string
	}{
		{"killed right after the end, before saving", recs(1000), Evidence{Kills: map[string][]time.Time{"e1": {at(1004)}}}, true, "SIGKILLed 4ms after attempt 1's end, before it saved"},
		{"the end record a moment after the kill", recs(1000), Evidence{Kills: map[string][]time.Time{"e1": {at(950)}}}, true, "SIGKILLed -50ms after"},
		{"saved, not delivered", recs(1000), Evidence{Kills: map[string][]time.Time{"e1": {at(4000)}}, Unsent: map[string]time.Time{Key("p/a/1", 1): at(1003)}}, true, "saved the result 3ms after the end and not delivered it"},
		{"killed long after the end with nothing unsent", recs(1000), Evidence{Kills: map[string][]time.Time{"e1": {at(4000)}}}, false, "no undelivered result"},
		{"never killed", recs(1000), Evidence{}, false, "e1 was not killed"},
		{"killed before the step ended", recs(1000), Evidence{Kills: map[string][]time.Time{"e1": {at(500)}}}, false, "e1 was not killed after"},
		{"the same attempt twice", "p/a/1 1 start 1 e1\np/a/1 1 end 2 e1\np/a/1 1 start 3 e2\np/a/1 1 end 4 e2\n", Evidence{Kills: map[string][]time.Time{"e1": {time.Unix(0, 3)}}}, false, "the same attempt twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs, err := Parse(strings.NewReader(tt.records))
			require.NoError(t, err)
			v := Judge(rs, []string{"p/a/1"}, tt.ev)
			if tt.excused {
				require.Empty(t, v.Double)
				require.Len(t, v.Excused, 1)
				require.Contains(t, v.Excused[0], tt.why)
				require.True(t, v.OK())
			} else {
				require.Empty(t, v.Excused)
				require.Len(t, v.Double, 1)
				require.Contains(t, v.Double[0], tt.why)
				require.False(t, v.OK())
			}
		})
	}
}

func TestCommandWritesParsableRecords(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/records"
	cmd := exec.Command("sh", "-c", Command(file, "true"))
	cmd.Env = append(os.Environ(), "SD_BUILD_ID=p/a/7", "SD_BUILD_ATTEMPT=2", "SD_EXECUTOR=e9")
	require.NoError(t, cmd.Run())
	recs, err := ParseFile(file)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, Record{Build: "p/a/7", Attempt: 2, Kind: "start", At: recs[0].At, Executor: "e9"}, recs[0])
	require.Equal(t, "end", recs[1].Kind)
	none, err := ParseFile(file + ".missing")
	require.NoError(t, err)
	require.Empty(t, none)
}
