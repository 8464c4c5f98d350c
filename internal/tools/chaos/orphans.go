package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// orphanGrace is how long a lost attempt's step processes may outlive the
// SIGKILL of their executor (docs/semantics.md, "Nothing outlives its
// attempt": the reaper acts within a second or two).
const orphanGrace = 30 * time.Second

// stepProc is a process a build step started: its PID, its start time
// (so a reused PID is not mistaken for it) and its command.
type stepProc struct {
	pid   int
	start string
	comm  string
}

// orphanCheck watches the step processes of killed executors.
type orphanCheck struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	orphans []string
}

// watch snapshots the step processes of executor (those whose environment
// names it in SD_EXECUTOR) right before it is killed, and after
// orphanGrace records every one still alive as an orphan.
func (c *orphanCheck) watch(executor string, procs []stepProc, killed time.Time) {
	if len(procs) == 0 {
		return
	}
	c.wg.Add(1)
	time.AfterFunc(time.Until(killed.Add(orphanGrace)), func() {
		defer c.wg.Done()
		for _, p := range procs {
			if start, comm, ok := procStat(p.pid); ok && start == p.start {
				c.mu.Lock()
				c.orphans = append(c.orphans, fmt.Sprintf("pid %d (%s) of executor %s, still alive %s after its SIGKILL at %s",
					p.pid, comm, executor, orphanGrace, killed.Format("15:04:05.000")))
				c.mu.Unlock()
			}
		}
	})
}

// wait waits for every pending check and returns the orphans found.
func (c *orphanCheck) wait() []string {
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.orphans...)
}

// stepProcesses lists the live processes whose environment holds
// SD_EXECUTOR=executor: every process a build step of that executor
// started (steps get the variable; their children inherit it).
func stepProcesses(executor string) []stepProc {
	want := []byte("SD_EXECUTOR=" + executor + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []stepProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.HasPrefix(env, want) && !bytes.Contains(env, append([]byte{0}, want...)) {
			continue
		}
		if start, comm, ok := procStat(pid); ok {
			out = append(out, stepProc{pid: pid, start: start, comm: comm})
		}
	}
	return out
}

// procStat reads a live (non-zombie) process's start time and command.
func procStat(pid int) (start, comm string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", "", false
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 20 || f[0][0] == 'Z' {
		return "", "", false
	}
	return string(f[19]), string(b[open+1 : end]), true
}
