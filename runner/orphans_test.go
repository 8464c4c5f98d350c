package runner_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// startGroup starts `sleep 600` leading its own process group.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

func TestKillRecordedGroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orphan, reused := startGroup(t), startGroup(t)
	require.NoError(t, runner.AppendGroupRecord(filepath.Join(dir, "a"), runner.RecordGroup(orphan.Process.Pid)))
	stale := runner.RecordGroup(reused.Process.Pid)
	stale.Start++ // the ID now names another process than the recorded one
	require.NoError(t, runner.AppendGroupRecord(filepath.Join(dir, "b"), stale))

	killed, err := runner.KillRecordedGroups(dir)

	require.NoError(t, err)
	require.Equal(t, []int{orphan.Process.Pid}, killed)
	waited := make(chan error, 1)
	go func() { waited <- orphan.Wait() }()
	select {
	case err := <-waited:
		require.Error(t, err, "sleep 600 was killed")
	case <-time.After(5 * time.Second):
		t.Fatal("the recorded group survived")
	}
	require.NoError(t, syscall.Kill(reused.Process.Pid, 0), "a reused ID is left alone")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "records are removed")

	killed, err = runner.KillRecordedGroups(filepath.Join(dir, "missing"))
	require.NoError(t, err)
	require.Empty(t, killed)
}
