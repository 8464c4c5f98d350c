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
	require.Equal(t, 4, strings.Count(svg, "<line "), "four edges")
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
	require.Equal(t, workflows.StatusRunning, st, "a matrix job shows the job's status")
}
