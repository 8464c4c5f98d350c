package cliout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		frac  float64
		width int
		want  string
	}{
		{"empty", 0, 10, "[----------]"},
		{"half", 0.5, 10, "[#####-----]"},
		{"full", 1, 10, "[##########]"},
		{"clamped high", 3, 4, "[####]"},
		{"clamped low", -1, 4, "[----]"},
		{"rounds down", 0.99, 10, "[#########-]"},
		{"minimum width", 1, 0, "[#]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Bar(tt.frac, tt.width))
		})
	}
	require.Equal(t, "[    ]", EmptyBar(4))
}

func TestSpinner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		frame int
		want  string
	}{
		{"start", 0, "[===  ]"},
		{"moves right", 1, "[ === ]"},
		{"right end", 2, "[  ===]"},
		{"bounces back", 3, "[ === ]"},
		{"full cycle", 4, "[===  ]"},
		{"negative frame", -1, "[ === ]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Spinner(tt.frame, 5))
		})
	}
	require.Equal(t, "[===]", Spinner(7, 1), "narrower than the block")
}

func TestFraction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		elapsed, typical time.Duration
		want             float64
		ok               bool
	}{
		{"no estimate", time.Second, 0, 0, false},
		{"quarter", time.Second, 4 * time.Second, 0.25, true},
		{"overrun stays below full", time.Minute, time.Second, 0.99, true},
		{"negative elapsed", -time.Second, time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Fraction(tt.elapsed, tt.typical)
			require.Equal(t, tt.ok, ok)
			require.InDelta(t, tt.want, got, 1e-9)
		})
	}
	require.Equal(t, "45%", Percent(0.456))
	require.Equal(t, "100%", Percent(2))
}

func TestTypical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"only non-positive", []time.Duration{0, -time.Second}, 0},
		{"odd", []time.Duration{3 * time.Second, time.Second, 2 * time.Second}, 2 * time.Second},
		{"even", []time.Duration{time.Second, 4 * time.Second, 2 * time.Second, 3 * time.Second}, 2500 * time.Millisecond},
		{"ignores zeros", []time.Duration{0, 5 * time.Second}, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Typical(tt.in))
		})
	}
}
