package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// readme is the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "README.md"))
	require.NoError(t, err)
	return string(b)
}

// quickstartBlock is the shell block the README's quickstart has the user
// type in a second terminal.
func quickstartBlock(t *testing.T, doc string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "## Quickstart")
	require.True(t, ok, "README has a Quickstart section")
	_, rest, ok = strings.Cut(rest, "in another terminal")
	require.True(t, ok, "the quickstart says what to type in another terminal")
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok, "a sh block follows")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	return block
}

// inlineCommand finds the README's inline code span that starts with prefix
// (spans may wrap across lines) and returns it with its whitespace folded.
func inlineCommand(t *testing.T, doc, prefix string) string {
	t.Helper()
	re := regexp.MustCompile("`(" + regexp.QuoteMeta(prefix) + "[^`]*)`")
	m := re.FindStringSubmatch(doc)
	require.NotNil(t, m, "README shows `%s…`", prefix)
	return strings.Join(strings.Fields(m[1]), " ")
}

// cleanEnviron is the test process's environment without sluice's or
// Temporal's variables: each command sees only what the README tells the
// user to set.
func cleanEnviron(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLUICE_") || strings.HasPrefix(kv, "TEMPORAL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// TestReadmeCommands runs the README as a new user does: `make run` (that is
// `sluice dev` with every default, the data directory the relative `.sluice`
// of the directory it starts in) and, in another directory, the quickstart's
// shell block exactly as written; every command must exit 0 and the event
// pass. Then the README's queue, executor and secret commands: a queue from
// the queue example, a standalone executor started as the README shows from
// yet another directory with its default (relative) data directory, and a
// secret set as the README shows, used by a build on that executor.
//
// The ports are the only settings that differ from make run's (the tests
// run side by side): given through the environment, as the configuration
// table says.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("graphviz's dot is not installed: the quickstart renders the graph with it")
	}
	doc := readme(t)
	block := quickstartBlock(t, doc)
	require.Contains(t, block, "bin/sluice event start demo --type commit --branch main --wait")

	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.Symlink(testenv.Binary(t), filepath.Join(bin, "sluice")))

	temporalPort, apiPort := freePort(t), freePort(t)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	temporalAddr := fmt.Sprintf("127.0.0.1:%d", temporalPort)
	dev := exec.Command(filepath.Join(bin, "sluice"), "dev")
	dev.Dir = home
	dev.Env = cleanEnviron("SLUICE_TEMPORAL_PORT="+strconv.Itoa(temporalPort), "SLUICE_UI_PORT=0",
		fmt.Sprintf("SLUICE_API_ADDR=127.0.0.1:%d", apiPort), "SLUICE_API_URL="+apiURL)
	devProc := startCmd(t, "sluice dev", dev)
	waitReady(t, apiURL, devProc)

	// The user's shell: their git identity, and the API the dev process
	// listens on.
	gitID := []string{
		"GIT_AUTHOR_NAME=readme", "GIT_AUTHOR_EMAIL=readme@sluice.invalid",
		"GIT_COMMITTER_NAME=readme", "GIT_COMMITTER_EMAIL=readme@sluice.invalid",
	}
	shellEnv := cleanEnviron(append(gitID, "SLUICE_API_URL="+apiURL)...)
	sh := func(what, script string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-x", "-c", script)
		cmd.Dir = home
		cmd.Env = shellEnv
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: a README command failed:\n%s\nsluice dev:\n%s", what, out, devProc.output())
		return string(out)
	}

	out := sh("quickstart", block)
	t.Logf("quickstart transcript:\n%s", out)
	require.Contains(t, out, "demo/1")
	client := api.NewClient(apiURL)
	ev, err := client.GetEvent(t.Context(), "demo/1")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "event: %+v", ev)
	require.Len(t, ev.Builds, 4)
	for _, b := range ev.Builds {
		require.Equal(t, workflows.StatusSuccess, b.Status, "build %s: %s", b.ID, b.Reason)
	}
	_, err = os.Stat(filepath.Join(home, ".sluice", "temporal.db"))
	require.NoError(t, err, "make run keeps its state in ./.sluice")

	// Queues: the README's example, with NAME filled in and the optional
	// second rule left out.
	queueCmd := inlineCommand(t, doc, "sluice queue create NAME --rule ")
	queueCmd = regexp.MustCompile(`\s*\[[^\]]*\]`).ReplaceAllString(queueCmd, "")
	queueCmd = strings.Replace(queueCmd, "NAME", "gpu", 1)
	sh("queue", "bin/"+queueCmd)

	// A standalone executor, started as the README says, from another
	// directory with the default data directory.
	workerCmd := inlineCommand(t, doc, "sluice worker --role executor --name ")
	require.Contains(t, workerCmd, "--queues gpu")
	machine := t.TempDir()
	worker := exec.Command("bash", "-c", "exec "+filepath.Join(bin, "sluice")+strings.TrimPrefix(workerCmd, "sluice"))
	worker.Dir = machine
	worker.Env = cleanEnviron("TEMPORAL_ADDRESS="+temporalAddr, "SLUICE_API_URL="+apiURL, "SLUICE_EXECUTOR_RUNTIME=host")
	if os.Geteuid() == 0 {
		// As root (CI) a host executor needs the README's
		// SLUICE_EXECUTOR_RUN_AS; these builds are trusted.
		worker.Env = append(worker.Env, "SLUICE_EXECUTOR_RUN_AS=root")
	}
	workerProc := startCmd(t, "executor", worker)
	name := regexp.MustCompile(`--name (\S+)`).FindStringSubmatch(workerCmd)[1]
	deadline := time.Now().Add(time.Minute)
	for {
		members, err := client.ListExecutors(t.Context())
		require.NoError(t, err)
		live := false
		for _, m := range members {
			live = live || (m.Name == name && m.Live)
		}
		if live {
			break
		}
		require.True(t, time.Now().Before(deadline), "executor %s never live:\n%s", name, workerProc.output())
		time.Sleep(200 * time.Millisecond)
	}

	// A secret set as the README shows, read by a job on that executor.
	secretCmd := inlineCommand(t, doc, `printf %s "$TOKEN" | sluice secret set`)
	sh("secret", `mkdir myapp && cd myapp && git init -q -b main
cat > screwdriver.yaml <<'YAML'
shared: {image: node:22}
jobs:
  publish:
    requires: [~commit]
    secrets: [NPM_TOKEN]
    annotations: { screwdriver.cd/executor: gpu }
    steps: [{publish: 'test "$NPM_TOKEN" = s3cret-value && echo "token is $NPM_TOKEN"'}]
YAML
git add . && git commit -qm init && cd ..
bin/sluice pipeline create myapp --repo ./myapp
export TOKEN=s3cret-value
`+strings.Replace(secretCmd, "| sluice", "| bin/sluice", 1)+`
bin/sluice event start myapp --type commit --branch main --wait
bin/sluice build logs myapp/publish/1 > publish.log`)
	ev, err = client.GetEvent(t.Context(), "myapp/1")
	require.NoError(t, err)
	require.Len(t, ev.Builds, 1)
	require.Equal(t, workflows.StatusSuccess, ev.Builds[0].Status, ev.Builds[0].Reason)
	require.Equal(t, name, ev.Builds[0].Executor)
	logText, err := os.ReadFile(filepath.Join(home, "publish.log"))
	require.NoError(t, err)
	require.Contains(t, string(logText), "token is ***")
	require.NotContains(t, string(logText), "s3cret-value")
	_, err = os.Stat(filepath.Join(machine, ".sluice"))
	require.NoError(t, err, "the executor keeps its state in its own ./.sluice")
}

// waitReady waits until the API at url answers /readyz.
func waitReady(t *testing.T, url string, p *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		if err := api.NewClient(url).Ready(ctx); err == nil {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited early:\n%s", p.name, p.output())
		case <-ctx.Done():
			t.Fatalf("%s not ready within 2 minutes:\n%s", p.name, p.output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
