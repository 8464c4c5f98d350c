package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReportListsSkippedTests: a skipped test is listed with its reason,
// a failure fails the report with its output, passes are only timed.
func TestReportListsSkippedTests(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: no chromium in PATH\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestA","Elapsed":0}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":1.5}`,
		`{"Action":"pass","Package":"p","Test":"TestC","Elapsed":2.5}`,
		`{"Action":"fail","Package":"p","Elapsed":4}`,
	}, "\n")
	var out strings.Builder
	err := run(strings.NewReader(in), &out, "unit", 10)
	require.EqualError(t, err, "unit: 2 failures")
	report := out.String()
	require.Contains(t, report, "-- unit: 1 skipped tests\n    p.TestA: a_test.go:9: no chromium in PATH\n")
	require.Contains(t, report, "--- FAIL: TestB (p)\n        b_test.go:3: boom\n")
	require.Contains(t, report, "      2.5s  p.TestC\n")
}
