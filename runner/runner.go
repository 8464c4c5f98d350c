package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// TeardownPrefix marks teardown steps: a step whose name starts with it
// always runs, whatever happened to the steps before it.
const TeardownPrefix = "teardown-"

// Defaults applied to the zero values of the corresponding Spec fields.
const (
	// DefaultKillGrace is the time between SIGTERM and SIGKILL.
	DefaultKillGrace = 2 * time.Second
	// DefaultTeardownTimeout is the budget of the teardown phase.
	DefaultTeardownTimeout = 5 * time.Minute
	// DefaultAbortTeardownTimeout is the budget of the teardown phase once
	// the build's context is cancelled.
	DefaultAbortTeardownTimeout = 30 * time.Second
)

// outputDrain is how long a step's log stays open after its shell exited,
// waiting for processes that inherited the pipe to close it.
const outputDrain = time.Second

// Status is how a build run ended.
type Status string

// The statuses Run reports.
const (
	// StatusSuccess means every step exited 0.
	StatusSuccess Status = "success"
	// StatusFailure means a step exited non-zero or could not start.
	StatusFailure Status = "failure"
	// StatusAborted means the context passed to Run was cancelled.
	StatusAborted Status = "aborted"
	// StatusTimeout means Spec.Timeout (or the teardown budget) expired.
	StatusTimeout Status = "timeout"
)

// Step is one command of a build.
type Step struct {
	// Name identifies the step in logs and results; names starting with
	// TeardownPrefix are teardown steps.
	Name string
	// Command is sourced by the build's shell session (see the package
	// documentation): it may span lines and changes the shell's state for
	// the next steps.
	Command string
}

// IsTeardown reports whether the step is a teardown step.
func (s Step) IsTeardown() bool { return strings.HasPrefix(s.Name, TeardownPrefix) }

// LogSink receives the logs of a build's steps.
type LogSink interface {
	// Open returns the writer for one step's combined stdout and stderr.
	// Run closes it when the step's output is drained; Close marks the step
	// log complete.
	Open(step string) (io.WriteCloser, error)
}

// Spec is everything Run needs to run one build.
type Spec struct {
	// Dir is the workspace, already checked out by the caller.
	Dir string
	// Env is the full environment of every step (KEY=value); nil means an
	// empty environment.
	Env []string
	// Steps run in order, teardown steps last.
	Steps []Step
	// Timeout bounds the non-teardown steps; 0 means no timeout.
	Timeout time.Duration
	// Logs receives each step's output; nil discards it.
	Logs LogSink
	// OnStep, if set, is called synchronously as steps start, end or are
	// skipped. It must not block for long.
	OnStep func(StepEvent)
	// KillGrace is the time between SIGTERM and SIGKILL sent to a process
	// group; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// TeardownTimeout is the budget of the whole teardown phase; 0 means
	// DefaultTeardownTimeout.
	TeardownTimeout time.Duration
	// SkipTeardown, when it reports true for the cause of ctx's
	// cancellation, skips the teardown steps: the caller no longer owns the
	// build (another attempt may be running it), so its teardown must not
	// run beside that attempt's steps.
	SkipTeardown func(cause error) bool
	// AbortTeardownTimeout is the teardown budget once ctx is cancelled;
	// 0 means DefaultAbortTeardownTimeout.
	AbortTeardownTimeout time.Duration
	// ControlDir is where Run keeps step scripts, output FIFOs and the saved
	// shell state; "" means a temporary directory Run removes. Required with
	// Container, which must have it mounted at Container.ControlDir.
	ControlDir string
	// OnProcessGroup, if set, is called with the ID of each process group
	// Run creates on the host (one per shell session) right after it
	// started, so the caller can record it and kill it should the executor
	// die before Run returns (see KillRecordedGroups).
	OnProcessGroup func(pgid int)
	// Container, if set, runs the build's shell sessions in that running
	// container instead of on the host.
	Container *Container
	// Prepare, if set, makes Dir ready (the caller's checkout) while Run
	// sets up the control directory and starts the first step's shell
	// beside it, in Dir (which must exist, empty is fine; with RunAs the
	// shell starts after Prepare, as without it); no step runs
	// before it returned. An error ends the build before any step, every
	// step skipped (teardown too): as a failure with the error as the
	// reason, or aborted when ctx is done. Not with Container (the caller
	// starts the container once Dir is ready).
	Prepare func(ctx context.Context) error
	// RunAs, if set, runs the build's shells on the host as that user
	// (the executor must be root): Dir and everything in it is handed to
	// the user, the control directory stays the executor's (the user gets
	// only the files the shell writes), HOME is a directory of its own in
	// the control directory, and the shells run with no supplementary
	// groups. Not with Container.
	RunAs *RunAs
}

// Container is a running container the steps of a build run in. The caller
// creates it (with Spec.Dir and Spec.ControlDir mounted) and removes it
// after Run; Run only execs shells in it.
type Container struct {
	// Runtime is the container CLI: "docker" or "podman".
	Runtime string
	// ID names the running container.
	ID string
	// Dir is Spec.Dir as mounted in the container.
	Dir string
	// ControlDir is Spec.ControlDir as mounted in the container.
	ControlDir string
	// PathPrefix, if set, goes in front of the image's PATH in the
	// build's shells (the sluice tools mounted into the container).
	PathPrefix string
}

// StepResult is what happened to one step.
type StepResult struct {
	// Name is the step's name.
	Name string
	// ExitCode is the shell's exit code, 128+signal when killed by a signal,
	// -1 when the step could not start; meaningless when Skipped.
	ExitCode int
	// Start and End bracket the step's run; zero when Skipped.
	Start, End time.Time
	// Skipped is true when the step never ran.
	Skipped bool
	// Err explains an abnormal end: could not start, killed, log errors.
	Err string
}

// Result is how a build run ended.
type Result struct {
	// Status is the build's outcome.
	Status Status
	// Steps has one entry per Spec step, in Spec order.
	Steps []StepResult
	// Reason explains a non-success Status, e.g. `step "test" exited with
	// code 2`; empty on success.
	Reason string
}

// StepEventKind says what happened to a step.
type StepEventKind string

// The kinds of StepEvent.
const (
	// StepStarted is sent before the step's process starts.
	StepStarted StepEventKind = "started"
	// StepEnded is sent once the step's process exited and its log closed.
	StepEnded StepEventKind = "ended"
	// StepSkipped is sent for a step that will not run.
	StepSkipped StepEventKind = "skipped"
)

// StepEvent reports progress to Spec.OnStep.
type StepEvent struct {
	// Kind says what happened.
	Kind StepEventKind
	// Index is the step's position in Spec.Steps.
	Index int
	// Step is the step's result so far (End is zero for StepStarted).
	Step StepResult
}

// Causes attached to the contexts that bound steps, so a kill can be
// attributed.
var (
	errBuildTimeout    = errors.New("build timed out")
	errTeardownTimeout = errors.New("teardown budget exhausted")
	errAborted         = errors.New("build aborted")
)

// Run runs spec's steps and reports how the build ended. It returns only
// once every process it started is gone (or could not be killed), every log
// writer is closed and every goroutine it started has exited.
func Run(ctx context.Context, spec Spec) Result {
	r := newRun(spec)
	defer r.cleanup()

	res := Result{Status: StatusSuccess, Steps: make([]StepResult, len(spec.Steps))}
	var main, teardown []int
	for i, st := range spec.Steps {
		res.Steps[i].Name = st.Name
		if st.IsTeardown() {
			teardown = append(teardown, i)
		} else {
			main = append(main, i)
		}
	}

	if spec.Prepare != nil {
		if err := r.prepare(ctx); err != nil {
			res.Status, res.Reason = StatusFailure, err.Error()
			if ctx.Err() != nil {
				res.Status = StatusAborted
			}
			for i := range spec.Steps {
				r.skip(&res, i, "skipped: "+res.Reason)
			}
			return res
		}
	}
	r.runMain(ctx, main, &res)
	if len(teardown) > 0 {
		r.runTeardown(ctx, teardown, &res)
	}
	return res
}

func (r *run) runMain(ctx context.Context, steps []int, res *Result) {
	runCtx, cancel := context.WithCancel(ctx)
	if r.spec.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(ctx, r.spec.Timeout, errBuildTimeout)
	}
	defer cancel()

	for _, i := range steps {
		if res.Status == StatusSuccess && runCtx.Err() != nil {
			res.Status, res.Reason = r.stopped(runCtx, "before", i)
		}
		if res.Status != StatusSuccess {
			r.skip(res, i, "")
			continue
		}
		sr, killed := r.step(runCtx, i)
		res.Steps[i] = sr
		switch {
		case killed != nil:
			res.Status, res.Reason = r.stopped(runCtx, "in", i)
		case sr.ExitCode == -1:
			res.Status = StatusFailure
			res.Reason = fmt.Sprintf("step %q could not start: %s", sr.Name, sr.Err)
		case sr.ExitCode != 0:
			res.Status = StatusFailure
			res.Reason = exitReason(sr)
		}
	}
}

// exitReason says how a step that exited non-zero ended, with what the shell
// or runtime said of it when it said anything (a script it could not open).
func exitReason(sr StepResult) string {
	reason := fmt.Sprintf("step %q exited with code %d", sr.Name, sr.ExitCode)
	if sr.Err != "" {
		reason += ": " + sr.Err
	}
	return reason
}

// stopped classifies why runCtx is done: a timeout of its own, or the
// caller's cancellation (including the caller's own deadline).
func (r *run) stopped(runCtx context.Context, where string, i int) (Status, string) {
	name := r.spec.Steps[i].Name
	if errors.Is(context.Cause(runCtx), errBuildTimeout) {
		return StatusTimeout, fmt.Sprintf("timed out after %s %s step %q", r.spec.Timeout, where, name)
	}
	return StatusAborted, fmt.Sprintf("aborted %s step %q", where, name)
}

func (r *run) runTeardown(ctx context.Context, steps []int, res *Result) {
	if ctx.Err() != nil && r.spec.SkipTeardown != nil && r.spec.SkipTeardown(context.Cause(ctx)) {
		for _, i := range steps {
			r.skip(res, i, "skipped: "+context.Cause(ctx).Error())
		}
		return
	}
	tctx, stop := teardownContext(ctx, r.teardownTimeout, r.abortTeardownTimeout)
	defer stop()

	for _, i := range steps {
		if tctx.Err() != nil {
			r.skip(res, i, "skipped: "+context.Cause(tctx).Error())
			continue
		}
		sr, killed := r.step(tctx, i)
		res.Steps[i] = sr
		if res.Status != StatusSuccess {
			continue
		}
		switch {
		case errors.Is(killed, errTeardownTimeout):
			res.Status = StatusTimeout
			res.Reason = fmt.Sprintf("teardown timed out after %s in step %q", r.teardownTimeout, sr.Name)
		case killed != nil:
			res.Status = StatusAborted
			res.Reason = fmt.Sprintf("aborted in step %q", sr.Name)
		case sr.ExitCode == -1:
			res.Status = StatusFailure
			res.Reason = fmt.Sprintf("step %q could not start: %s", sr.Name, sr.Err)
		case sr.ExitCode != 0:
			res.Status = StatusFailure
			res.Reason = exitReason(sr)
		}
	}
}

// teardownContext returns the context bounding the teardown phase: it
// ignores ctx's cancellation but expires after budget, or after abortBudget
// once ctx is cancelled, whichever comes first. stop releases its resources.
func teardownContext(ctx context.Context, budget, abortBudget time.Duration) (context.Context, func()) {
	base, cancelBase := context.WithCancelCause(context.WithoutCancel(ctx))
	tctx, cancelT := context.WithTimeoutCause(base, budget, errTeardownTimeout)

	abort := make(chan struct{})
	done := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() { close(abort) })
	go func() {
		defer close(done)
		select {
		case <-abort:
		case <-tctx.Done():
			return
		}
		t := time.NewTimer(abortBudget)
		defer t.Stop()
		select {
		case <-t.C:
			cancelBase(errAborted)
		case <-tctx.Done():
		}
	}()

	return tctx, func() {
		stopAfter()
		cancelT()
		cancelBase(nil)
		<-done
	}
}

func (r *run) skip(res *Result, i int, why string) {
	res.Steps[i] = StepResult{Name: r.spec.Steps[i].Name, Skipped: true, Err: why}
	r.emit(StepSkipped, i, res.Steps[i])
}

func (r *run) emit(kind StepEventKind, i int, sr StepResult) {
	if r.spec.OnStep != nil {
		r.spec.OnStep(StepEvent{Kind: kind, Index: i, Step: sr})
	}
}

type discardSink struct{}

func (discardSink) Open(string) (io.WriteCloser, error) { return nopCloser{io.Discard}, nil }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
