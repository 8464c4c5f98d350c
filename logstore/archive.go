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

// archived is one step log in the blob store.
type archived struct {
	key  string
	seq  int
	name string
	size int64
	mod  time.Time
}

// archivedSteps lists a build's finished step logs in the blob store, in
// creation order.
func (s *Store) archivedSteps(ctx context.Context, build string) ([]archived, error) {
	dir, err := archiveDir(build)
	if err != nil {
		return nil, err
	}
	infos, err := s.archive.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list archived logs of %s: %w", build, err)
	}
	var out []archived
	for _, i := range infos {
		rest := strings.TrimPrefix(i.Key, dir)
		if strings.Contains(rest, "/") {
			continue // a longer build ID nested below: never, as "@" is not an escaped segment
		}
		seqStr, esc, ok := strings.Cut(strings.TrimSuffix(rest, ".log"), ".")
		seq, err := strconv.Atoi(seqStr)
		if !ok || err != nil || !strings.HasSuffix(rest, ".log") {
			continue
		}
		name, err := unescape(esc)
		if err != nil {
			continue
		}
		out = append(out, archived{key: i.Key, seq: seq, name: name, size: i.Size, mod: i.ModTime})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].seq < out[b].seq })
	return out, nil
}

// archivedStep finds one step log in the blob store; ErrNotFound if absent.
func (s *Store) archivedStep(ctx context.Context, build, step string) (archived, error) {
	steps, err := s.archivedSteps(ctx, build)
	if err != nil {
		return archived{}, err
	}
	for _, a := range steps {
		if a.name == step {
			return a, nil
		}
	}
	return archived{}, ErrNotFound
}

// upload copies a finished step log to the blob store. It runs after the
// .done marker exists, so the local file no longer changes.
func (s *Store) upload(sp stepPaths, build, step string) error {
	if s.archive == nil {
		return nil
	}
	names, err := readIndex(sp.dir)
	if err != nil {
		return fmt.Errorf("archive log %s/%s: %w", build, step, err)
	}
	seq := len(names)
	for i, n := range names {
		if n == step {
			seq = i
			break
		}
	}
	dir, err := archiveDir(build)
	if err != nil {
		return err
	}
	f, err := os.Open(sp.log)
	if err != nil {
		return fmt.Errorf("archive log %s/%s: %w", build, step, err)
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	if _, err := s.archive.Put(ctx, archiveKey(dir, seq, step), f); err != nil {
		return fmt.Errorf("archive log %s/%s to %s: %w", build, step, s.archive, err)
	}
	return nil
}

// readArchived reads a finished step log from the blob store (see Read).
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
	if n > 0 {
		r, _, err := s.archive.GetRange(ctx, a.key, offset, n)
		if err != nil {
			return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, err)
		}
		defer func() { _ = r.Close() }()
		data, err = io.ReadAll(io.LimitReader(r, n))
		if err != nil {
			return Chunk{}, fmt.Errorf("read log %s/%s: %w", build, step, err)
		}
		n = int64(len(data))
	}
	return Chunk{Offset: offset, Data: data, NextOffset: offset + n, Size: a.size, Complete: true}, nil
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
