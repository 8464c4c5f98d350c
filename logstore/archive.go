package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/blobstore"
)

// ArchivePrefix is the blob store prefix of finished step logs.
const ArchivePrefix = "logs/"

// archiveTimeout bounds one upload or lookup in the blob store.
const archiveTimeout = 2 * time.Minute

// blobPoll is how many Wait poll intervals pass between looks at the blob
// store for a log this directory does not have (4 × 250 ms).
const blobPoll = 4

// SetArchive makes the store copy every step log it finishes to b, and read
// from b the logs its directory lacks: finished logs written by another API
// replica, or logs whose local copy was pruned or lost. The local directory
// then only needs to hold the logs that are being written (see doc.go).
// onErr hears of each failed upload (the local copy still serves reads);
// nil ignores them. Call it before the store is used.
func (s *Store) SetArchive(b *blobstore.Store, onErr func(error)) {
	s.archive = b
	s.archiveErr = onErr
}

// archiveDir is the blob key prefix of one build's finished step logs:
// "logs/" + the escaped build segments + "/@/", mirroring the directory
// layout (so one build ID being a prefix of another is harmless).
func archiveDir(build string) (string, error) {
	if build == "" || strings.HasPrefix(build, "/") {
		return "", fmt.Errorf("%w: build id %q", ErrInvalidID, build)
	}
	segs := strings.Split(build, "/")
	esc := make([]string, len(segs))
	for i, seg := range segs {
		if err := checkName(seg); err != nil {
			return "", fmt.Errorf("%w: build id %q: %s", ErrInvalidID, build, err.Error())
		}
		esc[i] = escape(seg)
	}
	return ArchivePrefix + strings.Join(esc, "/") + "/" + dataDir + "/", nil
}

// archiveKey names one finished step log: its position in the build's
// creation order, then the escaped step name ("0003.build.log").
func archiveKey(dir string, seq int, step string) string {
	return fmt.Sprintf("%s%04d.%s.log", dir, seq, escape(step))
}

// archived is one step log in the blob store: finished (its archive
// object, and the marks next to it), or live (the chunks the replica
// receiving it flushed so far, live.go).
type archived struct {
	key  string // the finished log ("" while live)
	seq  int
	name string
	size int64
	mod  time.Time
	// complete is true when the finished log is there.
	complete bool
	// times is the key of the finished log's marks ("" if none).
	times string
	// chunks are a live log's flushed pieces, contiguous from offset 0,
	// and chunkTimes the keys of their marks.
	chunks     []liveChunk
	chunkTimes []string
}

// liveChunk is one flushed piece of a live log.
type liveChunk struct {
	key          string
	offset, size int64
}

// archivedSteps lists a build's step logs in the blob store, finished or
// live, in creation order.
func (s *Store) archivedSteps(ctx context.Context, build string) ([]archived, error) {
	dir, err := archiveDir(build)
	if err != nil {
		return nil, err
	}
	infos, err := s.archive.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list archived logs of %s: %w", build, err)
	}
	byName := map[string]*archived{}
	var order []*archived
	get := func(seq int, name string) *archived {
		a := byName[name]
		if a == nil {
			a = &archived{seq: seq, name: name}
			byName[name] = a
			order = append(order, a)
		}
		return a
	}
	for _, i := range infos {
		rest := strings.TrimPrefix(i.Key, dir)
		obj, piece, isLive := strings.Cut(rest, "/")
		seqStr, esc, ok := strings.Cut(obj, ".")
		seq, err := strconv.Atoi(seqStr)
		if !ok || err != nil {
			continue
		}
		switch {
		case isLive:
			// <seq>.<step>.live/<offset>[.times]
			esc, ok = strings.CutSuffix(esc, liveSuffix)
			if !ok || strings.Contains(piece, "/") {
				continue
			}
			name, err := unescape(esc)
			if err != nil {
				continue
			}
			a := get(seq, name)
			if offStr, ok := strings.CutSuffix(piece, ".times"); ok {
				if _, err := strconv.ParseInt(offStr, 10, 64); err == nil {
					a.chunkTimes = append(a.chunkTimes, i.Key)
				}
				continue
			}
			off, err := strconv.ParseInt(piece, 10, 64)
			if err != nil {
				continue
			}
			a.chunks = append(a.chunks, liveChunk{key: i.Key, offset: off, size: i.Size})
			if i.ModTime.After(a.mod) && !a.complete {
				a.mod = i.ModTime
			}
		case strings.HasSuffix(esc, ".log"):
			name, err := unescape(strings.TrimSuffix(esc, ".log"))
			if err != nil {
				continue
			}
			a := get(seq, name)
			a.key, a.size, a.mod, a.complete = i.Key, i.Size, i.ModTime, true
		case strings.HasSuffix(esc, ".times"):
			name, err := unescape(strings.TrimSuffix(esc, ".times"))
			if err != nil {
				continue
			}
			get(seq, name).times = i.Key
		}
	}
	out := make([]archived, 0, len(order))
	for _, a := range order {
		if !a.complete {
			// Only the run of chunks from offset 0 counts (keys sort by
			// their zero-padded offsets).
			var size int64
			n := 0
			for _, c := range a.chunks {
				if c.offset != size {
					break
				}
				size += c.size
				n++
			}
			a.chunks, a.size = a.chunks[:n], size
			if n == 0 {
				continue // only marks, or a gap: nothing readable yet
			}
		}
		out = append(out, *a)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].seq < out[b].seq })
	return out, nil
}

// archivedStep finds one step log in the blob store; ErrNotFound if absent.
// A log finished between the listing's passing its archive and its live
// chunks (deleted once archived) is missed once: it looks twice.
func (s *Store) archivedStep(ctx context.Context, build, step string) (archived, error) {
	for try := 0; try < 2; try++ {
		steps, err := s.archivedSteps(ctx, build)
		if err != nil {
			return archived{}, err
		}
		for _, a := range steps {
			if a.name == step {
				return a, nil
			}
		}
	}
	return archived{}, ErrNotFound
}

// upload copies a finished step log and its marks to the blob store,
// then removes the chunks flushed while it was live. It runs after the
// .done marker exists, so the local files no longer change.
func (s *Store) upload(sp stepPaths, build, step string) error {
	if s.archive == nil {
		return nil
	}
	seq, err := stepSeq(sp, step)
	if err != nil {
		return fmt.Errorf("archive log %s/%s: %w", build, step, err)
	}
	dir, err := archiveDir(build)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	// The marks first: a reader that finds the log finds its marks.
	if times, err := os.Open(sp.times); err == nil {
		_, err := s.archive.Put(ctx, archiveTimesKey(dir, seq, step), times)
		_ = times.Close()
		if err != nil {
			return fmt.Errorf("archive log %s/%s (its marks) to %s: %w", build, step, s.archive, err)
		}
	}
	f, err := os.Open(sp.log)
	if err != nil {
		return fmt.Errorf("archive log %s/%s: %w", build, step, err)
	}
	defer func() { _ = f.Close() }()
	if _, err := s.archive.Put(ctx, archiveKey(dir, seq, step), f); err != nil {
		return fmt.Errorf("archive log %s/%s to %s: %w", build, step, s.archive, err)
	}
	if _, err := s.archive.DeletePrefix(ctx, liveDir(dir, seq, step)); err != nil {
		return fmt.Errorf("remove the live chunks of log %s/%s: %w", build, step, err)
	}
	return nil
}

// stepSeq is the step's position in its build's index.
func stepSeq(sp stepPaths, step string) (int, error) {
	names, err := readIndex(sp.dir)
	if err != nil {
		return 0, err
	}
	for i, n := range names {
		if n == step {
			return i, nil
		}
	}
	return len(names), nil
}

// archiveTimesKey names a finished step log's marks.
func archiveTimesKey(dir string, seq int, step string) string {
	return fmt.Sprintf("%s%04d.%s.times", dir, seq, escape(step))
}

// readArchived reads a step log from the blob store (see Read): the
// finished log, or the chunks of a live one flushed so far.
func (s *Store) readArchived(build, step string, offset, length int64) (Chunk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	a, err := s.archivedStep(ctx, build, step)
	if err != nil {
		return Chunk{}, err
	}
	if offset > a.size {
		return Chunk{}, fmt.Errorf("read log %s/%s: %w: offset %d is beyond the end of the log (size %d)",
			build, step, ErrBadOffset, offset, a.size)
	}
	n := a.size - offset
	if length > 0 && length < n {
		n = length
	}
	n = min(n, MaxReadLength)
	data := []byte{}
	pieces := []liveChunk{{key: a.key, offset: 0, size: a.size}}
	if !a.complete {
		pieces = a.chunks
	}
	for _, p := range pieces {
		from, to := max(offset, p.offset), min(offset+n, p.offset+p.size)
		if from >= to {
			continue
		}
		got, err := s.getRange(ctx, p.key, from-p.offset, to-from)
		if err != nil {
			return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, err)
		}
		data = append(data, got...)
		if int64(len(got)) < to-from {
			break // the object is shorter than listed: stop at what is there
		}
	}
	n = int64(len(data))
	return Chunk{Offset: offset, Data: data, NextOffset: offset + n, Size: a.size, Complete: a.complete}, nil
}

// getRange reads length bytes of an object from offset.
func (s *Store) getRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	r, _, err := s.archive.GetRange(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(io.LimitReader(r, length))
}

// pruneArchive removes the archived logs of every build attempt none of
// whose step logs was written since before.
func (s *Store) pruneArchive(ctx context.Context, before time.Time) (int, error) {
	newest := map[string]time.Time{}
	keys := map[string][]string{}
	err := s.archive.Walk(ctx, ArchivePrefix, func(i blobstore.Info) error {
		at := strings.LastIndex(i.Key, "/"+dataDir+"/")
		if at < 0 {
			return nil
		}
		dir := i.Key[:at]
		if i.ModTime.After(newest[dir]) {
			newest[dir] = i.ModTime
		}
		keys[dir] = append(keys[dir], i.Key)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune archived logs: %w", err)
	}
	n := 0
	for dir, t := range newest {
		if !t.Before(before) {
			continue
		}
		for _, k := range keys[dir] {
			if err := s.archive.Delete(ctx, k); err != nil {
				return n, fmt.Errorf("prune archived logs: %w", err)
			}
		}
		n++
	}
	return n, nil
}

// deleteArchivedPipeline removes every archived log of a pipeline.
func (s *Store) deleteArchivedPipeline(pipeline string) error {
	if s.archive == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	if _, err := s.archive.DeletePrefix(ctx, ArchivePrefix+escape(pipeline)+"/"); err != nil {
		return fmt.Errorf("delete the archived logs of pipeline %s: %w", pipeline, err)
	}
	return nil
}

// isNotFound reports whether err means the log does not exist.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, blobstore.ErrNotFound)
}
