package workflows

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

// Every reason a build refuses an executor's claim, each on its own: a
// claim accepted in any of these states would run the build twice or run
// one that is ending (the tests review's M10a–c survived every test).
func TestValidateClaimRefusals(t *testing.T) {
	t.Parallel()
	ready := func() *build {
		return &build{state: BuildState{ID: "app/test/7", Status: StatusQueued}, attempt: 1, dispatchN: 2}
	}
	ok := ClaimRequest{Attempt: 1, Executor: "exec-a", Dispatch: 2}
	require.NoError(t, ready().validateClaim(nil, ok), "a claim of the current attempt and dispatch is accepted")
	named := ok
	named.Build = "app/test/7"
	require.NoError(t, ready().validateClaim(nil, named), "a claim naming the build is accepted")

	tests := []struct {
		name  string
		setup func(*build)
		req   ClaimRequest
		want  string
	}{
		{"the build ended", func(b *build) { b.state.Status = StatusAborted }, ok, "build app/test/7 already ended ABORTED"},
		{"it is being cancelled", func(b *build) { b.cancel = true }, ok, "build app/test/7 is being cancelled"},
		{"it is being collapsed", func(b *build) { b.collapse = "collapsed into build app/test/8" }, ok, "build app/test/7 is being collapsed: collapsed into build app/test/8"},
		{"it is being aborted", func(b *build) { b.abort = "pipeline deleted" }, ok, "build app/test/7 is being aborted: pipeline deleted"},
		{"it is being superseded", func(b *build) { b.supersede = "superseded by event 9" }, ok, "build app/test/7 is being superseded: superseded by event 9"},
		{"it is failing", func(b *build) { b.fail = "queue gpu was deleted" }, ok, "build app/test/7 is failing: queue gpu was deleted"},
		{"another executor holds the attempt", func(b *build) { b.claimed, b.state.Executor = true, "exec-b" }, ok, "build app/test/7 attempt 1 is already running on exec-b"},
		{"a stale attempt", nil, ClaimRequest{Attempt: 0, Executor: "exec-a", Dispatch: 2}, "build app/test/7 is on attempt 1, not 0"},
		{"an earlier dispatch", nil, ClaimRequest{Attempt: 1, Executor: "exec-a", Dispatch: 1}, "build app/test/7 was dispatched again (dispatch 2, not 1)"},
		{"no executor named", nil, ClaimRequest{Attempt: 1, Dispatch: 2}, "claim names no executor"},
		{"another build named", nil, ClaimRequest{Build: "app/test/8", Attempt: 1, Executor: "exec-a", Dispatch: 2}, "the claim is for build app/test/8, not app/test/7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := ready()
			if tt.setup != nil {
				tt.setup(b)
			}
			err := b.validateClaim(nil, tt.req)
			require.EqualError(t, err, tt.want)
			require.Empty(t, b.state.Attempts, "a refused claim records no attempt")
			require.Equal(t, tt.name == "another executor holds the attempt", b.claimed)
		})
	}
}

// A job's and an event's status is its worst part's: FAILURE over ABORTED
// over COLLAPSED over SUCCESS (M11: ABORTED ranked above FAILURE survived
// every test).
func TestStatusPrecedence(t *testing.T) {
	t.Parallel()
	order := []Status{StatusSuccess, StatusCollapsed, StatusAborted, StatusFailure}
	for i, better := range order {
		for _, bad := range order[i+1:] {
			require.True(t, worse(bad, better), "%s ranks below %s", bad, better)
			require.False(t, worse(better, bad), "%s does not rank below %s", better, bad)
		}
	}
	require.False(t, worse(StatusSkipped, StatusSuccess), "a skipped job does not fail its event")
	require.False(t, worse(StatusSuccess, StatusSkipped))

	st, reason := jobStatus([]BuildState{
		{ID: "app/m/1#1", Status: StatusAborted, Reason: "cancelled"},
		{ID: "app/m/1#2", Status: StatusFailure, Reason: `step "x" exited with code 1`},
		{ID: "app/m/1#3", Status: StatusCollapsed, Reason: "collapsed"},
	})
	require.Equal(t, StatusFailure, st)
	require.Equal(t, `build app/m/1#2: step "x" exited with code 1`, reason)
	st, _ = jobStatus([]BuildState{{Status: StatusSuccess}, {Status: StatusCollapsed}})
	require.Equal(t, StatusCollapsed, st)
}

// A pull request reaches its ~pr jobs only, unless the spec chains PRs:
// the jobs downstream of them are neither checked against their queues'
// use rules nor given pending commit statuses (M12).
func TestPullRequestReachesItsPRJobsOnly(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: alpine}
jobs:
  test: {requires: [~pr, ~commit], steps: [{t: "true"}]}
  deploy: {requires: [test], steps: [{d: "true"}]}
`
	pr := &eventRun{spec: parseSpec(t, spec), in: EventInput{Trigger: Trigger{Kind: TriggerPR, PR: 4}}}
	require.Equal(t, []string{"test"}, pr.reachable([]string{"test"}))

	chained := &eventRun{spec: parseSpec(t, "annotations: {screwdriver.cd/chainPR: true}\n"+spec), in: pr.in}
	require.Equal(t, []string{"test", "deploy"}, chained.reachable([]string{"test"}))

	commit := &eventRun{spec: parseSpec(t, spec), in: EventInput{Trigger: Trigger{Kind: TriggerCommit}}}
	require.Equal(t, []string{"test", "deploy"}, commit.reachable([]string{"test"}))
}

// A schedule is set up for an identity: a periodic job on a queue it may
// not use is left out, saying why; a queue that does not exist is the
// events' concern.
func TestSchedulesFor(t *testing.T) {
	t.Parallel()
	spec := parseSpec(t, `
shared: {image: alpine}
jobs:
  main: {requires: [~commit], steps: [{a: "true"}]}
  nightly: {requires: [~commit], annotations: {screwdriver.cd/buildPeriodically: "H 3 * * *"}, steps: [{b: "true"}]}
  release:
    requires: [~commit]
    annotations: {screwdriver.cd/buildPeriodically: "H 4 * * *", screwdriver.cd/executor: release-q}
    steps: [{c: "true"}]
  elsewhere:
    requires: [~commit]
    annotations: {screwdriver.cd/buildPeriodically: "H 5 * * *", screwdriver.cd/executor: nowhere}
    steps: [{d: "true"}]
`)
	defined := []queue.Queue{queue.DefaultQueue(), {Name: "release-q", UseRoles: []string{"release"}, Rules: queue.DefaultQueue().Rules}}
	rel := queue.Identity{User: "rel", Roles: []string{"release"}}
	got, refused := SchedulesFor(spec, rel, defined, "")
	require.ElementsMatch(t, []string{"nightly", "release", "elsewhere"}, slices.Collect(maps.Keys(got)))
	require.Empty(t, refused)

	dev := queue.Identity{User: "dev", Roles: []string{"dev"}}
	got, refused = SchedulesFor(spec, dev, defined, "")
	require.ElementsMatch(t, []string{"nightly", "elsewhere"}, slices.Collect(maps.Keys(got)))
	require.Len(t, refused, 1)
	require.Contains(t, refused[0], `job release: user "dev" may not use queue release-q`)
	require.Equal(t, spec.Jobs["nightly"].Settings.PeriodicCron, got["nightly"])
}
