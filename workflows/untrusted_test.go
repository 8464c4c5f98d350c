package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
)

// A pull request from a fork is dispatched to its queue's untrusted task
// queue, every time it is dispatched; a pull request from a branch of the
// repository, and a build marked as a fork's without a pull request, go to
// the queue's own task queue. A fork's build whose history predates the
// change keeps the queue's own task queue, so it replays.
func TestBuildWorkflowForkGoesToUntrustedTaskQueue(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		prBuild := BuildRef{Pipeline: "app", Job: "test", Event: 7, PR: 12}
		tests := []struct {
			name   string
			build  BuildRef
			fork   bool
			oldRun bool // the history was recorded before changeUntrustedQueue
			want   string
		}{
			{name: "fork pull request", build: prBuild, fork: true, want: "queue/gpu@untrusted"},
			{name: "pull request from a branch", build: prBuild, want: "queue/gpu"},
			{name: "fork flag without a pull request", build: testBuild, fork: true, want: "queue/gpu"},
			{name: "fork pull request of an old history", build: prBuild, fork: true, oldRun: true, want: "queue/gpu"},
		}
		for _, tt := range tests {
			if tt.oldRun && host == eventHost {
				continue // an event that owns its builds has no old histories
			}
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host,
					attemptPlan{steps: []buildStep{claimAs("exec-a")}, err: heartbeatLost()},
					attemptPlan{steps: []buildStep{claimAs("exec-b")}, result: succeeded("exec-b")},
				)
				if tt.oldRun {
					h.env.OnGetVersion(changeUntrustedQueue, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				}
				in := buildInput()
				in.Lean = !tt.oldRun // a lean build asks no version
				in.Build, in.Lane.Build = tt.build, tt.build
				in.Trigger.Fork = tt.fork
				grantAt(h, 0)
				st := h.run(in)
				require.Equal(t, StatusSuccess, st.Status, st.Reason)
				require.Equal(t, tt.fork && tt.build.PR > 0, st.Fork)
				opts := h.rec.activityOptions("RunBuild")
				require.Len(t, opts, 2, "dispatched again after the lost executor")
				for _, o := range opts {
					require.Equal(t, tt.want, o.TaskQueue)
				}
				for _, in := range h.inputs {
					require.Equal(t, st.Fork, in.Fork)
				}
			})
		}
	})
}

func TestTaskQueueNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"default", "gpu pool", "a.b-c_d"} {
		q, untrusted, ok := QueueFromTaskQueue(QueueTaskQueue(name))
		require.True(t, ok)
		require.False(t, untrusted)
		require.Equal(t, name, q)
		q, untrusted, ok = QueueFromTaskQueue(UntrustedTaskQueue(name))
		require.True(t, ok)
		require.True(t, untrusted)
		require.Equal(t, name, q)
		q, untrusted, ok = activities.SplitTaskQueue(UntrustedTaskQueue(name))
		require.Equal(t, []any{name, true, true}, []any{q, untrusted, ok}, "the executor reads the name the workflow writes")
	}
	_, _, ok := QueueFromTaskQueue(ControllerTaskQueue)
	require.False(t, ok)
}
