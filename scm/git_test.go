package scm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGitResolve(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitIn(t, filepath.Dir(bare), "clone", "--quiet", "--bare", h.dir, bare)

	locations := []struct {
		name, location, kind string
	}{
		{name: "local work tree", location: h.dir, kind: KindGitLocal},
		{name: "file URL", location: "file://" + h.dir, kind: KindGitRemote},
		{name: "local bare repository", location: bare, kind: KindGitLocal},
	}
	refs := []struct {
		name, ref, want string
		wantErr         error
	}{
		{name: "default branch", ref: "", want: h.c4},
		{name: "HEAD", ref: "HEAD", want: h.c4},
		{name: "branch", ref: "main", want: h.c4},
		{name: "other branch", ref: "feature", want: h.c3},
		{name: "full branch ref", ref: "refs/heads/feature", want: h.c3},
		{name: "annotated tag peels to its commit", ref: "v1", want: h.c1},
		{name: "lightweight tag", ref: "v2-light", want: h.c2},
		{name: "full sha", ref: h.c2, want: h.c2},
		{name: "short sha", ref: h.c3[:8], want: h.c3},
		{name: "upper-case sha", ref: strings.ToUpper(h.c1), want: h.c1},
		{name: "unknown branch", ref: "nope", wantErr: ErrNotFound},
		{name: "unknown sha", ref: strings.Repeat("ab", 20), wantErr: ErrNotFound},
		{name: "option-like ref", ref: "--upload-pack=touch", wantErr: ErrInvalidArgument},
		{name: "range syntax", ref: "main..feature", wantErr: ErrInvalidArgument},
		{name: "reflog syntax", ref: "main@{1}", wantErr: ErrInvalidArgument},
		{name: "message search", ref: ":/docs", wantErr: ErrInvalidArgument},
	}
	for _, loc := range locations {
		t.Run(loc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, loc.kind, Kind(loc.location))
			r := openRepo(t, loc.location)
			for _, tc := range refs {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					got, err := r.Resolve(context.Background(), tc.ref)
					if tc.wantErr != nil {
						require.ErrorIs(t, err, tc.wantErr)
						require.ErrorContains(t, err, loc.location)
						return
					}
					require.NoError(t, err)
					require.Equal(t, tc.want, got)
				})
			}
		})
	}
}

func TestGitReadFile(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	require.NoError(t, os.Symlink("screwdriver.yaml", filepath.Join(h.dir, "sd-link.yaml")))
	require.NoError(t, os.Symlink("../../etc/passwd", filepath.Join(h.dir, "escape")))
	withLinks := h.commit("links", nil)
	r := openRepo(t, h.dir)

	tests := []struct {
		name, sha, path string
		want            string
		wantErr         error
		wantMsg         string
	}{
		{name: "first version", sha: h.c1, path: "screwdriver.yaml", want: "image: node:20"},
		{name: "second version", sha: h.c2, path: "screwdriver.yaml", want: "image: node:22"},
		{name: "nested file", sha: h.c3, path: "docs/guide.md", want: "guide\n"},
		{name: "dot-slash path", sha: h.c3, path: "./docs/guide.md", want: "guide\n"},
		{name: "short sha", sha: h.c2[:10], path: "src/app.go", want: "package app\n"},
		{name: "symlink followed", sha: withLinks, path: "sd-link.yaml", want: "image: node:22"},
		{name: "symlink out of the tree", sha: withLinks, path: "escape", wantErr: ErrNotFound},
		{name: "absent file", sha: h.c1, path: "src/app.go", wantErr: ErrNotFound, wantMsg: "src/app.go"},
		{name: "directory", sha: h.c2, path: "src", wantErr: ErrNotFound, wantMsg: "directory"},
		{name: "parent escape", sha: h.c2, path: "../x", wantErr: ErrInvalidArgument},
		{name: "absolute path", sha: h.c2, path: "/etc/passwd", wantErr: ErrInvalidArgument},
		{name: "empty path", sha: h.c2, path: "", wantErr: ErrInvalidArgument},
		{name: "ref instead of sha", sha: "main", path: "README.md", wantErr: ErrInvalidArgument},
		{name: "unknown commit", sha: strings.Repeat("0123", 10), path: "README.md", wantErr: ErrNotFound, wantMsg: strings.Repeat("0123", 10)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.ReadFile(context.Background(), tc.sha, tc.path)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorContains(t, err, h.dir)
				require.ErrorContains(t, err, tc.wantMsg)
				return
			}
			require.NoError(t, err)
			require.Contains(t, string(got), tc.want)
		})
	}
}

func TestGitCheckout(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)

	tests := []struct {
		name    string
		sha     string
		setup   func(t *testing.T) string // returns the checkout directory
		files   map[string]string
		absent  []string
		wantErr error
	}{
		{
			name:   "absent directory is created",
			sha:    h.c1,
			setup:  func(t *testing.T) string { return filepath.Join(t.TempDir(), "a", "b") },
			files:  map[string]string{"README.md": "# demo\n"},
			absent: []string{"src/app.go", "docs/guide.md"},
		},
		{
			name:  "empty directory",
			sha:   h.c4,
			setup: func(t *testing.T) string { return t.TempDir() },
			files: map[string]string{"src/app.go": "package app\n", "docs/guide.md": "guide\n"},
		},
		{
			name: "non-empty directory",
			sha:  h.c4,
			setup: func(t *testing.T) string {
				dir := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), nil, 0o644))
				return dir
			},
			wantErr: ErrDirNotEmpty,
		},
		{
			name:    "unknown sha",
			sha:     strings.Repeat("f", 40),
			setup:   func(t *testing.T) string { return filepath.Join(t.TempDir(), "co") },
			wantErr: ErrNotFound,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tc.setup(t)
			err := r.Checkout(context.Background(), tc.sha, dir)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.sha, gitIn(t, dir, "rev-parse", "HEAD"))
			require.Equal(t, "file://"+h.dir, gitIn(t, dir, "remote", "get-url", "origin"))
			require.Empty(t, gitIn(t, dir, "status", "--porcelain"))
			for p, want := range tc.files {
				got, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err)
				require.Equal(t, want, string(got))
			}
			for _, p := range tc.absent {
				require.NoFileExists(t, filepath.Join(dir, p))
			}
		})
	}
}

func TestGitChangedFiles(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	h.git("mv", "README.md", "README.rst")
	renamed := h.commit("rename", nil)
	empty := h.commit("nothing", nil)
	r := openRepo(t, h.dir)

	tests := []struct {
		name, from, to string
		want           []string
		wantErr        error
	}{
		{name: "root commit lists every file", to: h.c1, want: []string{"README.md", "screwdriver.yaml"}},
		{name: "own diff", to: h.c2, want: []string{"screwdriver.yaml", "src/app.go"}},
		{name: "merge against first parent", to: h.c4, want: []string{"docs/guide.md"}},
		{name: "range", from: h.c1, to: h.c4, want: []string{"docs/guide.md", "screwdriver.yaml", "src/app.go"}},
		{name: "range across branches", from: h.c3, to: h.c2, want: []string{"docs/guide.md", "screwdriver.yaml", "src/app.go"}},
		{name: "rename lists both paths", to: renamed, want: []string{"README.md", "README.rst"}},
		{name: "empty commit", to: empty, want: []string{}},
		{name: "same commit", from: h.c2, to: h.c2, want: []string{}},
		{name: "unknown from", from: strings.Repeat("1", 40), to: h.c2, wantErr: ErrNotFound},
		{name: "bad to", to: "HEAD~1", wantErr: ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.ChangedFiles(context.Background(), tc.from, tc.to)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMirrorIsReused(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	cache := t.TempDir()
	ctx := context.Background()

	first, err := Open(ctx, h.dir, cache)
	require.NoError(t, err)
	g1 := first.(*gitRepo)
	require.True(t, g1.cloned)
	require.True(t, strings.HasPrefix(g1.mirror, filepath.Join(cache, "git")+string(filepath.Separator)))
	require.True(t, strings.HasSuffix(g1.mirror, "-src.git"), g1.mirror)
	location, err := os.ReadFile(filepath.Join(g1.mirror, locationFile))
	require.NoError(t, err)
	require.Equal(t, h.dir+"\n", string(location))
	marker := filepath.Join(g1.mirror, "left-by-test")
	require.NoError(t, os.WriteFile(marker, nil, 0o644))

	second, err := Open(ctx, h.dir, cache)
	require.NoError(t, err)
	g2 := second.(*gitRepo)
	require.False(t, g2.cloned, "second Open must reuse the mirror")
	require.Equal(t, g1.mirror, g2.mirror)
	require.FileExists(t, marker)
	sha, err := second.Resolve(ctx, "feature")
	require.NoError(t, err)
	require.Equal(t, h.c3, sha)

	other, err := Open(ctx, "file://"+h.dir, cache)
	require.NoError(t, err)
	require.NotEqual(t, g1.mirror, other.(*gitRepo).mirror, "another location gets its own mirror")
}

func TestGitFetchesNewCommits(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	ctx := context.Background()

	got, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, h.c4, got)

	// A commit pushed after the mirror was made is found by Resolve.
	c5 := h.commit("later", map[string]string{"later.txt": "later\n"})
	got, err = r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, c5, got)
	got, err = r.Resolve(ctx, "")
	require.NoError(t, err)
	require.Equal(t, c5, got)

	// A sha the mirror has never seen is fetched by ReadFile.
	h.git("checkout", "--quiet", "-b", "topic")
	c6 := h.commit("topic", map[string]string{"topic.txt": "topic\n"})
	content, err := r.ReadFile(ctx, c6, "topic.txt")
	require.NoError(t, err)
	require.Equal(t, "topic\n", string(content))
	files, err := r.ChangedFiles(ctx, c5, c6)
	require.NoError(t, err)
	require.Equal(t, []string{"topic.txt"}, files)

	// A new tag and a deleted branch.
	h.git("tag", "v3", c5)
	h.git("checkout", "--quiet", "main")
	h.git("branch", "-D", "topic")
	got, err = r.Resolve(ctx, "v3")
	require.NoError(t, err)
	require.Equal(t, c5, got)
	_, err = r.Resolve(ctx, "topic")
	require.ErrorIs(t, err, ErrNotFound)

	// A detached HEAD on a commit no branch holds (local repositories).
	h.git("checkout", "--quiet", "--detach")
	c7 := h.commit("detached", map[string]string{"detached.txt": "x\n"})
	got, err = r.Resolve(ctx, "HEAD")
	require.NoError(t, err)
	require.Equal(t, c7, got)
}

func TestGitConcurrentResolve(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	cache := t.TempDir()
	ctx := context.Background()
	const workers = 8

	var wg sync.WaitGroup
	shas := make([]string, workers)
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			// Each worker opens on its own, as separate processes would.
			r, err := Open(ctx, h.dir, cache)
			if err != nil {
				errs[i] = err
				return
			}
			for _, ref := range []string{"main", "feature", "", "v1", "main"} {
				if shas[i], err = r.Resolve(ctx, ref); err != nil {
					errs[i] = err
					return
				}
			}
			_, errs[i] = r.ReadFile(ctx, shas[i], "screwdriver.yaml")
		})
	}
	wg.Wait()
	for i := range workers {
		require.NoError(t, errs[i])
		require.Equal(t, h.c4, shas[i])
	}
	gitIn(t, "", "--git-dir", openRepo(t, h.dir).(*gitRepo).mirror, "fsck", "--no-progress")
	entries, err := os.ReadDir(filepath.Join(cache, "git"))
	require.NoError(t, err)
	require.Len(t, entries, 2, "one mirror and its lock file")
}

func TestGitOpenErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name, location string
		cache          string
		wantErr        error
		wantMsg        []string
	}{
		{name: "missing file URL", location: "file://" + missing, wantMsg: []string{"file://" + missing, "fatal:"}},
		{name: "missing path", location: missing, wantErr: ErrNotFound, wantMsg: []string{missing}},
		{name: "empty location", location: "", wantErr: ErrInvalidArgument},
		{name: "option-like location", location: "--upload-pack=x", wantErr: ErrInvalidArgument},
		{name: "no cache directory", location: t.TempDir(), cache: "-", wantErr: ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := t.TempDir()
			if tc.cache == "-" {
				cache = ""
			}
			_, err := Open(context.Background(), tc.location, cache)
			require.Error(t, err)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
			for _, m := range tc.wantMsg {
				require.ErrorContains(t, err, m)
			}
		})
	}
}

func TestGitCancelledContext(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, h.dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Resolve(ctx, "main")
	require.ErrorIs(t, err, context.Canceled)
}

// TestGitWithoutIdentity runs every operation with no git identity and no
// global or system configuration. It changes the environment, so it is not
// parallel.
func TestGitWithoutIdentity(t *testing.T) {
	home := t.TempDir()
	strict := filepath.Join(home, "gitconfig")
	require.NoError(t, os.WriteFile(strict, []byte("[user]\n\tuseConfigOnly = true\n"), 0o644))
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_GLOBAL", strict)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{"EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"} {
		unsetenv(t, k)
	}
	h := newHistory(t) // the helper brings its own identity
	ctx := context.Background()
	r, err := Open(ctx, h.dir, t.TempDir())
	require.NoError(t, err)
	sha, err := r.Resolve(ctx, "")
	require.NoError(t, err)
	_, err = r.ReadFile(ctx, sha, "screwdriver.yaml")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "co")
	require.NoError(t, r.Checkout(ctx, sha, dir))
	require.Equal(t, sha, gitIn(t, dir, "rev-parse", "HEAD"))
	_, err = r.ChangedFiles(ctx, "", sha)
	require.NoError(t, err)
}

func TestMirrorName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, a, b string
		same       bool
		suffix     string
	}{
		{name: "token rotation keeps the mirror", a: "https://x:old@github.com/o/r.git", b: "https://x:new@github.com/o/r.git", same: true, suffix: "-o-r"},
		{name: "different repositories", a: "https://github.com/o/r", b: "https://github.com/o/s", suffix: "-o-r"},
		{name: "scp-like", a: "git@gitlab.com:group/sub/proj.git", b: "git@gitlab.com:group/sub/other.git", suffix: "-sub-proj"},
		{name: "local path", a: "/srv/repos/app", b: "/srv/repos/app2", suffix: "-repos-app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := mirrorName(tc.a), mirrorName(tc.b)
			require.Equal(t, tc.same, a == b, "%s vs %s", a, b)
			require.True(t, strings.HasSuffix(a, tc.suffix), a)
			require.Regexp(t, `^[0-9a-f]{16}-[A-Za-z0-9._-]+$`, a)
		})
	}
}

// A fetch into the mirror brings its objects as a pack, never loose: reads
// of the mirror take no lock, and loose objects appear one by one, a
// commit before its tree (an event then found its commit but not its
// screwdriver.yaml). A pack appears whole when its index is renamed in.
func TestMirrorFetchesArriveWhole(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, h.dir)
	ctx := context.Background()
	_, err := r.Resolve(ctx, "main")
	require.NoError(t, err)

	// Two small commits (a handful of objects, well under git's default
	// unpack limit of 100), fetched once by sha and once by the branch.
	c5 := h.commit("fifth", map[string]string{"five.txt": "5\n"})
	data, err := r.ReadFile(ctx, c5, "five.txt")
	require.NoError(t, err)
	require.Equal(t, "5\n", string(data))
	c6 := h.commit("sixth", map[string]string{"six.txt": "6\n"})
	got, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, c6, got)

	mirror := r.(*gitRepo).mirror
	count := gitIn(t, mirror, "count-objects", "-v")
	require.Contains(t, strings.Split(count, "\n"), "count: 0", "no loose objects in the mirror after its fetches:\n%s", count)
}
