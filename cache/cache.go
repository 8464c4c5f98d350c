// Package cache restores and saves a build's caches (Screwdriver's
// `cache:` with its pipeline, event and job scopes) in the blob store.
//
// # Keys
//
// Each cached path is one gzip-compressed tar under
//
//	caches/<pipeline>/pipeline/<h>.tgz          (pipeline scope)
//	caches/<pipeline>/event/<event number>/<h>.tgz
//	caches/<pipeline>/job/<job>/<h>.tgz         (job scope: pipeline + job)
//
// where <h> is a hash of the path as written in the spec, and <pipeline> and
// <job> are path-escaped. A restore that hits also rewrites a small
// "<h>.used" marker next to the archive: its time is the cache's last use.
//
// # Rules
//
// Caches are restored before the first step and saved after a successful
// build only. Builds of pull requests restore every scope but save only the
// event scope (their own event's): a pull request, from a fork above all,
// must not poison what the pipeline's other builds restore. A path is
// relative to the workspace (the checkout; bind-mounted in containers) and
// may not leave it; "~" and absolute paths are skipped with a message.
// Nothing here fails a build: a miss, a path that does not exist, a store
// outage, an archive over the budget are lines in the build's log.
//
// # Size and eviction
//
// Max (SLUICE_CACHE_MAX) is the budget of one pipeline's caches, all scopes
// together, compressed. An archive larger than the budget is not saved.
// After each save, the pipeline's caches are evicted least recently used
// first (last use: the newer of the archive's and its marker's time) until
// they fit, never the archive just saved.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/pipeline"
)

// Prefix is the blob store prefix of every cache.
const Prefix = "caches/"

// Scope is one of Screwdriver's cache scopes.
type Scope string

// The scopes, in the order a build restores and saves them.
const (
	ScopePipeline Scope = "pipeline"
	ScopeEvent    Scope = "event"
	ScopeJob      Scope = "job"
)

// Build is what keys a build's caches.
type Build struct {
	// Pipeline is the pipeline's name.
	Pipeline string
	// Event is the event's number within the pipeline.
	Event string
	// Job is the job's name (matrix permutations share it).
	Job string
	// PR is true for a pull request's build: it saves only event caches.
	PR bool
}

// Entry is one cached path of one scope.
type Entry struct {
	Scope Scope
	Path  string
}

// Entries lists a job's cached paths, pipeline scope first.
func Entries(c *pipeline.JobCache) []Entry {
	if c == nil {
		return nil
	}
	var out []Entry
	for _, p := range c.Pipeline {
		out = append(out, Entry{ScopePipeline, p})
	}
	for _, p := range c.Event {
		out = append(out, Entry{ScopeEvent, p})
	}
	for _, p := range c.Job {
		out = append(out, Entry{ScopeJob, p})
	}
	return out
}

// Store keeps caches in a blob store.
type Store struct {
	blobs *blobstore.Store
	max   int64
}

// New returns a cache store in b with a per-pipeline budget of maxBytes.
func New(b *blobstore.Store, maxBytes int64) *Store {
	return &Store{blobs: b, max: maxBytes}
}

// pipelineDir is the prefix of one pipeline's caches.
func pipelineDir(p string) string { return Prefix + url.PathEscape(p) + "/" }

// Key is the blob key of one cached path's archive.
func Key(b Build, e Entry) string {
	sum := sha256.Sum256([]byte(e.Path))
	h := hex.EncodeToString(sum[:8])
	dir := pipelineDir(b.Pipeline)
	switch e.Scope {
	case ScopeEvent:
		dir += "event/" + url.PathEscape(b.Event) + "/"
	case ScopeJob:
		dir += "job/" + url.PathEscape(b.Job) + "/"
	default:
		dir += "pipeline/"
	}
	return dir + h + ".tgz"
}

func markerKey(archive string) string { return strings.TrimSuffix(archive, ".tgz") + ".used" }

// checkPath turns a spec path into a clean workspace-relative one, or says
// why it is skipped.
func checkPath(p string) (string, error) {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		return "", errors.New("~ paths are not supported: cache a path inside the workspace (for example set MAVEN_OPTS=-Dmaven.repo.local=.m2 and cache .m2)")
	case filepath.IsAbs(p):
		return "", errors.New("absolute paths are not supported: cache a path inside the workspace")
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("the path leaves the workspace")
	}
	return c, nil
}

// say writes one line of the cache step's log.
func say(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format+"\n", args...)
}

// Restore restores every entry into the workspace, writing one line per
// entry to log: "cache hit: …", "cache miss: …" or "cache unavailable: …".
// It never fails.
func (s *Store) Restore(ctx context.Context, b Build, entries []Entry, workspace string, log io.Writer) {
	for _, e := range entries {
		what := fmt.Sprintf("%s cache %s", e.Scope, e.Path)
		rel, err := checkPath(e.Path)
		if err != nil {
			say(log, "cache skipped: %s: %v", what, err)
			continue
		}
		if s == nil {
			say(log, "cache unavailable: %s: this executor has no blob store", what)
			continue
		}
		key := Key(b, e)
		r, info, err := s.blobs.Get(ctx, key)
		if errors.Is(err, blobstore.ErrNotFound) {
			say(log, "cache miss: %s", what)
			continue
		}
		if err != nil {
			say(log, "cache unavailable: %s: %v", what, err)
			continue
		}
		err = Unpack(r, workspace)
		_ = r.Close()
		if err != nil {
			say(log, "cache unavailable: %s: restore failed: %v", what, err)
			continue
		}
		// The marker records the use, for eviction; losing it only makes
		// the cache look older.
		_, _ = s.blobs.Put(ctx, markerKey(key), strings.NewReader(""))
		say(log, "cache hit: %s (%s) restored into %s", what, human(info.Size), rel)
	}
}

// Save archives every entry of the workspace the build may write (see the
// package comment), then evicts the pipeline's least recently used caches
// over the budget. It writes one line per entry to log and never fails.
func (s *Store) Save(ctx context.Context, b Build, entries []Entry, workspace string, log io.Writer) {
	saved := map[string]bool{}
	for _, e := range entries {
		what := fmt.Sprintf("%s cache %s", e.Scope, e.Path)
		rel, err := checkPath(e.Path)
		if err != nil {
			say(log, "cache skipped: %s: %v", what, err)
			continue
		}
		if b.PR && e.Scope != ScopeEvent {
			say(log, "cache not saved: %s: pull request builds only read %s caches", what, e.Scope)
			continue
		}
		if s == nil {
			say(log, "cache unavailable: %s: this executor has no blob store", what)
			continue
		}
		if s.max <= 0 {
			say(log, "cache not saved: %s: caches are off (SLUICE_CACHE_MAX=0)", what)
			continue
		}
		if _, err := os.Lstat(filepath.Join(workspace, filepath.FromSlash(rel))); err != nil {
			say(log, "cache not saved: %s: %s does not exist in the workspace", what, rel)
			continue
		}
		key := Key(b, e)
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(Pack(workspace, rel, pw)) }()
		n, err := s.blobs.PutMax(ctx, key, pr, s.max)
		_ = pr.CloseWithError(errors.New("upload ended"))
		switch {
		case errors.Is(err, blobstore.ErrTooLarge):
			say(log, "cache not saved: %s: its archive is larger than the pipeline's cache budget SLUICE_CACHE_MAX (%s)", what, human(s.max))
			continue
		case err != nil:
			say(log, "cache unavailable: %s: %v", what, err)
			continue
		}
		_ = s.blobs.Delete(ctx, markerKey(key))
		saved[key] = true
		say(log, "cache saved: %s (%s)", what, human(n))
	}
	if len(saved) == 0 {
		return
	}
	evicted, err := s.Evict(ctx, b.Pipeline, saved)
	if err != nil {
		say(log, "cache unavailable: eviction: %v", err)
	}
	for _, k := range evicted {
		say(log, "cache evicted: %s (least recently used, over SLUICE_CACHE_MAX %s)", strings.TrimPrefix(k, pipelineDir(b.Pipeline)), human(s.max))
	}
}

// cached is one archive with its last use.
type cached struct {
	key  string
	size int64
	used time.Time
}

// Evict deletes a pipeline's least recently used archives until the rest
// fit in the budget, keeping those in keep, and returns the keys deleted.
func (s *Store) Evict(ctx context.Context, pipelineName string, keep map[string]bool) ([]string, error) {
	infos, err := s.blobs.List(ctx, pipelineDir(pipelineName))
	if err != nil {
		return nil, err
	}
	archives := map[string]*cached{}
	markers := map[string]time.Time{}
	for _, i := range infos {
		switch {
		case strings.HasSuffix(i.Key, ".tgz"):
			archives[i.Key] = &cached{key: i.Key, size: i.Size, used: i.ModTime}
		case strings.HasSuffix(i.Key, ".used"):
			markers[i.Key] = i.ModTime
		}
	}
	var total int64
	list := make([]*cached, 0, len(archives))
	for k, c := range archives {
		if m, ok := markers[markerKey(k)]; ok && m.After(c.used) {
			c.used = m
		}
		total += c.size
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].used.Equal(list[j].used) {
			return list[i].used.Before(list[j].used)
		}
		return list[i].key < list[j].key
	})
	var evicted []string
	for _, c := range list {
		if total <= s.max {
			break
		}
		if keep[c.key] {
			continue
		}
		if err := s.blobs.Delete(ctx, c.key); err != nil {
			return evicted, err
		}
		_ = s.blobs.Delete(ctx, markerKey(c.key))
		total -= c.size
		evicted = append(evicted, c.key)
	}
	return evicted, nil
}

// DeletePipeline deletes every cache of a pipeline.
func (s *Store) DeletePipeline(ctx context.Context, pipelineName string) error {
	_, err := s.blobs.DeletePrefix(ctx, pipelineDir(pipelineName))
	return err
}

// human formats a size for the log.
func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
