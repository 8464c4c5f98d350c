package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// startLeftovers runs a build on exec whose step leaves two sleeps in its
// process group, and returns the group once both run.
func startLeftovers(t *testing.T, e *testenv.Env, pipelineName string) int {
	t.Helper()
	ctx := e.Context()
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
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: pipelineName, Repo: repo.Dir})
	require.NoError(t, err)
	_, err = e.StartEvent(ctx, pipelineName, api.StartEventRequest{Type: "commit", Branch: "main"})
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
	return pgid
}

// reapersOf lists the PIDs of the reapers guarding member's lives.
func reapersOf(t *testing.T, member string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "reap" && strings.Contains(string(b), "/.sluice-groups/"+member+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// N5: what a build started dies with its executor, even a SIGKILLed one,
// without waiting for the executor to come back: the executor's reaper
// sees it go and kills the attempt's process groups.
func TestHostLeftoversDieWithTheExecutor(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	exec1 := e.StartExecutor(testenv.ExecutorOptions{Name: "reap-1"})
	e.WaitExecutorLive("reap-1")
	require.Len(t, reapersOf(t, "reap-1"), 1, "the executor started its reaper")
	pgid := startLeftovers(t, e, "reaped")

	exec1.Kill() // SIGKILL to the executor's process group
	e.WaitFor("no process of the lost attempt", 15*time.Second, func() bool {
		return len(groupMembers(t, pgid)) == 0
	})
	e.WaitFor("the reaper to finish", 15*time.Second, func() bool { return len(reapersOf(t, "reap-1")) == 0 })
}

// When no reaper ran (it was killed too), the executor started again
// kills what its earlier life left.
func TestHostOrphansKilledOnRestart(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	exec1 := e.StartExecutor(testenv.ExecutorOptions{Name: "orph-1"})
	e.WaitExecutorLive("orph-1")
	pgid := startLeftovers(t, e, "orphans")

	reapers := reapersOf(t, "orph-1")
	require.Len(t, reapers, 1)
	require.NoError(t, syscall.Kill(reapers[0], syscall.SIGKILL))
	exec1.Kill()
	// The session shell dies with the executor (Pdeathsig); what it started
	// does not, with no reaper: the restarted executor must clean up.
	left := groupMembers(t, pgid)
	require.GreaterOrEqual(t, strings.Count(strings.Join(left, "\n"), "sleep"), 2,
		"with no reaper the attempt's processes outlive a SIGKILLed executor: %v", left)

	e.StartExecutor(testenv.ExecutorOptions{Name: "orph-1"})
	e.WaitFor("no process of the killed attempt", 15*time.Second, func() bool {
		return len(groupMembers(t, pgid)) == 0
	})
}
