package main

import (
	"slices"
	"testing"
	"time"
)

func TestNextDelayDoublesUpToTheLimit(t *testing.T) {
	d := 100 * time.Millisecond
	var got []time.Duration
	for range 6 {
		d = nextDelay(d, time.Second)
		got = append(got, d)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second, time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}
