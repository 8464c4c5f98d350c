package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
)

// prBase is the base branch's spec: test runs on pr-pool with NPM_TOKEN.
const prBase = `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  test:
    requires: [~pr, ~commit]
    annotations: {screwdriver.cd/executor: pr-pool, screwdriver.cd/cpu: LOW}
    secrets: [NPM_TOKEN]
  deploy: {requires: [test], secrets: [DEPLOY_KEY]}
`

// prHead is what the pull request asks for: the release queue, the deploy
// key, chainPR, more memory.
const prHead = `
annotations: {screwdriver.cd/chainPR: true}
shared: {image: alpine, steps: [{pwn: env}]}
jobs:
  test:
    requires: [~pr, ~commit]
    annotations: {screwdriver.cd/executor: release-q, screwdriver.cd/ram: TURBO}
    secrets: [NPM_TOKEN, DEPLOY_KEY]
  deploy: {requires: [test], secrets: [DEPLOY_KEY]}
`

func prInput(t Trigger) EventInput {
	in := eventInput(t)
	id := PullRequestIdentity()
	in.Identity = &id
	return in
}

func prQueues() []queue.Queue {
	return []queue.Queue{
		queue.DefaultQueue(),
		{Name: "pr-pool", UseRoles: []string{PullRequestRole}},
		{Name: "release-q", UseRoles: []string{"release"}},
	}
}

func TestEventPullRequestTakesBaseSettings(t *testing.T) {
	t.Parallel()
	t.Run("the base branch's spec gives queue, cpu/ram, secrets and chainPR", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, "")
		// What ResolveEvent answers for a BaseRef: the head's steps with
		// the base's settings (pipeline.ApplyBase, tested with it).
		h.resolve.Spec = pipeline.ApplyBase(parseSpec(t, prHead), parseSpec(t, prBase))
		h.resolve.BaseSHA = "ba5e000000000000000000000000000000000001"
		h.resolve.Queues = prQueues()
		st := h.run(prInput(Trigger{Kind: TriggerPR, Branch: "main", PR: 12, SHA: eventSHA}))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, "ba5e000000000000000000000000000000000001", st.BaseSHA)
		require.Equal(t, PullRequestUser, st.ActsFor)

		require.Len(t, h.resolved, 1)
		require.Equal(t, "main", h.resolved[0].BaseRef, "the base is the branch the pull request targets")
		require.Equal(t, eventSHA, h.resolved[0].SHA, "the steps come from the head")

		require.Equal(t, []string{"test"}, h.jobsStarted(), "chainPR is off in the base")
		in := h.runsOf("test")[0].Input
		require.Equal(t, "pr-pool", in.Queue)
		require.Equal(t, []string{"NPM_TOKEN"}, in.Secrets)
		require.Equal(t, "LOW", in.CPU)
		require.Empty(t, in.RAM)
		require.Equal(t, "pwn", in.Steps[0].Name)
	})
	t.Run("the base is the branch the pull request targets", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, prBase)
		h.resolve.Queues = prQueues()
		h.run(prInput(Trigger{Kind: TriggerPR, Branch: "release-1", PR: 12}))
		require.Equal(t, "release-1", h.resolved[0].BaseRef)
	})
	t.Run("the base of a pull request without a branch is the pipeline's", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, prBase)
		h.resolve.Queues = prQueues()
		h.run(prInput(Trigger{Kind: TriggerPRClosed, PR: 12}))
		require.Equal(t, "main", h.resolved[0].BaseRef)
	})
	t.Run("other events read no base", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, prBase)
		h.resolve.Queues = prQueues()
		h.run(eventInput(commitOnMain))
		require.Empty(t, h.resolved[0].BaseRef)
	})
	t.Run("a pull request acts for the pull-request identity on queues", func(t *testing.T) {
		t.Parallel()
		// The base itself names the restricted queue: the pull request
		// still may not use it.
		h := newEventHarness(t, `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  test: {requires: [~pr], annotations: {screwdriver.cd/executor: release-q}}
`)
		h.resolve.Queues = prQueues()
		st := h.run(prInput(Trigger{Kind: TriggerPR, Branch: "main", PR: 12}))
		require.Equal(t, StatusFailure, st.Status)
		require.Contains(t, st.Reason, `job test: user "pull-request" may not use queue release-q`)
		require.Empty(t, h.builds)
	})
}

const restrictedSpec = `
annotations: {screwdriver.cd/restrictPR: fork}
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  test: {requires: [~pr]}
`

func TestEventPullRequestApproval(t *testing.T) {
	t.Parallel()
	fork := Trigger{Kind: TriggerPR, Branch: "main", PR: 7, SHA: eventSHA, Fork: true}
	t.Run("a restricted pull request waits until an admin approves", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, restrictedSpec)
		at(h.env, 30*time.Minute, func() {
			st := query[EventState](t, h.env, QueryEvent)
			require.Equal(t, StatusBlocked, st.Status)
			require.Equal(t, "waiting for approval: pull request #7 from a fork (screwdriver.cd/restrictPR: fork); a pipeline admin runs: sluice event approve app/1", st.Reason)
			require.Equal(t, WaitApproval, st.WaitCode)
			require.Equal(t, &Approval{Required: "pull request #7 from a fork (screwdriver.cd/restrictPR: fork)"}, st.Approval)
			require.Empty(t, h.builds, "nothing runs before the approval")
			batches := enqueueBatches(h)
			require.Len(t, batches, 1, "the pipeline's hold is released while the event waits")
			require.Empty(t, batches[0].Requests)
		})
		empty := updateAt(h.env, 40*time.Minute, UpdateApproveEvent, ApproveRequest{})
		ok := updateAt(h.env, time.Hour, UpdateApproveEvent, ApproveRequest{User: "alice"})
		again := updateAt(h.env, time.Hour+time.Minute, UpdateApproveEvent, ApproveRequest{User: "bob"})
		st := h.run(prInput(fork))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Empty(t, st.WaitCode, "approved, it waits no more")
		require.ErrorContains(t, empty.Rejected, "approve: name the user who approves")
		require.True(t, ok.Accepted)
		require.NoError(t, ok.Err)
		require.ErrorContains(t, again.Rejected, "event app/1 is not waiting for approval: alice approved it already")
		require.Equal(t, &Approval{Required: "pull request #7 from a fork (screwdriver.cd/restrictPR: fork)", ApprovedBy: "alice", ApprovedAt: wfT0.Add(time.Hour)}, st.Approval)
		runs := h.runsOf("test")
		require.Len(t, runs, 1)
		require.Equal(t, wfT0.Add(time.Hour), runs[0].Start, "the build starts once approved")
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, restrictedSpec)
		at(h.env, time.Hour, func() { h.env.CancelWorkflow() })
		st := h.run(prInput(fork))
		require.Equal(t, StatusAborted, st.Status)
		require.Equal(t, "event cancelled while waiting for approval", st.Reason)
		require.Empty(t, h.builds)
	})
	t.Run("a newer commit ends the wait", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, restrictedSpec)
		at(h.env, time.Hour, func() {
			h.env.SignalWorkflow(SignalPRSuperseded, PRSuperseded{Reason: "superseded by bbbbbbbbbbbb (event 2)"})
		})
		late := updateAt(h.env, 2*time.Hour, UpdateApproveEvent, ApproveRequest{User: "alice"})
		st := h.run(prInput(fork))
		require.Equal(t, StatusCollapsed, st.Status)
		require.Equal(t, "not approved before it was superseded: superseded by bbbbbbbbbbbb (event 2)", st.Reason)
		require.Equal(t, wfT0.Add(time.Hour), st.EndTime)
		require.False(t, late.Accepted, "the ended event takes no approval")
		require.Empty(t, h.builds)
	})
	t.Run("a superseded notice that came before the wait ends it at once", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, restrictedSpec)
		h.env.RegisterDelayedCallback(func() {
			h.env.SignalWorkflow(SignalPRSuperseded, PRSuperseded{Closed: true, Reason: "pull request #7 was closed"})
		}, 0)
		st := h.run(prInput(fork))
		require.Equal(t, StatusAborted, st.Status)
		require.Equal(t, "not approved before it was superseded: pull request #7 was closed", st.Reason)
		require.Empty(t, h.builds)
	})
	t.Run("a notice to an event that does not wait changes nothing", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, restrictedSpec)
		at(h.env, 30*time.Second, func() {
			h.env.SignalWorkflow(SignalPRSuperseded, PRSuperseded{Reason: "superseded by bbbbbbbbbbbb (event 2)"})
		})
		st := h.run(prInput(Trigger{Kind: TriggerPR, Branch: "main", PR: 7, SHA: eventSHA}))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
	})
	t.Run("not approved in time", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, restrictedSpec)
		st := h.run(prInput(fork))
		require.Equal(t, StatusAborted, st.Status)
		require.Equal(t, "not approved within 7 days: pull request #7 from a fork (screwdriver.cd/restrictPR: fork)", st.Reason)
		require.Equal(t, wfT0.Add(ApprovalWait), st.EndTime)
		require.Empty(t, h.builds)
	})
	for _, tc := range []struct {
		name     string
		restrict string
		in       EventInput
		waits    bool
	}{
		{name: "fork: a branch pull request runs", restrict: "fork", in: prInput(Trigger{Kind: TriggerPR, Branch: "main", PR: 7})},
		{name: "branch: a branch pull request waits", restrict: "branch", in: prInput(Trigger{Kind: TriggerPR, Branch: "main", PR: 7}), waits: true},
		{name: "branch: a fork runs", restrict: "branch", in: prInput(fork)},
		{name: "all: a fork waits", restrict: "all", in: prInput(fork), waits: true},
		{name: "all: its close waits too", restrict: "all", in: prInput(Trigger{Kind: TriggerPRClosed, Branch: "main", PR: 7, Fork: true}), waits: true},
		{name: "none: a fork runs", restrict: "none", in: prInput(fork)},
		{name: "all: a person's pull request event runs", restrict: "all", in: func() EventInput {
			in := eventInput(fork)
			in.Identity = &queue.Identity{User: "ann"}
			return in
		}()},
		{name: "all: a commit runs", restrict: "all", in: prInput(commitOnMain)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, "annotations: {screwdriver.cd/restrictPR: "+tc.restrict+"}\nshared: {image: alpine, steps: [{run: ./run.sh}]}\njobs: {test: {requires: [~pr, ~pr-closed, ~commit]}}\n")
			approve := updateAt(h.env, 30*time.Second, UpdateApproveEvent, ApproveRequest{User: "alice"})
			st := h.run(tc.in)
			require.Equal(t, StatusSuccess, st.Status, st.Reason)
			if !tc.waits {
				require.ErrorContains(t, approve.Rejected, "is not waiting for approval")
				require.Nil(t, st.Approval)
				require.Equal(t, wfT0, h.runsOf("test")[0].Start)
				return
			}
			require.NoError(t, approve.Err)
			require.Equal(t, "alice", st.Approval.ApprovedBy)
			require.Equal(t, wfT0.Add(30*time.Second), h.runsOf("test")[0].Start)
		})
	}
	t.Run("a bad restrictPR fails the event", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, "annotations: {screwdriver.cd/restrictPR: forks}\nshared: {image: alpine, steps: [{run: ./run.sh}]}\njobs: {test: {requires: [~pr]}}\n")
		st := h.run(prInput(fork))
		require.Equal(t, StatusFailure, st.Status)
		require.Contains(t, st.Reason, `"screwdriver.cd/restrictPR" must be none, all, fork or branch, got "forks"`)
		require.Empty(t, h.builds)
	})
}
