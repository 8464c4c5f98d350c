package cliout

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// BarWidth is the width of progress bars inside their brackets.
const BarWidth = 20

// maxRunningFraction caps the estimated progress of a build still running:
// a bar is full only once the build ended.
const maxRunningFraction = 0.99

// Bar draws a progress bar of width cells (inside brackets) filled to frac,
// which is clamped to [0, 1]: Bar(0.5, 10) is "[#####-----]".
func Bar(frac float64, width int) string {
	width = max(width, 1)
	frac = min(max(frac, 0), 1)
	full := int(frac * float64(width))
	return "[" + strings.Repeat("#", full) + strings.Repeat("-", width-full) + "]"
}

// EmptyBar is the bar of something that has not started: Bar(0, width)
// drawn with spaces.
func EmptyBar(width int) string {
	return "[" + strings.Repeat(" ", max(width, 1)) + "]"
}

// spinnerBlock is the width of the moving block of Spinner.
const spinnerBlock = 3

// Spinner draws an indeterminate bar for frame: a short block that bounces
// between the brackets, one cell per frame.
func Spinner(frame, width int) string {
	width = max(width, spinnerBlock)
	span := width - spinnerBlock
	pos := 0
	if span > 0 {
		frame = ((frame % (2 * span)) + 2*span) % (2 * span)
		pos = frame
		if frame > span {
			pos = 2*span - frame
		}
	}
	return "[" + strings.Repeat(" ", pos) + strings.Repeat("=", spinnerBlock) + strings.Repeat(" ", span-pos) + "]"
}

// Fraction estimates how far a running build is from how long it ran and
// how long the job typically takes. ok is false without an estimate
// (typical ≤ 0). The estimate stays below 1 while the build runs, even when
// it overruns.
func Fraction(elapsed, typical time.Duration) (frac float64, ok bool) {
	if typical <= 0 {
		return 0, false
	}
	return min(max(float64(elapsed)/float64(typical), 0), maxRunningFraction), true
}

// Percent formats a fraction as a whole percentage: "45%".
func Percent(frac float64) string {
	return fmt.Sprintf("%d%%", int(min(max(frac, 0), 1)*100))
}

// Typical is the median of the positive durations, or 0 when there is none:
// the expected duration of a job from its recent successful builds.
func Typical(ds []time.Duration) time.Duration {
	var pos []time.Duration
	for _, d := range ds {
		if d > 0 {
			pos = append(pos, d)
		}
	}
	if len(pos) == 0 {
		return 0
	}
	slices.Sort(pos)
	n := len(pos)
	if n%2 == 1 {
		return pos[n/2]
	}
	return (pos[n/2-1] + pos[n/2]) / 2
}
