package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one sluice process under the harness's control: it can be started,
// SIGKILLed (with its whole process group) and started again with the same
// arguments and environment. Its output goes to a log file that survives
// restarts. A process that exits without being killed is started again by
// its supervisor, and counted.
type proc struct {
	name  string
	bin   string
	args  []string
	env   []string
	log   string
	ready string // a line the process prints once it serves ("" = none)

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	killing    bool
	starts     int
	unexpected []string
}

// start launches the process in its own process group and, when the proc
// has a ready line, waits for it.
func (p *proc) start(ctx context.Context) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	p.mu.Lock()
	p.starts++
	_, _ = fmt.Fprintf(f, "=== chaos: start #%d of %s at %s ===\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano))
	w := &watchWriter{w: f, want: p.ready, seen: make(chan struct{})}
	if p.ready == "" {
		close(w.seen)
	}
	// The harness kills its processes itself (process groups, SIGKILL);
	// the context must not.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.killing = cmd, done, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		_ = f.Close()
		p.mu.Lock()
		if !p.killing {
			p.unexpected = append(p.unexpected, fmt.Sprintf("%s exited on its own at %s: %v",
				p.name, time.Now().Format(time.TimeOnly), err))
		}
		p.mu.Unlock()
		close(done)
	}()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	select {
	case <-w.seen:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready; see %s", p.name, p.log)
	case <-timer.C:
		return fmt.Errorf("%s not ready within 2 minutes; see %s", p.name, p.log)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill sends SIGKILL to the process group and waits for the process to end.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.killing = true
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// exited reports whether the current process has ended.
func (p *proc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// unexpectedExits lists the times the process ended without being killed.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unexpected...)
}

// tail is the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// supervise restarts the process whenever it exits on its own (not killed by
// the harness), as systemd or Kubernetes would, until ctx ends. paused
// reports whether the harness has the process down on purpose.
func (p *proc) supervise(ctx context.Context, logf func(string, ...any)) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		crashed := !p.killing && p.done != nil
		p.mu.Unlock()
		if !crashed || !p.exited() {
			continue
		}
		logf("%s exited on its own; restarting it in 1s (log %s)", p.name, p.log)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if err := p.start(ctx); err != nil && ctx.Err() == nil {
			logf("restart %s: %v", p.name, err)
		}
	}
}

// watchWriter passes output through and closes seen once want appears.
type watchWriter struct {
	w    io.Writer
	want string
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	done bool
}

func (w *watchWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	if !w.done && w.want != "" {
		w.buf.Write(b)
		if strings.Contains(w.buf.String(), w.want) {
			w.done = true
			close(w.seen)
			w.buf = bytes.Buffer{}
		} else if w.buf.Len() > 1<<16 {
			keep := w.buf.Bytes()[w.buf.Len()-len(w.want):]
			w.buf = *bytes.NewBuffer(append([]byte(nil), keep...))
		}
	}
	w.mu.Unlock()
	n, err := w.w.Write(b)
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return n, err
	}
	return len(b), nil
}
