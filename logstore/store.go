package logstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-ci/sluice/blobstore"
)

// MaxReadLength caps the bytes one Read returns.
const MaxReadLength = 1 << 20

// pollInterval is how often Wait re-reads the filesystem, to notice appends
// made by other processes sharing the directory.
const pollInterval = 250 * time.Millisecond

// Sentinel errors; the errors returned wrap them and name the build, step or
// value at fault.
var (
	// ErrInvalidID means a build ID or step name cannot be mapped to a path.
	ErrInvalidID = errors.New("logstore: invalid id")
	// ErrNotFound means no log exists for the build or step.
	ErrNotFound = errors.New("logstore: not found")
	// ErrBadOffset means an offset is negative or beyond the end of the log.
	ErrBadOffset = errors.New("logstore: bad offset")
	// ErrOffsetMismatch means a conditional append's offset is not the
	// log's size; errors.As with *OffsetMismatchError gives the size.
	ErrOffsetMismatch = errors.New("logstore: offset mismatch")
	// ErrComplete means an append came after the step log was finished.
	ErrComplete = errors.New("logstore: log complete")
)

// OffsetMismatchError is returned by AppendAt when offset is not the size of
// the log. It matches ErrOffsetMismatch with errors.Is.
type OffsetMismatchError struct {
	// Build and Step name the log.
	Build, Step string
	// Offset is the offset the writer sent.
	Offset int64
	// Size is the log's current size: the offset to resume from.
	Size int64
}

// Error implements error.
func (e *OffsetMismatchError) Error() string {
	return fmt.Sprintf("logstore: offset %d does not match the size %d of log %s/%s", e.Offset, e.Size, e.Build, e.Step)
}

// Is makes errors.Is(err, ErrOffsetMismatch) true.
func (e *OffsetMismatchError) Is(target error) bool { return target == ErrOffsetMismatch }

// Chunk is a piece of a step log, as returned by Read (Azkaban's LogData).
type Chunk struct {
	// Offset is where Data starts.
	Offset int64 `json:"offset"`
	// Data is the bytes read (base64 in JSON).
	Data []byte `json:"data"`
	// NextOffset is Offset+len(Data): where the next read starts.
	NextOffset int64 `json:"next_offset"`
	// Size is the log's size when read.
	Size int64 `json:"size"`
	// Complete is true once the step log is finished; a reader with
	// NextOffset == Size and Complete has everything.
	Complete bool `json:"complete"`
}

// StepInfo describes one step log of a build.
type StepInfo struct {
	// Name is the step's name.
	Name string `json:"name"`
	// Size is the log's size in bytes.
	Size int64 `json:"size"`
	// Complete is true once the step log is finished.
	Complete bool `json:"complete"`
}

// Store keeps step logs under a directory. It is safe for concurrent use,
// and several Stores (in several processes) may share one directory.
type Store struct {
	dir string

	mu      sync.Mutex
	watches map[string]*watch
	// waiting, when set (tests), is called each time Wait found nothing
	// new and is about to block.
	waiting func()

	// archive, when set, keeps a copy of every finished step log and
	// serves the logs the directory lacks (SetArchive).
	archive    *blobstore.Store
	archiveErr func(error)

	// now is the clock marks are stamped with (tests set it).
	now func() time.Time
	// live tracks the logs written here that are not finished, for
	// FlushLive (live.go).
	liveMu  sync.Mutex
	live    map[string]*liveLog
	flushMu sync.Mutex
	// marksCache holds marks objects read from the blob store (live.go).
	marksCache map[string][]Mark
}

// watch wakes the Wait calls on one step log.
type watch struct {
	ch      chan struct{} // closed and replaced on every change
	waiters int
}

// Open returns a Store rooted at dir, creating it if needed.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("open log store: %w: empty directory", ErrInvalidID)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	return &Store{dir: abs, watches: map[string]*watch{}, now: time.Now, live: map[string]*liveLog{}}, nil
}

// Dir returns the directory the store is rooted at.
func (s *Store) Dir() string { return s.dir }

// Append appends p to the log of step in build, creating the log if needed.
// It fails with ErrComplete once the log is finished.
func (s *Store) Append(build, step string, p []byte) error {
	_, err := s.appendLog(build, step, -1, p, nil)
	return err
}

// AppendAt appends p only if the log's size is offset, and returns the new
// size. A mismatch returns an *OffsetMismatchError carrying the current size,
// so a writer retrying a chunk that was already stored can resynchronise
// instead of duplicating it. An empty p with offset 0 creates the log.
func (s *Store) AppendAt(build, step string, offset int64, p []byte) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("append to log %s/%s: %w: offset %d is negative", build, step, ErrBadOffset, offset)
	}
	return s.appendLog(build, step, offset, p, nil)
}

// AppendAtMarked is AppendAt with the times the writer saw its bytes
// written (marks, absolute offsets within p's range, increasing): a remote
// writer ships every half second, and its lines keep their own times.
// Marks outside p's range or out of order are ignored, and times after
// now are taken as now. With no marks, p's lines take the previous mark's
// time; AppendAt marks p with now.
func (s *Store) AppendAtMarked(build, step string, offset int64, p []byte, marks []Mark) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("append to log %s/%s: %w: offset %d is negative", build, step, ErrBadOffset, offset)
	}
	if marks == nil {
		marks = []Mark{}
	}
	return s.appendLog(build, step, offset, p, marks)
}

// appendLog appends p (at offset, or anywhere when offset < 0) under an
// exclusive flock of the log file, which serialises writers in this and
// other processes and orders them with Finish.
func (s *Store) appendLog(build, step string, offset int64, p []byte, marks []Mark) (int64, error) {
	sp, err := s.paths(build, step)
	if err != nil {
		return 0, fmt.Errorf("append to log: %w", err)
	}
	if offset > 0 && !exists(sp.log) {
		// A writer continuing a log this directory does not have (it
		// moved to another replica): create nothing that would hide the
		// log's flushed chunks from this replica's readers.
		return 0, &OffsetMismatchError{Build: build, Step: step, Offset: offset, Size: 0}
	}
	f, err := s.openLog(sp)
	if err != nil {
		return 0, fmt.Errorf("append to log %s/%s: %w", build, step, err)
	}
	defer func() { _ = f.Close() }()
	if err := lock(f); err != nil {
		return 0, fmt.Errorf("append to log %s/%s: %w", build, step, err)
	}
	if exists(sp.done) {
		size, _ := fileSize(f)
		return size, fmt.Errorf("append to log %s/%s: %w", build, step, ErrComplete)
	}
	size, err := fileSize(f)
	if err != nil {
		return 0, fmt.Errorf("append to log %s/%s: %w", build, step, err)
	}
	if offset >= 0 && offset != size {
		return size, &OffsetMismatchError{Build: build, Step: step, Offset: offset, Size: size}
	}
	if len(p) > 0 {
		start := size
		n, err := f.Write(p)
		size += int64(n)
		if n > 0 {
			s.dirty(sp, build, step)
		}
		if err != nil {
			s.notify(sp.key)
			return size, fmt.Errorf("append to log %s/%s: %w", build, step, err)
		}
		// A mark that cannot be written loses nothing: the bytes are
		// stored, and their lines take the previous mark's time.
		now := s.now()
		if marks == nil || start == 0 && (len(marks) == 0 || marks[0].Offset != 0) {
			// No times from the writer (or none for the log's start,
			// without which it would keep none): now.
			_ = mark(sp, start, now)
		}
		prev := start - 1
		for _, m := range marks {
			if m.Offset <= prev || m.Offset >= size {
				continue
			}
			t := m.Time
			if t.After(now) {
				t = now
			}
			_ = mark(sp, m.Offset, t)
			prev = m.Offset
		}
		s.notify(sp.key)
	}
	return size, nil
}

// openLog opens the step's log for appending, creating it (and recording it
// in the build's index, in creation order) if it does not exist.
func (s *Store) openLog(sp stepPaths) (*os.File, error) {
	f, err := os.OpenFile(sp.log, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	if err := os.MkdirAll(sp.dir, 0o750); err != nil {
		return nil, err
	}
	// Creating the log and indexing it happen under the index's lock, so
	// the index order is the creation order even across processes.
	idx, err := os.OpenFile(sp.index, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	defer func() { _ = idx.Close() }()
	if err := lock(idx); err != nil {
		return nil, err
	}
	f, err = os.OpenFile(sp.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o640)
	if errors.Is(err, fs.ErrExist) {
		return os.OpenFile(sp.log, os.O_WRONLY|os.O_APPEND, 0)
	}
	if err != nil {
		return nil, err
	}
	line := sp.esc + "\n"
	if _, err := idx.WriteString(line); err != nil {
		_ = f.Close()
		return nil, err
	}
	s.notify(sp.key)
	return f, nil
}

// Finish marks the step log complete, creating an empty log if the step
// wrote nothing. Finishing twice is not an error.
//
//nolint:contextcheck // blob store lookups are bounded by archiveTimeout
func (s *Store) Finish(build, step string) error {
	sp, err := s.paths(build, step)
	if err != nil {
		return fmt.Errorf("finish log: %w", err)
	}
	f, err := s.openLog(sp)
	if err != nil {
		return fmt.Errorf("finish log %s/%s: %w", build, step, err)
	}
	defer func() { _ = f.Close() }()
	if err := lock(f); err != nil {
		return fmt.Errorf("finish log %s/%s: %w", build, step, err)
	}
	done, err := os.OpenFile(sp.done, os.O_WRONLY|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("finish log %s/%s: %w", build, step, err)
	}
	if err := done.Close(); err != nil {
		return fmt.Errorf("finish log %s/%s: %w", build, step, err)
	}
	s.notify(sp.key)
	// Done exists: no append changes the log now. Unlock it before the
	// upload (a flush takes the flush lock, then the log's).
	_ = f.Close()
	s.flushMu.Lock() // no chunk of this log is flushed after its archive
	defer s.flushMu.Unlock()
	s.forget(sp.key)
	if err := s.upload(sp, build, step); err != nil && s.archiveErr != nil {
		s.archiveErr(err)
	}
	return nil
}

// Read returns up to length bytes of the step log from offset; length ≤ 0
// means to the end. At most MaxReadLength bytes are returned either way;
// read on from NextOffset. Reading at the end returns empty Data; an offset
// beyond the end is ErrBadOffset.
//
//nolint:contextcheck // blob store lookups are bounded by archiveTimeout
func (s *Store) Read(build, step string, offset, length int64) (Chunk, error) {
	sp, err := s.paths(build, step)
	if err != nil {
		return Chunk{}, fmt.Errorf("read log: %w", err)
	}
	if offset < 0 {
		return Chunk{}, fmt.Errorf("read log %s/%s: %w: offset %d is negative", build, step, ErrBadOffset, offset)
	}
	// Completion first: once complete the size is final, so a reader never
	// sees Complete with a stale Size.
	complete := exists(sp.done)
	f, err := os.Open(sp.log)
	if errors.Is(err, fs.ErrNotExist) {
		if s.archive != nil {
			c, err := s.readArchived(build, step, offset, length)
			if err == nil || !isNotFound(err) {
				return c, err
			}
		}
		return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, ErrNotFound)
	}
	if err != nil {
		return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, err)
	}
	defer func() { _ = f.Close() }()
	size, err := fileSize(f)
	if err != nil {
		return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, err)
	}
	if offset > size {
		return Chunk{}, fmt.Errorf("read log %s/%s: %w: offset %d is beyond the end of the log (size %d)",
			build, step, ErrBadOffset, offset, size)
	}
	n := size - offset
	if length > 0 && length < n {
		n = length
	}
	n = min(n, MaxReadLength)
	data := make([]byte, n)
	if _, err := f.ReadAt(data, offset); err != nil && !errors.Is(err, io.EOF) {
		return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, err)
	}
	return Chunk{Offset: offset, Data: data, NextOffset: offset + n, Size: size, Complete: complete}, nil
}

// Stat describes one step log; a missing log is ErrNotFound.
//
//nolint:contextcheck // blob store lookups are bounded by archiveTimeout
func (s *Store) Stat(build, step string) (StepInfo, error) {
	sp, err := s.paths(build, step)
	if err != nil {
		return StepInfo{}, fmt.Errorf("stat log: %w", err)
	}
	info, err := stat(sp, step)
	if errors.Is(err, fs.ErrNotExist) {
		if s.archive != nil {
			ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
			defer cancel()
			a, err := s.archivedStep(ctx, build, step)
			if err == nil {
				return StepInfo{Name: step, Size: a.size, Complete: a.complete}, nil
			}
			if !isNotFound(err) {
				return StepInfo{}, fmt.Errorf("stat log %s/%s: %w", build, step, err)
			}
		}
		return StepInfo{}, fmt.Errorf("stat log %s/%s: %w", build, step, ErrNotFound)
	}
	if err != nil {
		return StepInfo{}, fmt.Errorf("stat log %s/%s: %w", build, step, err)
	}
	return info, nil
}

// stat reads a step log's completion (first: once complete, the size is
// final) and size.
func stat(sp stepPaths, step string) (StepInfo, error) {
	complete := exists(sp.done)
	st, err := os.Stat(sp.log)
	if err != nil {
		return StepInfo{}, err
	}
	return StepInfo{Name: step, Size: st.Size(), Complete: complete}, nil
}

// Steps lists the build's step logs in creation order. A build without any
// log is ErrNotFound.
//
//nolint:contextcheck // blob store lookups are bounded by archiveTimeout
func (s *Store) Steps(build string) ([]StepInfo, error) {
	dir, err := s.buildDir(build)
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	names, err := readIndex(dir)
	if err != nil {
		return nil, fmt.Errorf("list logs of %s: %w", build, err)
	}
	var arch []archived
	if s.archive != nil {
		// Finished logs another replica wrote, or whose local copy is
		// gone, come from the blob store; the local copy wins where both
		// exist (it is the same bytes, or the live version).
		ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
		defer cancel()
		if arch, err = s.archivedSteps(ctx, build); err != nil && len(names) == 0 {
			return nil, fmt.Errorf("list logs of %s: %w", build, err)
		}
	}
	if len(names) == 0 && len(arch) == 0 {
		return nil, fmt.Errorf("list logs of %s: %w", build, ErrNotFound)
	}
	if len(names) == 0 {
		infos := make([]StepInfo, 0, len(arch))
		for _, a := range arch {
			infos = append(infos, StepInfo{Name: a.name, Size: a.size, Complete: a.complete})
		}
		return infos, nil
	}
	local := map[string]bool{}
	for _, n := range names {
		local[n] = true
	}
	for _, a := range arch {
		if !local[a.name] {
			names = append(names, a.name)
		}
	}
	archivedInfo := map[string]StepInfo{}
	for _, a := range arch {
		archivedInfo[a.name] = StepInfo{Name: a.name, Size: a.size, Complete: a.complete}
	}
	infos := make([]StepInfo, 0, len(names))
	for _, name := range names {
		sp, err := s.paths(build, name)
		if err != nil {
			continue // an index entry this store cannot map: skip it
		}
		info, err := stat(sp, name)
		if err != nil {
			if a, ok := archivedInfo[name]; ok {
				infos = append(infos, a)
			}
			continue
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// readIndex returns the step names of a build's data directory: those in
// the index in order, then any log file the index misses (a writer died
// between creating it and indexing it), sorted.
func readIndex(dir string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	f, err := os.Open(filepath.Join(dir, "index"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, err := unescape(sc.Text())
		if err != nil || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var extra []string
	for _, e := range entries {
		esc, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		name, err := unescape(esc)
		if err != nil || seen[name] {
			continue
		}
		extra = append(extra, name)
	}
	sort.Strings(extra)
	return append(names, extra...), nil
}

// Wait blocks until the step log is larger than offset or complete, or ctx
// is done. A log that does not exist yet counts as empty. Appends through
// this Store wake it at once; appends by other processes are noticed within
// a poll interval (250 ms).
func (s *Store) Wait(ctx context.Context, build, step string, offset int64) error {
	sp, err := s.paths(build, step)
	if err != nil {
		return fmt.Errorf("wait for log: %w", err)
	}
	if offset < 0 {
		return fmt.Errorf("wait for log %s/%s: %w: offset %d is negative", build, step, ErrBadOffset, offset)
	}
	s.mu.Lock()
	w := s.watches[sp.key]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		s.watches[sp.key] = w
	}
	w.waiters++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		w.waiters--
		if w.waiters == 0 && s.watches[sp.key] == w {
			delete(s.watches, sp.key)
		}
		s.mu.Unlock()
	}()

	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for polls := 0; ; polls++ {
		s.mu.Lock()
		changed := w.ch
		s.mu.Unlock()
		info, err := stat(sp, step)
		if err == nil && (info.Complete || info.Size > offset) {
			return nil
		}
		if err != nil && s.archive != nil && polls%blobPoll == 0 {
			// Not here: written through another replica? Its flushed
			// chunks or its finished archive are in the blob store.
			if a, err := s.archivedStep(ctx, build, step); err == nil && (a.complete || a.size > offset) {
				return nil
			}
		}
		if s.waiting != nil {
			s.waiting()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for log %s/%s: %w", build, step, context.Cause(ctx))
		case <-changed:
		case <-ticker.C:
		}
	}
}

// notify wakes the waiters on a step log, if any.
func (s *Store) notify(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.watches[key]; w != nil {
		close(w.ch)
		w.ch = make(chan struct{})
	}
}

func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
