package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/runner"
)

// buildInput is build app/main/7, attempt 1, of the fixture's feature
// commit, with a job variable and a matrix value in its environment.
func buildInput(r repoFixture, steps ...pipeline.Command) activities.RunBuildInput {
	return activities.RunBuildInput{
		WorkflowID: "build/app/main/7", BuildID: "app/main/7", Pipeline: "app", Job: "main", EventID: "app/7",
		Attempt: 1, Repo: r.dir, SHA: r.feature, Branch: "feature", Trigger: "commit",
		Steps:       steps,
		Environment: map[string]string{"DEPLOY_ENV": "staging", "GO_VERSION": "1.22"},
		Timeout:     time.Minute,
	}
}

func step(name, command string) pipeline.Command {
	return pipeline.Command{Name: name, Command: command}
}

// readEnv parses `env` output written by a step.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	vars := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	return vars
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

func workspace(h *harness, in activities.RunBuildInput) string {
	return filepath.Join(h.acts.WorkDir, filepath.FromSlash(in.BuildID), "attempt-1")
}

func TestRunBuildRunsStepsInACheckout(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	out := t.TempDir()
	in := buildInput(r,
		step("greet", "echo hello from $SD_JOB_NAME"),
		step("record", "git rev-parse HEAD > "+out+"/head && pwd -P > "+out+"/pwd && cat README > "+out+"/readme && env > "+out+"/env"),
	)
	res, err := h.runBuild(t, in)
	require.NoError(t, err)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Empty(t, res.Reason)
	require.Equal(t, "exec-t", res.Executor)
	require.Equal(t, activities.LogKey("app/main/7", 1), res.LogKey)
	require.Equal(t, "app/main/7/1", res.LogKey)
	require.Len(t, res.Steps, 2)
	for i, name := range []string{"greet", "record"} {
		require.Equal(t, name, res.Steps[i].Name)
		require.Zero(t, res.Steps[i].ExitCode)
		require.False(t, res.Steps[i].Skipped)
		require.False(t, res.Steps[i].Start.IsZero())
		require.False(t, res.Steps[i].End.Before(res.Steps[i].Start))
	}

	// The steps ran in the attempt's workspace, checked out at the sha.
	require.Equal(t, r.feature, readFile(t, out+"/head"))
	require.Equal(t, "feature", readFile(t, out+"/readme"))
	wantDir, err := filepath.EvalSymlinks(h.acts.WorkDir)
	require.NoError(t, err)
	wantDir = filepath.Join(wantDir, "app", "main", "7", "attempt-1")
	require.Equal(t, wantDir, readFile(t, out+"/pwd"))

	env := readEnv(t, out+"/env")
	for k, v := range map[string]string{
		"SD_SHA": r.feature, "SD_JOB_NAME": "main", "SD_BUILD_ID": "app/main/7", "SD_EVENT_ID": "app/7",
		"SD_BRANCH": "feature", "SD_PIPELINE_NAME": "app", "SD_BUILD_ATTEMPT": "1", "SD_EXECUTOR": "exec-t",
		"SD_TRIGGER": "commit", "CI": "true", "SCREWDRIVER": "true", "SLUICE": "true",
		"DEPLOY_ENV": "staging", "GO_VERSION": "1.22",
	} {
		require.Equal(t, v, env[k], "step variable %s", k)
	}
	require.Equal(t, workspace(h, in), env["SD_SOURCE_DIR"])
	require.NotContains(t, env, "SD_PULL_REQUEST", "no pull request, no SD_PULL_REQUEST")
	require.NotEmpty(t, env["PATH"])

	// The build claimed its attempt, counted as running, then ended.
	require.Equal(t, []string{"build/app/main/7#1@exec-t"}, h.claimer.got())
	require.Equal(t, []string{"app/main/7"}, h.claimer.gotBuilds(), "the claim names its build")
	begun, running := h.executor.counts()
	require.Equal(t, 1, begun)
	require.Zero(t, running)

	// The workspace is gone; the logs stay under the attempt's key.
	require.NoDirExists(t, workspace(h, in))
	steps, err := h.logs.Steps(res.LogKey)
	require.NoError(t, err)
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
		require.True(t, s.Complete, "step %s log is complete", s.Name)
	}
	require.Equal(t, []string{"greet", "record"}, names)
	chunk, err := h.logs.Read(res.LogKey, "greet", 0, 0)
	require.NoError(t, err)
	require.Contains(t, string(chunk.Data), "hello from main")
}

func TestRunBuildPullRequestVariable(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	out := t.TempDir()
	in := buildInput(r, step("env", "env > "+out+"/env"))
	in.PR, in.Trigger = 42, "pr"
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	env := readEnv(t, out+"/env")
	require.Equal(t, "42", env["SD_PULL_REQUEST"])
	require.Equal(t, "pr", env["SD_TRIGGER"])
}

func TestRunBuildJobCannotOverrideSDVariables(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	out := t.TempDir()
	in := buildInput(r, step("env", "env > "+out+"/env"))
	in.Environment = map[string]string{"SD_SHA": "forged", "SD_BUILD_ID": "other", "CI": "false", "MY_VAR": "kept"}
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	env := readEnv(t, out+"/env")
	require.Equal(t, r.feature, env["SD_SHA"])
	require.Equal(t, "app/main/7", env["SD_BUILD_ID"])
	require.Equal(t, "true", env["CI"])
	require.Equal(t, "kept", env["MY_VAR"])
}

func TestRunBuildFailureRunsTeardown(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	out := t.TempDir()
	in := buildInput(r,
		step("ok", "echo fine"),
		step("boom", "echo about to fail; exit 3"),
		step("never", "touch "+out+"/never"),
		step("teardown-cleanup", "echo cleaned > "+out+"/teardown"),
	)
	res, err := h.runBuild(t, in)
	require.NoError(t, err, "a failing step is a result, not an activity error")

	require.Equal(t, runner.StatusFailure, res.Status)
	require.Contains(t, res.Reason, `"boom"`)
	require.Contains(t, res.Reason, "3")
	require.Len(t, res.Steps, 4)
	require.Zero(t, res.Steps[0].ExitCode)
	require.Equal(t, 3, res.Steps[1].ExitCode)
	require.True(t, res.Steps[2].Skipped, "steps after a failure are skipped")
	require.False(t, res.Steps[3].Skipped, "teardown runs after a failure")
	require.Zero(t, res.Steps[3].ExitCode)
	require.Equal(t, "cleaned", readFile(t, out+"/teardown"))
	require.NoFileExists(t, out+"/never")

	chunk, err := h.logs.Read(res.LogKey, "boom", 0, 0)
	require.NoError(t, err)
	require.Contains(t, string(chunk.Data), "about to fail")
	require.NoDirExists(t, workspace(h, in), "a failed build's workspace is removed too")
}

func TestRunBuildWorkspaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keep bool
	}{
		{name: "removed afterwards", keep: false},
		{name: "kept with KeepWorkspaces", keep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupRepo(t)
			h := setup(t)
			h.acts.KeepWorkspaces = tt.keep
			in := buildInput(r, step("fresh", "test ! -e stale.txt && echo built > artifact.txt"))
			// A previous attempt's leftovers in the same place are wiped first.
			ws := workspace(h, in)
			writeFiles(t, ws, map[string]string{"stale.txt": "old"})

			res, err := h.runBuild(t, in)
			require.NoError(t, err)
			require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
			if !tt.keep {
				require.NoDirExists(t, ws)
				return
			}
			require.Equal(t, "built", readFile(t, filepath.Join(ws, "artifact.txt")))
			require.Equal(t, "feature", readFile(t, filepath.Join(ws, "README")))
			require.NoFileExists(t, filepath.Join(ws, "stale.txt"))
		})
	}
}

// TestRunBuildKeepsExecutorSecrets sets variables in the executor's own
// environment, so it cannot run in parallel with other tests.
func TestRunBuildKeepsExecutorSecrets(t *testing.T) {
	t.Setenv("SLUICE_GITHUB_SECRET", "hunter2-webhook")
	t.Setenv("TEMPORAL_API_KEY", "hunter2-api-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hunter2-aws")
	t.Setenv("TZ", "UTC")
	r := setupRepo(t)
	h := setup(t)
	out := t.TempDir()
	in := buildInput(r, step("env", "env > "+out+"/env"))
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)

	raw := readFile(t, out+"/env")
	require.NotContains(t, raw, "hunter2")
	env := readEnv(t, out+"/env")
	for _, k := range []string{"SLUICE_GITHUB_SECRET", "TEMPORAL_API_KEY", "AWS_SECRET_ACCESS_KEY"} {
		require.NotContains(t, env, k)
	}
	require.Equal(t, "UTC", env["TZ"], "the executor's basics pass through")
	require.Equal(t, os.Getenv("PATH"), env["PATH"])
}

func TestRunBuildRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		decline string
		refuse  error
		typ     string
		want    string
		claimed bool
	}{
		{
			name: "executor declines", decline: "exec-t is draining", typ: activities.ErrTypeDeclined,
			want: "executor exec-t declined build app/main/7: exec-t is draining",
		},
		{
			name: "build refuses the claim", refuse: errors.New("build collapsed into app/main/8"), typ: activities.ErrTypeSuperseded,
			want: "build app/main/7 refused executor exec-t: build collapsed into app/main/8", claimed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupRepo(t)
			h := setup(t)
			h.executor.decline = tt.decline
			h.claimer.refuse = tt.refuse
			out := t.TempDir()
			_, err := h.runBuild(t, buildInput(r, step("never", "touch "+out+"/ran")))
			app := requireAppError(t, err, tt.typ)
			require.Contains(t, app.Error(), tt.want)
			require.Equal(t, tt.typ == activities.ErrTypeDeclined, activities.IsDeclined(err))
			require.Equal(t, tt.typ == activities.ErrTypeSuperseded, activities.IsSuperseded(err))
			require.False(t, activities.IsExecutorStopped(err))

			require.Equal(t, tt.claimed, len(h.claimer.got()) == 1)
			begun, _ := h.executor.counts()
			require.Zero(t, begun, "a refused build never counts as running")
			require.NoFileExists(t, out+"/ran")
			// The checkout that overlapped the refused claim is gone
			// (empty parent directories may stay, as after any build).
			require.NoDirExists(t, workspace(h, buildInput(r)), "no workspace for a refused build")
			require.NoError(t, filepath.WalkDir(h.acts.WorkDir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					return fmt.Errorf("a refused build left %s", p)
				}
				return err
			}))
			h.reporter.mu.Lock()
			require.Empty(t, h.reporter.results)
			h.reporter.mu.Unlock()
		})
	}
}

// TestRunBuildChecksOutWhileClaiming: a repository that needs no
// credentials is checked out while the claim is on its way, and no step
// runs before the claim is answered.
func TestRunBuildChecksOutWhileClaiming(t *testing.T) {
	t.Parallel()
	h, out := setup(t), t.TempDir()
	in := buildInput(setupRepo(t), step("after", "touch "+out+"/ran"))
	checkedOut, ranEarly := false, false
	h.claimer.before = func() {
		// The claim's answer waits for the checkout (bounded).
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(workspace(h, in), "README")); err == nil {
				checkedOut = true
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := os.Stat(out + "/ran"); !errors.Is(err, fs.ErrNotExist) {
			ranEarly = true
		}
	}
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.True(t, checkedOut, "the commit was checked out while the claim was on its way")
	require.False(t, ranEarly, "a step ran before the claim was answered")
	require.FileExists(t, out+"/ran")
}

// TestRunBuildChecksOutWhileTheRegistryAnswers: an executor that asks its
// registry whether it may take the build starts the checkout once its own
// answer is yes, beside the question; a task its own answer declines
// checks nothing out, and the checkout of one the registry declines is
// removed.
func TestRunBuildChecksOutWhileTheRegistryAnswers(t *testing.T) {
	t.Parallel()
	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		h, out := setup(t), t.TempDir()
		in := buildInput(setupRepo(t), step("after", "touch "+out+"/ran"))
		checkedOut := false
		h.acts.Executor = askingExecutor{fakeExecutor: h.executor, ask: func() {
			// The registry's answer waits for the checkout (bounded).
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && !checkedOut {
				_, err := os.Stat(filepath.Join(workspace(h, in), "README"))
				checkedOut = err == nil
				time.Sleep(5 * time.Millisecond)
			}
		}}
		res, err := h.runBuild(t, in)
		require.NoError(t, err)
		require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
		require.True(t, checkedOut, "the commit was checked out while the registry answered")
		require.FileExists(t, out+"/ran")
		require.Len(t, h.claimer.got(), 1)
	})
	for _, tt := range []struct{ name, local, registry string }{
		{name: "declined by its own answer", local: "exec-t is draining"},
		{name: "declined by the registry", registry: "exec-t is not in queue default's active rule: a preferred rule is live"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupRepo(t)
			h, out := setup(t), t.TempDir()
			h.executor.decline = tt.registry
			h.acts.Executor = askingExecutor{fakeExecutor: h.executor, localDecline: tt.local}
			_, err := h.runBuild(t, buildInput(r, step("never", "touch "+out+"/ran")))
			app := requireAppError(t, err, activities.ErrTypeDeclined)
			require.Contains(t, app.Error(), tt.local+tt.registry)
			h.executor.mu.Lock()
			asked := len(h.executor.asked)
			h.executor.mu.Unlock()
			require.Equal(t, tt.local == "", asked == 1, "the registry is asked only after the executor's own yes")
			require.Empty(t, h.claimer.got(), "a declined build is not claimed")
			require.NoFileExists(t, out+"/ran")
			require.NoError(t, filepath.WalkDir(h.acts.WorkDir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					return fmt.Errorf("a declined build left %s", p)
				}
				return err
			}))
		})
	}
}

func TestRunBuildCheckoutFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(in *activities.RunBuildInput, dir string)
		want string
	}{
		{name: "unknown commit", edit: func(in *activities.RunBuildInput, _ string) {
			in.SHA = "0123456789abcdef0123456789abcdef01234567"
		}, want: "at 0123456789ab"},
		{name: "missing repository", edit: func(in *activities.RunBuildInput, dir string) {
			in.Repo = filepath.Join(dir, "gone")
		}, want: "gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupRepo(t)
			h := setup(t)
			in := buildInput(r, step("never", "true"))
			tt.edit(&in, t.TempDir())
			res, err := h.runBuild(t, in)
			require.NoError(t, err, "a checkout failure fails the build, it is not retried here")
			require.Equal(t, runner.StatusFailure, res.Status)
			require.True(t, strings.HasPrefix(res.Reason, "check out "+in.Repo), res.Reason)
			require.Contains(t, res.Reason, tt.want)
			require.Empty(t, res.Steps)
			_, running := h.executor.counts()
			require.Zero(t, running)
		})
	}
}

func TestRunBuildTimeout(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	out := t.TempDir()
	in := buildInput(r, step("slow", "sleep 20"), step("teardown-note", "echo done > "+out+"/teardown"))
	in.Timeout = 300 * time.Millisecond
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Equal(t, runner.StatusTimeout, res.Status)
	require.Equal(t, `timed out after 300ms in step "slow"`, res.Reason)
	require.Len(t, res.Steps, 2)
	require.Equal(t, 143, res.Steps[0].ExitCode, "the step got SIGTERM")
	require.Equal(t, 0, res.Steps[1].ExitCode)
	require.Equal(t, "done", readFile(t, filepath.Join(out, "teardown")), "the teardown ran after the timeout")
}

func TestRunBuildCancelledThroughHeartbeat(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	// The build is cancelled: the answer to the heartbeat naming the
	// running step says so.
	h.reporter.heartbeat = func(details []any) error {
		if p, ok := details[0].(activities.Progress); ok && p.Step == "wait" {
			return temporal.NewCanceledError()
		}
		return nil
	}
	in := buildInput(r, step("wait", "sleep 30"), step("after", "true"))
	start := time.Now()
	res, err := h.runBuild(t, in)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 20*time.Second, "the step is killed, not waited for")
	require.Equal(t, runner.StatusAborted, res.Status, res.Reason)
	require.NoDirExists(t, workspace(h, in))
}

func TestRunBuildExecutorStopping(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	stop := make(chan struct{})
	h.env.SetWorkerStopChannel(stop)
	var once sync.Once
	h.reporter.heartbeat = func(details []any) error {
		if p, ok := details[0].(activities.Progress); ok && p.Step == "wait" {
			once.Do(func() { close(stop) })
		}
		return nil
	}
	in := buildInput(r, step("wait", "sleep 30"))
	_, err := h.runBuild(t, in)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, activities.ErrTypeExecutorStopped, app.Type())
	require.False(t, app.NonRetryable())
	require.True(t, activities.IsExecutorStopped(err))
	require.Contains(t, err.Error(), "executor exec-t stopped during build app/main/7")
	_, running := h.executor.counts()
	require.Zero(t, running)
}

// TestRunBuildAttemptCredential: the executor generates a credential per
// attempt, claims with its hash only, and presents the credential itself to
// the secret source and the log sink; the build's steps never see it.
func TestRunBuildAttemptCredential(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	var creds, hashes []string
	for range 2 { // two attempts, each with its own credential
		h := setup(t)
		var asked []activities.SecretRequest
		h.acts.Secrets = activities.SecretSourceFunc(func(_ context.Context, req activities.SecretRequest) (map[string]string, []string, error) {
			asked = append(asked, req)
			return map[string]string{"TOKEN": "tok-value"}, nil, nil
		})
		out := t.TempDir()
		in := buildInput(r, step("env", "env > "+out+"/env"))
		in.Secrets = []string{"TOKEN"}
		res, err := h.runBuild(t, in)
		require.NoError(t, err)
		require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)

		require.Len(t, asked, 1)
		cred := asked[0].Credential
		require.Len(t, cred, 43, "32 random bytes, base64url")
		require.Len(t, h.claimer.gotHashes(), 1)
		hash := h.claimer.gotHashes()[0]
		require.True(t, activities.ValidCredentialHash(hash), hash)
		require.Equal(t, activities.CredentialHash(cred), hash, "the claim carries the credential's hash")
		require.NotEqual(t, cred, hash)
		require.Equal(t, []string{cred}, h.logCredentials, "the log sink presents the same credential")
		require.NotContains(t, readFile(t, out+"/env"), cred, "the steps never see the credential")
		stepCred := readEnv(t, out+"/env")["SD_BUILD_CREDENTIAL"]
		require.Len(t, stepCred, 43, "the steps get a credential of their own")
		require.NotEqual(t, cred, stepCred)
		require.Equal(t, "tok-value", readEnv(t, out+"/env")["TOKEN"])
		creds, hashes = append(creds, cred), append(hashes, hash)
	}
	require.NotEqual(t, creds[0], creds[1], "a fresh credential per attempt")
	require.NotEqual(t, hashes[0], hashes[1])
}

// blockingBuildData holds the metadata save until released, as an API
// whose controller is down would.
type blockingBuildData struct {
	saving  chan struct{}
	release chan struct{}

	mu        sync.Mutex
	artifacts []string
}

func (d *blockingBuildData) StartMeta(context.Context, activities.MetaStart) ([]byte, error) {
	return []byte("{}"), nil
}

func (d *blockingBuildData) SaveMeta(context.Context, activities.MetaSave) error {
	close(d.saving)
	<-d.release
	return nil
}

func (d *blockingBuildData) SaveArtifact(_ context.Context, req activities.ArtifactSave) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.artifacts = append(d.artifacts, req.Path)
	return nil
}

// TestRunBuildSavesTheResultBeforeKeepingOutputs: once the steps end, the
// result is in the outbox before the executor waits on the API to keep the
// build's metadata and artifacts, so an executor killed meanwhile delivers
// it when it starts again instead of the build running twice.
func TestRunBuildSavesTheResultBeforeKeepingOutputs(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	h := setup(t)
	h.acts.Outbox = t.TempDir()
	h.acts.ArtifactMax = 1 << 20
	data := &blockingBuildData{saving: make(chan struct{}), release: make(chan struct{})}
	h.acts.BuildData = data
	in := buildInput(r, step("make", `echo built > "$SD_ARTIFACTS_DIR/app"`))

	done := make(chan error, 1)
	go func() {
		_, err := h.env.ExecuteActivity(h.acts.RunBuild, in)
		done <- err
	}()
	select {
	case <-data.saving:
	case err := <-done:
		t.Fatalf("the build ended without saving its metadata: %v", err)
	}
	pending, err := activities.ReadOutbox(h.acts.Outbox)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the result is in the outbox while the metadata waits for the API")
	require.Equal(t, in.BuildID, pending[0].BuildID)
	close(data.release)

	require.ErrorIs(t, <-done, activity.ErrResultPending, "the result goes to Temporal by task token")
	h.reporter.mu.Lock()
	require.Len(t, h.reporter.results, 1)
	res := h.reporter.results[0]
	h.reporter.mu.Unlock()
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Len(t, res.Steps, 2)
	require.Equal(t, []string{"make", "sd-teardown-artifacts"}, []string{res.Steps[0].Name, res.Steps[1].Name})
	require.Equal(t, []string{"app"}, data.artifacts)
	pending, err = activities.ReadOutbox(h.acts.Outbox)
	require.NoError(t, err)
	require.Empty(t, pending, "a delivered result leaves the outbox")
}
