package main

import (
	"sort"
	"sync"
	"time"
)

// percentile is the p-th percentile (0-100) of ds by nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// ms is a duration in milliseconds with one decimal.
func ms(d time.Duration) float64 { return round1(float64(d) / float64(time.Millisecond)) }

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// perSecond is CPU milliseconds per second of wall time.
func perSecond(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return round1(float64(cpu) / float64(time.Millisecond) / wall.Seconds())
}

// parallel runs fn(0..n-1) with at most width at once and returns the first error.
func parallel(n, width int, fn func(i int) error) error {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
