package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
)

// groupMembers lists the live (non-zombie) processes of a process group, as
// "pid comm", read from /proc.
func groupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		f := bytes.Fields(b[end+1:])
		if len(f) < 3 || f[0][0] == 'Z' || string(f[2]) != strconv.Itoa(pgid) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", pid, b[open+1:end]))
	}
	return out
}

func TestHostOrphansKilledOnRestart(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	exec1 := e.StartExecutor(testenv.ExecutorOptions{Name: "orph-1"})
	e.WaitExecutorLive("orph-1")
	pgidFile := filepath.Join(t.TempDir(), "pgid")
	spec := fmt.Sprintf(`
shared: {image: alpine}
jobs:
  long:
    requires: [~commit]
    steps:
      - spawn: "[ -e %[1]s ] || echo $$ > %[1]s; sh -c 'sleep 30 & sleep 30'"
`, pgidFile)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "orphans", Repo: repo.Dir})
	require.NoError(t, err)
	_, err = e.API.StartEvent(ctx, "orphans", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)

	var pgid int
	e.WaitFor("the step's sleeps", 30*time.Second, func() bool {
		b, err := os.ReadFile(pgidFile)
		if err != nil {
			return false
		}
		if pgid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return false
		}
		return strings.Count(strings.Join(groupMembers(t, pgid), "\n"), "sleep") == 2
	})

	exec1.Kill()
	// The session shell dies with the executor (Pdeathsig); what it started
	// does not: this is what the restarted executor must clean up.
	time.Sleep(300 * time.Millisecond)
	left := groupMembers(t, pgid)
	require.GreaterOrEqual(t, strings.Count(strings.Join(left, "\n"), "sleep"), 2,
		"the attempt's processes outlive a SIGKILLed executor: %v", left)

	e.StartExecutor(testenv.ExecutorOptions{Name: "orph-1"})
	e.WaitFor("no process of the killed attempt", 15*time.Second, func() bool {
		return len(groupMembers(t, pgid)) == 0
	})
}
