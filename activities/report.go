package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/runner"
)

// How a build attempt talks to Temporal while it runs and when it ends.
//
// The SDK's own paths are too fragile for builds when the Temporal server
// restarts: activity.RecordHeartbeat cancels the activity as soon as one
// heartbeat cannot reach the server within the heartbeat throttle (one
// second on executors, so cancellations arrive fast), which aborted every
// running build during a two-second server restart; and the SDK reports a
// result once, giving up after ten seconds, after which the build is
// dispatched again and runs twice. So RunBuild heartbeats and completes by
// task token itself: a heartbeat that cannot get through only stops the
// build once none got through for the whole heartbeat timeout (the server
// gives the attempt up then), and a result is first written to the
// executor's outbox, then delivered until Temporal takes it or says the
// attempt is gone; an executor killed before delivery delivers it when it
// starts again, within the heartbeat timeout if it is to count. What is
// left is the moment between a step's last action and the executor saving
// the result (the step's exit, the last log shipment; milliseconds): an
// executor killed then cannot know the work was done, and the build runs
// again after the heartbeat timeout.

// Reporter reaches a running build attempt by its activity task token:
// heartbeats (whose answers carry cancellations) and the completion.
// client.Client implements it.
type Reporter interface {
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
	CompleteActivity(ctx context.Context, taskToken []byte, result any, err error) error
}

// Causes of a running build's context being cancelled by its heartbeats.
var (
	errCancelRequested = errors.New("the build was cancelled")
	errAttemptGone     = errors.New("the Temporal server no longer runs this attempt (it timed out and was dispatched again, or the build ended)")
	errUnreachable     = errors.New("the Temporal server was unreachable for the whole heartbeat timeout")
)

func (a *Activities) reporter(ctx context.Context) Reporter {
	if a.Reporter != nil {
		return a.Reporter
	}
	return activity.GetClient(ctx)
}

// keepHeartbeating calls beat every interval, the first time after one,
// until the returned stop is called; with activity.RecordHeartbeat as
// beat, the SDK throttles what it sends to a fraction of the heartbeat
// timeout.
func keepHeartbeating(ctx context.Context, every time.Duration, beat func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			beat()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// heartbeatPeriod is how often a running build reports. A cancellation
// reaches a running build only with a heartbeat's answer, so this bounds how
// long `sluice build cancel` takes to kill the steps.
const heartbeatPeriod = time.Second

// heartbeater records a heartbeat by task token every period, carrying the
// current step, until stopped (each is a write of the workflow's state on
// the server: a short build's attempt makes none). It
// cancels the build (through cancel, with a cause) when the answer says the
// build was cancelled or the attempt is gone, or when no heartbeat got
// through for the whole heartbeat timeout.
type heartbeater struct {
	rep     Reporter
	token   []byte
	timeout time.Duration
	cancel  context.CancelCauseFunc
	log     *slog.Logger
	period  time.Duration
	// beatFirst: the first beat goes at once (see loop).
	beatFirst bool

	mu     sync.Mutex
	p      Progress
	lastOK time.Time
	failed bool

	wg sync.WaitGroup
	// rpc lives until stop (or the build's end) and bounds the heartbeat
	// calls: stop cancels it, so that a call hanging on an unreachable
	// server does not hold the result back from the outbox (an executor
	// killed in that time would run the build twice).
	rpc       context.Context
	rpcCancel context.CancelFunc
}

func newHeartbeater(ctx context.Context, rep Reporter, token []byte, executor string, timeout time.Duration,
	cancel context.CancelCauseFunc, log *slog.Logger, beatFirst bool,
) *heartbeater {
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	h := &heartbeater{
		rep: rep, token: token, timeout: timeout, cancel: cancel, log: log,
		period:    min(heartbeatPeriod, max(timeout/4, 100*time.Millisecond)),
		beatFirst: beatFirst,
		p:         Progress{Executor: executor}, lastOK: time.Now(),
	}
	h.rpc, h.rpcCancel = context.WithCancel(ctx)
	h.wg.Go(h.loop)
	return h
}

// loop beats every period, the first time at once when h.beatFirst (an
// attempt picked up again after its executor restarted, whose heartbeat
// timeout may be close) and otherwise after one period: a build's attempt
// just started, and a short build ends before it needs any.
func (h *heartbeater) loop() {
	t := time.NewTicker(h.period)
	defer t.Stop()
	if h.beatFirst {
		h.beat()
	}
	for {
		select {
		case <-h.rpc.Done():
			return
		case <-t.C:
		}
		h.beat()
	}
}

func (h *heartbeater) beat() {
	h.mu.Lock()
	p := h.p
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(h.rpc, max(2*h.period, 2*time.Second))
	err := h.rep.RecordActivityHeartbeat(ctx, h.token, p)
	cancel()
	if h.rpc.Err() != nil { // the build ended or the heartbeats stopped
		return
	}
	var canceled *temporal.CanceledError
	var gone *serviceerror.NotFound
	switch {
	case err == nil:
		h.mu.Lock()
		h.lastOK = time.Now()
		if h.failed {
			h.failed = false
			h.log.Info("build_heartbeat_ok", "executor", p.Executor)
		}
		h.mu.Unlock()
	case errors.As(err, &canceled), errors.Is(err, activity.ErrActivityPaused), errors.Is(err, activity.ErrActivityReset):
		h.cancel(errCancelRequested)
	case errors.As(err, &gone):
		h.cancel(errAttemptGone)
	default:
		h.mu.Lock()
		silent := time.Since(h.lastOK)
		first := !h.failed
		h.failed = true
		h.mu.Unlock()
		if silent > h.timeout {
			h.log.Warn("build_heartbeat_given_up", "executor", p.Executor, "silent", silent.Round(time.Millisecond).String(), "error", err)
			h.cancel(errUnreachable)
		} else if first {
			h.log.Warn("build_heartbeat_failed", "executor", p.Executor, "error", err,
				"why", "the build keeps running until the heartbeat timeout "+h.timeout.String())
		}
	}
}

// step notes the step now running: the next heartbeat carries it.
func (h *heartbeater) step(name string) {
	h.mu.Lock()
	h.p.Step = name
	h.mu.Unlock()
}

// stop ends the heartbeats at once: a call in flight is abandoned.
func (h *heartbeater) stop() {
	h.rpcCancel()
	h.wg.Wait()
}

// pendingResult is an outbox entry: a finished attempt's result on its way
// to Temporal, and what the attempt still has to keep before (see keep.go).
type pendingResult struct {
	BuildID   string         `json:"build_id"`
	Attempt   int            `json:"attempt"`
	TaskToken []byte         `json:"task_token"`
	Result    RunBuildResult `json:"result"`
	Saved     time.Time      `json:"saved"`
	// Keep is what is left to keep before delivery (nil: nothing).
	Keep *keepWork `json:"keep,omitempty"`
	// HeartbeatTimeout is the attempt's, for a restarted executor that
	// heartbeats it while it keeps what is left.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
}

// report hands a finished attempt's result to Temporal: saved to the outbox
// first (unless path says where it was saved already), then, once logsDone
// returned (the steps' logs are complete on the API), delivered until
// Temporal takes it. It returns activity.ErrResultPending: the SDK must not
// report the result again.
func (a *Activities) report(ctx context.Context, rep Reporter, p pendingResult, path string, logsDone func()) (RunBuildResult, error) {
	if path == "" {
		var err error
		path, err = a.saveResult(p)
		if err != nil {
			a.Logger.Warn("build_result_not_saved", "build", p.BuildID, "attempt", p.Attempt, "error", err)
		} else {
			a.Logger.Debug("build_result_saved", "build", p.BuildID, "attempt", p.Attempt, "status", string(p.Result.Status), "outbox", path)
		}
	}
	if logsDone != nil {
		logsDone()
	}
	if err := deliver(ctx, rep, p, path, a.Logger); err != nil {
		a.Logger.Warn("build_result_undelivered", "build", p.BuildID, "attempt", p.Attempt, "error", err,
			"outbox", path, "why", "the executor is stopping; it delivers the result when it starts again")
	}
	return RunBuildResult{}, activity.ErrResultPending
}

// saveResult writes the entry to the outbox (write, sync, rename); "" when
// the activities have no outbox.
func (a *Activities) saveResult(p pendingResult) (string, error) {
	if a.Outbox == "" {
		return "", nil
	}
	if err := os.MkdirAll(a.Outbox, 0o755); err != nil {
		return "", fmt.Errorf("create outbox: %w", err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode result: %w", err)
	}
	name := strings.ReplaceAll(p.BuildID, "/", "_") + "." + strconv.Itoa(p.Attempt) + ".json"
	path := filepath.Join(a.Outbox, name)
	tmp, err := os.CreateTemp(a.Outbox, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create outbox entry: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("write outbox entry %s: %w", path, err)
	}
	return path, nil
}

// deliver completes the attempt with its result until Temporal takes it or
// answers that the attempt is gone (then nobody waits for the result: the
// build was dispatched again), and removes the outbox entry. It gives up
// only when ctx ends, leaving the entry for the next start.
func deliver(ctx context.Context, rep Reporter, p pendingResult, path string, log *slog.Logger) error {
	wait := 100 * time.Millisecond
	warned := false
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := rep.CompleteActivity(cctx, p.TaskToken, p.Result, nil)
		cancel()
		var gone *serviceerror.NotFound
		var bad *serviceerror.InvalidArgument
		switch {
		case err == nil:
			level := slog.LevelDebug
			if warned || time.Since(p.Saved) > time.Second {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "build_result_delivered", "build", p.BuildID, "attempt", p.Attempt, "after", time.Since(p.Saved).Round(time.Millisecond).String())
		case errors.As(err, &gone), errors.As(err, &bad):
			log.Warn("build_result_dropped", "build", p.BuildID, "attempt", p.Attempt, "status", string(p.Result.Status), "error", err,
				"why", "Temporal no longer waits for this attempt: it has the result already, or gave the attempt up after the heartbeat timeout and dispatched the build again")
		default:
			if ctx.Err() != nil {
				return fmt.Errorf("deliver the result of build %s attempt %d: %w", p.BuildID, p.Attempt, ctx.Err())
			}
			if !warned {
				warned = true
				log.Warn("build_result_delivery_failed", "build", p.BuildID, "attempt", p.Attempt, "error", err, "why", "retrying until Temporal answers")
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("deliver the result of build %s attempt %d: %w", p.BuildID, p.Attempt, ctx.Err())
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
			continue
		}
		if path != "" {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.Warn("outbox_remove_failed", "path", path, "error", err)
			}
		}
		return nil
	}
}

// DeliverPending delivers the results a previous run of this executor saved
// but could not deliver before it died, until ctx ends. Executors call it
// when they start.
func (a *Activities) DeliverPending(ctx context.Context) {
	if a.Outbox == "" || a.Reporter == nil {
		return
	}
	files, tmps, err := readOutbox(a.Outbox)
	if err != nil {
		a.Logger.Warn("outbox_read_failed", "dir", a.Outbox, "error", err)
		return
	}
	for _, path := range tmps {
		_ = os.Remove(path) // a write the previous run did not finish
	}
	// Each entry on its own: one waiting for the API to keep its outputs
	// must not hold the others past their heartbeat timeout.
	var wg sync.WaitGroup
	for _, f := range files {
		if f.err != nil {
			a.Logger.Warn("outbox_entry_unreadable", "path", f.path, "error", f.err)
			_ = os.Remove(f.path)
			continue
		}
		wg.Go(func() {
			a.Logger.Info("build_result_redelivering", "build", f.p.BuildID, "attempt", f.p.Attempt, "saved", f.p.Saved)
			a.keepAfterRestart(ctx, &f)
			_ = deliver(ctx, a.Reporter, f.p, f.path, a.Logger)
		})
	}
	wg.Wait()
}

// outboxFile is one entry of an outbox directory, read (or why not).
type outboxFile struct {
	path string
	p    pendingResult
	err  error
}

// readOutbox reads the entries of an outbox directory, and lists the
// temporary files of writes that never finished; a missing directory holds
// none.
func readOutbox(dir string) (files []outboxFile, tmps []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read outbox: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), ".tmp-"):
			tmps = append(tmps, path)
			continue
		case !strings.HasSuffix(e.Name(), ".json"):
			continue
		}
		f := outboxFile{path: path}
		var data []byte
		if data, f.err = os.ReadFile(path); f.err == nil {
			f.err = json.Unmarshal(data, &f.p)
		}
		files = append(files, f)
	}
	return files, tmps, nil
}

// OutboxEntry is a result an executor saved and has not delivered yet.
type OutboxEntry struct {
	BuildID string
	Attempt int
	Saved   time.Time
}

// ReadOutbox lists the undelivered results in an executor's outbox
// directory (SLUICE_DATA_DIR/outbox/<name>); a missing directory holds none.
// Test harnesses read it to tell a build run twice because its executor
// died holding the result from a defect.
func ReadOutbox(dir string) ([]OutboxEntry, error) {
	files, _, err := readOutbox(dir)
	if err != nil {
		return nil, err
	}
	var out []OutboxEntry
	for _, f := range files {
		switch {
		case errors.Is(f.err, os.ErrNotExist):
			continue // delivered meanwhile
		case f.err != nil:
			return nil, fmt.Errorf("outbox entry %s: %w", f.path, f.err)
		}
		out = append(out, OutboxEntry{BuildID: f.p.BuildID, Attempt: f.p.Attempt, Saved: f.p.Saved})
	}
	return out, nil
}

// OutboxDir is the outbox directory of the executor name under dataDir.
func OutboxDir(dataDir, name string) string {
	return filepath.Join(dataDir, "outbox", strings.ReplaceAll(name, "/", "_"))
}

// lateCloseSink closes each step's log in the background: the runner goes
// on (and the result reaches the outbox) while the log's last bytes ship to
// the API, which may be slow; wait blocks until every log is complete.
type lateCloseSink struct {
	runner.LogSink
	log   *slog.Logger
	build string
	wg    sync.WaitGroup
}

func (s *lateCloseSink) Open(step string) (io.WriteCloser, error) {
	w, err := s.LogSink.Open(step)
	if err != nil {
		return nil, err //nolint:wrapcheck // the sink's own error
	}
	return &lateCloser{WriteCloser: w, s: s, step: step}, nil
}

// wait blocks until every step log opened so far is closed (each close is
// bounded by the log store's own timeout) and logs those that failed.
func (s *lateCloseSink) wait() {
	if s == nil {
		return
	}
	s.wg.Wait()
}

type lateCloser struct {
	io.WriteCloser
	s    *lateCloseSink
	step string
	once sync.Once
}

func (c *lateCloser) Close() error {
	c.once.Do(func() {
		c.s.wg.Go(func() {
			if err := c.WriteCloser.Close(); err != nil {
				c.s.log.Warn("build_log_incomplete", "build", c.s.build, "step", c.step, "error", err)
			}
		})
	})
	return nil
}
