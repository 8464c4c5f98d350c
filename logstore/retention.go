package logstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DeletePipeline removes every log of a pipeline (its builds' IDs start
// with "<pipeline>/").
//
//nolint:contextcheck // blob store calls are bounded by archiveTimeout
func (s *Store) DeletePipeline(pipeline string) error {
	if err := checkName(pipeline); err != nil {
		return fmt.Errorf("%w: pipeline %q: %s", ErrInvalidID, pipeline, err.Error())
	}
	if strings.Contains(pipeline, "/") {
		return fmt.Errorf("%w: pipeline %q contains '/'", ErrInvalidID, pipeline)
	}
	if err := os.RemoveAll(filepath.Join(s.dir, escape(pipeline))); err != nil {
		return fmt.Errorf("delete the logs of pipeline %s: %w", pipeline, err)
	}
	return s.deleteArchivedPipeline(pipeline)
}

// Prune removes the logs of every build attempt none of whose files changed
// since before: a log being written is never removed. It returns how many
// attempts' logs it removed, and leaves no empty directory behind. With an
// archive (SetArchive) it also removes the archived logs of every attempt
// whose newest archived step log is older than before, and counts those
// attempts too (an attempt held in both places counts twice).
//
//nolint:contextcheck // blob store calls are bounded by archiveTimeout
func (s *Store) Prune(before time.Time) (int, error) {
	n, err := s.pruneLocal(before)
	if err != nil || s.archive == nil {
		return n, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	m, err := s.pruneArchive(ctx, before)
	return n + m, err
}

// pruneLocal is Prune for the local directory.
func (s *Store) pruneLocal(before time.Time) (int, error) {
	var stale []string
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() || d.Name() != dataDir {
			return nil
		}
		newest, err := newestModTime(path)
		if err != nil {
			return err
		}
		if newest.Before(before) {
			stale = append(stale, path)
		}
		return fs.SkipDir
	})
	if err != nil {
		return 0, fmt.Errorf("prune logs: %w", err)
	}
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			return 0, fmt.Errorf("prune logs: %w", err)
		}
		// Remove the now empty parents up to the store's root.
		for p := filepath.Dir(dir); p != s.dir && len(p) > len(s.dir); p = filepath.Dir(p) {
			if os.Remove(p) != nil {
				break // not empty (another attempt or a longer build ID below)
			}
		}
	}
	return len(stale), nil
}

// newestModTime is the latest modification time of dir and the files in it.
func newestModTime(dir string) (time.Time, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return time.Time{}, err
	}
	newest := info.ModTime()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return time.Time{}, err
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
	}
	return newest, nil
}

// KeepPruned prunes logs older than retention now and then every interval
// until ctx ends; report hears of each pass that removed something or
// failed. A zero retention keeps logs forever (nothing runs).
func (s *Store) KeepPruned(ctx context.Context, retention, interval time.Duration, report func(removed int, err error)) {
	if retention <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.Prune(time.Now().Add(-retention)) //nolint:contextcheck // Prune bounds its blob store calls itself
		if n > 0 || err != nil {
			report(n, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
