package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/sluice-ci/sluice/blobstore"
)

// Live logs across API replicas.
//
// A remote writer ships a step's output to one API replica, which appends
// it to its local directory. With an archive (SetArchive) and FlushLive
// running, that replica copies what each live log gained to the blob store
// every interval, as chunk objects next to where the finished log goes:
//
//	logs/<build>/@/<seq>.<step>.live/<offset>        the bytes from offset on
//	logs/<build>/@/<seq>.<step>.live/<offset>.times  the marks in that range
//
// offset zero-padded to 16 digits. A replica without the log locally reads
// the run of chunks from offset 0 (Read, Stat, Steps, Wait, Marks), so a
// running build's log shows everywhere, at most an interval behind. When
// the log is finished, the receiving replica archives it whole and deletes
// its chunks; readers prefer the archive.

// DefaultLiveFlush is how often `sluice api` flushes live logs.
const DefaultLiveFlush = time.Second

// liveSuffix ends the name of a live log's chunk "directory".
const liveSuffix = ".live"

// liveChunkMax caps the bytes one chunk object holds.
const liveChunkMax = 4 << 20

// liveLog is a log written through this store and not finished.
type liveLog struct {
	build, step string
	sp          stepPaths
	dirty       bool
	// flushed is how much of the log is in the blob store; known is false
	// until it was asked (a restarted replica continues after the chunks
	// it flushed before).
	flushed int64
	known   bool
}

// liveDir is the key prefix of a live log's chunks.
func liveDir(dir string, seq int, step string) string {
	return fmt.Sprintf("%s%04d.%s%s/", dir, seq, escape(step), liveSuffix)
}

// dirty notes that a log written here grew.
func (s *Store) dirty(sp stepPaths, build, step string) {
	if s.archive == nil {
		return
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	l := s.live[sp.key]
	if l == nil {
		l = &liveLog{build: build, step: step, sp: sp}
		s.live[sp.key] = l
	}
	l.dirty = true
}

// forget stops flushing a log (it is finished).
func (s *Store) forget(key string) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	delete(s.live, key)
}

// FlushLive flushes the live logs written through this store to the blob
// store (Flush) every interval until ctx ends; onErr hears of each failed
// pass (nil ignores them). Without an archive it returns at once.
func (s *Store) FlushLive(ctx context.Context, interval time.Duration, onErr func(error)) {
	if s.archive == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Flush(ctx); err != nil && onErr != nil {
			onErr(err)
		}
	}
}

// Flush copies what each live log written through this store gained since
// the last flush to the blob store, as one or more chunk objects. A log
// whose flush failed is tried again on the next call.
func (s *Store) Flush(ctx context.Context) error {
	if s.archive == nil {
		return nil
	}
	// A blob store that hangs holds up Finish (it waits for the flush):
	// bound each pass as an upload is bounded.
	ctx, cancel := context.WithTimeout(ctx, archiveTimeout)
	defer cancel()
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.liveMu.Lock()
	var todo []*liveLog
	for _, l := range s.live {
		if l.dirty {
			l.dirty = false
			todo = append(todo, l)
		}
	}
	s.liveMu.Unlock()
	var errs []error
	for _, l := range todo {
		if err := s.flushLog(ctx, l); err != nil {
			s.liveMu.Lock()
			l.dirty = true
			s.liveMu.Unlock()
			errs = append(errs, fmt.Errorf("flush live log %s/%s: %w", l.build, l.step, err))
		}
	}
	return errors.Join(errs...)
}

// flushLog copies the bytes of one log past l.flushed; flushMu is held.
func (s *Store) flushLog(ctx context.Context, l *liveLog) error {
	if exists(l.sp.done) {
		s.forget(l.sp.key) // Finish archives it whole
		return nil
	}
	seq, err := stepSeq(l.sp, l.step)
	if err != nil {
		return err
	}
	dir, err := archiveDir(l.build)
	if err != nil {
		return err
	}
	ld := liveDir(dir, seq, l.step)
	if !l.known {
		infos, err := s.archive.List(ctx, ld)
		if err != nil {
			return err
		}
		var end int64
		for _, i := range infos {
			var off int64
			if _, err := fmt.Sscanf(i.Key[len(ld):], "%016d", &off); err != nil || len(i.Key)-len(ld) != 16 || off != end {
				continue
			}
			end += i.Size
		}
		l.flushed, l.known = end, true
	}
	f, err := os.Open(l.sp.log)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	// The size and the marks under the log's lock: an appender writes its
	// bytes, then their mark.
	if err := lock(f); err != nil {
		return err
	}
	size, err := fileSize(f)
	if err != nil {
		_ = unlock(f)
		return err
	}
	timesData, err := os.ReadFile(l.sp.times)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = unlock(f)
		return err
	}
	if err := unlock(f); err != nil {
		return err
	}
	marks := decodeMarks(timesData)
	for l.flushed < size {
		n := min(size-l.flushed, liveChunkMax)
		data := make([]byte, n)
		if _, err := f.ReadAt(data, l.flushed); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		var ms bytes.Buffer
		for _, m := range marks {
			if m.Offset >= l.flushed && m.Offset < l.flushed+n {
				ms.Write(m.encode())
			}
		}
		// The bytes, then their marks: a marks object, once there, is
		// final (a retry after a failed one rewrites both), so readers
		// may keep it.
		key := fmt.Sprintf("%s%016d", ld, l.flushed)
		if _, err := s.archive.Put(ctx, key, bytes.NewReader(data)); err != nil {
			return err
		}
		if ms.Len() > 0 {
			if _, err := s.archive.Put(ctx, key+".times", &ms); err != nil {
				return err
			}
		}
		l.flushed += n
	}
	return nil
}

// remoteMarks reads a step log's marks from the blob store: the finished
// log's, or those of a live log's flushed chunks.
func (s *Store) remoteMarks(build, step string) ([]Mark, error) {
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	a, err := s.archivedStep(ctx, build, step)
	if err != nil {
		return nil, err
	}
	keys := a.chunkTimes
	if a.complete {
		keys = nil
		if a.times != "" {
			keys = []string{a.times}
		}
	}
	var out []Mark
	for _, k := range keys {
		if ms, ok := s.cachedMarks(k); ok {
			out = append(out, ms...)
			continue
		}
		r, _, err := s.archive.Get(ctx, k)
		if errors.Is(err, blobstore.ErrNotFound) {
			continue // deleted since the listing (the log was archived)
		}
		if err != nil {
			return nil, fmt.Errorf("read log marks %s/%s: %w", build, step, err)
		}
		b, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil {
			return nil, fmt.Errorf("read log marks %s/%s: %w", build, step, err)
		}
		ms := decodeMarks(b)
		s.cacheMarks(k, ms)
		out = append(out, ms...)
	}
	return out, nil
}

// maxCachedMarks bounds the marks objects kept in memory.
const maxCachedMarks = 4096

// cachedMarks returns the decoded marks object under key, if read before.
// Marks objects are written once (a chunk's, or a finished log's), so a
// follower on another replica reads each once, not every second.
func (s *Store) cachedMarks(key string) ([]Mark, bool) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	ms, ok := s.marksCache[key]
	return ms, ok
}

func (s *Store) cacheMarks(key string, ms []Mark) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.marksCache == nil || len(s.marksCache) >= maxCachedMarks {
		s.marksCache = map[string][]Mark{}
	}
	s.marksCache[key] = ms
}
