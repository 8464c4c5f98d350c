package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/workflows"
)

func TestEventGraph(t *testing.T) {
	t.Parallel()
	spec, err := pipeline.ParseWithOptions([]byte(`
shared: {image: alpine}
jobs:
  build: {requires: [~commit], steps: [{b: "true"}]}
  test: {requires: [~build], steps: [{t: "true"}]}
  lint: {requires: [~build], steps: [{l: "true"}]}
  deploy: {requires: [test, lint], steps: [{d: "true"}]}
`), pipeline.Options{Pipeline: "app"})
	require.NoError(t, err)
	ev := Event{
		Jobs: []workflows.JobOutcome{
			{Job: "build", Status: workflows.StatusSuccess},
			{Job: "test", Status: workflows.StatusFailure, Reason: `step "t" exited <1>`},
			{Job: "lint", Status: workflows.StatusRunning},
		},
		Builds: []Build{{ID: "app/lint/1", Job: "lint", Status: workflows.StatusQueued, Reason: "waiting for a slot"}},
	}
	svg := string(eventGraph(spec, ev))
	box := func(job string) string {
		i := strings.Index(svg, `data-job="`+job+`"`)
		require.GreaterOrEqual(t, i, 0, job)
		return svg[i : i+strings.Index(svg[i:], "</g>")]
	}
	require.Contains(t, box("build"), `fill="#2da44e"`)
	require.Contains(t, box("test"), `fill="#cf222e"`)
	require.Contains(t, box("test"), "exited &lt;1&gt;", "reasons are escaped")
	require.Contains(t, box("lint"), `fill="#8c959f"`, "a job of one build shows the build's status: QUEUED")
	require.Contains(t, box("deploy"), `fill="#ffffff"`, "not reached")
	require.Contains(t, svg, `<a href="/ui/builds/app/lint/1">`)
	// deploy sits a column right of test and lint, which sit right of build.
	require.Equal(t, 5, strings.Count(svg, "<line "), "four edges between jobs, one from ~commit")
	require.Contains(t, svg, `data-trigger="commit" data-fired="false"`, "the trigger ~commit is drawn (this event has no trigger)")
	require.Contains(t, svg, `stroke-dasharray`, "OR edges are dashed")
}

// A started job whose only build waits shows QUEUED, in the graph and the
// jobs table alike; a finished job shows its own status.
func TestJobShownFollowsItsOnlyBuild(t *testing.T) {
	t.Parallel()
	queued := []Build{{Status: workflows.StatusQueued, Reason: "waiting for a slot on queue default"}}
	st, why := jobShown(workflows.StatusRunning, "", queued)
	require.Equal(t, workflows.StatusQueued, st)
	require.Equal(t, "waiting for a slot on queue default", why)
	st, _ = jobShown(workflows.StatusSuccess, "", queued)
	require.Equal(t, workflows.StatusSuccess, st)
	two := append(queued, Build{Status: workflows.StatusRunning})
	st, _ = jobShown(workflows.StatusRunning, "", two)
	require.Equal(t, workflows.StatusRunning, st, "a matrix job runs when one of its builds runs")
	// A matrix job whose builds all wait shows QUEUED too (not RUNNING), and
	// one whose builds are all held by their lane BLOCKED.
	st, why = jobShown(workflows.StatusRunning, "", []Build{
		{Status: workflows.StatusBlocked, Reason: "blocked by app/deploy/3"}, {Status: workflows.StatusQueued, Reason: "next in line"},
	})
	require.Equal(t, workflows.StatusQueued, st)
	require.Equal(t, "next in line", why)
	st, _ = jobShown(workflows.StatusRunning, "", []Build{{Status: workflows.StatusBlocked}, {Status: workflows.StatusSuccess}})
	require.Equal(t, workflows.StatusBlocked, st)
	st, _ = jobShown(workflows.StatusRunning, "", []Build{{Status: workflows.StatusSuccess}})
	require.Equal(t, workflows.StatusRunning, st, "every build ended: the job ends in a moment")
	st, _ = jobShown(workflows.StatusRunning, "", nil)
	require.Equal(t, workflows.StatusRunning, st)
}

// The API's event shows each job as its builds do, so `event show`, the
// graph and the jobs table agree.
func TestShownJobs(t *testing.T) {
	t.Parallel()
	jobs := []workflows.JobOutcome{{Job: "a", Status: workflows.StatusRunning}, {Job: "b", Status: workflows.StatusSuccess}}
	out := shownJobs(jobs, []Build{{Job: "a", Status: workflows.StatusQueued, Reason: "waits"}, {Job: "b", Status: workflows.StatusSuccess}})
	require.Equal(t, workflows.StatusQueued, out[0].Status)
	require.Equal(t, "waits", out[0].Reason)
	require.Equal(t, workflows.StatusSuccess, out[1].Status)
	require.Equal(t, workflows.StatusRunning, jobs[0].Status, "the event's own record is not changed")
}

// The graph draws triggers (an SCM event, another pipeline's job), marks
// the one that started the event, and a matrix job's builds as squares
// linking to each build.
func TestEventGraphTriggersAndMatrix(t *testing.T) {
	t.Parallel()
	spec, err := pipeline.ParseWithOptions([]byte(`
shared: {image: alpine}
jobs:
  build:
    requires: [~commit, ~pr, ~sd@other:publish]
    matrix: {GO: ["1.22", "1.23"]}
    steps: [{b: "true"}]
  deploy: {requires: [build], steps: [{d: "true"}]}
`), pipeline.Options{Pipeline: "app"})
	require.NoError(t, err)
	ev := Event{
		ID: "app/4", Trigger: workflows.Trigger{Kind: workflows.TriggerRemote, Remote: "sd@other:publish"},
		Jobs: []workflows.JobOutcome{{Job: "build", Status: workflows.StatusRunning}},
		Builds: []Build{
			{ID: "app/build/4-1", Job: "build", Status: workflows.StatusSuccess},
			{ID: "app/build/4-2", Job: "build", Status: workflows.StatusQueued},
		},
	}
	svg := string(eventGraph(spec, ev))
	require.Contains(t, svg, `data-trigger="commit" data-fired="false"`)
	require.Contains(t, svg, `data-trigger="pr" data-fired="false"`)
	require.Contains(t, svg, `<a href="/ui/pipelines/other"><g class="trigger" data-trigger="sd@other:publish" data-fired="true">`)
	require.Contains(t, svg, `<a href="/ui/builds/app/build/4-1" class="permutation" data-build="app/build/4-1">`)
	require.Contains(t, svg, `<a href="/ui/builds/app/build/4-2" class="permutation" data-build="app/build/4-2">`)
	require.Contains(t, svg, `<a href="/ui/builds?event=app%2F4&amp;job=build">`, "the matrix job links to its builds")
	i := strings.Index(svg, `data-job="build"`)
	require.Contains(t, svg[i:i+200], `data-status="QUEUED"`, "no build runs: the job shows QUEUED")
}

func TestTriggerFired(t *testing.T) {
	t.Parallel()
	commitMain := workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "main"}
	require.True(t, triggerFired("commit", commitMain))
	require.True(t, triggerFired("commit:main", commitMain))
	require.False(t, triggerFired("commit:feature", commitMain))
	require.True(t, triggerFired("commit:/^ma/", commitMain))
	require.False(t, triggerFired("commit:/^fe/", commitMain))
	require.False(t, triggerFired("pr", commitMain))
	require.True(t, triggerFired("tag:v1", workflows.Trigger{Kind: workflows.TriggerTag, Ref: "v1", Branch: "main"}))
	require.True(t, triggerFired("sd@other:publish", workflows.Trigger{Kind: workflows.TriggerRemote, Remote: "sd@other:publish"}))
	require.False(t, triggerFired("sd@other:test", workflows.Trigger{Kind: workflows.TriggerRemote, Remote: "sd@other:publish"}))
}
