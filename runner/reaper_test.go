package runner_test

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// The reaper does nothing while its executor lives (its input is open),
// and when the input ends kills every recorded process group of the life
// it guards, including the records of each attempt, and removes them.
func TestRunReaperKillsRecordedGroupsWhenItsInputEnds(t *testing.T) {
	t.Parallel()
	life := filepath.Join(t.TempDir(), "groups", "life-1")
	var pids []int
	for i, attempt := range []string{"app_main_7-attempt-1", "app_test_7-attempt-2"} {
		cmd := exec.Command("sh", "-c", "sleep 600 & sleep 600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		require.NoError(t, runner.AppendGroupRecord(filepath.Join(life, attempt), runner.RecordGroup(cmd.Process.Pid)), "attempt %d", i)
		pids = append(pids, cmd.Process.Pid)
		go func() { _ = cmd.Wait() }()
	}

	r, w := io.Pipe()
	type result struct {
		reaped runner.Reaped
		err    error
	}
	done := make(chan result, 1)
	go func() {
		reaped, err := runner.RunReaper(context.Background(), r, runner.ReaperConfig{Records: life})
		done <- result{reaped, err}
	}()
	_, err := w.Write([]byte("the executor lives\n"))
	require.NoError(t, err, "the reaper reads its input while the executor lives")
	for _, pid := range pids {
		require.False(t, processGone(pid), "group %d killed while the executor lives", pid)
	}

	require.NoError(t, w.Close()) // the executor is gone
	var got result
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the reaper did not act when its input ended")
	}
	require.NoError(t, got.err)
	require.ElementsMatch(t, pids, got.reaped.Groups)
	for _, pid := range pids {
		require.Eventually(t, func() bool { return processGone(pid) }, 10*time.Second, 10*time.Millisecond, "group %d", pid)
	}
	require.NoDirExists(t, life)
}

// An executor started again kills what its earlier lives recorded, each
// in its own directory, and records from before lives had directories.
func TestKillRecordedGroupsOfEarlierLives(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "exec-a")
	var pids []int
	for _, rec := range []string{"life-100/app_main_1-attempt-1", "app_main_2-attempt-1"} {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		go func() { _ = cmd.Wait() }()
		require.NoError(t, runner.AppendGroupRecord(filepath.Join(base, rec), runner.RecordGroup(cmd.Process.Pid)))
		pids = append(pids, cmd.Process.Pid)
	}
	killed, err := runner.KillRecordedGroups(base)
	require.NoError(t, err)
	require.ElementsMatch(t, pids, killed)
	for _, pid := range pids {
		require.Eventually(t, func() bool { return processGone(pid) }, 10*time.Second, 10*time.Millisecond)
	}
	require.NoDirExists(t, filepath.Join(base, "life-100"))
}

func TestReaperConfigArgs(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"--records", "/d"}, runner.ReaperConfig{Records: "/d", Runtime: runner.RuntimeHost}.Args())
	require.Equal(t, []string{"--records", "/d", "--runtime", "podman", "--label", "a=1", "--label", "b=2"},
		runner.ReaperConfig{Records: "/d", Runtime: "podman", Labels: map[string]string{"b": "2", "a": "1"}}.Args())
}
