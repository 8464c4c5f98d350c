package cliout

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
)

// WatchOptions are what a watch frame depends on besides the event.
type WatchOptions struct {
	// Now is the time of the frame.
	Now time.Time
	// Frame counts redraws; it moves the spinner of builds without an
	// estimate.
	Frame int
	// Width truncates lines to the terminal's width; 0 means no limit.
	Width int
	// Typical maps a job to its typical successful duration; a running
	// build of a job without one shows a spinner.
	Typical map[string]time.Duration
}

// View is one frame of `sluice event watch`.
type View struct {
	// Lines are the frame's lines, without line breaks.
	Lines []string
	// key identifies what the frame says, leaving out what changes with
	// the clock alone (durations, bars, spinners).
	key string
}

// Changed reports whether v says something prev did not: a new build, a
// status, reason or executor change. A frame that differs only by the clock
// has not changed.
func (v View) Changed(prev View) bool { return v.key != prev.key }

// Watch renders an event as a header line and one line per build (or job
// that did not run): label, status, duration, progress bar and detail.
func Watch(ev Event, o WatchOptions) View {
	var key strings.Builder
	fmt.Fprintf(&key, "%s|%s|%s\n", ev.Status, ev.Reason, ev.SHA)

	head := fmt.Sprintf("event %s  %s  %s  %s", ev.ID, Status(ev.Status), ShortSHA(ev.SHA), ev.Trigger)
	if d, ok := Elapsed(ev.Start, ev.End, o.Now); ok {
		head += "  " + Duration(d)
	}
	if Final(ev.Status) && ev.Reason != "" {
		head += "  (" + ev.Reason + ")"
	}

	var buf bytes.Buffer
	t := NewTable(&buf, "JOB", "STATUS", "TIME", "PROGRESS", "DETAIL")
	for _, r := range Rows(ev) {
		fmt.Fprintf(&key, "%s|%s|%s|%s|%s\n", r.Label, r.ID, r.Status, r.Reason, r.Executor)
		bar, detail := progress(r, o)
		t.Row(r.Label, Status(r.Status), ElapsedText(r.Start, r.End, o.Now), bar, detail)
	}
	if t.Rows() == 0 {
		t.Row("(no builds yet)", "", "", "", "")
	}
	_ = t.Flush()
	lines := []string{head}
	lines = append(lines, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
	for i, l := range lines {
		lines[i] = Truncate(strings.TrimRight(l, " "), o.Width)
	}
	return View{Lines: lines, key: key.String()}
}

// progress is a row's bar and detail: a full bar once a build ran and
// ended, an estimate or a spinner while it runs, an empty bar while it
// waits or when it never ran.
func progress(r Row, o WatchOptions) (bar, detail string) {
	detail = OneLine(r.Reason)
	status := strings.ToUpper(r.Status)
	switch {
	case Final(status) && !r.Start.IsZero():
		return Bar(1, BarWidth), detail
	case status == StatusRunning:
		elapsed, _ := Elapsed(r.Start, r.End, o.Now)
		if detail == "" && r.Executor != "" {
			detail = "on " + r.Executor
		}
		if frac, ok := Fraction(elapsed, o.Typical[r.Job]); ok {
			return Bar(frac, BarWidth) + " " + Percent(frac), detail
		}
		return Spinner(o.Frame, BarWidth), detail
	default:
		return EmptyBar(BarWidth), detail
	}
}

// ANSI sequences for redrawing a frame in place.
const (
	ansiClearLine = "\x1b[2K"
	ansiClearDown = "\x1b[J"
)

// Redraw writes lines over the prevLines lines written before (when
// prevLines > 0, it first moves the cursor up to where they began), clears
// what is left of the old frame, and returns how many lines it wrote.
func Redraw(w io.Writer, prevLines int, lines []string) (int, error) {
	var b strings.Builder
	if prevLines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", prevLines)
	}
	for _, l := range lines {
		b.WriteString(ansiClearLine + l + "\n")
	}
	b.WriteString(ansiClearDown)
	_, err := io.WriteString(w, b.String())
	return len(lines), err
}
