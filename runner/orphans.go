package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// GroupRecord identifies a process group a build's shell session leads: its
// ID and the start time of its leader (field 22 of /proc/<pid>/stat, in clock
// ticks since boot), so a later reader never mistakes a reused ID for it.
type GroupRecord struct {
	PGID  int
	Start uint64
}

// String is the record's line in a record file: "<pgid> <start>".
func (g GroupRecord) String() string { return fmt.Sprintf("%d %d", g.PGID, g.Start) }

// RecordGroup returns the record of the process group led by pgid.
func RecordGroup(pgid int) GroupRecord {
	start, _ := procStart(pgid)
	return GroupRecord{PGID: pgid, Start: start}
}

// AppendGroupRecord appends rec to the record file at path, creating it.
func AppendGroupRecord(path string, rec GroupRecord) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("record process group: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("record process group: %w", err)
	}
	_, werr := f.WriteString(rec.String() + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("record process group: %w", werr)
	}
	return nil
}

// KillRecordedGroups reads every record file in dir (and in its
// subdirectories, which it removes too), SIGKILLs each recorded
// process group that still has a live member, and removes the files. A group
// whose leader is alive but started at another time is a reused ID and is
// left alone; while any member of a group lives, its ID cannot be reused, so
// a group whose leader is gone is still the recorded one. It returns the
// groups it signalled.
func KillRecordedGroups(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read process group records: %w", err)
	}
	var killed []int
	var errs []error
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() {
			// An earlier life's records (see the reaper).
			k, err := KillRecordedGroups(path)
			killed = append(killed, k...)
			if err == nil {
				err = os.Remove(path)
			}
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			rec, ok := parseGroupRecord(line)
			if !ok || !groupAlive(rec.PGID) {
				continue
			}
			if start, leaderAlive := procStart(rec.PGID); leaderAlive && start != rec.Start {
				continue
			}
			if err := syscall.Kill(-rec.PGID, syscall.SIGKILL); err == nil {
				killed = append(killed, rec.PGID)
			}
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
		}
	}
	return killed, errors.Join(errs...)
}

func parseGroupRecord(line string) (GroupRecord, bool) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return GroupRecord{}, false
	}
	pgid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pgid <= 1 {
		return GroupRecord{}, false
	}
	return GroupRecord{PGID: pgid, Start: start}, true
}

// procStart reads a live process's start time from /proc/<pid>/stat.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, false
	}
	// Fields after "(comm)": state is field 3 of the line, starttime 22.
	fields := bytes.Fields(b[end+1:])
	if len(fields) < 20 || fields[0][0] == 'Z' {
		return 0, false
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	return start, err == nil
}
