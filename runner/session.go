package runner

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// session is one long-lived `sh` reading the build's driver script from a
// pipe: every step is sourced into it, so exported variables, the working
// directory, shell options and functions carry over from step to step.
type session struct {
	pgid   int
	stdin  *os.File // write end of the driver pipe
	status *os.File // read end of the status FIFO
	// codes receives the exit code of each step the shell finished; it is
	// closed once the status pipe reaches EOF (the shell is gone).
	codes  chan int
	exited chan struct{} // closed once the shell was reaped
	code   int           // the shell's exit code, valid once exited is closed
	err    error         // why Wait failed, valid once exited is closed
	// stderr keeps what a container runtime's exec client said, valid once
	// exited; on the host the shell's own stderr goes to errFile.
	stderr  *tailBuffer
	errFile *os.File // the host shell's stderr, read back by complaint
}

// complaint is what the shell or the runtime client said on its own stderr
// (not a step's output, which goes to the step's log): why the shell could
// not run the driver, e.g. "cannot open …". Valid once exited.
func (s *session) complaint() string {
	if s.errFile == nil {
		return s.stderr.String()
	}
	// Read through the open descriptor: a step may have removed the file.
	fi, err := s.errFile.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-tailMax, 0)
	b := make([]byte, fi.Size()-off)
	n, _ := s.errFile.ReadAt(b, off)
	return strings.TrimSpace(string(b[:n]))
}

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 4 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > tailMax {
		b.buf = b.buf[len(b.buf)-tailMax:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}

// statusFD is the shell's descriptor (opened on a FIFO of the control
// directory) on which the driver reports each step's exit code. Steps run
// with it closed, so no step process holds it.
const statusFD = 3

// startSession starts a shell in dir with the build's environment. When
// restore is set, the shell first sources the environment the previous
// session saved after its last completed step.
func (r *run) startSession(dir string, restore bool) (*session, error) {
	n := len(r.sessions)
	statusName := "status-" + strconv.Itoa(n)
	if err := syscall.Mkfifo(r.ctlPath(statusName), 0o600); err != nil {
		return nil, fmt.Errorf("mkfifo: %w", err)
	}
	if err := r.giveFile(r.ctlPath(statusName)); err != nil {
		return nil, err
	}
	stR, err := os.OpenFile(r.ctlPath(statusName), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open status: %w", err)
	}
	// Held until the shell was reaped, so the reader sees EOF only once
	// the shell is gone, not before the shell opened its end.
	stHold, err := os.OpenFile(r.ctlPath(statusName), os.O_WRONLY, 0)
	if err != nil {
		_ = stR.Close()
		return nil, fmt.Errorf("open status: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		_ = stR.Close()
		_ = stHold.Close()
		return nil, fmt.Errorf("create driver pipe: %w", err)
	}
	// abandon releases what was opened so far when the shell cannot start.
	abandon := func(errFile *os.File) {
		for _, f := range []*os.File{inR, inW, stR, stHold, errFile} {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	var cmd *exec.Cmd
	errs := &tailBuffer{}
	var errFile *os.File
	initName := ""
	if c := r.spec.Container; c != nil {
		args := []string{"exec", "-i", "-w", dir}
		// The runtime's client runs with the executor's runtime settings
		// only (RuntimeEnv): no build variable reaches it, so a job cannot
		// steer it (LD_PRELOAD, DOCKER_HOST, proxies). The build's variables
		// reach the shell inside the container through a 0600 file of the
		// control directory that the shell sources and removes first; no
		// value shows in the host's process list.
		cmd = exec.Command(c.Runtime) //nolint:gosec,noctx // the shell runs the build's steps; cancellation kills them in the container
		cmd.Env = RuntimeEnv()
		var b strings.Builder
		for _, kv := range r.env {
			k, v, _ := strings.Cut(kv, "=")
			if !validName(k) {
				continue
			}
			fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
		}
		if c.PathPrefix != "" {
			fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(c.PathPrefix))
		}
		initName = "env-init-" + strconv.Itoa(n)
		if werr := os.WriteFile(r.ctlPath(initName), []byte(b.String()), 0o600); werr != nil {
			abandon(nil)
			return nil, fmt.Errorf("write the build's environment: %w", werr)
		}
		cmd.Args = append(append([]string{c.Runtime}, args...), c.ID, "sh")
		cmd.Stderr = errs
	} else {
		cmd = exec.Command("sh") //nolint:gosec,noctx // the shell runs the build's steps; cancellation kills its whole group
		cmd.Dir = dir
		cmd.Env = r.env
		// The shell's own stderr is a file of the control directory (a file,
		// not a pipe, so nothing a step leaves running can hold Wait up):
		// when the driver itself fails (a script it cannot open) the step's
		// log says why.
		var ferr error
		if _, ferr = os.Stat(dir); ferr == nil {
			errFile, ferr = os.OpenFile(r.ctlPath("shell-"+strconv.Itoa(n)+".err"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
		} else {
			ferr = fmt.Errorf("workspace: %w", ferr)
		}
		if ferr != nil {
			abandon(nil)
			return nil, ferr
		}
		cmd.Stderr = errFile
	}
	cmd.Stdin = inR
	// Everything a step prints (syntax errors in the step included) goes to
	// the step's log; the shell's own stdout is /dev/null.
	// Pdeathsig: if the executor dies (SIGKILL, OOM), the shell dies with it
	// instead of finishing a build nobody will report; the build is
	// dispatched again elsewhere. The signal is tied to the forking thread,
	// so that thread is kept for the fork.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ra := r.spec.RunAs; ra != nil && r.spec.Container == nil {
		// Set before Pdeathsig by the fork (which a change of credentials
		// would clear otherwise).
		cmd.SysProcAttr.Credential = ra.credential()
	}
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		abandon(errFile)
		return nil, err //nolint:wrapcheck // reported as "start: <err>"
	}
	_ = inR.Close() // the shell has its copy
	s := &session{
		pgid:    cmd.Process.Pid,
		stdin:   inW,
		status:  stR,
		codes:   make(chan int, 4),
		exited:  make(chan struct{}),
		stderr:  errs,
		errFile: errFile,
	}
	r.pgids = append(r.pgids, s.pgid)
	r.sessions = append(r.sessions, s)
	if r.spec.OnProcessGroup != nil && r.spec.Container == nil {
		r.spec.OnProcessGroup(s.pgid)
	}
	go func() {
		defer close(s.codes)
		defer func() { _ = stR.Close() }()
		sc := bufio.NewScanner(stR)
		for sc.Scan() {
			if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
				s.codes <- n
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		s.code = exitCode(cmd.ProcessState, err)
		if cmd.ProcessState == nil {
			s.err = err
		}
		_ = stHold.Close()
		close(s.exited)
	}()
	line := fmt.Sprintf("exec %d>%s\n", statusFD, shellQuote(r.shPath(statusName)))
	if initName != "" {
		line += fmt.Sprintf(". %s >/dev/null 2>&1 </dev/null %d>&-; rm -f %s\n", shellQuote(r.shPath(initName)), statusFD, shellQuote(r.shPath(initName)))
	}
	if restore {
		line += fmt.Sprintf(". %s >/dev/null 2>&1 </dev/null %d>&-\n", shellQuote(r.shPath("env")), statusFD)
	}
	if _, err := s.stdin.WriteString(line); err != nil {
		return s, fmt.Errorf("set up shell: %w", err)
	}
	return s, nil
}

// alive reports whether the shell has not exited yet.
func (s *session) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// send asks the shell to source script with its output going to out, then
// to save its environment and working directory and report the exit code.
func (r *run) send(s *session, script, out string) error {
	line := fmt.Sprintf(". %s >%s 2>&1 </dev/null %d>&-; __sluice_rc=$?; "+
		"export -p >%s; pwd >%s; echo \"$__sluice_rc\" >&%d\n",
		shellQuote(r.shPath(script)), shellQuote(r.shPath(out)), statusFD,
		shellQuote(r.shPath("env")), shellQuote(r.shPath("cwd")), statusFD)
	if _, err := s.stdin.WriteString(line); err != nil {
		return fmt.Errorf("write driver: %w", err)
	}
	return nil
}

// await waits until the shell reports the step's exit code, the shell exits
// (a step ran `exit`, or set -e fired), or ctx is done. In the last case the
// whole session (shell, step and whatever earlier steps left running) is
// killed: SIGTERM, then SIGKILL after the grace period; killed is then ctx's
// cause.
func (r *run) await(ctx context.Context, s *session) (code int, ended bool, killed error) {
	select {
	case c, ok := <-s.codes:
		if ok {
			return c, false, nil
		}
	case <-s.exited:
	case <-ctx.Done():
		r.kill(context.WithoutCancel(ctx), s)
		return s.code, true, context.Cause(ctx)
	}
	// The shell is exiting on its own.
	select {
	case <-s.exited:
		return s.code, true, nil
	case <-ctx.Done():
		r.kill(context.WithoutCancel(ctx), s)
		return s.code, true, context.Cause(ctx)
	}
}

// kill ends the session's process group and waits for the shell.
func (r *run) kill(ctx context.Context, s *session) {
	r.signal(ctx, s, syscall.SIGTERM)
	t := time.NewTimer(r.grace)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		r.signal(ctx, s, syscall.SIGKILL)
		<-s.exited
	}
	// Make sure nothing of the group survives the grace period,
	// descendants included.
	terminateGroups([]int{s.pgid}, r.grace, false)
}

// signal sends sig to the session's process group on the host, or to every
// process of the container but its init (the shell, the steps and whatever
// earlier steps left running).
func (r *run) signal(ctx context.Context, s *session, sig syscall.Signal) {
	c := r.spec.Container
	if c == nil {
		_ = syscall.Kill(-s.pgid, sig)
		return
	}
	name := "TERM"
	if sig == syscall.SIGKILL {
		name = "KILL"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = runtimeCmd(ctx, c.Runtime, "exec", c.ID, "sh", "-c", "kill -"+name+" -1").Run() //nolint:gosec // fixed arguments
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-s.pgid, sig) // the runtime's client, should it hang
	}
}

// close ends a session that is still alive and waits for its goroutines.
func (s *session) close(grace time.Duration) {
	_ = s.stdin.Close() // an idle shell exits at the end of its script
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
		<-s.exited
	}
	// A process in a container may still hold the status FIFO: stop
	// reading it rather than hang.
	if err := s.status.SetReadDeadline(time.Now().Add(grace)); err != nil {
		_ = s.status.Close()
	}
	for range s.codes { //nolint:revive // drain until the reader goroutine is done
	}
	if s.errFile != nil {
		_ = s.errFile.Close()
	}
}

// ctlPath names a file in the run's control directory.
func (r *run) ctlPath(name string) string { return filepath.Join(r.ctl, filepath.Base(name)) }

// shPath names a file of the control directory as the shell sees it.
func (r *run) shPath(name string) string {
	if c := r.spec.Container; c != nil {
		return path.Join(c.ControlDir, filepath.Base(name))
	}
	return r.ctlPath(name)
}

// openOutput creates the FIFO a step writes its output to and opens its read
// end, plus a write end held by the runner until the step's exit code is
// known, so the reader sees EOF only once the step is done and every process
// that inherited its output closed it.
func (r *run) openOutput(n int) (path string, rd, hold *os.File, err error) {
	path = r.ctlPath("out-" + strconv.Itoa(n))
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return "", nil, nil, fmt.Errorf("mkfifo: %w", err)
	}
	if err := r.giveFile(path); err != nil {
		return "", nil, nil, err
	}
	rd, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", nil, nil, fmt.Errorf("open output: %w", err)
	}
	hold, err = os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		_ = rd.Close()
		return "", nil, nil, fmt.Errorf("open output: %w", err)
	}
	return path, rd, hold, nil
}

// savedDir is the working directory the last completed step left, if it
// still exists, else Spec.Dir.
func (r *run) savedDir() (string, bool) {
	b, err := os.ReadFile(r.ctlPath("cwd"))
	if err != nil {
		return r.startDir(), false
	}
	dir := strings.TrimSuffix(string(b), "\n")
	if dir == "" { // created empty for a RunAs user: no step completed
		return r.startDir(), false
	}
	hostDir := dir
	if c := r.spec.Container; c != nil {
		rel, ok := strings.CutPrefix(dir, c.Dir)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			return dir, true // outside the workspace: trust the container
		}
		hostDir = r.spec.Dir + rel
	}
	if fi, err := os.Stat(hostDir); err != nil || !fi.IsDir() { //nolint:gosec // the build's own working directory, only checked for existence
		return r.startDir(), true
	}
	return dir, true
}

// startDir is Spec.Dir as the shell sees it.
func (r *run) startDir() string {
	if c := r.spec.Container; c != nil {
		return c.Dir
	}
	return r.spec.Dir
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runtimeOwnVar reports the variables of the executor's environment that a
// container runtime's client reads for itself (where it finds its daemon,
// configuration and storage, and how it reaches registries).
func runtimeOwnVar(k string) bool {
	switch k {
	case "PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "TZ", "REGISTRY_AUTH_FILE",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy":
		return true
	}
	return strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "DOCKER_") || strings.HasPrefix(k, "CONTAINERS_") || strings.HasPrefix(k, "CONTAINER_")
}

// RuntimeEnv is the environment every container runtime command runs with:
// the executor's own runtime settings (runtimeOwnVar) and nothing else, so
// neither the executor's secrets (its API token) nor anything a build sets
// reaches the runtime's client.
func RuntimeEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); runtimeOwnVar(k) {
			out = append(out, kv)
		}
	}
	return out
}

// validName reports whether k can be a shell variable name.
func validName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
