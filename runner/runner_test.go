package runner_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// memSink keeps each step's log in memory and remembers which were closed.
type memSink struct {
	mu     sync.Mutex
	logs   map[string]*bytes.Buffer
	closed map[string]bool
	failOn string
}

func newMemSink() *memSink {
	return &memSink{logs: map[string]*bytes.Buffer{}, closed: map[string]bool{}}
}

var errSinkBroken = errors.New("sink broken")

func (s *memSink) Open(step string) (io.WriteCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if step == s.failOn {
		return nil, errSinkBroken
	}
	s.logs[step] = &bytes.Buffer{}
	return &memWriter{s: s, step: step}, nil
}

func (s *memSink) log(step string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.logs[step]; ok {
		return b.String()
	}
	return ""
}

func (s *memSink) isClosed(step string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed[step]
}

type memWriter struct {
	s    *memSink
	step string
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.closed[w.step] {
		return 0, errors.New("write after close")
	}
	return w.s.logs[w.step].Write(p)
}

func (w *memWriter) Close() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.closed[w.step] = true
	return nil
}

// setup returns a spec with a fresh workspace, a PATH-only environment and
// an in-memory log sink.
func setup(t *testing.T, steps ...runner.Step) (runner.Spec, *memSink) {
	t.Helper()
	sink := newMemSink()
	return runner.Spec{
		Dir:       t.TempDir(),
		Env:       []string{"PATH=" + os.Getenv("PATH")},
		Steps:     steps,
		Logs:      sink,
		KillGrace: 500 * time.Millisecond,
	}, sink
}

func step(name, command string) runner.Step { return runner.Step{Name: name, Command: command} }

// processGone reports whether pid no longer runs: it does not exist or is a
// zombie nobody reaped (PID 1 in a container may never reap orphans).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	end := bytes.LastIndexByte(b, ')')
	return end > 0 && len(b) > end+2 && b[end+2] == 'Z'
}

// readPID waits for a pid file written by a step.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "pid file %s never written", path)
	return pid
}

func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		steps      []runner.Step
		timeout    time.Duration
		teardown   time.Duration
		wantStatus runner.Status
		wantReason string
		wantExit   map[string]int
		wantSkip   []string
		wantErr    map[string]string // substring of StepResult.Err
	}{
		{
			name:       "success",
			steps:      []runner.Step{step("a", "true"), step("b", "echo hi")},
			wantStatus: runner.StatusSuccess,
			wantExit:   map[string]int{"a": 0, "b": 0},
		},
		{
			name: "failure skips later steps but runs teardown",
			steps: []runner.Step{
				step("a", "true"), step("test", "exit 2"), step("c", "true"),
				step("teardown-a", "true"), step("teardown-b", "exit 0"),
			},
			wantStatus: runner.StatusFailure,
			wantReason: `step "test" exited with code 2`,
			wantExit:   map[string]int{"a": 0, "test": 2, "teardown-a": 0, "teardown-b": 0},
			wantSkip:   []string{"c"},
		},
		{
			name:       "exit code above 128 kept",
			steps:      []runner.Step{step("a", "exit 130")},
			wantStatus: runner.StatusFailure,
			wantReason: `step "a" exited with code 130`,
			wantExit:   map[string]int{"a": 130},
		},
		{
			name:       "killed by SIGKILL is 137",
			steps:      []runner.Step{step("a", "kill -KILL $$")},
			wantStatus: runner.StatusFailure,
			wantReason: `step "a" exited with code 137`,
			wantExit:   map[string]int{"a": 137},
		},
		{
			name:       "killed by SIGTERM is 143",
			steps:      []runner.Step{step("a", "kill -TERM $$")},
			wantStatus: runner.StatusFailure,
			wantExit:   map[string]int{"a": 143},
		},
		{
			name:       "failing teardown fails a successful build",
			steps:      []runner.Step{step("a", "true"), step("teardown-x", "exit 3"), step("teardown-y", "true")},
			wantStatus: runner.StatusFailure,
			wantReason: `step "teardown-x" exited with code 3`,
			wantExit:   map[string]int{"a": 0, "teardown-x": 3, "teardown-y": 0},
		},
		{
			name:       "failing teardown keeps the first reason",
			steps:      []runner.Step{step("a", "exit 1"), step("teardown-x", "exit 3")},
			wantStatus: runner.StatusFailure,
			wantReason: `step "a" exited with code 1`,
			wantExit:   map[string]int{"a": 1, "teardown-x": 3},
		},
		{
			name: "timeout kills the step and runs teardown",
			steps: []runner.Step{
				step("build", "sleep 600"), step("after", "true"), step("teardown-x", "echo cleaned"),
			},
			timeout:    300 * time.Millisecond,
			wantStatus: runner.StatusTimeout,
			wantReason: `timed out after 300ms in step "build"`,
			wantExit:   map[string]int{"build": 143, "teardown-x": 0},
			wantSkip:   []string{"after"},
			wantErr:    map[string]string{"build": "killed: build timed out"},
		},
		{
			name: "teardown budget exhausted",
			steps: []runner.Step{
				step("a", "true"), step("teardown-slow", "sleep 600"), step("teardown-next", "true"),
			},
			teardown:   300 * time.Millisecond,
			wantStatus: runner.StatusTimeout,
			wantReason: `teardown timed out after 300ms in step "teardown-slow"`,
			wantExit:   map[string]int{"a": 0, "teardown-slow": 143},
			wantSkip:   []string{"teardown-next"},
			wantErr:    map[string]string{"teardown-next": "teardown budget exhausted"},
		},
		{
			name:       "missing command",
			steps:      []runner.Step{step("a", "no-such-command-sluice"), step("b", "true")},
			wantStatus: runner.StatusFailure,
			wantReason: `step "a" exited with code 127`,
			wantExit:   map[string]int{"a": 127},
			wantSkip:   []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, _ := setup(t, tt.steps...)
			spec.Timeout = tt.timeout
			spec.TeardownTimeout = tt.teardown

			res := runner.Run(t.Context(), spec)

			require.Equal(t, tt.wantStatus, res.Status, "reason: %s", res.Reason)
			if tt.wantReason != "" {
				require.Equal(t, tt.wantReason, res.Reason)
			}
			require.Len(t, res.Steps, len(tt.steps))
			for i, sr := range res.Steps {
				require.Equal(t, tt.steps[i].Name, sr.Name)
				if code, ok := tt.wantExit[sr.Name]; ok {
					require.False(t, sr.Skipped, "step %s", sr.Name)
					require.Equal(t, code, sr.ExitCode, "step %s", sr.Name)
					require.False(t, sr.Start.IsZero())
					require.False(t, sr.End.Before(sr.Start))
				}
				if want, ok := tt.wantErr[sr.Name]; ok {
					require.Contains(t, sr.Err, want, "step %s", sr.Name)
				}
			}
			for _, name := range tt.wantSkip {
				for _, sr := range res.Steps {
					if sr.Name == name {
						require.True(t, sr.Skipped, "step %s", name)
					}
				}
			}
		})
	}
}

func TestRunStartFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		mutate     func(*runner.Spec, *memSink)
		wantReason string
	}{
		{
			name:       "workspace missing",
			mutate:     func(s *runner.Spec, _ *memSink) { s.Dir = filepath.Join(s.Dir, "missing") },
			wantReason: `step "a" could not start: start:`,
		},
		{
			name:       "log cannot be opened",
			mutate:     func(_ *runner.Spec, m *memSink) { m.failOn = "a" },
			wantReason: `step "a" could not start: open log: sink broken`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, sink := setup(t, step("a", "true"), step("b", "true"), step("teardown-c", "true"))
			tt.mutate(&spec, sink)

			res := runner.Run(t.Context(), spec)

			require.Equal(t, runner.StatusFailure, res.Status)
			require.Contains(t, res.Reason, tt.wantReason)
			require.Equal(t, -1, res.Steps[0].ExitCode)
			require.True(t, res.Steps[1].Skipped)
			require.False(t, res.Steps[2].Skipped, "teardown runs after a start failure")
		})
	}
}

func TestRunCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t,
		step("wait", `sleep 600 & echo $! > bg.pid; echo $$ > sh.pid; wait`),
		step("later", "true"),
		step("teardown-note", "echo tore down"),
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	done := make(chan runner.Result, 1)
	go func() { done <- runner.Run(ctx, spec) }()
	shPID := readPID(t, filepath.Join(spec.Dir, "sh.pid"))
	bgPID := readPID(t, filepath.Join(spec.Dir, "bg.pid"))
	require.False(t, processGone(shPID))
	require.False(t, processGone(bgPID))

	cancel()
	var res runner.Result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}

	require.Equal(t, runner.StatusAborted, res.Status)
	require.Equal(t, `aborted in step "wait"`, res.Reason)
	require.Equal(t, 143, res.Steps[0].ExitCode)
	require.Equal(t, "killed: build aborted (context canceled)", res.Steps[0].Err)
	require.True(t, res.Steps[1].Skipped)
	require.False(t, res.Steps[2].Skipped)
	require.Equal(t, "tore down\n", sink.log("teardown-note"))
	require.True(t, processGone(shPID), "shell %d survived", shPID)
	require.True(t, processGone(bgPID), "grandchild %d survived", bgPID)
}

func TestRunCancelEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("stubborn", `trap '' TERM; sleep 600 & echo $! > bg.pid; wait; wait`))
	spec.KillGrace = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	done := make(chan runner.Result, 1)
	go func() { done <- runner.Run(ctx, spec) }()
	bgPID := readPID(t, filepath.Join(spec.Dir, "bg.pid"))
	cancel()
	var res runner.Result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}

	require.Equal(t, runner.StatusAborted, res.Status)
	require.Equal(t, 137, res.Steps[0].ExitCode)
	require.True(t, processGone(bgPID), "grandchild %d survived", bgPID)
}

func TestRunCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("a", "true"), step("teardown-b", "true"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	res := runner.Run(ctx, spec)

	require.Equal(t, runner.StatusAborted, res.Status)
	require.Equal(t, `aborted before step "a"`, res.Reason)
	require.True(t, res.Steps[0].Skipped)
	require.False(t, res.Steps[1].Skipped, "teardown runs even when cancelled before start")
	require.Equal(t, 0, res.Steps[1].ExitCode)
}

func TestRunCancelShortensTeardown(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("a", "sleep 600"), step("teardown-slow", "sleep 600"))
	spec.AbortTeardownTimeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)

	res := runner.Run(ctx, spec)

	require.Equal(t, runner.StatusAborted, res.Status)
	require.Equal(t, `aborted in step "a"`, res.Reason)
	require.Equal(t, 143, res.Steps[1].ExitCode)
	require.Contains(t, res.Steps[1].Err, "killed: build aborted")
}

func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("env", `echo "$SLUICE_TEST_VAR|${HOME-unset}|$(pwd)"`))
	spec.Env = append(spec.Env, "SLUICE_TEST_VAR=from spec")

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	dir, err := filepath.EvalSymlinks(spec.Dir)
	require.NoError(t, err)
	require.Equal(t, "from spec|unset|"+dir+"\n", sink.log("env"),
		"only Spec.Env is visible and steps run in Spec.Dir")
}

func TestRunLogsPerStep(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t,
		step("one", "echo out; echo err >&2"),
		step("two", "printf 'no newline'"),
		step("teardown-three", "echo bye"),
	)

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, "out\nerr\n", sink.log("one"))
	require.Equal(t, "no newline", sink.log("two"))
	require.Equal(t, "bye\n", sink.log("teardown-three"))
	for _, name := range []string{"one", "two", "teardown-three"} {
		require.True(t, sink.isClosed(name), "log of %s closed", name)
	}
}

func TestRunNilSinkDiscards(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("a", "echo discarded"))
	spec.Logs = nil

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
}

func TestRunBackgroundProcessHoldingStdout(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t,
		step("start", `sleep 600 & echo $! > bg.pid; echo started`),
		step("use", `kill -0 "$(cat bg.pid)" && echo alive`),
	)

	start := time.Now()
	res := runner.Run(t.Context(), spec)

	require.Less(t, time.Since(start), 30*time.Second, "Run must not wait for the background process")
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, "started\n", sink.log("start"))
	require.Equal(t, "alive\n", sink.log("use"), "background processes live until the build ends")
	require.True(t, sink.isClosed("start"))
	bgPID := readPID(t, filepath.Join(spec.Dir, "bg.pid"))
	require.True(t, processGone(bgPID), "background process %d survived the build", bgPID)
}

func TestRunProcessLeavingGroupDoesNotHang(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("escape", `setsid sleep 600 & echo $! > esc.pid`))

	done := make(chan runner.Result, 1)
	go func() { done <- runner.Run(t.Context(), spec) }()
	escPID := readPID(t, filepath.Join(spec.Dir, "esc.pid"))
	t.Cleanup(func() { _ = syscall.Kill(escPID, syscall.SIGKILL) })

	select {
	case res := <-done:
		require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	case <-time.After(30 * time.Second):
		t.Fatal("Run hung on a pipe held by a process outside the group")
	}
}

func TestRunOnStepEvents(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t, step("teardown-first", "true"), step("a", "exit 1"), step("b", "true"))
	var events []string
	spec.OnStep = func(e runner.StepEvent) {
		events = append(events, string(e.Kind)+" "+strconv.Itoa(e.Index)+" "+e.Step.Name)
	}

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status)
	require.Equal(t, []string{
		"started 1 a", "ended 1 a",
		"skipped 2 b",
		"started 0 teardown-first", "ended 0 teardown-first",
	}, events, "teardown steps run after all other steps")
}

// TestRunLeaksNothing is not parallel: it counts the goroutines and file
// descriptors of the whole test binary.
func TestRunLeaksNothing(t *testing.T) {
	countFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(entries)
	}
	spec, _ := setup(t,
		step("bg", `sleep 600 &`),
		step("fail", "exit 1"),
		step("teardown-x", "echo x"),
	)
	spec.Timeout = time.Minute
	runner.Run(t.Context(), spec) // warm up lazily started runtime goroutines

	goroutines, fds := runtime.NumGoroutine(), countFDs()
	res := runner.Run(t.Context(), spec)
	require.Equal(t, runner.StatusFailure, res.Status)

	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (runtime.NumGoroutine() > goroutines || countFDs() > fds) {
		time.Sleep(20 * time.Millisecond)
	}
	if runtime.NumGoroutine() > goroutines {
		buf := make([]byte, 1<<20)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines leaked")
	require.LessOrEqual(t, countFDs(), fds, "file descriptors leaked")
}

func TestRunOneShellPerBuild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		steps      []runner.Step
		wantStatus runner.Status
		wantReason string
		wantLogs   map[string]string
		wantExit   map[string]int
	}{
		{
			name: "export, cd, functions and shell variables carry over",
			steps: []runner.Step{
				step("setup", "mkdir -p sub/deeper && export FOO=bar && cd sub && greet() { echo \"hi $1\"; } && LOCAL=kept"),
				step("use", `echo "$FOO|${PWD##*/}|$LOCAL"; greet you; cd deeper`),
				step("teardown-where", `echo "${PWD##*/}|$FOO"`),
			},
			wantStatus: runner.StatusSuccess,
			wantLogs: map[string]string{
				"use": "bar|sub|kept\nhi you\n", "teardown-where": "deeper|bar\n",
			},
		},
		{
			name: "exit ends the shell: that step fails and teardown restores env and cwd",
			steps: []runner.Step{
				step("setup", "export FOO=bar; mkdir sub; cd sub"),
				step("quit", "export LOST=yes; exit 4"),
				step("never", "true"),
				step("teardown-a", `echo "$FOO|${LOST-unset}|${PWD##*/}"`),
			},
			wantStatus: runner.StatusFailure,
			wantReason: `step "quit" exited with code 4`,
			wantExit:   map[string]int{"setup": 0, "quit": 4, "teardown-a": 0},
			wantLogs:   map[string]string{"teardown-a": "bar|unset|sub\n"},
		},
		{
			name: "set -e persists and names the failing step",
			steps: []runner.Step{
				step("strict", "set -e"),
				step("fails", "false; echo not reached"),
				step("teardown-a", "echo ran"),
			},
			wantStatus: runner.StatusFailure,
			wantReason: `step "fails" exited with code 1`,
			wantExit:   map[string]int{"strict": 0, "fails": 1, "teardown-a": 0},
			wantLogs:   map[string]string{"fails": "", "teardown-a": "ran\n"},
		},
		{
			name: "a failing command without exit keeps the shell",
			steps: []runner.Step{
				step("a", "export A=1; false"),
				step("teardown-a", `echo "$A"`),
			},
			wantStatus: runner.StatusFailure,
			wantReason: `step "a" exited with code 1`,
			wantLogs:   map[string]string{"teardown-a": "1\n"},
		},
		{
			name: "syntax error fails its step with the shell's message",
			steps: []runner.Step{
				step("bad", "if then"),
				step("teardown-a", "echo ran"),
			},
			wantStatus: runner.StatusFailure,
			wantReason: `step "bad" exited with code 2`,
			wantLogs:   map[string]string{"teardown-a": "ran\n"},
		},
		{
			name: "steps cannot read the driver script",
			steps: []runner.Step{
				step("reads", "cat; echo read-done"),
				step("after", "echo after"),
			},
			wantStatus: runner.StatusSuccess,
			wantLogs:   map[string]string{"reads": "read-done\n", "after": "after\n"},
		},
		{
			name: "a step's exec redirections do not leak into the driver",
			steps: []runner.Step{
				step("redirect", "exec 3>/dev/null; exec >/dev/null; echo hidden"),
				step("after", "echo shown"),
			},
			wantStatus: runner.StatusSuccess,
			wantLogs:   map[string]string{"redirect": "", "after": "shown\n"},
		},
		{
			name: "multi-line commands and quotes",
			steps: []runner.Step{
				step("multi", "X='it''s'\ncat <<EOT\n$X \"q\"\nEOT\n"),
			},
			wantStatus: runner.StatusSuccess,
			wantLogs:   map[string]string{"multi": "its \"q\"\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, sink := setup(t, tt.steps...)

			res := runner.Run(t.Context(), spec)

			require.Equal(t, tt.wantStatus, res.Status, "reason: %s", res.Reason)
			if tt.wantReason != "" {
				require.Equal(t, tt.wantReason, res.Reason)
			}
			for _, sr := range res.Steps {
				if code, ok := tt.wantExit[sr.Name]; ok {
					require.Equal(t, code, sr.ExitCode, "step %s", sr.Name)
				}
			}
			for name, want := range tt.wantLogs {
				require.Equal(t, want, sink.log(name), "log of %s", name)
			}
		})
	}
}

func TestRunSyntaxErrorLogged(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("bad", "if then"))

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status)
	require.Contains(t, sink.log("bad"), "Syntax error")
}

func TestRunCancelKillsEarlierStepsBackgroundProcesses(t *testing.T) {
	t.Parallel()
	spec, _ := setup(t,
		step("service", `sleep 600 & echo $! > bg.pid`),
		step("wait", `echo $$ > sh.pid; sleep 600`),
		step("teardown-check", `echo "$$" > teardown.pid`),
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	done := make(chan runner.Result, 1)
	go func() { done <- runner.Run(ctx, spec) }()
	shPID := readPID(t, filepath.Join(spec.Dir, "sh.pid"))
	bgPID := readPID(t, filepath.Join(spec.Dir, "bg.pid"))
	cancel()
	var res runner.Result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}

	require.Equal(t, runner.StatusAborted, res.Status)
	require.Equal(t, `aborted in step "wait"`, res.Reason)
	require.True(t, processGone(shPID), "session shell %d survived", shPID)
	require.True(t, processGone(bgPID), "background process %d of an earlier step survived", bgPID)
	require.NotEqual(t, shPID, readPID(t, filepath.Join(spec.Dir, "teardown.pid")),
		"teardown runs in a fresh shell once the session was killed")
}

// A relative control directory names the worker's directory, not the
// workspace the shell runs in: the runner makes it absolute (the README
// quickstart's default relative data directory failed every step with exit
// code 2 and an empty log).
func TestRunRelativeControlDir(t *testing.T) { //nolint:paralleltest // changes the working directory
	base := t.TempDir()
	t.Chdir(base)
	spec, sink := setup(t, step("a", "echo hello > out.txt; echo ran"), step("b", "cat out.txt"))
	spec.ControlDir = filepath.Join("state", "build-1.ctl")

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, "ran\n", sink.log("a"))
	require.Equal(t, "hello\n", sink.log("b"))
}

// When the shell itself cannot go on (here the step removed the control
// directory the driver saves its state to), the step's log and the build's
// reason say what the shell said instead of a bare exit code.
func TestRunDriverFailureIsExplained(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("a", "rm -rf \"$CTL\"; echo removed"), step("b", "true"))
	spec.ControlDir = filepath.Join(t.TempDir(), "ctl")
	spec.Env = append(spec.Env, "CTL="+spec.ControlDir)

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status)
	require.Contains(t, sink.log("a"), "removed\n")
	require.Contains(t, sink.log("a"), "sluice: shell: ")
	require.Contains(t, sink.log("a"), "ctl/env")
	require.Contains(t, res.Reason, `step "a" exited with code 2: shell: `)
	require.True(t, res.Steps[1].Skipped)
}

// A step that cannot start says why in its own log, not only in the result.
func TestRunStartFailureInLog(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("a", "true"))
	spec.Dir = filepath.Join(spec.Dir, "missing")

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status)
	require.Contains(t, sink.log("a"), `sluice: step "a" could not start: start: workspace: stat `)
}

// The container runtime's client never sees a build's variables nor the
// executor's own secrets (review finding 6: LD_PRELOAD in a job's
// environment ran code in the podman process on the host). A stand-in
// runtime records its environment and runs the shell on the host.
func TestRuntimeClientGetsNoBuildVariables(t *testing.T) { //nolint:paralleltest // sets the process environment
	t.Setenv("SLUICE_TOKEN", "executor-secret-token")
	t.Setenv("CONTAINERS_CONF", "/etc/containers/test.conf")
	dir := t.TempDir()
	envOut := filepath.Join(dir, "runtime-env")
	fake := filepath.Join(dir, "fakeruntime")
	// Called as: fakeruntime exec -i -w DIR ID sh
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nenv > "+envOut+"\ncd \"$4\" && exec sh\n"), 0o755))
	spec, sink := setup(t, step("show", `echo "$BUILD_SECRET|$LD_PRELOAD_PROBE|$WITH_QUOTE"`))
	spec.ControlDir = filepath.Join(dir, "ctl")
	require.NoError(t, os.MkdirAll(spec.ControlDir, 0o700))
	spec.Env = append(spec.Env, "BUILD_SECRET=s3cret value", "LD_PRELOAD_PROBE=/tmp/evil.so", "WITH_QUOTE=it's \"quoted\"\nand multi-line")
	spec.Container = &runner.Container{Runtime: fake, ID: "c1", Dir: spec.Dir, ControlDir: spec.ControlDir}

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, "s3cret value|/tmp/evil.so|it's \"quoted\"\nand multi-line\n", sink.log("show"), "the shell has the build's variables")
	got, err := os.ReadFile(envOut)
	require.NoError(t, err)
	for _, leak := range []string{"BUILD_SECRET", "s3cret", "LD_PRELOAD_PROBE", "SLUICE_TOKEN", "executor-secret-token"} {
		require.NotContains(t, string(got), leak, "the runtime's client environment")
	}
	require.Contains(t, string(got), "CONTAINERS_CONF=/etc/containers/test.conf", "the runtime's own settings pass")
	entries, err := os.ReadDir(spec.ControlDir)
	if err == nil {
		for _, e := range entries {
			require.False(t, strings.HasPrefix(e.Name(), "env-init"), "the shell removed the environment file")
		}
	}
}

// N11: when the caller says the cancellation means it no longer owns the
// build, teardown steps are skipped instead of running beside the next
// attempt; any other cancellation still runs them.
func TestRunSkipsTeardownWhenTheAttemptIsGone(t *testing.T) {
	t.Parallel()
	gone := errors.New("attempt gone")
	for _, tc := range []struct {
		cause    error
		teardown bool
	}{{gone, false}, {errors.New("cancelled by a person"), true}} {
		spec, sink := setup(t, step("work", "sleep 30"), step("teardown-unlock", "echo unlocked"))
		spec.SkipTeardown = func(cause error) bool { return errors.Is(cause, gone) }
		ctx, cancel := context.WithCancelCause(t.Context())
		spec.OnStep = func(ev runner.StepEvent) {
			if ev.Kind == runner.StepStarted && ev.Step.Name == "work" {
				cancel(tc.cause)
			}
		}

		res := runner.Run(ctx, spec)

		require.Equal(t, runner.StatusAborted, res.Status)
		if tc.teardown {
			require.Equal(t, "unlocked\n", sink.log("teardown-unlock"), tc.cause)
		} else {
			require.True(t, res.Steps[1].Skipped, tc.cause)
			require.Empty(t, sink.log("teardown-unlock"))
		}
	}
}
