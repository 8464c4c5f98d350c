package main

import (
	"slices"
	"time"
)

// Comparisons between sluice and its baselines run on the same server, in
// the same minutes: the arms of a comparison take turns so that a machine
// that speeds up or slows down during a figure (other tenants, thermal
// limits, a database that grows) moves every arm alike.

// armOrder is the order in which arms run in round r: forward in even
// rounds, backward in odd ones (A B C, C B A, A B C, ...). Over each pair of
// rounds every arm has the same mean position, so a drift that is linear in
// time is shared equally; a fixed A-first order would hand A the earlier
// minutes every round.
func armOrder(round, arms int) []int {
	out := make([]int, arms)
	for i := range out {
		out[i] = i
	}
	if round%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// burst is one arm's run of many builds (or bare runs) started at once.
type burst struct {
	runs int
	// wall is the first start → the last run's close.
	wall time.Duration
	// cpu is the stack's CPU from the first start until every run had
	// ended, read before the harness polls visibility for close times.
	cpu time.Duration
	// accept holds how long the API took to answer each start (sluice
	// only; a bare start is a direct gRPC call).
	accept []time.Duration
}

// bursts are one arm's bursts over the rounds of a comparison.
type bursts []burst

// rate is runs per second over every round: total runs / total wall time.
func (bs bursts) rate() float64 {
	runs, wall := 0, time.Duration(0)
	for _, b := range bs {
		runs += b.runs
		wall += b.wall
	}
	if wall <= 0 {
		return 0
	}
	return float64(runs) / wall.Seconds()
}

// cpuPerRun is the CPU per run over every round.
func (bs bursts) cpuPerRun() time.Duration {
	runs, cpu := 0, time.Duration(0)
	for _, b := range bs {
		runs += b.runs
		cpu += b.cpu
	}
	if runs == 0 {
		return 0
	}
	return cpu / time.Duration(runs)
}

// accepts are the API's answer times over every round.
func (bs bursts) accepts() []time.Duration {
	var out []time.Duration
	for _, b := range bs {
		out = append(out, b.accept...)
	}
	return out
}

// roundRatios is a's rate over b's, round by round (a and b ran in the
// same rounds); their spread shows how much the ratio itself moves.
func roundRatios(a, b bursts) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i, x := range a[:n] {
		ra, rb := bursts{x}.rate(), bursts{b[i]}.rate()
		if rb > 0 {
			out = append(out, ra/rb)
		}
	}
	return out
}

// ratio is a/b, 0 when b is 0 (a baseline that measured nothing).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// durRatio is a/b for durations, 0 when b is 0.
func durRatio(a, b time.Duration) float64 { return ratio(float64(a), float64(b)) }

// spread is the smallest and largest of xs (0, 0 for none).
func spread(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}
