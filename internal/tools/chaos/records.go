package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// record is one line a step wrote: "<build> <attempt> start|end <unix nanos> <executor>".
type record struct {
	Build    string
	Attempt  int
	Kind     string
	At       time.Time
	Executor string
}

// parseRecords reads the records file. A malformed line is an error: steps
// write whole lines with single appends, so a torn line means the check
// itself cannot be trusted.
func parseRecords(r io.Reader) ([]record, error) {
	var out []record
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
		out = append(out, record{Build: f[0], Attempt: attempt, Kind: f[2], At: time.Unix(0, ns), Executor: f[4]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return out, nil
}

// verdict is what the records say about the expected builds.
type verdict struct {
	// Builds is how many builds were expected; Completed how many of them
	// have an end record.
	Builds, Completed int
	// Lost are expected builds with no end record.
	Lost []string
	// Double are builds with more than one end record ("<build>: <attempts>").
	Double []string
	// FirstEnds maps each build in Double to its first completed run.
	FirstEnds map[string]record
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

// ok reports whether nothing was lost and nothing completed twice.
func (v verdict) ok() bool {
	return len(v.Lost) == 0 && len(v.Double) == 0 && len(v.Unexpected) == 0 && len(v.LateWrites) == 0
}

// lateWrites finds records of an attempt written after a later attempt of
// the same build started.
func lateWrites(recs []record) []string {
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

// judge checks the records against the builds that must each complete
// exactly once.
func judge(recs []record, expected []string) verdict {
	type run struct {
		attempt    int
		executor   string
		start, end time.Time
		ended      bool
	}
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
	v := verdict{Builds: len(expected), LateWrites: lateWrites(recs)}
	want := make(map[string]bool, len(expected))
	for _, b := range expected {
		want[b] = true
		var ends []string
		var first *run
		for _, x := range runs[b] {
			if x.ended {
				ends = append(ends, fmt.Sprintf("attempt %d on %s", x.attempt, x.executor))
				if first == nil || x.end.Before(first.end) {
					first = x
				}
			}
		}
		switch len(ends) {
		case 0:
			v.Lost = append(v.Lost, b)
		case 1:
			v.Completed++
		default:
			v.Completed++
			v.Double = append(v.Double, b+": "+strings.Join(ends, ", "))
			if v.FirstEnds == nil {
				v.FirstEnds = map[string]record{}
			}
			v.FirstEnds[b] = record{Build: b, Attempt: first.attempt, Kind: "end", At: first.end, Executor: first.executor}
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
