package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/workflows"
)

// TestSpecWarningsAndParameters: a spec with fields sluice does not act on
// gets warnings from `pipeline validate`, pipeline create and update (API
// and CLI) and on the event; pipeline parameters are listed by `pipeline
// show`, refused before anything starts when outside their choices or
// unknown, reach the step's environment, are shown by `event show` and are
// carried by `event restart`.
func TestSpecWarningsAndParameters(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	out := filepath.Join(t.TempDir(), "seen")
	spec := `
parameters:
  target:
    value: [staging, production]
    description: where to deploy
  note: hello
annotations:
  screwdriver.cd/buildCluster: aws
shared:
  image: alpine
  parameters:
    region: eu
jobs:
  deploy:
    requires: [~commit]
    provider: git@github.com:org/provider.git#main:provider.yaml
    steps:
      - show: echo "$SD_EVENT_ID target=$SD_PARAM_TARGET note=$SD_PARAM_NOTE" >> ` + out + `
`
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	cli := []string{"SLUICE_API_URL=" + e.APIURL}

	// validate names every field sluice ignores.
	file := filepath.Join(t.TempDir(), "screwdriver.yaml")
	require.NoError(t, os.WriteFile(file, []byte(spec), 0o644))
	stdout, _, code := sluice(t, nil, "pipeline", "validate", file)
	require.Zero(t, code)
	for _, field := range []string{"annotations.screwdriver.cd/buildCluster", "shared.parameters", "jobs.deploy.provider"} {
		require.Contains(t, stdout, file+": warning: "+field+": ", "validate warns about %s", field)
	}

	// Create (API): the answer carries the warnings and the parameters.
	p, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "params", Repo: repo.Dir})
	require.NoError(t, err)
	fields := func(ws []pipeline.Warning) []string {
		var fs []string
		for _, w := range ws {
			fs = append(fs, w.Field)
		}
		return fs
	}
	require.ElementsMatch(t, []string{"annotations.screwdriver.cd/buildCluster", "shared.parameters", "jobs.deploy.provider"}, fields(p.Warnings))
	require.Equal(t, []pipeline.Parameter{
		{Name: "note", Default: "hello"},
		{Name: "target", Default: "staging", Description: "where to deploy", Choices: []string{"staging", "production"}},
	}, p.Parameters)

	// Update (API): the answer carries the warnings of the spec it now reads.
	admins := []string{"role:admin"}
	p, err = e.API.UpdatePipeline(ctx, "params", api.UpdatePipelineRequest{Admins: &admins})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"annotations.screwdriver.cd/buildCluster", "shared.parameters", "jobs.deploy.provider"}, fields(p.Warnings))

	// Update (CLI) prints them; show lists the parameters.
	stdout, stderr, code := sluice(t, cli, "pipeline", "update", "params", "--admin", "role:ops")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "warning: jobs.deploy.provider: providers (cloud build services) are not supported")
	stdout, stderr, code = sluice(t, cli, "pipeline", "show", "params")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "parameters (event start -p NAME=VALUE")
	require.Regexp(t, `target\s+staging\s+staging, production\s+where to deploy`, stdout)
	require.Contains(t, stdout, "warning: shared.parameters: job-level parameters are ignored")

	// A value outside the choices, or an unknown name, starts nothing.
	_, stderr, code = sluice(t, cli, "event", "start", "params", "-p", "target=prod")
	require.NotZero(t, code)
	require.Contains(t, stderr, `parameter "target": "prod" is not one of the allowed values: "staging", "production"`)
	_, stderr, code = sluice(t, cli, "event", "start", "params", "-p", "tagret=production")
	require.NotZero(t, code)
	require.Contains(t, stderr, `parameter "tagret": not a parameter of the pipeline (it has: note, target)`)
	_, stderr, code = sluice(t, cli, "event", "start", "params", "-p", "target")
	require.NotZero(t, code)
	require.Contains(t, stderr, `-p "target": want NAME=VALUE`)
	_, err = e.StartEvent(ctx, "params", api.StartEventRequest{Parameters: map[string]string{"target": "qa"}})
	require.ErrorContains(t, err, `"qa" is not one of the allowed values`)
	evs, err := e.API.ListEvents(ctx, "params", 10)
	require.NoError(t, err)
	require.Empty(t, evs, "a refused start starts no event")
	p, err = e.API.GetPipeline(ctx, "params")
	require.NoError(t, err)
	require.Zero(t, p.Events, "a refused start takes no event number")

	// A good value reaches the step and the event.
	stdout, stderr, code = sluice(t, cli, "event", "start", "params", "-p", "target=production", "--wait")
	require.Zero(t, code, stderr)
	id := strings.TrimSpace(strings.SplitN(stdout, "\n", 2)[0])
	ev := e.WaitEvent(id, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	require.Equal(t, map[string]string{"target": "production", "note": "hello"}, ev.Parameters)
	require.Contains(t, strings.Join(ev.Warnings, "\n"), "jobs.deploy.provider: ", "the event carries the spec's warnings")
	stdout, stderr, code = sluice(t, cli, "event", "show", id)
	require.Zero(t, code, stderr)
	require.Regexp(t, `parameter:\s+target=production`, stdout)
	require.Regexp(t, `parameter:\s+note=hello`, stdout)

	// The event page shows the parameters and a warnings box.
	page, err := http.Get(e.APIURL + "/ui/pipelines/params/events/" + strconv.Itoa(ev.Number)) //nolint:noctx // a test's one request
	require.NoError(t, err)
	body, err := io.ReadAll(page.Body)
	require.NoError(t, page.Body.Close())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, page.StatusCode, string(body))
	require.Contains(t, string(body), "<code>target=production</code>")
	require.Regexp(t, `(?s)<div class="warnings".*<li>jobs.deploy.provider: providers`, string(body))

	// So does the pipeline page, with the parameters.
	page, err = http.Get(e.APIURL + "/ui/pipelines/params") //nolint:noctx // a test's one request
	require.NoError(t, err)
	body, err = io.ReadAll(page.Body)
	require.NoError(t, page.Body.Close())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, page.StatusCode, string(body))
	require.Regexp(t, `<td><code>target</code></td><td>staging</td><td>staging, production</td><td>where to deploy</td>`, string(body))
	require.Contains(t, string(body), "<li><code>shared.parameters</code>: job-level parameters")

	// The restart runs with the same parameters.
	stdout, stderr, code = sluice(t, cli, "event", "restart", id, "--from", "deploy", "--wait")
	require.Zero(t, code, stderr)
	rid := strings.TrimSpace(strings.SplitN(stdout, "\n", 2)[0])
	require.NotEqual(t, id, rid)
	rev := e.WaitEvent(rid, time.Minute)
	require.Equal(t, workflows.StatusSuccess, rev.Status, rev.Reason)
	require.Equal(t, ev.Parameters, rev.Parameters)

	// A commit event (as a webhook starts) gets the defaults.
	started, err := e.StartEvent(ctx, "params", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	cev := e.WaitEvent(started.ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, cev.Status, cev.Reason)
	require.Equal(t, map[string]string{"target": "staging", "note": "hello"}, cev.Parameters)

	seen, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, id+" target=production note=hello\n"+rid+" target=production note=hello\n"+started.ID+" target=staging note=hello\n", string(seen))
}
