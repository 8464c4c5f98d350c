package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/runner"
)

// Every way a build ends records its cause, for machines, next to the
// reason for people.
func TestBuildCauses(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		failed := activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusFailure, Reason: `step "test" exited with code 2`, Steps: []activities.StepResult{
			{Name: "setup", ExitCode: 0}, {Name: "test", ExitCode: 2}, {Name: "more", Skipped: true}, {Name: "teardown-x", ExitCode: 1},
		}}
		timedOut := activities.RunBuildResult{Executor: "exec-a", Status: runner.StatusTimeout, Reason: `timed out after 30m0s in step "test"`, Steps: []activities.StepResult{
			{Name: "test", ExitCode: 143},
		}}
		tests := []struct {
			name   string
			plans  []attemptPlan
			during func(h *buildHarness)
			in     func(*BuildInput)
			status Status
			cause  Cause
			info   *CauseInfo
		}{
			{
				name: "succeeded", plans: []attemptPlan{{steps: []buildStep{claimAs("exec-a")}, result: succeeded("exec-a")}},
				status: StatusSuccess, cause: CauseSucceeded,
			},
			{name: "virtual job", in: func(in *BuildInput) { in.Virtual = true }, status: StatusSuccess, cause: CauseSucceeded},
			{
				name: "a step failed", plans: []attemptPlan{{steps: []buildStep{claimAs("exec-a")}, result: failed}},
				status: StatusFailure, cause: CauseFailed, info: &CauseInfo{Step: "test", ExitCode: 2},
			},
			{
				name: "timed out", plans: []attemptPlan{{steps: []buildStep{claimAs("exec-a")}, result: timedOut}},
				status: StatusFailure, cause: CauseTimedOut, info: &CauseInfo{Step: "test", ExitCode: 143},
			},
			{name: "executors lost", plans: []attemptPlan{
				{steps: []buildStep{claimAs("exec-a")}, err: heartbeatLost()},
				{steps: []buildStep{claimAs("exec-b")}, err: heartbeatLost()},
				{steps: []buildStep{claimAs("exec-c")}, err: heartbeatLost()},
			}, status: StatusFailure, cause: CauseExecutorLost, info: &CauseInfo{Executor: "exec-c", Attempt: 3}},
			{
				name: "executor lost, no retry asked", in: func(in *BuildInput) { in.NoRetryOnLoss = true },
				plans:  []attemptPlan{{steps: []buildStep{claimAs("exec-a")}, err: heartbeatLost()}},
				status: StatusFailure, cause: CauseExecutorLost, info: &CauseInfo{Executor: "exec-a", Attempt: 1},
			},
			{
				name: "its queue was deleted while it waited for a slot",
				plans: []attemptPlan{{err: temporal.NewNonRetryableApplicationError(
					"queue gpu was deleted while build app/test/7 waited for it", activities.ErrTypeQueueDeleted, nil)}},
				status: StatusFailure, cause: CauseRefused,
			},
			{
				name: "collapsed while waiting", plans: []attemptPlan{{steps: []buildStep{laneSignal(collapseMsg)}, block: true}},
				status: StatusCollapsed, cause: CauseSuperseded, info: &CauseInfo{Build: "app/test/8"},
			},
			{
				name: "its queue was deleted", plans: []attemptPlan{{steps: []buildStep{laneSignal(LaneMessage{Kind: LaneFail, Reason: "queue gpu was deleted"})}, block: true}},
				status: StatusFailure, cause: CauseRefused,
			},
			{name: "cancelled by a person while queued", plans: []attemptPlan{{steps: []buildStep{
				func(h *buildHarness, _ activities.RunBuildInput) { h.cancel("dana") },
			}, block: true}}, status: StatusAborted, cause: CauseCancelled, info: &CauseInfo{By: "dana"}},
			{
				name: "cancelled, nobody named", plans: []attemptPlan{{steps: []buildStep{cancelBuild()}, block: true}},
				status: StatusAborted, cause: CauseCancelled,
			},
			{name: "cancelled in the lane", during: func(h *buildHarness) {
				at(h.env, 30*time.Second, func() {
					h.cancel("erin")
				})
			}, status: StatusAborted, cause: CauseCancelled, info: &CauseInfo{By: "erin"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				h := newBuildHarness(t, host, tt.plans...)
				in := buildInput()
				if tt.in != nil {
					tt.in(&in)
				}
				if !in.Virtual {
					grantAt(h, time.Minute)
				}
				if tt.during != nil {
					tt.during(h)
				}
				st := h.run(in)
				require.Equal(t, tt.status, st.Status, st.Reason)
				require.Equal(t, tt.cause, st.Cause, st.Reason)
				require.Equal(t, tt.info, st.CauseInfo)
				require.True(t, st.Cause.Valid())
				require.Equal(t, int64(1), h.rec.counter("sluice_builds_ended{cause="+string(tt.cause)+",queue=gpu}"), "counted once by cause")
			})
		}
	})
}

// A build tells the registry each time an executor lost its claimed
// attempt, so an executor that keeps losing builds can be drained.
func TestBuildReportsLostAttempts(t *testing.T) {
	t.Parallel()
	eachHost(t, func(t *testing.T, host hostKind) {
		h := newBuildHarness(t, host,
			attemptPlan{steps: []buildStep{claimAs("exec-a")}, err: heartbeatLost()},
			attemptPlan{steps: []buildStep{claimAs("exec-b")}, err: heartbeatLost()},
			attemptPlan{steps: []buildStep{claimAs("exec-a")}, result: succeeded("exec-a")},
		)
		grantAt(h, time.Minute)
		st := h.run(buildInput())
		require.Equal(t, StatusSuccess, st.Status)
		require.Equal(t, []any{
			BuildLost{Member: "exec-a", Build: "app/test/7"},
			BuildLost{Member: "exec-b", Build: "app/test/7"},
		}, h.rec.signalsTo(RegistryID, SignalBuildLost))
		// Each next attempt is first offered to another executor than the one
		// that lost the previous.
		require.Len(t, h.inputs, 3)
		require.Empty(t, h.inputs[0].Avoid)
		require.Equal(t, "exec-a", h.inputs[1].Avoid)
		require.Equal(t, "exec-b", h.inputs[2].Avoid)
		// Granted at one minute, lost at once: avoided for AvoidLostExecutorFor from then.
		require.WithinDuration(t, wfT0.Add(time.Minute+AvoidLostExecutorFor), h.inputs[1].AvoidUntil, 5*time.Second)
	})
}
