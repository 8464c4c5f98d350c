package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/pipeline"
)

// sluice runs the binary with args and returns stdout, stderr and the exit code.
func sluice(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestCLIHelp(t *testing.T) {
	t.Parallel()
	out, _, code := sluice(t, nil, "--help")
	require.Zero(t, code)
	for _, c := range []string{"dev", "worker", "api", "pipeline", "event", "build", "queue", "executor", "schedule"} {
		require.Contains(t, out, "\n  "+c+" ", "sluice --help lists %s", c)
	}
	out, _, code = sluice(t, nil, "dev", "--help")
	require.Zero(t, code)
	for _, want := range []string{"--data-dir", "SLUICE_DATA_DIR", "--ui-port", "SLUICE_UI_PORT", "--api-addr", "SLUICE_API_ADDR", "TEMPORAL_ADDRESS"} {
		require.Contains(t, out, want)
	}
	for _, sub := range [][]string{{"event", "start", "--help"}, {"queue", "create", "--help"}, {"build", "logs", "--help"}, {"worker", "--help"}} {
		_, _, code := sluice(t, nil, sub...)
		require.Zero(t, code, "%v", sub)
	}
}

func TestCLIBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{name: "unknown output", args: []string{"queue", "list", "-o", "yaml"}, want: `--output "yaml"`},
		{name: "bad event type", args: []string{"event", "start", "p", "--type", "push"}, want: "--type"},
		{name: "bad rule", args: []string{"queue", "create", "q", "--rule", "run-on=nowhere"}, want: "run-on"},
		{name: "bad worker role", args: []string{"worker", "--role", "boss"}, want: `--role "boss"`},
		{name: "bad env", env: []string{"SLUICE_UI_PORT=99999"}, args: []string{"dev"}, want: "SLUICE_UI_PORT"},
		{name: "bad flag", args: []string{"dev", "--ui-port", "-4"}, want: "--ui-port (SLUICE_UI_PORT)"},
		{name: "bad event id", args: []string{"event", "show", "nope"}, want: "<pipeline>/<number>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := sluice(t, tc.env, tc.args...)
			require.NotZero(t, code)
			require.Contains(t, stderr, tc.want)
		})
	}
}

// TestCLIPipelineSpec: validate prints ok or every error and exits non-zero
// for an invalid file; graph prints Screwdriver's workflowGraph; the dot
// output renders with Graphviz.
func TestCLIPipelineSpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte(`
shared: {image: alpine}
stages:
  canary:
    jobs: [deploy]
    requires: [build]
jobs:
  build: {requires: [~commit, ~pr], steps: [make]}
  lint: {requires: [~commit], steps: [lint]}
  test: {requires: [build, lint], steps: [test]}
  deploy: {steps: [deploy]}
  nightly: {steps: [nightly], annotations: {screwdriver.cd/buildPeriodically: H 3 * * *}}
  downstream: {requires: [~sd@other:publish], steps: [x]}
`), 0o644))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("jobs:\n  main:\n    requires: [nothere]\n    steps: [{sd-x: y}]\n"), 0o644))

	out, _, code := sluice(t, nil, "pipeline", "validate", good)
	require.Zero(t, code)
	require.Contains(t, out, good+": ok")

	_, stderr, code := sluice(t, nil, "pipeline", "validate", good, bad)
	require.NotZero(t, code)
	require.Contains(t, stderr, "nothere")
	require.Contains(t, stderr, `"sd-"`)

	out, _, code = sluice(t, nil, "pipeline", "graph", "--format", "json", good)
	require.Zero(t, code)
	var g pipeline.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	require.Contains(t, g.Edges, pipeline.Edge{Src: "build", Dest: "test", Join: true})
	require.Contains(t, g.Edges, pipeline.Edge{Src: "lint", Dest: "test", Join: true})
	require.Contains(t, g.Edges, pipeline.Edge{Src: "~pr", Dest: "build"})
	require.Contains(t, g.Edges, pipeline.Edge{Src: "~sd@other:publish", Dest: "downstream"})
	require.NotContains(t, out, `"join": false`, "join appears only when true")

	_, stderr, code = sluice(t, nil, "pipeline", "graph", bad)
	require.NotZero(t, code)
	require.Contains(t, stderr, "nothere")

	out, _, code = sluice(t, nil, "pipeline", "graph", "--format", "mermaid", good)
	require.Zero(t, code)
	require.Contains(t, out, "subgraph")

	dotOut, _, code := sluice(t, nil, "pipeline", "graph", "--format", "dot", good)
	require.Zero(t, code)
	require.True(t, strings.HasPrefix(strings.TrimSpace(dotOut), "digraph"))
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("graphviz (dot) is missing: the rendering check requires it (.ci/run installs it)")
	}
	render := exec.Command(dot, "-Tpng")
	render.Stdin = strings.NewReader(dotOut)
	png, err := render.Output()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "dot -Tpng renders a PNG")
}
