package activities_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/runner"
)

// gitEnv makes git deterministic and independent of the user's config.
var gitEnv = []string{
	"GIT_AUTHOR_NAME=Sluice Test", "GIT_AUTHOR_EMAIL=test@sluice.invalid",
	"GIT_COMMITTER_NAME=Sluice Test", "GIT_COMMITTER_EMAIL=test@sluice.invalid",
	"GIT_AUTHOR_DATE=2025-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2025-01-01T00:00:00Z",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

const validSpec = `jobs:
  main:
    image: alpine
    requires: [~commit]
    steps:
      - test: echo hello
  deploy:
    image: alpine
    requires: [main]
    steps:
      - ship: echo ship
`

// repoFixture is a local git repository with a few branches:
//
//	main     first (spec, README) → second (src/app.go, docs/guide.md)
//	feature  second → a commit changing README
//	broken   second → a spec that does not parse
//	nospec   second → the spec removed
type repoFixture struct {
	dir                   string
	first, second         string
	feature, broken, none string
}

func setupRepo(t *testing.T) repoFixture {
	t.Helper()
	return setupRepoSpec(t, validSpec)
}

// setupRepoSpec is setupRepo with spec as the screwdriver.yaml of main.
func setupRepoSpec(t *testing.T, spec string) repoFixture {
	t.Helper()
	dir := t.TempDir()
	r := repoFixture{dir: dir}
	git(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, map[string]string{"screwdriver.yaml": spec, "README": "first\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "first")
	r.first = git(t, dir, "rev-parse", "HEAD")
	writeFiles(t, dir, map[string]string{"src/app.go": "package app\n", "docs/guide.md": "# guide\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "second")
	r.second = git(t, dir, "rev-parse", "HEAD")

	branch := func(name string, change func()) string {
		git(t, dir, "checkout", "-q", "-b", name, r.second)
		change()
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", name)
		sha := git(t, dir, "rev-parse", "HEAD")
		git(t, dir, "checkout", "-q", "main")
		return sha
	}
	r.feature = branch("feature", func() { writeFiles(t, dir, map[string]string{"README": "feature\n"}) })
	r.broken = branch("broken", func() {
		writeFiles(t, dir, map[string]string{"screwdriver.yaml": "jobs:\n  main:\n    steps: [\n"})
	})
	r.none = branch("nospec", func() { require.NoError(t, os.Remove(filepath.Join(dir, "screwdriver.yaml"))) })
	return r
}

// fakeClaimer accepts or refuses claims and records them.
type fakeClaimer struct {
	refuse error
	// before, when set, runs before the claim is answered (as a round
	// trip to the build would take its time).
	before func()

	mu     sync.Mutex
	claims []string
	hashes []string // the credential hash of each claim
	builds []string // the build each claim names
}

func (c *fakeClaimer) Claim(_ context.Context, cl activities.Claim) error {
	if c.before != nil {
		c.before()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, fmt.Sprintf("%s#%d@%s", cl.WorkflowID, cl.Attempt, cl.Executor))
	c.hashes = append(c.hashes, cl.CredentialHash)
	c.builds = append(c.builds, cl.Build)
	return c.refuse
}

func (c *fakeClaimer) gotBuilds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.builds...)
}

func (c *fakeClaimer) gotHashes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.hashes...)
}

func (c *fakeClaimer) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.claims...)
}

// fakeExecutor accepts or declines builds and counts the running ones.
type fakeExecutor struct {
	decline string // non-empty: Accepting says no, with this reason

	mu      sync.Mutex
	asked   []string
	begun   int
	running int
}

func (e *fakeExecutor) Name() string { return "exec-t" }

func (e *fakeExecutor) Accepting(queueName string, _ bool) (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, queueName)
	return e.decline == "", e.decline
}

// askingExecutor is a fakeExecutor that asks someone else whether it may
// take a build (activities.LocalAcceptor, as an agent asks its registry):
// its local answer is localDecline's, and ask runs inside Accepting's
// question before it is answered.
type askingExecutor struct {
	*fakeExecutor
	localDecline string
	ask          func()
}

func (e askingExecutor) AcceptingLocally(string, bool) (bool, string) {
	return e.localDecline == "", e.localDecline
}

func (e askingExecutor) Accepting(queueName string, untrusted bool) (bool, string) {
	if e.ask != nil {
		e.ask()
	}
	return e.fakeExecutor.Accepting(queueName, untrusted)
}

func (e *fakeExecutor) Begin(string) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.begun++
	e.running++
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.running--
		})
	}
}

func (e *fakeExecutor) counts() (begun, running int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.begun, e.running
}

// fakeQueues lists fixed queues or fails.
type fakeQueues struct {
	queues []queue.Queue
	err    error
}

func (q fakeQueues) ListQueues(context.Context) ([]queue.Queue, error) { return q.queues, q.err }

// blockedQueues is a registry that never answers: ListQueues says it
// started, then waits for its context's end and says it stopped.
type blockedQueues struct{ started, stopped chan struct{} }

func (q *blockedQueues) ListQueues(ctx context.Context) ([]queue.Queue, error) {
	close(q.started)
	<-ctx.Done()
	close(q.stopped)
	return nil, ctx.Err()
}

// fakeReporter takes build results by task token, like Temporal does.
type fakeReporter struct {
	heartbeat func(details []any) error

	mu      sync.Mutex
	results []activities.RunBuildResult
}

func (r *fakeReporter) RecordActivityHeartbeat(_ context.Context, _ []byte, details ...any) error {
	if r.heartbeat != nil {
		return r.heartbeat(details)
	}
	return nil
}

func (r *fakeReporter) CompleteActivity(_ context.Context, _ []byte, result any, err error) error {
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, result.(activities.RunBuildResult))
	return nil
}

// harness is an executor's activities over fakes, a real repository
// cache, workspace root and log store.
type harness struct {
	acts     *activities.Activities
	claimer  *fakeClaimer
	executor *fakeExecutor
	reporter *fakeReporter
	logs     *logstore.Store
	env      *testsuite.TestActivityEnvironment

	mu sync.Mutex
	// logCredentials are the credentials the log sinks were opened with.
	logCredentials []string
}

func setup(t *testing.T) *harness {
	t.Helper()
	logs, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	h := &harness{claimer: &fakeClaimer{}, executor: &fakeExecutor{}, reporter: &fakeReporter{}, logs: logs}
	h.acts = &activities.Activities{
		Logger:   slog.New(slog.DiscardHandler),
		Repos:    activities.CachedRepos(t.TempDir()),
		Queues:   fakeQueues{queues: []queue.Queue{queue.DefaultQueue()}},
		Claimer:  h.claimer,
		Executor: h.executor,
		Logs: func(key, credential string) runner.LogSink {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.logCredentials = append(h.logCredentials, credential)
			return logs.Sink(key)
		},
		WorkDir:  t.TempDir(),
		Reporter: h.reporter,
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h.env = suite.NewTestActivityEnvironment()
	h.env.SetTestTimeout(time.Minute)
	// One by one, as the workers register them: not every exported method
	// of Activities is an activity.
	h.env.RegisterActivity(h.acts.RunBuild)
	h.env.RegisterActivity(h.acts.ResolveEvent)
	return h
}

// runBuild runs RunBuild for real and returns its result: the one the
// activity returned, or the one it handed to Temporal by task token.
func (h *harness) runBuild(t *testing.T, in activities.RunBuildInput) (activities.RunBuildResult, error) {
	t.Helper()
	val, err := h.env.ExecuteActivity(h.acts.RunBuild, in)
	var res activities.RunBuildResult
	switch {
	case errors.Is(err, activity.ErrResultPending):
		h.reporter.mu.Lock()
		defer h.reporter.mu.Unlock()
		require.Len(t, h.reporter.results, 1, "a pending result is completed by task token once")
		return h.reporter.results[0], nil
	case err != nil:
		return res, err
	}
	require.NoError(t, val.Get(&res))
	return res, nil
}

// resolve runs ResolveEvent for real.
func (h *harness) resolve(t *testing.T, in activities.ResolveEventInput) (activities.ResolveEventResult, error) {
	t.Helper()
	var out activities.ResolveEventResult
	val, err := h.env.ExecuteActivity(h.acts.ResolveEvent, in)
	if err != nil {
		return out, err
	}
	require.NoError(t, val.Get(&out))
	return out, nil
}

// requireAppError checks err is a non-retryable application error of typ.
func requireAppError(t *testing.T, err error, typ string) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, typ, app.Type(), "%v", err)
	require.True(t, app.NonRetryable(), "%v", err)
	return app
}
