package runner_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// Nothing a build started outlives its attempt, even after a build that
// passed: a background process that ignores SIGTERM is killed when the
// grace period ends (the tests review's M14: the SIGKILL after the grace
// in terminateGroups could be removed and every test still passed, and
// the sleep outlived the build).
func TestRunKillsLeftoversOfASuccessfulBuild(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("leave", `trap '' TERM; sleep 600 & echo $! > bg.pid`))
	spec.KillGrace = 200 * time.Millisecond

	res := runner.Run(t.Context(), spec)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	bgPID := readPID(t, filepath.Join(spec.Dir, "bg.pid"))
	require.True(t, processGone(bgPID), "background process %d, which ignores SIGTERM, outlived its build", bgPID)
}
