package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU (user + system) the whole stack has used so far: this
// process (the Temporal server, an in-process controller, the API) and the
// children it reaped (git), plus every live member process and the children
// they reaped (steps, checkouts). Deltas of it are load-independent: on a
// busy machine wall-clock figures drift, CPU per build does not.
func (s *stack) cpuTime() time.Duration {
	self, members := s.cpuParts()
	return self + members
}

// cpuParts splits cpuTime into this process (with the children it reaped)
// and the member processes (with theirs).
func (s *stack) cpuParts() (self, members time.Duration) {
	self = rusage(syscall.RUSAGE_SELF) + rusage(syscall.RUSAGE_CHILDREN)
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		if p.cmd.Process != nil && !p.exited() {
			d, err := procCPU(p.cmd.Process.Pid)
			if err == nil {
				members += d
			}
		}
	}
	return self, members
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads a process's utime, stime, cutime and cstime.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("read CPU of process %d: %w", pid, err)
	}
	// Fields after the command name (which may hold spaces) start at state.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
