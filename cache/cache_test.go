package cache_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/cache"
	"github.com/sluice-ci/sluice/internal/fakes3"
	"github.com/sluice-ci/sluice/pipeline"
)

func write(t *testing.T, dir, rel, text string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(text), 0o640))
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

func TestPackUnpackRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, src, "deps/a/one.txt", "one")
	write(t, src, "deps/two.bin", "two")
	require.NoError(t, os.Chmod(filepath.Join(src, "deps/two.bin"), 0o751))
	require.NoError(t, os.Symlink("a/one.txt", filepath.Join(src, "deps/link")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "deps/abs-link")))
	write(t, src, "other.txt", "not cached")
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, os.Chtimes(filepath.Join(src, "deps/a/one.txt"), old, old))

	var buf bytes.Buffer
	require.NoError(t, cache.Pack(src, "deps", &buf))
	write(t, dst, "deps/two.bin", "stale contents that are longer")
	require.NoError(t, cache.Unpack(&buf, dst))

	require.Equal(t, "one", readFile(t, dst, "deps/a/one.txt"))
	require.Equal(t, "two", readFile(t, dst, "deps/two.bin"), "a restore replaces what is there")
	fi, err := os.Stat(filepath.Join(dst, "deps/two.bin"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o751), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dst, "deps/a/one.txt"))
	require.NoError(t, err)
	require.True(t, fi.ModTime().Equal(old), "modification times are kept: %s", fi.ModTime())
	link, err := os.Readlink(filepath.Join(dst, "deps/link"))
	require.NoError(t, err)
	require.Equal(t, "a/one.txt", link)
	link, err = os.Readlink(filepath.Join(dst, "deps/abs-link"))
	require.NoError(t, err)
	require.Equal(t, "/etc/passwd", link, "links are stored as links, never followed")
	_, err = os.Stat(filepath.Join(dst, "other.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A single file works too.
	buf.Reset()
	require.NoError(t, cache.Pack(src, "other.txt", &buf))
	require.NoError(t, cache.Unpack(&buf, dst))
	require.Equal(t, "not cached", readFile(t, dst, "other.txt"))
}

// A build that makes a cached path a link out of the workspace cannot make
// the executor archive files outside it.
func TestPackDoesNotLeaveTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, "secret/key", "executor secret")
	ws := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "deps")))
	var buf bytes.Buffer
	require.Error(t, cache.Pack(ws, "deps/secret", &buf))
	require.NotContains(t, buf.String(), "executor secret")
}

func tarGz(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len("payload"))
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte("payload"))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestUnpackRefusesEntriesOutsideTheWorkspace(t *testing.T) {
	for name, entries := range map[string][]*tar.Header{
		"dot-dot":  {{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute": {{Name: "/tmp/escaped", Typeflag: tar.TypeReg, Mode: 0o644}},
		"through a link": {
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "OUTSIDE"},
			{Name: "l/escaped", Typeflag: tar.TypeReg, Mode: 0o644},
		},
	} {
		t.Run(name, func(t *testing.T) {
			outside, ws := t.TempDir(), t.TempDir()
			for _, h := range entries {
				h.Linkname = strings.ReplaceAll(h.Linkname, "OUTSIDE", outside)
				if h.Name == "/tmp/escaped" {
					h.Name = filepath.Join(outside, "escaped")
				}
			}
			err := cache.Unpack(bytes.NewReader(tarGz(t, entries...)), ws)
			require.Error(t, err)
			_, err = os.Stat(filepath.Join(outside, "escaped"))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing is written outside the workspace")
			_, err = os.Stat(filepath.Join(filepath.Dir(ws), "escaped"))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing is written outside the workspace")
		})
	}
}

func buckets(t *testing.T) map[string]*blobstore.Store {
	t.Helper()
	ctx := context.Background()
	u, err := blobstore.DefaultURL(t.TempDir())
	require.NoError(t, err)
	fb, err := blobstore.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fb.Close() })
	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "caches")
	sb, err := blobstore.Open(ctx, srv.BucketURL("caches"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	return map[string]*blobstore.Store{"file": fb, "s3": sb}
}

var spec = &pipeline.JobCache{Pipeline: []string{"node_modules"}, Event: []string{"dist"}, Job: []string{".m2"}}

func TestRestoreMissSaveThenHit(t *testing.T) {
	for name, b := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := cache.New(b, 1<<20)
			build := cache.Build{Pipeline: "app", Event: "1", Job: "test"}
			entries := cache.Entries(spec)

			ws := t.TempDir()
			var log strings.Builder
			s.Restore(ctx, build, entries, ws, &log)
			require.Equal(t, "cache miss: pipeline cache node_modules\ncache miss: event cache dist\ncache miss: job cache .m2\n", log.String())

			write(t, ws, "node_modules/x/index.js", "module")
			write(t, ws, "dist/app", "binary")
			write(t, ws, ".m2/repo/a.jar", "jar")
			log.Reset()
			s.Save(ctx, build, entries, ws, &log)
			require.Equal(t, 3, strings.Count(log.String(), "cache saved: "), log.String())

			// The next event of the pipeline gets the pipeline and job
			// caches, not the first event's.
			ws2 := t.TempDir()
			log.Reset()
			s.Restore(ctx, cache.Build{Pipeline: "app", Event: "2", Job: "test"}, entries, ws2, &log)
			require.Contains(t, log.String(), "cache hit: pipeline cache node_modules")
			require.Contains(t, log.String(), "cache miss: event cache dist")
			require.Contains(t, log.String(), "cache hit: job cache .m2")
			require.Equal(t, "module", readFile(t, ws2, "node_modules/x/index.js"))
			require.Equal(t, "jar", readFile(t, ws2, ".m2/repo/a.jar"))

			// Another job of the pipeline gets the pipeline cache only;
			// another pipeline gets nothing.
			log.Reset()
			s.Restore(ctx, cache.Build{Pipeline: "app", Event: "2", Job: "deploy"}, entries, t.TempDir(), &log)
			require.Contains(t, log.String(), "cache hit: pipeline cache node_modules")
			require.Contains(t, log.String(), "cache miss: job cache .m2")
			log.Reset()
			other := t.TempDir()
			s.Restore(ctx, cache.Build{Pipeline: "other", Event: "1", Job: "test"}, entries, other, &log)
			require.Equal(t, 3, strings.Count(log.String(), "cache miss: "), log.String())
			_, err := os.Stat(filepath.Join(other, "node_modules"))
			require.ErrorIs(t, err, os.ErrNotExist)

			// The same event gets the event cache.
			log.Reset()
			ws3 := t.TempDir()
			s.Restore(ctx, cache.Build{Pipeline: "app", Event: "1", Job: "deploy"}, entries, ws3, &log)
			require.Contains(t, log.String(), "cache hit: event cache dist")
			require.Equal(t, "binary", readFile(t, ws3, "dist/app"))
		})
	}
}

// A pull request's build reads every scope but writes only its event's
// caches: it cannot poison what the pipeline's other builds restore.
func TestPullRequestBuildsDoNotWritePipelineOrJobCaches(t *testing.T) {
	ctx := context.Background()
	b := buckets(t)["file"]
	s := cache.New(b, 1<<20)
	entries := cache.Entries(spec)
	main := cache.Build{Pipeline: "app", Event: "1", Job: "test"}
	ws := t.TempDir()
	write(t, ws, "node_modules/x", "good")
	write(t, ws, ".m2/x", "good")
	var log strings.Builder
	s.Save(ctx, main, entries, ws, &log)

	pr := cache.Build{Pipeline: "app", Event: "2", Job: "test", PR: true}
	prws := t.TempDir()
	log.Reset()
	s.Restore(ctx, pr, entries, prws, &log)
	require.Contains(t, log.String(), "cache hit: pipeline cache node_modules")
	write(t, prws, "node_modules/x", "poison")
	write(t, prws, ".m2/x", "poison")
	write(t, prws, "dist/app", "pr binary")
	log.Reset()
	s.Save(ctx, pr, entries, prws, &log)
	require.Contains(t, log.String(), "cache not saved: pipeline cache node_modules: pull request builds only read pipeline caches")
	require.Contains(t, log.String(), "cache not saved: job cache .m2: pull request builds only read job caches")
	require.Contains(t, log.String(), "cache saved: event cache dist")

	after := t.TempDir()
	log.Reset()
	s.Restore(ctx, cache.Build{Pipeline: "app", Event: "3", Job: "test"}, entries, after, &log)
	require.Equal(t, "good", readFile(t, after, "node_modules/x"))
	require.Equal(t, "good", readFile(t, after, ".m2/x"))
}

func TestPathsOutsideTheWorkspaceAreSkipped(t *testing.T) {
	ctx := context.Background()
	s := cache.New(buckets(t)["file"], 1<<20)
	entries := []cache.Entry{
		{Scope: cache.ScopeJob, Path: "~/.m2"},
		{Scope: cache.ScopeJob, Path: "/var/cache"},
		{Scope: cache.ScopeJob, Path: "../sibling"},
		{Scope: cache.ScopeJob, Path: "missing"},
	}
	var log strings.Builder
	ws := t.TempDir()
	s.Restore(ctx, cache.Build{Pipeline: "app", Event: "1", Job: "j"}, entries, ws, &log)
	s.Save(ctx, cache.Build{Pipeline: "app", Event: "1", Job: "j"}, entries, ws, &log)
	out := log.String()
	require.Contains(t, out, "cache skipped: job cache ~/.m2: ~ paths are not supported")
	require.Contains(t, out, "cache skipped: job cache /var/cache: absolute paths are not supported")
	require.Contains(t, out, "cache skipped: job cache ../sibling: the path leaves the workspace")
	require.Contains(t, out, "cache miss: job cache missing")
	require.Contains(t, out, "cache not saved: job cache missing: missing does not exist in the workspace")
}

// Eviction: over the budget, the least recently used caches go (a restore
// counts as a use), never the one just saved; an archive over the whole
// budget is not saved at all.
func TestBudgetAndLeastRecentlyUsedEviction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	u, err := blobstore.DefaultURL(dir)
	require.NoError(t, err)
	b, err := blobstore.Open(ctx, u)
	require.NoError(t, err)
	defer func() { _ = b.Close() }()

	ws := t.TempDir()
	// Incompressible contents of a known size.
	noise := func(n int) string {
		var sb strings.Builder
		x := uint32(2463534242)
		for range n {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			sb.WriteByte(byte(x))
		}
		return sb.String()
	}
	write(t, ws, "a/f", noise(3000))
	write(t, ws, "b/f", noise(3000))
	write(t, ws, "c/f", noise(3000))
	write(t, ws, "huge/f", noise(20000))
	s := cache.New(b, 8000)
	build := cache.Build{Pipeline: "app", Event: "1", Job: "j"}
	entry := func(p string) []cache.Entry { return []cache.Entry{{Scope: cache.ScopeJob, Path: p}} }
	age := func(p string, at time.Time) {
		k := filepath.Join(dir, "blobs", filepath.FromSlash(cache.Key(build, entry(p)[0])))
		require.NoError(t, os.Chtimes(k, at, at))
	}
	var log strings.Builder
	s.Save(ctx, build, entry("huge"), ws, &log)
	require.Contains(t, log.String(), "cache not saved: job cache huge: its archive is larger than the pipeline's cache budget")

	base := time.Now().Add(-time.Hour)
	s.Save(ctx, build, entry("a"), ws, &log)
	age("a", base)
	s.Save(ctx, build, entry("b"), ws, &log)
	age("b", base.Add(time.Minute))
	// Restoring a makes it the most recently used.
	s.Restore(ctx, build, entry("a"), t.TempDir(), &log)
	log.Reset()
	s.Save(ctx, build, entry("c"), ws, &log)
	require.Contains(t, log.String(), "cache evicted: job/j/")
	list, err := b.List(ctx, cache.Prefix)
	require.NoError(t, err)
	var keys []string
	for _, i := range list {
		if strings.HasSuffix(i.Key, ".tgz") {
			keys = append(keys, i.Key)
		}
	}
	require.ElementsMatch(t, []string{cache.Key(build, entry("a")[0]), cache.Key(build, entry("c")[0])}, keys, "b, the least recently used, went")
}

func TestStoreOutageNeverFailsAndSaysSo(t *testing.T) {
	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "caches")
	b, err := blobstore.Open(context.Background(), srv.BucketURL("caches"))
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	s := cache.New(b, 1<<20)
	srv.SetDown(true)
	ws := t.TempDir()
	write(t, ws, ".m2/x", "x")
	var log strings.Builder
	entries := []cache.Entry{{Scope: cache.ScopeJob, Path: ".m2"}}
	build := cache.Build{Pipeline: "app", Event: "1", Job: "j"}
	s.Restore(context.Background(), build, entries, ws, &log)
	s.Save(context.Background(), build, entries, ws, &log)
	require.Equal(t, 2, strings.Count(log.String(), "cache unavailable: job cache .m2: "), log.String())

	// An executor without a blob store says so too.
	log.Reset()
	var none *cache.Store
	none.Restore(context.Background(), build, entries, ws, &log)
	require.Equal(t, "cache unavailable: job cache .m2: this executor has no blob store\n", log.String())
}
