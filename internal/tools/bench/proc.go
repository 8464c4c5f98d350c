package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a `sluice worker` process in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

// startProcess starts `$SLUICE_BIN worker --role role` against the stack.
// When ctx ends (the figure's bound), the process group is killed.
func (s *stack) startProcess(ctx context.Context, name, role string, extra []string) (*proc, error) {
	dataDir := filepath.Join(s.dir, "members", name)
	cmd := exec.CommandContext(ctx, s.b.bin, "worker", "--role", role)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(baseEnv(),
		"TEMPORAL_ADDRESS="+s.temporal.FrontendAddress(),
		"TEMPORAL_NAMESPACE=default",
		"SLUICE_API_URL="+s.apiURL,
		"SLUICE_DATA_DIR="+dataDir,
		"SLUICE_LOG_LEVEL=warn",
		// The figures measure dispatch: steps run on the host, not in images.
		"SLUICE_EXECUTOR_RUNTIME=host",
	)
	if os.Geteuid() == 0 {
		cmd.Env = append(cmd.Env, "SLUICE_EXECUTOR_RUN_AS=root") // the bench's own, trusted builds
	}
	cmd.Env = append(cmd.Env, extra...)
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	// Its own group, so killing it kills the steps it runs; and it dies with
	// this process even when this one is killed without a chance to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s worker --role %s): %w", name, s.b.bin, role, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// baseEnv is the little of this process's environment a worker needs; no
// SLUICE_* or TEMPORAL_* setting of the caller leaks into the stack.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Write collects the process's output (kept for error messages).
func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out.Len() < 1<<20 {
		p.out.Write(b)
	}
	return len(b), nil
}

// tail is the end of the process's output.
func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill stops the process group: SIGTERM, then SIGKILL after 5 s.
func (p *proc) kill() {
	if p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// peakRSSMB reads VmHWM (peak resident set) of a process from /proc.
func peakRSSMB(pid int) (float64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", v, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
