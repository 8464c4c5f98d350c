package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// (internal/e2e TestRecordedHistoriesReplay with SLUICE_RECORD_HISTORIES=1)
// against the current workflow code. A change that would break workflows
// already running fails here: version it with workflow.GetVersion, or, if no
// deployment runs the old code, record the histories again. Files without a
// prefix come from the first release's code, v2_* from the code after the
// pull-request lanes and ordering rules, v3_* from lean events and builds
// (versioned by their input) and admission by signal, v4_* from Slim
// builds and lane places in events' results, v5_* from builds handed to
// the lanes by the enqueue-builds update and started with the lanes'
// answer, v6_* from builds that no lane can make wait not held for
// earlier events, v7_owned_* from events that run their builds themselves
// (SLUICE_BUILDS_IN_EVENTS); all must keep replaying.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata/histories")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			replayer := worker.NewWorkflowReplayer()
			Register(replayer)
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
