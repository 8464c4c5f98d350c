package main

import (
	"strings"
	"testing"
	"time"
)

// keys are the key names of a figure's line, in order.
func keys(line string) []string {
	var out []string
	for _, f := range strings.Fields(line)[1:] {
		k, _, _ := strings.Cut(f, "=")
		out = append(out, k)
	}
	return out
}

// wantPrefix fails unless the line starts with name and then keys want, in
// order: other documents quote these lines, so new figures go after them.
func wantPrefix(t *testing.T, line, name string, want []string) {
	t.Helper()
	if !strings.HasPrefix(line, name+" ") {
		t.Fatalf("line %q does not start with %q", line, name)
	}
	got := keys(line)
	if len(got) < len(want) {
		t.Fatalf("line has keys %v, want them to start with %v", got, want)
	}
	for i, k := range want {
		if got[i] != k {
			t.Fatalf("key %d is %q, want %q (keys %v)", i, got[i], k, got)
		}
	}
}

func TestLatencyLineKeepsItsKeysFirst(t *testing.T) {
	ms := func(n int) []time.Duration { return []time.Duration{time.Duration(n) * time.Millisecond} }
	l := &latencyRun{
		lats: ms(200), dispatch: ms(100), noopLats: ms(10), comparableLats: ms(80),
		phases: [][]time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5)},
	}
	line := l.line(1)
	wantPrefix(t, line, "latency", []string{
		"p50_ms", "p99_ms", "baseline_p50_ms", "ratio_p50", "baseline_p99_ms", "events",
		"p50_event_ms", "p50_build_ms", "p50_grant_ms", "p50_claim_ms", "p50_step_ms",
	})
	for _, kv := range []string{"dispatch_p50_ms=100.0", "dispatch_ratio_p50=10.00", "comparable_p50_ms=80.0", "ratio_p50_comparable=2.50"} {
		if !strings.Contains(line, " "+kv) {
			t.Fatalf("line %q lacks %s", line, kv)
		}
	}
}

func TestThroughputLineKeepsItsKeysFirst(t *testing.T) {
	b := &bench{plan: planFor(true, 0, 0, "lease")}
	tr := &throughputRun{
		b: b, figure: "throughput_pipelines", n: 10, pipelines: throughputPipelines(2),
		sluiceRuns:     bursts{{runs: 10, wall: 10 * time.Second, cpu: 3 * time.Second, accept: []time.Duration{time.Millisecond}}},
		noopRuns:       bursts{{runs: 10, wall: time.Second, cpu: 300 * time.Millisecond}},
		comparableRuns: bursts{{runs: 10, wall: 4 * time.Second, cpu: time.Second}},
	}
	line := tr.line()
	wantPrefix(t, line, "throughput_pipelines", []string{
		"builds_per_s", "baseline_per_s", "ratio", "events", "executors", "slots", "cpu_ms_per_build", "baseline_cpu_ms_per_run",
	})
	for _, kv := range []string{"builds_per_s=1.00", "comparable_per_s=2.50", "ratio_comparable=0.40", "cpu_ratio_comparable=3.00", "accept_p99_ms=1.0", "pipelines=2", "rounds=1"} {
		if !strings.Contains(line, " "+kv) {
			t.Fatalf("line %q lacks %s", line, kv)
		}
	}
}
