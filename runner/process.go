package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pollInterval is how often, at most, a dying process group is checked.
const pollInterval = 20 * time.Millisecond

// run is the state of one Run call: the process groups and output pumps it
// created, all reclaimed by cleanup.
type run struct {
	spec                 Spec
	logs                 LogSink
	env                  []string
	grace                time.Duration
	teardownTimeout      time.Duration
	abortTeardownTimeout time.Duration

	pgids    []int
	pumps    []*pump
	sessions []*session
	sess     *session // the current shell session, nil before the first step
	ctl      string   // control directory: step scripts, output FIFOs, saved state
	ownCtl   bool     // ctl was created by the run, which removes it
}

// makeControlDir sets up the control directory: Spec.ControlDir if given,
// else a temporary directory removed by cleanup. With Spec.RunAs it also
// hands the workspace and the shell's files to that user.
func (r *run) makeControlDir() error {
	if err := r.makeControlDirOnly(); err != nil {
		return err
	}
	return r.giveWorkspace()
}

// makeControlDirOnly is makeControlDir without handing the workspace over
// (see prepare).
func (r *run) makeControlDirOnly() error {
	if err := r.createControlDir(); err != nil {
		return err
	}
	ra := r.spec.RunAs
	if ra == nil {
		return nil
	}
	if r.spec.Container != nil {
		return errRunAsContainer
	}
	if err := r.prepareControlDir(); err != nil {
		return err
	}
	env := make([]string, 0, len(r.env)+1)
	for _, kv := range r.env {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	r.env = append(env, "HOME="+r.ctlPath("home"))
	return nil
}

// giveWorkspace hands the workspace to the Spec.RunAs user, if any.
func (r *run) giveWorkspace() error {
	ra := r.spec.RunAs
	if ra == nil {
		return nil
	}
	if err := ra.giveTree(r.spec.Dir); err != nil {
		return fmt.Errorf("hand the workspace to %s: %w", ra, err)
	}
	if err := ra.Traversable(r.spec.Dir); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// prepare runs Spec.Prepare while the control directory is set up and the
// first step's shell starts in the workspace (not with RunAs: see below). Setting up or starting the shell may
// fail here without failing the build: the first step then does it again
// and reports why it could not start.
func (r *run) prepare(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- r.spec.Prepare(ctx) }()
	// With RunAs the first step sets everything up once the workspace is
	// ready, as without Prepare: the user's shell and the directories it
	// must reach are settled together (makeControlDir).
	if r.spec.Container == nil && r.spec.RunAs == nil {
		if err := r.makeControlDirOnly(); err == nil {
			if s, _ := r.startSession(r.startDir(), false); s != nil {
				r.sess = s
			}
		} else {
			// The first step sets it up again and says why it fails.
			if r.ownCtl {
				_ = os.RemoveAll(r.ctl)
			}
			r.ctl, r.ownCtl = "", false
		}
	}
	return <-done
}

// createControlDir creates the control directory (see makeControlDir).
func (r *run) createControlDir() error {
	if r.spec.ControlDir != "" {
		// The shell runs in the workspace: it is handed absolute paths.
		ctl, err := filepath.Abs(r.spec.ControlDir)
		if err != nil {
			return fmt.Errorf("control directory: %w", err)
		}
		if err := os.MkdirAll(ctl, 0o700); err != nil {
			return fmt.Errorf("create control directory: %w", err)
		}
		r.ctl = ctl
		return nil
	}
	if r.spec.Container != nil {
		return errors.New("a container run needs Spec.ControlDir")
	}
	dir, err := os.MkdirTemp("", "sluice-run-")
	if err != nil {
		return fmt.Errorf("create control directory: %w", err)
	}
	r.ctl, r.ownCtl = dir, true
	return nil
}

func newRun(spec Spec) *run {
	r := &run{
		spec:                 spec,
		logs:                 spec.Logs,
		env:                  spec.Env,
		grace:                spec.KillGrace,
		teardownTimeout:      spec.TeardownTimeout,
		abortTeardownTimeout: spec.AbortTeardownTimeout,
	}
	if r.logs == nil {
		r.logs = discardSink{}
	}
	if r.env == nil {
		r.env = []string{}
	}
	if r.grace <= 0 {
		r.grace = DefaultKillGrace
	}
	if r.teardownTimeout <= 0 {
		r.teardownTimeout = DefaultTeardownTimeout
	}
	if r.abortTeardownTimeout <= 0 {
		r.abortTeardownTimeout = DefaultAbortTeardownTimeout
	}
	return r
}

// step runs step i in the build's shell session until the shell reports its
// exit code, the shell exits, or ctx is done. killed is the cause of ctx
// when the session had to be killed, else nil.
func (r *run) step(ctx context.Context, i int) (res StepResult, killed error) {
	st := r.spec.Steps[i]
	res = StepResult{Name: st.Name, Start: time.Now()}
	r.emit(StepStarted, i, res)
	defer func() {
		res.End = time.Now()
		r.emit(StepEnded, i, res)
	}()

	w, err := r.logs.Open(st.Name)
	if err != nil {
		res.ExitCode, res.Err = -1, fmt.Sprintf("open log: %v", err)
		return res, nil
	}
	fail := func(msg string) (StepResult, error) {
		// The step's log says why it could not start, not only the result.
		_, _ = fmt.Fprintf(w, "sluice: step %q could not start: %s\n", st.Name, msg)
		res.ExitCode, res.Err = -1, joinErr(msg, closeLog(w))
		return res, nil
	}
	if r.ctl == "" {
		if err := r.makeControlDir(); err != nil {
			return fail(err.Error())
		}
	}
	script := r.ctlPath("step-" + strconv.Itoa(i) + ".sh")
	if err := os.WriteFile(script, []byte(st.Command+"\n"), 0o600); err != nil {
		return fail(fmt.Sprintf("write step script: %v", err))
	}
	if err := r.giveFile(script); err != nil {
		return fail(err.Error())
	}
	if r.sess == nil || !r.sess.alive() {
		// The first step, or the shell of an earlier step ended (exit,
		// set -e, killed): a fresh shell restores the environment and
		// working directory the last completed step left.
		dir, restore := r.savedDir()
		s, err := r.startSession(dir, restore)
		if s == nil {
			return fail(fmt.Sprintf("start: %v", err))
		}
		r.sess = s
	}
	out, rd, hold, err := r.openOutput(i)
	if err != nil {
		return fail(err.Error())
	}
	p := startPump(rd, w)
	r.pumps = append(r.pumps, p)

	s := r.sess
	if err := r.send(s, script, out); err != nil && s.alive() {
		res.Err = err.Error()
	}
	var ended bool
	res.ExitCode, ended, killed = r.await(ctx, s)
	_ = hold.Close()
	if killed != nil {
		res.Err = "killed: " + describeKill(killed)
	} else if !s.alive() && s.err != nil {
		res.Err = joinErr(res.Err, fmt.Errorf("wait: %w", s.err))
	}

	drain := time.NewTimer(outputDrain)
	select {
	case <-p.done:
	case <-drain.C:
	}
	drain.Stop()
	if werr := p.detach(); werr != nil {
		res.Err = joinErr(res.Err, fmt.Errorf("write log: %w", werr))
	}
	if msg := s.complaint(); ended && killed == nil && msg != "" {
		// The shell's or the container runtime's own complaint (a script
		// it cannot open, the container is gone, exec refused): the step's
		// log is where people look.
		who := "shell"
		if c := r.spec.Container; c != nil {
			who = c.Runtime + " exec"
		}
		_, _ = fmt.Fprintf(w, "sluice: %s: %s\n", who, msg)
		res.Err = joinErr(res.Err, fmt.Errorf("%s: %s", who, msg))
	}
	res.Err = joinErr(res.Err, closeLog(w))
	return res, killed
}

// cleanup terminates every process group the run created and waits for all
// output pumps to finish.
func (r *run) cleanup() {
	terminateGroups(r.pgids, r.grace, true)
	for _, s := range r.sessions {
		s.close(r.grace)
	}
	if r.ownCtl {
		_ = os.RemoveAll(r.ctl)
	}

	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	for _, p := range r.pumps {
		select {
		case <-p.done:
			continue
		case <-deadline.C:
		}
		// A process that left its group (setsid) still holds the pipe: stop
		// reading it rather than hang.
		p.abandon()
		<-p.done
	}
}

// killWait bounds the wait for process groups to be gone after SIGKILL
// (a process in uninterruptible sleep dies only when it wakes).
const killWait = 2 * time.Second

// terminateGroups makes sure the process groups are gone: SIGTERM (unless
// already sent), then SIGKILL to any group still alive after grace, and
// it returns once they are gone (within killWait): a signal takes effect
// when its process next runs, which on a busy machine is not at once.
func terminateGroups(pgids []int, grace time.Duration, sendTerm bool) {
	var live []int
	for _, pgid := range pgids {
		if groupAlive(pgid) {
			live = append(live, pgid)
			if sendTerm {
				_ = syscall.Kill(-pgid, syscall.SIGTERM)
			}
		}
	}
	// Poll quickly at first: a shell usually dies within a millisecond of
	// SIGTERM, and every build ends here (its session shell), between its
	// last step and its result being saved.
	live = awaitGone(live, grace)
	for _, pgid := range live {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	awaitGone(live, killWait)
}

// awaitGone polls the groups until none is alive or wait has passed, and
// returns those still alive.
func awaitGone(live []int, wait time.Duration) []int {
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for len(live) > 0 && time.Now().Before(deadline) {
		time.Sleep(pause)
		pause = min(2*pause, pollInterval)
		live = filterAlive(live)
	}
	return live
}

func filterAlive(pgids []int) []int {
	out := pgids[:0]
	for _, pgid := range pgids {
		if groupAlive(pgid) {
			out = append(out, pgid)
		}
	}
	return out
}

// groupAlive reports whether the process group has a member that is not a
// zombie. Zombies count as gone: orphans are reparented to PID 1, which in a
// container may never reap them, and a zombie holds no resources but its
// process table entry.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// The group's leader (the session shell, whose pid is the group's id)
	// alive answers at once: one read instead of every process's.
	if state, pgrp, ok := procStat(pgid); ok && pgrp == pgid && state != 'Z' && state != 'X' {
		return true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: trust kill(2)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if ok && pgrp == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// procStat reads a process's state and process group from /proc/<pid>/stat.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(b[end+1:])
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}

// exitCode maps a finished process to a shell-style exit code.
func exitCode(ps *os.ProcessState, waitErr error) int {
	if ps == nil {
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			ps = ee.ProcessState
		} else {
			return -1
		}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// describeKill says why a step's context ended.
func describeKill(cause error) string {
	for _, own := range []error{errBuildTimeout, errTeardownTimeout, errAborted} {
		if errors.Is(cause, own) {
			return own.Error()
		}
	}
	return "build aborted (" + cause.Error() + ")"
}

func closeLog(w io.Closer) error {
	if err := w.Close(); err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

func joinErr(msg string, err error) string {
	switch {
	case err == nil:
		return msg
	case msg == "":
		return err.Error()
	default:
		return msg + "; " + err.Error()
	}
}

// pump copies a step's output pipe to its log writer until detached, then
// keeps draining the pipe (discarding) so background processes that inherited
// it never block on a full pipe or die of SIGPIPE.
type pump struct {
	r    *os.File
	done chan struct{}

	mu   sync.Mutex
	w    io.Writer // nil once detached or after a write error
	werr error
}

func startPump(r *os.File, w io.Writer) *pump {
	p := &pump{r: r, w: w, done: make(chan struct{})}
	go p.run()
	return p
}

func (p *pump) run() {
	defer close(p.done)
	defer func() { _ = p.r.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := p.r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.w != nil {
				if _, werr := p.w.Write(buf[:n]); werr != nil {
					p.werr, p.w = werr, nil
				}
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// detach stops writing to the log writer; once it returns the writer is no
// longer used and may be closed. It returns the first write error, if any.
func (p *pump) detach() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w = nil
	return p.werr
}

// abandon makes the pump's pending read fail so it exits.
func (p *pump) abandon() {
	if err := p.r.SetReadDeadline(time.Now()); err != nil {
		_ = p.r.Close()
	}
}
