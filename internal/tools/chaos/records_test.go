package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		records  string
		expected []string
		check    func(t *testing.T, v verdict)
	}{
		{
			name: "every build once",
			records: `p/a/1 1 start 100 e1
p/a/1 1 end 200 e1
p/b/1 1 start 300 e2
p/b/1 1 end 400 e2
`,
			expected: []string{"p/a/1", "p/b/1"},
			check: func(t *testing.T, v verdict) {
				require.True(t, v.ok())
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
			check: func(t *testing.T, v verdict) {
				require.False(t, v.ok())
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
			check: func(t *testing.T, v verdict) {
				require.True(t, v.ok())
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
			check: func(t *testing.T, v verdict) {
				require.False(t, v.ok())
				require.Equal(t, []string{"p/b/1"}, v.Lost)
				require.Equal(t, []string{"p/a/1: attempt 1 on e1, attempt 2 on e2"}, v.Double)
				require.Equal(t, []string{"p/c/9"}, v.Unexpected)
				require.Len(t, v.Overlaps, 1)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			recs, err := parseRecords(strings.NewReader(tt.records))
			require.NoError(t, err)
			tt.check(t, judge(recs, tt.expected))
		})
	}
}

func TestParseRecordsRejectsTornLines(t *testing.T) {
	t.Parallel()
	_, err := parseRecords(strings.NewReader("p/a/1 1 start 100 e1\np/a/1 1 en"))
	require.ErrorContains(t, err, "line 2")
}

func TestPipelineSpec(t *testing.T) {
	t.Parallel()
	chainSpec := pipelineSpec(chain, 0, "/tmp/rec")
	require.Contains(t, chainSpec, "requires: [a]")
	require.Contains(t, chainSpec, "requires: [b]")
	require.Contains(t, chainSpec, "screwdriver.cd/collapseBuilds: false")
	require.Contains(t, chainSpec, "screwdriver.cd/blockedBySameJob: false")
	fanSpec := pipelineSpec(fan, 1, "/tmp/rec")
	require.Equal(t, 2, strings.Count(fanSpec, "requires: [a]"))
	require.Contains(t, fanSpec, `$SD_BUILD_ID $SD_BUILD_ATTEMPT start`)
}
