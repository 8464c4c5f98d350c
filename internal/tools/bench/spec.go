package main

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// job is one job of a generated screwdriver.yaml.
type job struct {
	name     string
	requires []string
	// parallel sets collapseBuilds and blockedBySameJob to false.
	parallel bool
	cmd      string
	matrix   map[string][]string
}

// specYAML renders jobs, every one on the bench queue.
func specYAML(jobs []job) string {
	var b strings.Builder
	b.WriteString("shared: {image: alpine}\njobs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&b, "  %s:\n", j.name)
		fmt.Fprintf(&b, "    requires: [%s]\n", strings.Join(j.requires, ", "))
		b.WriteString("    annotations:\n")
		fmt.Fprintf(&b, "      screwdriver.cd/executor: %s\n", benchQueue)
		if j.parallel {
			b.WriteString("      screwdriver.cd/collapseBuilds: false\n")
			b.WriteString("      screwdriver.cd/blockedBySameJob: false\n")
		}
		if len(j.matrix) > 0 {
			b.WriteString("    matrix:\n")
			for _, k := range slices.Sorted(maps.Keys(j.matrix)) {
				fmt.Fprintf(&b, "      %s: [%s]\n", k, strings.Join(j.matrix[k], ", "))
			}
		}
		fmt.Fprintf(&b, "    steps:\n      - run: %s\n", strconv.Quote(j.cmd))
	}
	return b.String()
}

// recordCmd is a step that appends "<build> start <unix ns>" to file, runs
// cmd, then appends "<build> end <unix ns>": the step's own clock marks
// when it really started.
func recordCmd(file, cmd string) string {
	return fmt.Sprintf(`echo "$SD_BUILD_ID start $(date +%%s%%N)" >> %s; %s; echo "$SD_BUILD_ID end $(date +%%s%%N)" >> %s`, file, cmd, file)
}

// span is one recorded step run.
type span struct {
	build      string
	start, end time.Time
}

// readRecords reads a record file: the spans by build ID (the first run of
// each build; a re-dispatched build would record twice).
func readRecords(file string) (map[string]*span, error) {
	out := map[string]*span{}
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) != 3 {
			return nil, fmt.Errorf("record line %q: want <build> start|end <ns>", sc.Text())
		}
		ns, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("record line %q: %w", sc.Text(), err)
		}
		s := out[parts[0]]
		if s == nil {
			s = &span{build: parts[0]}
			out[parts[0]] = s
		}
		at := time.Unix(0, ns)
		switch parts[1] {
		case "start":
			if s.start.IsZero() {
				s.start = at
			}
		case "end":
			if s.end.IsZero() {
				s.end = at
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return out, nil
}

// truncate empties a record file.
func truncate(file string) error {
	if err := os.Truncate(file, 0); err != nil {
		return fmt.Errorf("truncate records: %w", err)
	}
	return nil
}
