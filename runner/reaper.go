package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"syscall"
	"time"
)

// # The reaper: nothing outlives a dead executor
//
// A session's shell dies with its executor (parent-death signal), but what
// its steps started does not, nor does a container. An executor therefore
// starts one reaper: a small process of its own (the same binary, another
// subcommand) in its own process group, whose standard input is a pipe
// whose only writer is the executor. However the executor ends (exit,
// SIGKILL, the OOM killer), the kernel closes that pipe; the reaper reads
// end of file and kills every process group the executor recorded for the
// life it guards, then removes the containers labelled as the executor's.
// It ignores SIGINT, SIGTERM and SIGHUP, so a terminal's Ctrl-C or a
// service manager's stop reaches the executor, whose exit then triggers
// the reaper. An executor started again also kills what the records of
// its earlier lives hold (KillRecordedGroups), in case no reaper ran.

// ReaperConfig is what a reaper cleans up when its executor is gone.
type ReaperConfig struct {
	// Records is the directory of the process group records of the
	// executor life the reaper guards.
	Records string
	// Runtime is the executor's container runtime ("" or RuntimeHost:
	// none); Labels select the executor's containers.
	Runtime string
	Labels  map[string]string
}

// Args renders c as the reaper subcommand's arguments.
func (c ReaperConfig) Args() []string {
	args := []string{"--records", c.Records}
	if c.Runtime != "" && c.Runtime != RuntimeHost {
		args = append(args, "--runtime", c.Runtime)
		keys := make([]string, 0, len(c.Labels))
		for k := range c.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, "--label", k+"="+c.Labels[k])
		}
	}
	return args
}

// keep holds the write ends of reaper pipes for the life of the process:
// the garbage collector would close an unreferenced *os.File, and with it
// wake the reaper.
var keep []*os.File

// StartReaper starts command (the reaper subcommand of this binary, e.g.
// {"/usr/bin/sluice", "reap"}) with c's arguments. The reaper runs until
// this process ends, then cleans up. It returns the reaper's PID.
func StartReaper(command []string, c ReaperConfig) (int, error) {
	if len(command) == 0 {
		return 0, errors.New("start reaper: no command")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("start reaper: %w", err)
	}
	defer func() { _ = r.Close() }() // the reaper holds its own copy
	// Not tied to a context: the reaper must outlive whatever started it.
	cmd := exec.Command(command[0], append(append([]string{}, command[1:]...), c.Args()...)...) //nolint:gosec,noctx // our own binary
	cmd.Stdin = r
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Its own process group: a signal to the executor's group (a
	// terminal's Ctrl-C, a kill of the group) does not take it along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return 0, fmt.Errorf("start reaper: %w", err)
	}
	keep = append(keep, w)
	// Reap the reaper if it ends first (it should not); never block on it.
	go func() { _ = cmd.Wait() }()
	runtime.KeepAlive(w)
	return cmd.Process.Pid, nil
}

// Reaped is what a reaper did.
type Reaped struct {
	Groups     []int
	Containers []string
}

// RunReaper waits until in ends (its executor is gone), then kills the
// recorded process groups and removes the labelled containers. The
// reaper's command ignores SIGINT, SIGTERM and SIGHUP first
// (IgnoreStopSignals).
func RunReaper(ctx context.Context, in io.Reader, c ReaperConfig) (Reaped, error) {
	_, _ = io.Copy(io.Discard, in)
	return Reap(ctx, c)
}

// IgnoreStopSignals makes this process deaf to the signals that stop its
// executor: the reaper acts when the executor is gone, not before.
func IgnoreStopSignals() { signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP) }

// Reap kills the recorded process groups and removes the labelled
// containers now.
func Reap(ctx context.Context, c ReaperConfig) (Reaped, error) {
	var out Reaped
	var errs []error
	groups, err := KillRecordedGroups(c.Records)
	out.Groups = groups
	if err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(c.Records); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if c.Runtime != "" && c.Runtime != RuntimeHost && len(c.Labels) > 0 {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		removed, err := RemoveLabelled(rctx, c.Runtime, c.Labels)
		out.Containers = removed
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
