package scm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func readIn(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	require.NoError(t, err)
	return string(b)
}

// Builds of one repository check out from the executor's one mirror at
// once, each into its own directory: each gets its own commit, none sees
// another's files, and the mirror is cloned once.
func TestCheckoutConcurrentBuildsShareTheMirror(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	cache := t.TempDir()
	ctx := context.Background()
	shas := []string{h.c1, h.c2, h.c3, h.c4}
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	errs := make([]error, 8)
	base := t.TempDir()
	for i := range dirs {
		dirs[i] = filepath.Join(base, "build-"+strconv.Itoa(i))
		wg.Go(func() {
			// Each build opens the repository as RunBuild does.
			r, err := Open(ctx, "file://"+h.dir, cache)
			if err == nil {
				err = r.Checkout(ctx, shas[i%len(shas)], dirs[i])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, dir := range dirs {
		require.NoError(t, errs[i])
		require.Equal(t, shas[i%len(shas)], gitIn(t, dir, "rev-parse", "HEAD"))
		require.Empty(t, gitIn(t, dir, "status", "--porcelain"))
	}
	// A build's own files stay its own.
	require.NoError(t, os.WriteFile(filepath.Join(dirs[0], "README.md"), []byte("changed by build 0\n"), 0o644))
	require.Equal(t, "# demo\n", readIn(t, dirs[4], "README.md"))
	mirrors, err := filepath.Glob(filepath.Join(cache, "git", "*.git"))
	require.NoError(t, err)
	require.Len(t, mirrors, 1)
}

// A force-pushed branch: the new tip is fetched into the mirror for the
// build that asks for it, and a build of the old tip (still queued when the
// push came) still checks out what it was created for.
func TestCheckoutForcePushedBranch(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	ctx := context.Background()
	old := t.TempDir()
	require.NoError(t, r.Checkout(ctx, h.c4, old))

	h.git("reset", "--quiet", "--hard", h.c2)
	rewritten := h.commit("rewritten", map[string]string{"README.md": "# rewritten\n"})
	h.git("gc", "--quiet", "--prune=now")

	dir := t.TempDir()
	require.NoError(t, r.Checkout(ctx, rewritten, dir))
	require.Equal(t, rewritten, gitIn(t, dir, "rev-parse", "HEAD"))
	require.Equal(t, "# rewritten\n", readIn(t, dir, "README.md"))

	again := t.TempDir()
	require.NoError(t, r.Checkout(ctx, h.c4, again))
	require.Equal(t, h.c4, gitIn(t, again, "rev-parse", "HEAD"))
	require.Equal(t, "guide\n", readIn(t, again, "docs/guide.md"))
}

// A mirror deleted under a running executor (a cleanup of its cache) is
// cloned again by the next checkout.
func TestCheckoutDeletedMirrorRecovers(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	ctx := context.Background()
	require.NoError(t, r.Checkout(ctx, h.c1, t.TempDir()))
	g := r.(*gitRepo)
	require.NoError(t, os.RemoveAll(g.mirror))

	dir := t.TempDir()
	require.NoError(t, r.Checkout(ctx, h.c4, dir))
	require.Equal(t, h.c4, gitIn(t, dir, "rev-parse", "HEAD"))
	require.DirExists(t, g.mirror)
}

// A mirror damaged on disk (its objects gone, a disk error) is set aside and
// cloned afresh rather than failing every build of the repository.
func TestCheckoutCorruptedMirrorFallsBackToAFreshClone(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	ctx := context.Background()
	require.NoError(t, r.Checkout(ctx, h.c4, t.TempDir()))
	g := r.(*gitRepo)
	// Every object file truncated: refs still name the commits.
	require.NoError(t, filepath.WalkDir(filepath.Join(g.mirror, "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		require.NoError(t, os.Chmod(p, 0o644))
		return os.Truncate(p, 1)
	}))
	_, err := runGit(ctx, g.mirror, nil, "cat-file", "-p", h.c4)
	require.Error(t, err, "the mirror is damaged")

	dir := t.TempDir()
	require.NoError(t, r.Checkout(ctx, h.c4, dir))
	require.Equal(t, h.c4, gitIn(t, dir, "rev-parse", "HEAD"))
	require.Equal(t, "guide\n", readIn(t, dir, "docs/guide.md"))
	_, err = runGit(ctx, g.mirror, nil, "cat-file", "-p", h.c4)
	require.NoError(t, err, "the mirror was cloned afresh")
	require.NoDirExists(t, filepath.Join(filepath.Dir(g.mirror), filepath.Base(g.mirror[:len(g.mirror)-len(".git")])+".damaged"))
}

// A commit the repository does not have fails the checkout without cloning
// the mirror again.
func TestCheckoutUnknownCommitKeepsTheMirror(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	ctx := context.Background()
	g := r.(*gitRepo)
	marker := filepath.Join(g.mirror, "left-by-test")
	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	err := r.Checkout(ctx, "0123456789abcdef0123456789abcdef01234567", filepath.Join(t.TempDir(), "co"))
	require.ErrorIs(t, err, ErrNotFound)
	require.FileExists(t, marker)
}

// A copying checkout (pull requests from forks) shares no file with the
// mirror: a build that writes to its objects cannot change the mirror's, which
// later builds of the repository check out from. A plain checkout hard-links
// them (read-only files of the executor).
func TestCheckoutCopySharesNoFileWithTheMirror(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	ctx := context.Background()
	g := r.(*gitRepo)

	linked := func(dir string) int {
		n := 0
		require.NoError(t, filepath.WalkDir(filepath.Join(dir, ".git", "objects"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fi, err := d.Info()
			require.NoError(t, err)
			if fi.Sys().(*syscall.Stat_t).Nlink > 1 {
				n++
			}
			return nil
		}))
		return n
	}
	plain := t.TempDir()
	require.NoError(t, r.Checkout(ctx, h.c4, plain))
	require.Positive(t, linked(plain), "a plain checkout hard-links the mirror's objects")

	copied := t.TempDir()
	require.NoError(t, g.CheckoutCopy(ctx, h.c4, copied))
	require.Equal(t, h.c4, gitIn(t, copied, "rev-parse", "HEAD"))
	require.Equal(t, "file://"+h.dir, gitIn(t, copied, "remote", "get-url", "origin"))
	require.Zero(t, linked(copied), "a copying checkout shares no object file with the mirror")
}

// A branch tip, or a packed tag's commit, is known to be in the mirror from
// the ref files alone (the checkout then skips asking git); for any other
// commit git is asked.
func TestMirrorRefTip(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	g := r.(*gitRepo)
	require.True(t, g.refTip(h.c4), "main's tip")
	require.True(t, g.refTip(h.c3), "feature's tip")
	require.False(t, g.refTip("0123456789abcdef0123456789abcdef01234567"))
	_, err := runGit(context.Background(), g.mirror, nil, "pack-refs", "--all")
	require.NoError(t, err)
	require.True(t, g.refTip(h.c4), "main's tip, packed")
	require.True(t, g.refTip(h.c2), "tag v2-light, packed")
	require.True(t, g.refTip(h.c1), "annotated tag v1's commit, packed (peeled)")
}
