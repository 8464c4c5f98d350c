package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/runner"
)

// What a build keeps once its steps end (its metadata, its artifacts) is
// kept after the result is saved to the executor's outbox and before the
// result is delivered. Keeping needs the API, and through it the
// controller, so it may wait for seconds; an executor killed meanwhile
// finds the entry when it starts again, keeps what is left (heartbeating
// the attempt meanwhile, so that it is not given up) and delivers the
// result. A build whose steps ended is not run again because its executor
// died while keeping its outputs.

// keepWork is what an attempt still has to keep before its result is
// delivered. It travels in the outbox entry, with the attempt's
// credential (the entry is the executor's own file, mode 0600).
type keepWork struct {
	Build      string `json:"build"`
	Attempt    int    `json:"attempt"`
	Status     string `json:"status"`
	Credential string `json:"credential"`
	// Meta is the metadata document the attempt ended with (nil: the
	// executor has no API to keep it on).
	Meta []byte `json:"meta,omitempty"`
	// ArtifactsDir holds the files to upload ("" when there are none).
	ArtifactsDir string `json:"artifacts_dir,omitempty"`
	// Root is the attempt's build-files directory, which a restarted
	// executor removes once it kept what is in it.
	Root string `json:"root,omitempty"`
}

// keepWorkFor reads what the attempt left to keep: the metadata from its
// file (a file the steps broke fails the build: its downstream builds
// would start with the wrong metadata) and whether it left artifacts.
// withArtifacts is false for an attempt Temporal gave up on.
func (a *Activities) keepWorkFor(in RunBuildInput, f buildFiles, res *RunBuildResult, credential string, withArtifacts bool) *keepWork {
	k := &keepWork{Build: in.BuildID, Attempt: in.Attempt, Status: buildStatus(res.Status), Credential: credential, Root: f.root}
	if a.BuildData != nil {
		b, err := readEndMeta(f)
		if err != nil {
			foldFailure(res, err)
		} else {
			k.Meta = b
		}
	}
	if withArtifacts && hasArtifacts(f.artifactsDir) {
		k.ArtifactsDir = f.artifactsDir
	}
	if k.Meta == nil && k.ArtifactsDir == "" {
		return nil
	}
	return k
}

// keep keeps the attempt's metadata and artifacts and folds what failed
// into the result (metadata is kept for every build that ran, failed ones
// included; so are artifacts, within SLUICE_ARTIFACT_MAX, and their log
// is a step of its own). openLog opens that step's log (nil: none).
func (a *Activities) keep(ctx context.Context, p *pendingResult, openLog func() (io.WriteCloser, error)) {
	k := p.Keep
	if k == nil {
		return
	}
	var keepErr error
	if k.Meta != nil && a.BuildData != nil {
		keepErr = a.saveMeta(ctx, k)
	}
	if k.ArtifactsDir != "" {
		start := time.Now()
		logw := io.Discard
		var w io.WriteCloser
		if openLog != nil {
			var err error
			if w, err = openLog(); err == nil {
				logw = w
			} else {
				w = nil
			}
		}
		err := a.uploadArtifacts(ctx, k, logw)
		if w != nil {
			_ = w.Close()
		}
		step := StepResult{Name: artifactsLog, Start: start, End: time.Now()}
		if err != nil {
			step.ExitCode = 1
			keepErr = errors.Join(keepErr, fmt.Errorf("artifacts: %w", err))
		}
		p.Result.Steps = append(p.Result.Steps, step)
	}
	if keepErr != nil {
		foldFailure(&p.Result, keepErr)
	}
	p.Keep = nil
}

// foldFailure fails a successful result with err, or adds err to the
// reason of one that failed already.
func foldFailure(res *RunBuildResult, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if res.Status == runner.StatusSuccess {
		*res = fail(*res, msg)
		return
	}
	res.Reason = strings.TrimPrefix(res.Reason+"; "+msg, "; ")
}

// keepAfterRestart keeps what a previous run of this executor left to
// keep of an outbox entry, heartbeating the attempt meanwhile, and saves
// the entry again without it.
func (a *Activities) keepAfterRestart(ctx context.Context, f *outboxFile) {
	k := f.p.Keep
	if k == nil {
		return
	}
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hb := newHeartbeater(hctx, a.Reporter, f.p.TaskToken, f.p.Result.Executor, f.p.HeartbeatTimeout, cancel, a.Logger, true)
	var openLog func() (io.WriteCloser, error)
	if a.Logs != nil {
		openLog = func() (io.WriteCloser, error) { return a.Logs(f.p.Result.LogKey, k.Credential).Open(artifactsLog) }
	}
	a.Logger.Info("build_outputs_keeping", "build", f.p.BuildID, "attempt", f.p.Attempt,
		"why", "the executor stopped after the steps ended and before it kept the build's metadata and artifacts")
	a.keep(hctx, &f.p, openLog)
	hb.stop()
	if _, err := a.saveResult(f.p); err != nil {
		a.Logger.Warn("build_result_not_saved", "build", f.p.BuildID, "attempt", f.p.Attempt, "error", err)
	}
	if k.Root != "" {
		a.removeDir(k.Root)
	}
}
