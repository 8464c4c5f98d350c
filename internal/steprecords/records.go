// Package steprecords checks, from what build steps wrote themselves, that
// every build of a test ran to its end exactly once: the chaos harness and
// the cluster test give their steps Command, read the file back with Parse
// and judge it with Judge. A second completion is allowed in one case only,
// the window the product documents (docs/semantics.md, "No build runs
// twice"): the executor of the earlier completion was SIGKILLed after the
// step's end and before Temporal had its result.
package steprecords

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Record is one line a step wrote: "<build> <attempt> start|end <unix nanos> <executor>".
type Record struct {
	Build    string
	Attempt  int
	Kind     string
	At       time.Time
	Executor string
}

// Command is a step command that writes its start record, runs cmd, and
// writes its end record to file, each with one append.
func Command(file, cmd string) string {
	line := func(what string) string {
		return fmt.Sprintf(`echo "$SD_BUILD_ID $SD_BUILD_ATTEMPT %s $(date +%%s%%N) $SD_EXECUTOR" >> %s`, what, file)
	}
	return line("start") + "; " + cmd + "; " + line("end")
}

// ParseFile reads the records file at path; a file not written yet holds
// no records.
func ParseFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	defer func() { _ = f.Close() }()
	return Parse(f)
}

// Of returns the records of one build, in file order.
func Of(recs []Record, build string) []Record {
	var out []Record
	for _, r := range recs {
		if r.Build == build {
			out = append(out, r)
		}
	}
	return out
}

// Parse reads the records file. A malformed line is an error: steps
// write whole lines with single appends, so a torn line means the check
// itself cannot be trusted.
func Parse(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 5 || (f[2] != "start" && f[2] != "end") {
			return nil, fmt.Errorf("records line %d: malformed %q", n, sc.Text())
		}
		attempt, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("records line %d: attempt %q: %w", n, f[1], err)
		}
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("records line %d: time %q: %w", n, f[3], err)
		}
		out = append(out, Record{Build: f[0], Attempt: attempt, Kind: f[2], At: time.Unix(0, ns), Executor: f[4]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return out, nil
}

// Verdict is what the records say about the expected builds.
type Verdict struct {
	// Builds is how many builds were expected; Completed how many of them
	// have an end record.
	Builds, Completed int
	// Lost are expected builds with no end record.
	Lost []string
	// Double are builds with more than one end record that the documented
	// window does not explain ("<build>: <attempts> (<why>)").
	Double []string
	// Excused are builds completed more than once within the documented
	// window: the executor of the earlier completion was killed between the
	// step's end and Temporal having its result.
	Excused []string
	// Unexpected are build IDs in the records that no event should have run.
	Unexpected []string
	// Interrupted counts step runs that started and never ended (their
	// executor was killed under them).
	Interrupted int
	// Overlaps are builds two of whose runs were in flight at the same time.
	Overlaps []string
	// Retried counts expected builds whose steps started more than once.
	Retried int
	// LateWrites are records of an attempt written after a later attempt of
	// the same build had started: a step of a lost attempt that outlived
	// its executor and ran on beside the re-dispatched one.
	LateWrites []string
}

// OK reports whether nothing was lost and nothing completed twice.
func (v Verdict) OK() bool {
	return len(v.Lost) == 0 && len(v.Double) == 0 && len(v.Unexpected) == 0 && len(v.LateWrites) == 0
}

// lateWrites finds records of an attempt written after a later attempt of
// the same build started.
func lateWrites(recs []Record) []string {
	firstStart := map[string]map[int]time.Time{}
	for _, r := range recs {
		if r.Kind != "start" {
			continue
		}
		if firstStart[r.Build] == nil {
			firstStart[r.Build] = map[int]time.Time{}
		}
		if t, ok := firstStart[r.Build][r.Attempt]; !ok || r.At.Before(t) {
			firstStart[r.Build][r.Attempt] = r.At
		}
	}
	var out []string
	for _, r := range recs {
		for attempt, started := range firstStart[r.Build] {
			if attempt > r.Attempt && started.Before(r.At) {
				out = append(out, fmt.Sprintf("%s: attempt %d on %s wrote %q %s after attempt %d started",
					r.Build, r.Attempt, r.Executor, r.Kind, r.At.Sub(started).Round(time.Millisecond), attempt))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// run is one step run of a build: its start record and, once it ended, its
// end record.
type run struct {
	attempt    int
	executor   string
	start, end time.Time
	ended      bool
}

// pairRuns pairs each build's start and end records by attempt and executor.
func pairRuns(recs []Record) map[string][]*run {
	runs := map[string][]*run{}
	for _, r := range recs {
		switch r.Kind {
		case "start":
			runs[r.Build] = append(runs[r.Build], &run{attempt: r.Attempt, executor: r.Executor, start: r.At})
		case "end":
			// Pair with the open run of the same attempt and executor.
			var match *run
			for _, x := range runs[r.Build] {
				if !x.ended && x.attempt == r.Attempt && x.executor == r.Executor {
					match = x
				}
			}
			if match == nil {
				match = &run{attempt: r.Attempt, executor: r.Executor, start: r.At}
				runs[r.Build] = append(runs[r.Build], match)
			}
			match.end, match.ended = r.At, true
		}
	}
	return runs
}

// excuse says whether the completed run x, followed by the completed run
// next, is the window the product documents: x's executor was SIGKILLed
// after x's step ended (at most PdeathTolerance before its end record) and
// before Temporal had the result, that is either
//   - within SaveWindow of the step's end, before the executor could save
//     the result, or
//   - after it saved the result to its outbox, which still held it
//     (undelivered) when the executor died;
//
// and next is a later attempt (a re-dispatch, not the same attempt twice).
// It answers why, in either case.
func excuse(build string, x, next *run, ev Evidence) (string, bool) {
	if next.attempt <= x.attempt {
		return fmt.Sprintf("attempt %d on %s completed after attempt %d on %s: the same attempt twice is a sluice bug",
			next.attempt, next.executor, x.attempt, x.executor), false
	}
	var kill time.Time
	for _, k := range ev.Kills[x.executor] {
		if k.Sub(x.end) >= -PdeathTolerance && (kill.IsZero() || k.Before(kill)) {
			kill = k
		}
	}
	if kill.IsZero() {
		return fmt.Sprintf("%s was not killed after attempt %d's end: a sluice bug to investigate", x.executor, x.attempt), false
	}
	after := kill.Sub(x.end).Round(time.Millisecond)
	if saved, ok := ev.Unsent[Key(build, x.attempt)]; ok && !saved.After(kill) {
		return fmt.Sprintf("%s was SIGKILLed %s after attempt %d's end; it had saved the result %s after the end and not delivered it",
			x.executor, after, x.attempt, saved.Sub(x.end).Round(time.Millisecond)), true
	}
	if kill.Sub(x.end) <= SaveWindow {
		return fmt.Sprintf("%s was SIGKILLed %s after attempt %d's end, before it saved the result", x.executor, after, x.attempt), true
	}
	return fmt.Sprintf("%s was SIGKILLed %s after attempt %d's end, and no undelivered result of it was in its outbox: a sluice bug to investigate",
		x.executor, after, x.attempt), false
}

// Evidence is what the harness knows of the executors' deaths, with which
// Judge tells the documented window from a defect.
type Evidence struct {
	// Kills lists when each executor was SIGKILLed.
	Kills map[string][]time.Time
	// Unsent are the results that killed executors had saved in their
	// outbox and not delivered (read from the outbox right after the kill),
	// keyed by Key(build, attempt), with when each was saved.
	Unsent map[string]time.Time
}

// Key names one attempt of a build in Evidence.Unsent.
func Key(build string, attempt int) string { return build + " " + strconv.Itoa(attempt) }

// PdeathTolerance is how long after its executor's SIGKILL a step may still
// write its end record: the step's shell is killed by its parent-death
// signal only once the kernel has the executor gone.
const PdeathTolerance = 100 * time.Millisecond

// SaveWindow bounds the time from a step's end to its executor saving the
// result to its outbox (milliseconds when the machine is idle; a busy
// two-core machine stretches it). An executor killed within it after the
// step's end cannot know the step ended.
const SaveWindow = time.Second

// Judge checks the records against the builds that must each complete
// exactly once. A build completed more than once goes to Excused when each
// completion but the last is the documented window (see excuse), and to
// Double otherwise.
func Judge(recs []Record, expected []string, ev Evidence) Verdict {
	runs := pairRuns(recs)
	v := Verdict{Builds: len(expected), LateWrites: lateWrites(recs)}
	want := make(map[string]bool, len(expected))
	for _, b := range expected {
		want[b] = true
		var ended []*run
		for _, x := range runs[b] {
			if x.ended {
				ended = append(ended, x)
			}
		}
		sort.SliceStable(ended, func(i, j int) bool { return ended[i].end.Before(ended[j].end) })
		switch len(ended) {
		case 0:
			v.Lost = append(v.Lost, b)
		case 1:
			v.Completed++
		default:
			v.Completed++
			parts := make([]string, 0, len(ended))
			var whys []string
			excused := true
			for i, x := range ended {
				parts = append(parts, fmt.Sprintf("attempt %d on %s", x.attempt, x.executor))
				if i == len(ended)-1 {
					continue
				}
				why, ok := excuse(b, x, ended[i+1], ev)
				excused = excused && ok
				whys = append(whys, why)
			}
			line := b + ": " + strings.Join(parts, ", ") + " (" + strings.Join(whys, "; ") + ")"
			if excused {
				v.Excused = append(v.Excused, line)
			} else {
				v.Double = append(v.Double, line)
			}
		}
		if len(runs[b]) > 1 {
			v.Retried++
		}
	}
	builds := make([]string, 0, len(runs))
	for b := range runs {
		builds = append(builds, b)
	}
	sort.Strings(builds)
	for _, b := range builds {
		if !want[b] {
			v.Unexpected = append(v.Unexpected, b)
		}
		rs := runs[b]
		for i, x := range rs {
			if !x.ended {
				v.Interrupted++
			}
			for _, y := range rs[i+1:] {
				if x.ended && y.ended && x.start.Before(y.end) && y.start.Before(x.end) {
					v.Overlaps = append(v.Overlaps, fmt.Sprintf("%s: attempt %d on %s and attempt %d on %s",
						b, x.attempt, x.executor, y.attempt, y.executor))
				}
			}
		}
	}
	return v
}
