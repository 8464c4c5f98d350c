package main

import (
	"slices"
	"testing"
	"time"
)

func TestArmOrderAlternatesDirection(t *testing.T) {
	var got [][]int
	for r := range 4 {
		got = append(got, armOrder(r, 3))
	}
	want := [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}, {2, 1, 0}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("round %d: order %v, want %v", i, got[i], want[i])
		}
	}
}

// Over each pair of rounds every arm has the same mean position, so a
// linear drift is shared equally.
func TestArmOrderBalancesPositions(t *testing.T) {
	for _, arms := range []int{2, 3, 5} {
		sums := make([]int, arms)
		for r := range 2 {
			for pos, a := range armOrder(r, arms) {
				sums[a] += pos
			}
		}
		for a, s := range sums {
			if s != sums[0] {
				t.Fatalf("%d arms: arm %d has position sum %d, arm 0 has %d", arms, a, s, sums[0])
			}
		}
	}
}

func TestArmOrderRunsEveryArmOnce(t *testing.T) {
	for r := range 3 {
		got := armOrder(r, 4)
		slices.Sort(got)
		if !slices.Equal(got, []int{0, 1, 2, 3}) {
			t.Fatalf("round %d: arms %v, want each of 0..3 once", r, got)
		}
	}
}

func TestBurstsAggregateOverRounds(t *testing.T) {
	bs := bursts{
		{runs: 10, wall: 2 * time.Second, cpu: 500 * time.Millisecond, accept: []time.Duration{1, 2}},
		{runs: 30, wall: 3 * time.Second, cpu: 1500 * time.Millisecond, accept: []time.Duration{3}},
	}
	// 40 runs in 5 s, not the mean of the rounds' rates (5 and 10 per s).
	if got := bs.rate(); got != 8 {
		t.Fatalf("rate %v, want 8", got)
	}
	if got := bs.cpuPerRun(); got != 50*time.Millisecond {
		t.Fatalf("cpuPerRun %v, want 50ms", got)
	}
	if got := bs.accepts(); !slices.Equal(got, []time.Duration{1, 2, 3}) {
		t.Fatalf("accepts %v, want [1 2 3]", got)
	}
}

func TestBurstsEmpty(t *testing.T) {
	var bs bursts
	if bs.rate() != 0 || bs.cpuPerRun() != 0 || len(bs.accepts()) != 0 {
		t.Fatalf("empty bursts: rate %v cpu %v accepts %v, want zeros", bs.rate(), bs.cpuPerRun(), bs.accepts())
	}
}

func TestRoundRatiosPairRoundByRound(t *testing.T) {
	a := bursts{{runs: 10, wall: time.Second}, {runs: 10, wall: 2 * time.Second}}
	b := bursts{{runs: 20, wall: time.Second}, {runs: 10, wall: time.Second}, {runs: 1, wall: time.Second}}
	got := roundRatios(a, b)
	if !slices.Equal(got, []float64{0.5, 0.5}) {
		t.Fatalf("ratios %v, want [0.5 0.5] (two rounds in common)", got)
	}
	lo, hi := spread([]float64{0.4, 0.2, 0.3})
	if lo != 0.2 || hi != 0.4 {
		t.Fatalf("spread %v-%v, want 0.2-0.4", lo, hi)
	}
	if lo, hi := spread(nil); lo != 0 || hi != 0 {
		t.Fatalf("spread of nothing %v-%v, want 0-0", lo, hi)
	}
}

func TestRatioOfNothingIsZero(t *testing.T) {
	if ratio(3, 0) != 0 || durRatio(time.Second, 0) != 0 {
		t.Fatal("a ratio against a zero baseline must be 0, not Inf")
	}
	if got := durRatio(3*time.Second, 2*time.Second); got != 1.5 {
		t.Fatalf("durRatio %v, want 1.5", got)
	}
}

func TestThroughputPipelineNames(t *testing.T) {
	if got := throughputPipelines(1); !slices.Equal(got, []string{"tp"}) {
		t.Fatalf("one pipeline: %v, want [tp]", got)
	}
	if got := throughputPipelines(3); !slices.Equal(got, []string{"tp-1", "tp-2", "tp-3"}) {
		t.Fatalf("three pipelines: %v", got)
	}
}
