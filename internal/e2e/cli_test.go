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
	out, _, code = sluice(t, nil, "--version")
	require.Zero(t, code)
	require.True(t, strings.HasPrefix(out, "sluice "), out)
	require.Contains(t, out, "Temporal server v1.32")
	out, _, code = sluice(t, nil, "version", "-o", "json")
	require.Zero(t, code)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	require.NotEmpty(t, v["version"])
	require.NotEmpty(t, v["go_version"])
	require.NotEmpty(t, v["temporal_sdk"])
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
		{name: "bad build list time", args: []string{"build", "list", "--since", "yesterday"}, want: `--since "yesterday": want a time`},
		{name: "bad event list trigger", args: []string{"event", "list", "app", "--trigger", "push"}, want: `--trigger "push"`},
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

// TestCLIExitCodes: 2 for usage mistakes (a mistyped subcommand gets a
// suggestion instead of help and 0), 3 when the API cannot be reached, 1
// when what was asked failed (an invalid spec, an invalid configuration);
// --help documents them.
func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("jobs:\n  build:\n    image: a\n    steps: [make]\n  test:\n    image: a\n    requires: [~commit, biuld]\n    steps: [x]\n"), 0o644))
	unreachable := []string{"SLUICE_API_URL=http://127.0.0.1:1"}
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{name: "mistyped subcommand", args: []string{"queue", "stauts", "x"}, code: 2, want: `unknown command "stauts" for "sluice queue"; did you mean status?`},
		{name: "mistyped command", args: []string{"pipline", "list"}, code: 2, want: `unknown command "pipline"`},
		{name: "unknown flag", args: []string{"queue", "list", "--bogus"}, code: 2, want: "unknown flag: --bogus"},
		{name: "missing argument", args: []string{"event", "show"}, code: 2, want: "missing EVENT"},
		{name: "bad output", args: []string{"queue", "list", "-o", "yaml"}, code: 2, want: `--output "yaml"`},
		{name: "bad flag value", args: []string{"build", "logs", "p/j/1", "--attempt", "0"}, code: 2, want: "--attempt 0: want 1 or more"},
		{name: "API unreachable", env: unreachable, args: []string{"queue", "list"}, code: 3, want: "is `sluice dev` or `sluice api` running?"},
		{name: "invalid spec", args: []string{"pipeline", "validate", bad}, code: 1, want: bad + ":7:25: error: test job has invalid requires: biuld. Cannot find job biuld in jobs. Did you mean build?"},
		{name: "invalid config", env: []string{"SLUICE_BUILD_MAX_ATTEMPTS=0"}, args: []string{"config"}, code: 1, want: "SLUICE_BUILD_MAX_ATTEMPTS: must be 1-100"},
		{name: "store not PostgreSQL", env: []string{"SLUICE_DB=mysql://db/sluice"}, args: []string{"api"}, code: 1, want: `SLUICE_DB: want empty (SQLite in SLUICE_DATA_DIR) or a postgres:// URL, got scheme "mysql"`},
		{name: "PostgreSQL store without a key", env: []string{"SLUICE_DB=postgres://127.0.0.1:1/sluice", "SLUICE_SECRET_KEY=", "SLUICE_DATA_DIR=" + dir, "TEMPORAL_ADDRESS=127.0.0.1:1"}, args: []string{"api"}, code: 1, want: "SLUICE_SECRET_KEY: not set, and SLUICE_DB is PostgreSQL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := sluice(t, tc.env, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}

	out, _, code := sluice(t, nil, "--help")
	require.Zero(t, code)
	require.Contains(t, out, "Exit codes:")
	require.Contains(t, out, "3    the sluice API or Temporal could not be reached")
	out, _, code = sluice(t, nil, "queue")
	require.Zero(t, code, "a command group without arguments shows its help")
	require.Contains(t, out, "Available Commands")

	// -o json: the problems as an array of {file, line, column, job, field, message}.
	out, _, code = sluice(t, nil, "pipeline", "validate", "-o", "json", bad)
	require.Equal(t, 1, code)
	var problems []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &problems), out)
	require.Len(t, problems, 1)
	require.Equal(t, map[string]any{
		"file": bad, "line": 7.0, "column": 25.0, "job": "test", "field": "requires[1]", "severity": "error",
		"message": "test job has invalid requires: biuld. Cannot find job biuld in jobs. Did you mean build?",
	}, problems[0])
	out, _, code = sluice(t, nil, "pipeline", "graph", "-o", "json", bad)
	require.Equal(t, 1, code)
	require.NoError(t, json.Unmarshal([]byte(out), &problems), out)
	require.Equal(t, "requires[1]", problems[0]["field"])

	// sluice config: effective values, secrets redacted, snake_case JSON.
	out, _, code = sluice(t, []string{"SLUICE_TOKEN=s3cret", "SLUICE_BUILD_MAX_ATTEMPTS=5"}, "config", "-o", "json")
	require.Zero(t, code)
	require.NotContains(t, out, "s3cret")
	var settings []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &settings))
	byName := map[string]map[string]any{}
	for _, s := range settings {
		byName[s["variable"].(string)] = s
	}
	require.Equal(t, "<redacted>", byName["SLUICE_TOKEN"]["value"])
	require.Equal(t, "5", byName["SLUICE_BUILD_MAX_ATTEMPTS"]["value"])
	require.Equal(t, "env", byName["SLUICE_BUILD_MAX_ATTEMPTS"]["source"])
	require.Equal(t, "default", byName["SLUICE_LOG_LEVEL"]["source"])
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
	require.NoError(t, os.WriteFile(bad, []byte("shared: {image: alpine}\njobs:\n  main:\n    requires: [nothere]\n    steps: [{sd-x: y}]\n"), 0o644))

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
