package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// record is a step command that appends "<label> <event> start|end <unix nanos> <executor>"
// to file around running cmd.
func record(file, cmd string) string {
	return fmt.Sprintf(`echo "$SD_JOB_NAME $SD_EVENT_ID start $(date +%%s%%N) $SD_EXECUTOR" >> %s; %s; echo "$SD_JOB_NAME $SD_EVENT_ID end $(date +%%s%%N) $SD_EXECUTOR" >> %s`, file, cmd, file)
}

// span is one recorded step run.
type span struct {
	Job, Event, Executor string
	Start, End           time.Time
}

// readSpans pairs start and end lines per (job, event, executor), in start order.
func readSpans(t *testing.T, file string) []span {
	t.Helper()
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	open := map[string]*span{}
	var out []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		require.Len(t, parts, 5, "record line %q", sc.Text())
		ns, err := strconv.ParseInt(parts[3], 10, 64)
		require.NoError(t, err)
		at := time.Unix(0, ns)
		key := parts[0] + " " + parts[1] + " " + parts[4]
		switch parts[2] {
		case "start":
			open[key] = &span{Job: parts[0], Event: parts[1], Executor: parts[4], Start: at}
		case "end":
			s, ok := open[key]
			require.True(t, ok, "end without start: %q", sc.Text())
			s.End = at
			out = append(out, *s)
			delete(open, key)
		}
	}
	require.NoError(t, sc.Err())
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

func spanOf(t *testing.T, spans []span, job string) span {
	t.Helper()
	for _, s := range spans {
		if s.Job == job {
			return s
		}
	}
	t.Fatalf("no recorded run of job %s in %v", job, spans)
	return span{}
}

func buildOf(t *testing.T, ev api.Event, job string) api.Build {
	t.Helper()
	for _, b := range ev.Builds {
		if b.Job == job {
			return b
		}
	}
	t.Fatalf("event %s has no build of job %s: %+v", ev.ID, job, ev.Builds)
	return api.Build{}
}

func jobOf(t *testing.T, ev api.Event, job string) workflows.JobOutcome {
	t.Helper()
	for _, j := range ev.Jobs {
		if j.Job == job {
			return j
		}
	}
	t.Fatalf("event %s has no job %s: %+v", ev.ID, job, ev.Jobs)
	return workflows.JobOutcome{}
}

func recordsFile(t *testing.T) string {
	return filepath.Join(t.TempDir(), "records")
}
