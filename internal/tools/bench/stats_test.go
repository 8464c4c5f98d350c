package main

import (
	"slices"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 3}, {99, 5}, {100, 5}, {0, 1}, {20, 1}, {40, 2}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Fatalf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if !slices.Equal(ds, []time.Duration{5, 1, 4, 2, 3}) {
		t.Fatalf("percentile sorted its input: %v", ds)
	}
	if percentile(nil, 50) != 0 {
		t.Fatal("percentile of nothing must be 0")
	}
}

func TestPerSecond(t *testing.T) {
	if got := perSecond(500*time.Millisecond, 2*time.Second); got != 250 {
		t.Fatalf("perSecond %v, want 250", got)
	}
	if perSecond(time.Second, 0) != 0 {
		t.Fatal("perSecond over no time must be 0")
	}
}
