package scm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestResolveBranchAsksTheRemoteFirst(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir).(*gitRepo)
	ctx := context.Background()
	resolve := resolver(t, r)
	require.Equal(t, int64(1), r.fetches.Load(), "the clone")

	resolve("main", h.c4, 1, "a tip the mirror holds: no fetch")
	resolve("refs/heads/feature", h.c3, 1, "a full branch ref alike")
	require.Equal(t, int64(2), r.tipAsks.Load(), "one ls-remote each")

	c5 := h.commit("later", map[string]string{"later.txt": "later\n"})
	resolve("main", c5, 2, "a branch that moved past the mirror fetches")
	resolve("main", c5, 2, "then its tip is held")

	h.git("update-ref", "refs/heads/main", h.c4)
	resolve("main", h.c4, 2, "a branch forced back to a commit the mirror holds: the remote's tip, no fetch")

	h.git("branch", "-D", "feature")
	_, err := r.Resolve(ctx, "feature")
	require.ErrorIs(t, err, ErrNotFound, "a branch the remote deleted is gone, though the mirror still had it")
	require.Equal(t, int64(3), r.fetches.Load())

	resolve("v1", h.c1, 4, "no branch of that name: a tag, after a fetch")
	asked := r.tipAsks.Load()
	resolve(h.c2[:10], h.c2, 4, "a sha the mirror holds asks nobody")
	require.Equal(t, asked, r.tipAsks.Load())
	_, held := branchTips.Load(r.mirror + "\x00main")
	require.False(t, held, "nobody asks about main now: its entry is gone")
}

func TestResolveBranchSharesAsksOfTheRemote(t *testing.T) {
	h := newHistory(t)
	marks := t.TempDir()
	started, release := filepath.Join(marks, "started"), filepath.Join(marks, "release")
	// An ls-remote says it started, then waits for the test.
	wrapGit(t, fmt.Sprintf(`case "$*" in *ls-remote*) touch %q; while [ ! -e %q ]; do sleep 0.01; done;; esac`, started, release))
	r := openRepo(t, "file://"+h.dir).(*gitRepo)
	ctx := context.Background()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []string
	var errs []error
	resolve := func() {
		wg.Go(func() {
			sha, err := r.Resolve(ctx, "main")
			mu.Lock()
			defer mu.Unlock()
			got, errs = append(got, sha), append(errs, err)
		})
	}
	resolve()
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 10*time.Second, 5*time.Millisecond)
	for range 6 {
		resolve() // asked while the first ask is under way
	}
	time.Sleep(100 * time.Millisecond) // they wait on the first ask
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		require.Equal(t, h.c4, got[i])
	}
	require.Len(t, got, 7)
	require.Equal(t, int64(2), r.tipAsks.Load(),
		"the callers that came during an ask share the next one (the first may predate a push they were told of)")
	require.Equal(t, int64(1), r.fetches.Load(), "and nothing was fetched")
}

// TestLocalBranchTipIsWhatLsRemoteSays: a branch of a repository on this
// machine is read from its files as ls-remote advertises it — loose,
// packed, in a bare repository, absent — and left to git where files
// cannot say (a URL, a linked work tree, a symbolic ref).
func TestLocalBranchTipIsWhatLsRemoteSays(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	lsRemote := func(dir, name string) string {
		out := gitIn(t, h.dir, "ls-remote", dir, name)
		id, _, _ := strings.Cut(out, "\t")
		return id
	}
	same := func(dir, name, why string) {
		t.Helper()
		got, ok := localBranchTip(dir, name)
		require.True(t, ok, why)
		require.Equal(t, lsRemote(dir, name), got, why)
	}
	same(h.dir, "refs/heads/main", "a loose branch of a work tree")
	same(h.dir, "refs/heads/feature", "another")
	same(h.dir, "refs/heads/absent", "no such branch: none")
	h.git("pack-refs", "--all")
	same(h.dir, "refs/heads/main", "packed")
	c5 := h.commit("after packing", map[string]string{"p.txt": "p\n"})
	same(h.dir, "refs/heads/main", "loose again over the packed one")
	require.Equal(t, c5, lsRemote(h.dir, "refs/heads/main"))
	same(h.dir, "refs/heads/main/sub", "under a loose ref's name")

	bare := filepath.Join(t.TempDir(), "bare.git")
	gitIn(t, h.dir, "clone", "--quiet", "--bare", h.dir, bare)
	same(bare, "refs/heads/main", "a bare repository (packed by clone)")

	for _, tc := range []struct{ why, dir, name string }{
		{"a URL", "file://" + h.dir, "refs/heads/main"},
		{"a relative path", "src", "refs/heads/main"},
		{"a name that climbs", h.dir, "refs/heads/../../config"},
	} {
		_, ok := localBranchTip(tc.dir, tc.name)
		require.False(t, ok, tc.why)
	}
	wt := filepath.Join(t.TempDir(), "linked")
	h.git("worktree", "add", "--quiet", "--detach", wt)
	_, ok := localBranchTip(wt, "refs/heads/main")
	require.False(t, ok, "a linked work tree: its .git is a file")
	h.git("symbolic-ref", "refs/heads/alias", "refs/heads/main")
	_, ok = localBranchTip(h.dir, "refs/heads/alias")
	require.False(t, ok, "a symbolic ref")
}

// TestResolveBranchOfALocalRepository: Resolve of a repository given by
// its path answers a branch from its files, fetching only when the
// mirror lacks the tip, as with a URL.
func TestResolveBranchOfALocalRepository(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, h.dir).(*gitRepo)
	resolve := resolver(t, r)
	resolve("main", h.c4, 1, "a tip the mirror holds: no fetch")
	c5 := h.commit("later", map[string]string{"later.txt": "later\n"})
	resolve("main", c5, 2, "a branch that moved past the mirror fetches")
	h.git("pack-refs", "--all")
	resolve("main", c5, 2, "packed, held")
	h.git("branch", "-D", "feature")
	_, err := r.Resolve(context.Background(), "feature")
	require.ErrorIs(t, err, ErrNotFound, "a deleted branch is gone")
}

// resolver checks r.Resolve(ref): want, after fetches fetches in all.
func resolver(t *testing.T, r *gitRepo) func(ref, want string, fetches int64, why string) {
	return func(ref, want string, fetches int64, why string) {
		t.Helper()
		got, err := r.Resolve(context.Background(), ref)
		require.NoError(t, err, why)
		require.Equal(t, want, got, why)
		require.Equal(t, fetches, r.fetches.Load(), why)
	}
}

// TestOnBranch: a commit is on a branch when the branch's tip reaches it —
// the tip itself (answered without git), an ancestor — and not when only
// another branch reaches it.
func TestOnBranch(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, h.dir).(*gitRepo)
	ctx := context.Background()
	for _, tc := range []struct {
		why, sha, branch string
		want             bool
	}{
		{"the tip", h.c4, "main", true},
		{"the tip, upper case", strings.ToUpper(h.c4), "main", true},
		{"an ancestor", h.c2, "main", true},
		{"merged from feature", h.c3, "main", true},
		{"feature's own tip", h.c3, "feature", true},
		{"main's commit is not on feature", h.c2, "feature", false},
	} {
		got, err := r.OnBranch(ctx, tc.sha, tc.branch)
		require.NoError(t, err, tc.why)
		require.Equal(t, tc.want, got, tc.why)
	}
}
