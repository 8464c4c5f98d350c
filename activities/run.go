package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/cache"
	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/scm"
)

// RunBuildInput is everything an executor needs to run one build attempt.
type RunBuildInput struct {
	// Avoid is the executor that lost the build's previous attempt: it
	// declines the build until AvoidUntil, so another live executor takes
	// it first (after that anyone may, the avoided one included).
	Avoid      string    `json:"avoid,omitempty"`
	AvoidUntil time.Time `json:"avoid_until,omitzero"`
	// WorkflowID is the build workflow, which the executor claims first.
	WorkflowID string `json:"workflow_id"`
	// BuildID is the build's short ID ("<pipeline>/<job>/<event>[.k]").
	BuildID  string `json:"build_id"`
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
	// EventID is the event's short ID ("<pipeline>/<n>").
	EventID string `json:"event_id"`
	Attempt int    `json:"attempt"`
	Repo    string `json:"repo"`
	SHA     string `json:"sha"`
	Branch  string `json:"branch,omitempty"`
	PR      int    `json:"pr,omitempty"`
	Trigger string `json:"trigger,omitempty"`
	// Fork marks a pull request from a fork: its build gets only the
	// secrets the pipeline allows in fork pull requests.
	Fork bool `json:"fork,omitempty"`
	// RepoAuth: the pipeline reads its repository with its own credentials
	// (RepoAuthSecrets), which the checkout asks the API for.
	RepoAuth    bool               `json:"repo_auth,omitempty"`
	Image       string             `json:"image,omitempty"`
	Steps       []pipeline.Command `json:"steps"`
	Environment map[string]string  `json:"environment,omitempty"`
	// Secrets names the secrets the job lists; their values come from the
	// API at claim time (Activities.Secrets), never from Temporal.
	Secrets []string      `json:"secrets,omitempty"`
	Timeout time.Duration `json:"timeout"`
	// CPU and RAM are the job's screwdriver.cd/cpu and screwdriver.cd/ram
	// annotations as written: LOW, HIGH, TURBO or a number.
	CPU string `json:"cpu,omitempty"`
	RAM string `json:"ram,omitempty"`
	// Dispatch numbers the build workflow's dispatches: the claim names it,
	// so a claim from a dispatch the workflow gave up on is refused.
	Dispatch int `json:"dispatch,omitempty"`
	// Cache is the job's cache paths per scope (Screwdriver `cache:`),
	// restored before the first step and saved after a success.
	Cache *pipeline.JobCache `json:"cache,omitempty"`
	// StartMeta, when set, is the metadata the build starts with, which
	// the workflow holds all of for most first attempts
	// (workflows.OwnStartMeta): the executor then does not ask the API for
	// it.
	StartMeta buildmeta.Doc `json:"start_meta,omitempty"`
}

// LogKey is the log store key of one build attempt's step logs.
func LogKey(buildID string, attempt int) string {
	return buildID + "/" + strconv.Itoa(attempt)
}

// StepResult is one step's outcome.
type StepResult struct {
	Name     string    `json:"name"`
	ExitCode int       `json:"exit_code"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	Skipped  bool      `json:"skipped,omitempty"`
}

// RunBuildResult is one attempt's outcome.
type RunBuildResult struct {
	Executor string        `json:"executor"`
	Status   runner.Status `json:"status"`
	Reason   string        `json:"reason,omitempty"`
	Steps    []StepResult  `json:"steps,omitempty"`
	LogKey   string        `json:"log_key"`
}

// Progress is the heartbeat detail of a running build.
type Progress struct {
	Executor string `json:"executor"`
	Step     string `json:"step,omitempty"`
}

// RunBuild claims the build, checks its commit out into a fresh workspace and
// runs its steps. A step failure, a timeout and a cancellation are results,
// not activity errors; losing the executor shows up to the workflow as a
// heartbeat timeout, after which the build is dispatched again.
func (a *Activities) RunBuild(ctx context.Context, in RunBuildInput) (RunBuildResult, error) {
	info := activity.GetInfo(ctx)
	name := a.Executor.Name()
	res := RunBuildResult{Executor: name, LogKey: LogKey(in.BuildID, in.Attempt)}
	queueName, untrusted, _ := SplitTaskQueue(info.TaskQueue)
	declined := func(why string) (RunBuildResult, error) {
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("executor %s declined build %s: %s", name, in.BuildID, why), ErrTypeDeclined, nil)
	}
	// An executor that asks someone else whether it may take the build
	// answers what it knows first: the checkout starts after that, beside
	// the question (see below).
	local, asksElsewhere := a.Executor.(LocalAcceptor)
	accepting := a.Executor.Accepting
	if asksElsewhere {
		accepting = local.AcceptingLocally
	}
	if ok, why := accepting(queueName, untrusted); !ok {
		return declined(why)
	}
	if in.Avoid == name && time.Now().Before(in.AvoidUntil) {
		return declined(fmt.Sprintf("it lost the build's previous attempt, so another executor gets it first (until %s)",
			in.AvoidUntil.UTC().Format(time.RFC3339)))
	}
	// The attempt's credential stays in this process: the claim carries
	// only its hash, which the build records for the API to check.
	credential, credentialHash, err := NewAttemptCredential()
	if err != nil {
		return declined(err.Error())
	}
	// The steps get a credential of their own (SD_BUILD_CREDENTIAL), which
	// does not stand for the executor: the API takes it only on the routes
	// for builds.
	stepCredential, stepHash, err := NewAttemptCredential()
	if err != nil {
		return declined(err.Error())
	}
	dir := filepath.Join(a.WorkDir, filepath.FromSlash(in.BuildID), "attempt-"+strconv.Itoa(in.Attempt))
	// The pipeline's own repository credentials go to git alone (its
	// environment, for the fetch into the executor's mirror): never to the
	// checkout's configuration nor to the steps.
	doCheckout := func(ctx context.Context) error {
		auth, err := a.checkoutAuth(ctx, in, credential)
		var repo scm.Repo
		if err == nil {
			repo, err = openRepo(ctx, a.Repos, in.Repo, auth)
		}
		if err == nil {
			err = a.checkout(ctx, repo, in, dir)
		}
		return err
	}
	// A repository that needs no credentials is checked out while the
	// executor's registry answers whether it may take the build and the
	// claim is on its way (the API hands credentials only to a claimed
	// attempt): the round trips overlap. Nothing of the build runs before
	// the claim is accepted; the checkout of a build the registry declines
	// or that refuses the claim is removed.
	early := a.earlyCheckout(ctx, in, dir, doCheckout)
	if asksElsewhere {
		if ok, why := a.Executor.Accepting(queueName, untrusted); !ok {
			early.discard()
			return declined(why)
		}
	}
	if err := a.claim(ctx, in, name, credentialHash, stepHash); err != nil {
		early.discard()
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("build %s refused executor %s: %v", in.BuildID, name, err), ErrTypeSuperseded, nil)
	}
	if a.Metrics != nil {
		a.Metrics.Claimed(queueName, time.Since(info.ScheduledTime))
	}
	end := a.Executor.Begin(queueName)
	defer end()

	// runCtx bounds the checkout and the steps. The heartbeats cancel it
	// when the build is cancelled or its attempt is given up; a stopping
	// worker cancels it too. A Temporal server that cannot be reached for a
	// while does not (see report.go).
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	// The metadata the build starts with comes from the API while the
	// workspace is prepared and checked out.
	startMeta := a.startMeta(runCtx, in, credential)
	rep := a.reporter(ctx)
	hb := newHeartbeater(runCtx, rep, info.TaskToken, name, info.HeartbeatTimeout, cancelRun, a.Logger, false)
	defer hb.stop()
	// The steps' logs ship in the background once each step ends, so that
	// the result reaches the outbox without waiting for the API; it is
	// delivered only once they are complete.
	late := &lateCloseSink{log: a.Logger, build: in.BuildID}

	if early != nil {
		// The early checkout stops with the run (a cancelled build, a
		// stopping worker); the steps wait for its outcome.
		stop := context.AfterFunc(runCtx, early.cancel)
		defer stop()
		doCheckout = early.wait
	} else if err := os.RemoveAll(dir); err != nil {
		return fail(res, fmt.Sprintf("prepare workspace %s: %v", dir, err)), nil
	}
	if !a.KeepWorkspaces {
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				a.Logger.Warn("workspace_cleanup_failed", "dir", dir, "error", err)
			}
		}()
	}
	// A stopping worker interrupts the build at once; the workflow
	// dispatches it again (ErrTypeExecutorStopped).
	var stopped atomic.Bool
	go func() {
		select {
		case <-activity.GetWorkerStopChannel(ctx):
			stopped.Store(true)
			cancelRun(errors.New("the executor is stopping"))
		case <-runCtx.Done():
		}
	}()

	checkoutFailed := func(err error) (RunBuildResult, error) {
		if runCtx.Err() != nil {
			res.Status, res.Reason = runner.StatusAborted, "aborted during checkout"
			return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, res)
		}
		return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in,
			fail(res, fmt.Sprintf("check out %s at %s: %v", scm.RedactURL(in.Repo), short(in.SHA), err)))
	}
	// Steps in a container need the checkout before the container starts;
	// on the host the runner starts the first step's shell while the
	// checkout runs (runner.Spec.Prepare).
	inContainer := a.Runtime != "" && a.Runtime != runner.RuntimeHost && in.Image != ""
	if inContainer {
		if err := doCheckout(runCtx); err != nil {
			return checkoutFailed(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // the workspace and its parents, as the checkout creates them (before the 0700 control directory beside it)
		return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, fail(res, fmt.Sprintf("prepare workspace %s: %v", dir, err)))
	}

	// Secrets come from the API now that the build is claimed; a missing
	// one fails the build with its name.
	logs := a.Logs(res.LogKey, credential)
	var secrets map[string]string
	if len(in.Secrets) > 0 {
		var withheld []string
		secrets, withheld, err = a.resolveSecrets(runCtx, in, credential)
		if err != nil {
			if runCtx.Err() != nil {
				res.Status, res.Reason = runner.StatusAborted, "aborted while fetching secrets"
				return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, res)
			}
			return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, fail(res, "secrets: "+err.Error()))
		}
		if len(withheld) > 0 {
			a.Logger.Info("secrets_withheld_from_pr_build", "build", in.BuildID, "secrets", strings.Join(withheld, ","))
		}
		logs = maskSecrets(logs, secrets)
	}

	// The build's metadata, artifacts and tools (meta, sluice) live next
	// to the workspace; the metadata it starts with comes from the API.
	files, err := a.prepareBuildFiles(in, dir, inContainer)
	if !a.KeepWorkspaces {
		defer a.removeDir(files.root)
	}
	metaFailed := func(err error) (RunBuildResult, error) {
		if runCtx.Err() != nil {
			res.Status, res.Reason = runner.StatusAborted, "aborted while reading the build's metadata"
			return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, res)
		}
		return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, fail(res, "metadata: "+err.Error()))
	}
	if err == nil && inContainer {
		// The container starts on a checked-out workspace and its files.
		err = a.writeStartMeta(files, inContainer, startMeta)
	}
	if err != nil {
		return metaFailed(err)
	}
	// The steps hold their own credential (SD_BUILD_CREDENTIAL); the log
	// never shows it.
	logs = maskSecrets(logs, map[string]string{"SD_BUILD_CREDENTIAL": stepCredential})

	steps := make([]runner.Step, 0, len(in.Steps))
	for _, s := range in.Steps {
		steps = append(steps, runner.Step{Name: s.Name, Command: s.Command})
	}
	spec := runner.Spec{
		Dir:     dir,
		Env:     buildEnv(in, dir, name, secrets),
		Steps:   steps,
		Timeout: in.Timeout,
		Logs:    logs,
		OnStep: func(ev runner.StepEvent) {
			if ev.Kind == runner.StepStarted {
				hb.step(ev.Step.Name)
			}
		},
		// N11: an attempt Temporal gave up on (or could not be told about
		// for the whole heartbeat timeout) may already run elsewhere: its
		// teardown must not run beside the next attempt's steps.
		SkipTeardown: func(cause error) bool {
			return errors.Is(cause, errAttemptGone) || errors.Is(cause, errUnreachable)
		},
	}
	// The runner's control directory (step scripts, output FIFOs, saved
	// shell state) sits next to the workspace, never inside the checkout.
	spec.ControlDir = dir + ".ctl"
	defer a.removeDir(spec.ControlDir)
	if err := freshDir(spec.ControlDir); err != nil {
		return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in,
			fail(res, fmt.Sprintf("prepare control directory %s: %v", spec.ControlDir, err)))
	}
	// removeContainer removes the attempt's container, once: before the
	// result is reported (a build reported finished holds no container),
	// and deferred for every other way out.
	removeContainer := func() {}
	switch {
	case a.Runtime == "" || a.Runtime == runner.RuntimeHost:
		spec.RunAs = a.RunAs
		if in.Image != "" {
			why := a.RuntimeWhy
			if why == "" {
				why = "host runtime"
			}
			spec.Logs = &noticeSink{LogSink: spec.Logs, notice: fmt.Sprintf(
				"sluice: image %s is not used: executor %s runs steps in a shell on its host (%s)\n", in.Image, name, why)}
		}
	case in.Image == "":
		spec.RunAs = a.RunAs
		spec.Logs = &noticeSink{LogSink: spec.Logs, notice: fmt.Sprintf(
			"sluice: the job names no image: executor %s runs steps in a shell on its host\n", name)}
	default:
		ctr, err := a.startContainer(runCtx, in, dir, spec.ControlDir, name, files)
		if err != nil {
			if runCtx.Err() != nil {
				res.Status, res.Reason = runner.StatusAborted, "aborted while starting the container"
				return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, res)
			}
			return a.finish(ctx, runCtx, rep, hb, late, &stopped, info.TaskToken, in, fail(res, err.Error()))
		}
		var once sync.Once
		removeContainer = func() {
			once.Do(func() {
				if err := runner.RemoveContainer(ctx, a.Runtime, ctr.ID); err != nil {
					a.Logger.Warn("container_cleanup_failed", "container", ctr.ID, "error", err)
				}
			})
		}
		defer removeContainer()
		spec.Container = ctr
		spec.Env = containerEnv(in, ctr.Dir, name, secrets)
	}
	pathPrefix := ""
	if files.self != "" && spec.Container == nil {
		pathPrefix = files.binDir
	}
	spec.Env = withEnv(spec.Env, a.buildFileEnv(files, in, stepCredential, spec.Container != nil), pathPrefix)
	late.LogSink, spec.Logs = spec.Logs, late
	var groups string
	if spec.Container == nil && a.GroupRecords != "" {
		// Recorded so that this executor, started again after dying
		// mid-build, kills what the attempt left running.
		groups = filepath.Join(a.GroupRecords, reNotName.ReplaceAllString(in.BuildID, "_")+"-attempt-"+strconv.Itoa(in.Attempt))
		spec.OnProcessGroup = func(pgid int) {
			if err := runner.AppendGroupRecord(groups, runner.RecordGroup(pgid)); err != nil {
				a.Logger.Warn("process_group_record_failed", "build", in.BuildID, "error", err)
			}
		}
	}
	// Caches are restored into the checkout before the first step (on the
	// host, once the checkout that overlaps the shell's start is done).
	entries := cache.Entries(in.Cache)
	cb := cache.Build{Pipeline: in.Pipeline, Event: eventNumber(in.EventID), Job: in.Job, PR: in.PR > 0}
	restoreCache := func(ctx context.Context) {
		if len(entries) > 0 {
			a.cacheStep(in, spec.Logs, "sd-setup-cache", func(w io.Writer) { a.Caches.Restore(ctx, cb, entries, dir, w) })
		}
	}
	var checkoutErr, metaErr error
	if inContainer {
		restoreCache(runCtx)
	} else {
		spec.Prepare = func(ctx context.Context) error {
			if checkoutErr = doCheckout(ctx); checkoutErr != nil {
				return checkoutErr
			}
			// Fetched since the claim: the checkout rarely waits for it.
			if metaErr = a.writeStartMeta(files, false, startMeta); metaErr != nil {
				return metaErr
			}
			restoreCache(ctx)
			return nil
		}
	}
	out := runner.Run(runCtx, spec)
	removeGroups := func() {
		if groups != "" {
			// Run returned: every group it created is gone.
			if err := os.Remove(groups); err != nil && !errors.Is(err, os.ErrNotExist) {
				a.Logger.Warn("process_group_record_cleanup_failed", "build", in.BuildID, "error", err)
			}
		}
	}
	if checkoutErr != nil {
		removeContainer()
		removeGroups()
		return checkoutFailed(checkoutErr)
	}
	if metaErr != nil {
		removeContainer()
		removeGroups()
		return metaFailed(metaErr)
	}
	res.Status, res.Reason = out.Status, out.Reason
	for _, s := range out.Steps {
		res.Steps = append(res.Steps, StepResult{Name: s.Name, ExitCode: s.ExitCode, Start: s.Start, End: s.End, Skipped: s.Skipped})
	}
	// The result goes to the outbox at once, with what the build leaves
	// to keep (metadata, artifacts): an executor killed from here on keeps
	// them and delivers the result when it starts again (keep.go), instead
	// of the build running twice.
	p := pendingResult{
		BuildID: in.BuildID, Attempt: in.Attempt, TaskToken: info.TaskToken, HeartbeatTimeout: info.HeartbeatTimeout,
		Keep: a.keepWorkFor(in, files, &res, credential, !errors.Is(context.Cause(runCtx), errAttemptGone)),
	}
	p.Result, p.Saved = res, time.Now()
	path, err := a.saveResult(p)
	if err != nil {
		a.Logger.Warn("build_result_not_saved", "build", in.BuildID, "attempt", in.Attempt, "error", err)
	}
	if len(entries) > 0 && out.Status == runner.StatusSuccess && runCtx.Err() == nil {
		a.cacheStep(in, spec.Logs, "sd-teardown-cache", func(w io.Writer) { a.Caches.Save(runCtx, cb, entries, dir, w) })
	}
	removeContainer()
	removeGroups()
	if p.Keep != nil {
		a.keep(ctx, &p, func() (io.WriteCloser, error) { return late.Open(artifactsLog) })
		if path != "" {
			if _, err := a.saveResult(p); err != nil {
				a.Logger.Warn("build_result_not_saved", "build", in.BuildID, "attempt", in.Attempt, "error", err)
			}
		}
	}
	return a.finishSaved(ctx, runCtx, rep, hb, late, &stopped, p, path)
}

// cacheStep runs a cache restore or save under its own step log. A log
// that cannot be opened does not stop it (the cache still works; the
// executor's log says why the step log is missing).
func (a *Activities) cacheStep(in RunBuildInput, logs runner.LogSink, step string, run func(io.Writer)) {
	w := io.Discard
	if logs != nil {
		lw, err := logs.Open(step)
		if err != nil {
			a.Logger.Warn("cache_log_failed", "build", in.BuildID, "step", step, "error", err)
		} else {
			defer func() { _ = lw.Close() }()
			w = lw
		}
	}
	run(w)
}

// eventNumber is the event's number from its short ID "<pipeline>/<n>".
func eventNumber(eventID string) string {
	return eventID[strings.LastIndex(eventID, "/")+1:]
}

// claim claims the build, heartbeating while the claim waits (a controller
// slow to answer must not look like a lost executor).
func (a *Activities) claim(ctx context.Context, in RunBuildInput, executor, credentialHash, stepHash string) error {
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		defer keepHeartbeating(ctx, max(hb/4, 100*time.Millisecond), func() {
			activity.RecordHeartbeat(ctx, Progress{Executor: executor, Step: "claiming"})
		})()
	}
	return a.Claimer.Claim(ctx, Claim{
		WorkflowID: in.WorkflowID, Build: in.BuildID, Attempt: in.Attempt, Dispatch: in.Dispatch,
		Executor: executor, CredentialHash: credentialHash, StepHash: stepHash,
	})
}

// finish ends an attempt that ran (or tried to): an interrupted attempt is
// an error for the workflow to dispatch again; a result goes to Temporal
// through the outbox, unless nobody waits for it any more (the attempt is
// gone or timed out), in which case the SDK's report fails harmlessly.
func (a *Activities) finish(ctx, runCtx context.Context, rep Reporter, hb *heartbeater, late *lateCloseSink, stopped *atomic.Bool,
	token []byte, in RunBuildInput, res RunBuildResult,
) (RunBuildResult, error) {
	p := pendingResult{BuildID: in.BuildID, Attempt: in.Attempt, TaskToken: token, Result: res, Saved: time.Now()}
	return a.finishSaved(ctx, runCtx, rep, hb, late, stopped, p, "")
}

// finishSaved is finish for a result that may be in the outbox already
// (at path; "" when not).
func (a *Activities) finishSaved(ctx, runCtx context.Context, rep Reporter, hb *heartbeater, late *lateCloseSink, stopped *atomic.Bool,
	p pendingResult, path string,
) (RunBuildResult, error) {
	hb.stop()
	cause := context.Cause(runCtx)
	queueName := strings.TrimPrefix(activity.GetInfo(ctx).TaskQueue, "queue/")
	interrupted := func() {
		late.wait()
		a.finished(queueName, "interrupted")
		if path != "" {
			// Nobody waits for this result: the workflow dispatches the
			// build again.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				a.Logger.Warn("outbox_remove_failed", "path", path, "error", err)
			}
		}
	}
	switch {
	case stopped.Load() && ctx.Err() == nil:
		interrupted()
		return p.Result, temporal.NewApplicationError(fmt.Sprintf("executor %s stopped during build %s", p.Result.Executor, p.BuildID), ErrTypeExecutorStopped)
	case ctx.Err() != nil, errors.Is(cause, errAttemptGone), errors.Is(cause, errUnreachable):
		interrupted()
		return p.Result, nil
	}
	a.finished(queueName, string(p.Result.Status))
	return a.report(ctx, rep, p, path, func() { late.wait() })
}

func fail(res RunBuildResult, reason string) RunBuildResult {
	res.Status, res.Reason = runner.StatusFailure, reason
	return res
}

// baseEnv are the executor's own variables a step inherits; nothing else of
// the executor's environment (its secrets included) reaches builds.
var baseEnv = []string{"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "HOME", "USER", "SHELL", "TERM"}

// buildEnv is the step environment: a few executor basics, the job's
// environment and matrix values, its secrets, then the SD_* variables and
// CI=true, which neither can override.
func buildEnv(in RunBuildInput, dir, executor string, secrets map[string]string) []string {
	vars := map[string]string{}
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	if _, ok := vars["PATH"]; !ok {
		vars["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for k, v := range in.Environment {
		vars[k] = v
	}
	for k, v := range secrets {
		vars[k] = v
	}
	sd := map[string]string{
		"CI":               "true",
		"SCREWDRIVER":      "true",
		"SLUICE":           "true",
		"SD_PIPELINE_NAME": in.Pipeline,
		"SD_JOB_NAME":      in.Job,
		"SD_BUILD_ID":      in.BuildID,
		"SD_EVENT_ID":      in.EventID,
		"SD_SHA":           in.SHA,
		"SD_BRANCH":        in.Branch,
		"SD_SOURCE_DIR":    dir,
		"SD_BUILD_ATTEMPT": strconv.Itoa(in.Attempt),
		"SD_EXECUTOR":      executor,
		"SD_TRIGGER":       in.Trigger,
	}
	if in.PR > 0 {
		sd["SD_PULL_REQUEST"] = strconv.Itoa(in.PR)
	}
	for k, v := range sd {
		vars[k] = v
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// resolveSecrets fetches the build's secrets from the API with the
// attempt's credential.
func (a *Activities) resolveSecrets(ctx context.Context, in RunBuildInput, credential string) (map[string]string, []string, error) {
	if a.Secrets == nil {
		return nil, nil, fmt.Errorf("job %s lists secrets %s, but this executor has no secret source (SLUICE_API_URL)", in.Job, strings.Join(in.Secrets, ", "))
	}
	return a.Secrets.ResolveSecrets(ctx, SecretRequest{Build: in.BuildID, Attempt: in.Attempt, Names: in.Secrets, Fork: in.Fork, Credential: credential})
}

// checkoutAuth asks the API for the pipeline's repository credentials when
// it has some (nil otherwise). A fork's pull request gets them only when
// the secret allows fork pull requests; its checkout then uses the host's
// credentials alone.
func (a *Activities) checkoutAuth(ctx context.Context, in RunBuildInput, credential string) (*scm.Auth, error) {
	if !in.RepoAuth || a.Secrets == nil {
		return nil, nil
	}
	values, _, err := a.Secrets.ResolveSecrets(ctx, SecretRequest{
		Build: in.BuildID, Attempt: in.Attempt, Names: RepoAuthSecrets, Fork: in.Fork, Credential: credential, Checkout: true,
	})
	if err != nil {
		return nil, fmt.Errorf("the pipeline's repository credentials: %w", err)
	}
	return RepoAuthFrom(in.Pipeline, in.Repo, values), nil
}

// pendingCheckout is a checkout begun before the claim's answer.
type pendingCheckout struct {
	cancel func()
	done   chan struct{}
	err    error
	dir    string
}

// earlyCheckout begins checkout (of in's commit into dir, which it empties
// first) in the background when in's repository needs no credentials; nil
// otherwise, or when dir cannot be emptied (the caller reports that).
func (a *Activities) earlyCheckout(ctx context.Context, in RunBuildInput, dir string, checkout func(context.Context) error) *pendingCheckout {
	if in.RepoAuth || os.RemoveAll(dir) != nil {
		return nil
	}
	cctx, cancel := context.WithCancel(ctx)
	p := &pendingCheckout{cancel: cancel, done: make(chan struct{}), dir: dir}
	go func() {
		defer close(p.done)
		defer cancel()
		p.err = checkout(cctx)
	}()
	return p
}

// wait is the checkout's outcome, once it is done; ctx is the caller's
// (the checkout stops with the run: see RunBuild).
func (p *pendingCheckout) wait(context.Context) error {
	<-p.done
	return p.err
}

// discard stops the checkout of a claim that was refused and removes what
// it wrote.
func (p *pendingCheckout) discard() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
	_ = os.RemoveAll(p.dir)
}

// IsDeclined reports whether err is an executor's refusal to run a build.
func IsDeclined(err error) bool { return hasType(err, ErrTypeDeclined) }

// IsQueueDeleted reports whether the build's queue was deleted under it.
func IsQueueDeleted(err error) bool { return hasType(err, ErrTypeQueueDeleted) }

// IsExecutorStopped reports whether the executor stopped under the build.
func IsExecutorStopped(err error) bool { return hasType(err, ErrTypeExecutorStopped) }

// IsSuperseded reports whether err is a build's refusal of a claim.
func IsSuperseded(err error) bool { return hasType(err, ErrTypeSuperseded) }

func hasType(err error, t string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == t
}

// freshDir makes dir an empty directory (an attempt run again after its
// executor died finds its old one).
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err //nolint:wrapcheck // the caller names the directory
	}
	return os.MkdirAll(dir, 0o700) //nolint:wrapcheck // the caller names the directory
}

// finished tells the metrics how an attempt ended.
func (a *Activities) finished(queue, status string) {
	if a.Metrics != nil {
		a.Metrics.Finished(queue, status)
	}
}

// checkout checks the build's commit out into dir. The objects of a git
// checkout are hard links to the executor's mirror (read-only files of the
// executor's user). They are copied instead for steps in a container: it
// runs as the executor's user (who owns the files and may make them
// writable) or as root, and a write through a hard link would change the
// mirror, which every later build of the repository on this executor checks
// out from; the workspace is the container's only way to the mirror, and
// the copy closes it. Steps on the host run as another user, who cannot
// write the executor's read-only files (runner's giveTree leaves them the
// executor's), or as the executor itself (root included: trusted builds
// only), which can change its data directory directly anyway.
func (a *Activities) checkout(ctx context.Context, repo scm.Repo, in RunBuildInput, dir string) error {
	inContainer := a.Runtime != "" && a.Runtime != runner.RuntimeHost && in.Image != ""
	if cc, ok := repo.(scm.CopyCheckouter); ok && inContainer {
		return cc.CheckoutCopy(ctx, in.SHA, dir) //nolint:wrapcheck // RunBuild names the repository and the commit
	}
	return repo.Checkout(ctx, in.SHA, dir) //nolint:wrapcheck // as above
}
