package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// Spec.Prepare (the executor's checkout) runs while the first step's shell
// starts: the shell is up before Prepare returns, and the first step sees
// what Prepare put in the workspace.
func TestRunPrepareOverlapsTheShellStart(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("first", "cat checked-out.txt"), step("second", "echo two"))
	started := make(chan int, 4)
	spec.OnProcessGroup = func(pgid int) { started <- pgid }
	spec.Prepare = func(ctx context.Context) error {
		select {
		case <-started:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute): // a failure bound, not a timing
			return errors.New("the shell did not start while Prepare ran")
		}
		return os.WriteFile(filepath.Join(spec.Dir, "checked-out.txt"), []byte("from prepare\n"), 0o644)
	}

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, "from prepare\n", sink.log("first"))
	require.Equal(t, "two\n", sink.log("second"))
	require.Empty(t, started, "both steps ran in the shell started beside Prepare")
}

// A Prepare that fails ends the build before any step: a failure with its
// reason, every step skipped (teardown too), and the shell started beside
// it gone.
func TestRunPrepareFailureSkipsEveryStep(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("build", "echo built"), step(runner.TeardownPrefix+"clean", "echo cleaned"))
	pgids := make(chan int, 4)
	spec.OnProcessGroup = func(pgid int) { pgids <- pgid }
	spec.Prepare = func(context.Context) error { return errors.New("check out: no such commit") }

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status)
	require.Equal(t, "check out: no such commit", res.Reason)
	require.Len(t, res.Steps, 2)
	for _, s := range res.Steps {
		require.True(t, s.Skipped, s.Name)
	}
	require.Empty(t, sink.log("build"))
	close(pgids)
	for pgid := range pgids {
		require.ErrorIs(t, syscall.Kill(-pgid, 0), syscall.ESRCH, "the shell started beside Prepare is gone")
	}
}
