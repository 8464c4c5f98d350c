package scm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadCommitFileReadsAsReadFileDoes runs ReadFile's cases through
// ReadCommitFile: the same content, or the same error.
func TestReadCommitFileReadsAsReadFileDoes(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	require.NoError(t, os.Symlink("screwdriver.yaml", filepath.Join(h.dir, "sd-link.yaml")))
	require.NoError(t, os.Symlink("../../etc/passwd", filepath.Join(h.dir, "escape")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(h.dir, "dangling")))
	h.write(map[string]string{"with space/a b.yaml": "spaced\n"})
	withLinks := h.commit("links", nil)
	h.write(map[string]string{"big.bin": strings.Repeat("x", MaxFileBytes+1)})
	withBig := h.commit("big", nil)
	r := openRepo(t, h.dir)
	cf, ok := r.(CommitFileReader)
	require.True(t, ok, "a git repository reads a commit and a file together")

	tests := []struct {
		name, sha, path string
		wantErr         error
	}{
		{name: "first version", sha: h.c1, path: "screwdriver.yaml"},
		{name: "second version", sha: h.c2, path: "screwdriver.yaml"},
		{name: "nested file", sha: h.c3, path: "docs/guide.md"},
		{name: "dot-slash path", sha: h.c3, path: "./docs/guide.md"},
		{name: "short sha", sha: h.c2[:10], path: "src/app.go"},
		{name: "upper-case sha", sha: strings.ToUpper(h.c2), path: "src/app.go"},
		{name: "merge commit", sha: h.c4, path: "docs/guide.md"},
		{name: "symlink followed", sha: withLinks, path: "sd-link.yaml"},
		{name: "spaces in the path", sha: withLinks, path: "with space/a b.yaml"},
		{name: "symlink out of the tree", sha: withLinks, path: "escape", wantErr: ErrNotFound},
		{name: "dangling symlink", sha: withLinks, path: "dangling", wantErr: ErrNotFound},
		{name: "too large", sha: withBig, path: "big.bin", wantErr: ErrTooLarge},
		{name: "absent file", sha: h.c1, path: "src/app.go", wantErr: ErrNotFound},
		{name: "directory", sha: h.c2, path: "src", wantErr: ErrNotFound},
		{name: "parent escape", sha: h.c2, path: "../x", wantErr: ErrInvalidArgument},
		{name: "empty path", sha: h.c2, path: "", wantErr: ErrInvalidArgument},
		{name: "ref instead of sha", sha: "main", path: "README.md", wantErr: ErrInvalidArgument},
		{name: "tree sha", sha: h.git("rev-parse", h.c2+"^{tree}"), path: "README.md", wantErr: ErrNotFound},
		{name: "unknown commit", sha: strings.Repeat("0123", 10), path: "README.md", wantErr: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, got, err := cf.ReadCommitFile(ctx, tc.sha, tc.path)
			want, wantErr := r.ReadFile(ctx, tc.sha, tc.path)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorIs(t, wantErr, tc.wantErr, "ReadFile agrees")
				require.ErrorContains(t, err, h.dir, "the error names the repository")
				return
			}
			require.NoError(t, err)
			require.NoError(t, wantErr)
			require.Equal(t, want, got)
			require.NotNil(t, c)
			requireSameCommit(t, r, tc.sha, *c)
		})
	}
}

// requireSameCommit checks c is what CommitOf says of sha.
func requireSameCommit(t *testing.T, r Repo, sha string, c Commit) {
	t.Helper()
	want, err := r.(CommitReader).CommitOf(context.Background(), sha)
	require.NoError(t, err)
	require.Equal(t, want.Author, c.Author)
	require.Equal(t, want.Message, c.Message)
	require.True(t, want.Time.Equal(c.Time), "time %s, CommitOf %s", c.Time, want.Time)
	require.Equal(t, want.Time.Format(time.RFC3339), c.Time.Format(time.RFC3339), "the author's own offset")
}

// TestReadCommitFileDescribesCommitsAsGitShowDoes compares the commit
// object's reading with `git show` on commits written by hand: signed,
// with a legacy encoding, odd identities and messages.
func TestReadCommitFileDescribesCommitsAsGitShowDoes(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	tree := h.git("rev-parse", h.c2+"^{tree}")
	object := func(headers, message string) string {
		t.Helper()
		body := fmt.Sprintf("tree %s\nparent %s\n%s\n%s", tree, h.c2, headers, message)
		cmd := exec.Command("git", "hash-object", "-t", "commit", "-w", "--stdin", "--literally")
		cmd.Dir = h.dir
		cmd.Stdin = strings.NewReader(body)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		sha := strings.TrimSpace(string(out))
		h.git("update-ref", "refs/heads/hand-"+sha[:8], sha)
		return sha
	}
	const committer = "committer C <c@example.com> 1700000000 +0000\n"
	long := strings.Repeat("é", MaxCommitMessage)
	commits := map[string]string{
		"negative offset": object("author Ann Example <ann@example.com> 1767319445 -0930\n"+committer, "fix: the thing\n\nbody line\n"),
		"unicode name":    object("author Zoë Ōkubo <z@example.com> 1767319445 +0530\n"+committer, "ünïcode\n"),
		"signed": object("author A <a@example.com> 1767319445 +0000\n"+committer+
			"gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n", "signed commit\n"),
		"utf-8 declared":  object("author A <a@example.com> 1767319445 +0100\n"+committer+"encoding UTF-8\n", "déclaré\n"),
		"latin-1":         object("author A <a@example.com> 1767319445 +0100\n"+committer+"encoding ISO-8859-1\n", "caf\xe9\n"),
		"empty message":   object("author A <a@example.com> 1767319445 +0000\n"+committer, ""),
		"trailing spaces": object("author A <a@example.com> 1767319445 +0000\n"+committer, "  subject  \n\n\n"),
		"long message":    object("author A <a@example.com> 1767319445 +0000\n"+committer, long+"\n"),
	}
	r := openRepo(t, h.dir)
	cf := r.(CommitFileReader)
	for name, sha := range commits {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, data, err := cf.ReadCommitFile(context.Background(), sha, "src/app.go")
			require.NoError(t, err)
			require.Equal(t, "package app\n", string(data))
			require.NotNil(t, c)
			requireSameCommit(t, r, sha, *c)
		})
	}
}

func TestParseRawCommit(t *testing.T) {
	c, ok := parseRawCommit([]byte("tree t\nauthor Ann <a@b> 1767319445 +0100\n\nsubject\n\nbody\n"))
	require.True(t, ok)
	require.Equal(t, Commit{Author: "Ann", Message: "subject\n\nbody", Time: time.Unix(1767319445, 0).In(time.FixedZone("", 3600))}, c)

	_, ok = parseRawCommit([]byte("tree t\nencoding ISO-8859-1\n\nx\n"))
	require.False(t, ok, "a legacy encoding is left to git show")

	c, ok = parseRawCommit([]byte("tree t\nauthor Ann <a@b> soon +0100\n\nx"))
	require.True(t, ok)
	require.Equal(t, "Ann", c.Author)
	require.True(t, c.Time.IsZero(), "an unreadable date is no date")

	c, ok = parseRawCommit(nil)
	require.True(t, ok)
	require.Equal(t, Commit{}, c)
}

// TestReadCommitFileWithAnOldGit reads with a git that has no
// --batch-command (before 2.36): the commit and the file come the slower
// way, the same.
func TestReadCommitFileWithAnOldGit(t *testing.T) {
	h := newHistory(t)
	wrapGit(t, `for a in "$@"; do
  if [ "$a" = "--batch-command" ]; then echo "error: unknown option 'batch-command'" >&2; exit 129; fi
done`)
	r := openRepo(t, h.dir)
	c, data, err := r.(CommitFileReader).ReadCommitFile(context.Background(), h.c2, "screwdriver.yaml")
	require.NoError(t, err)
	require.Contains(t, string(data), "image: node:22")
	require.NotNil(t, c)
	require.Equal(t, "second", c.Message)
	_, _, err = r.(CommitFileReader).ReadCommitFile(context.Background(), h.c2, "absent")
	require.ErrorIs(t, err, ErrNotFound)
}

// keptSession is the pid of the cat-file session kept for dir (0: none).
func keptSession(dir string) int {
	keptCatFiles.mu.Lock()
	defer keptCatFiles.mu.Unlock()
	if s := keptCatFiles.byDir[dir]; s != nil {
		return s.cmd.Process.Pid
	}
	return 0
}

// TestCatFileSessionIsKeptBetweenReads: the session a read started answers
// the next read on the same mirror, and sees what a fetch brought since;
// a read whose context ends mid-way kills its session, which is not kept;
// a mirror set aside and made again is not read through the old session.
func TestCatFileSessionIsKeptBetweenReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	g := r.(*gitRepo)
	cf := r.(CommitFileReader)
	_, data, err := cf.ReadCommitFile(ctx, h.c2, "screwdriver.yaml")
	require.NoError(t, err)
	require.Contains(t, string(data), "node:22")
	first := keptSession(g.mirror)
	require.NotZero(t, first, "the session is kept")

	// A commit made after the session started, fetched into the mirror
	// by the read (the session first answers "missing").
	c5 := h.commit("fifth", map[string]string{"screwdriver.yaml": "jobs: {}\n"})
	_, data, err = cf.ReadCommitFile(ctx, c5, "screwdriver.yaml")
	require.NoError(t, err)
	require.Equal(t, "jobs: {}\n", string(data))
	require.Equal(t, first, keptSession(g.mirror), "the same session answered")

	// A read whose context ends while it reads: the session is killed,
	// the read fails, and the session is not kept.
	cctx, cancel := context.WithCancel(ctx)
	s, err := takeCatFile(cctx, g.mirror)
	require.NoError(t, err)
	require.Equal(t, first, s.cmd.Process.Pid, "the kept session is taken")
	require.Zero(t, keptSession(g.mirror), "and is no longer kept meanwhile")
	cancel()
	require.Eventually(t, func() bool {
		// Killed: a zombie until the session reaps it.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", first))
		return err != nil || strings.Contains(string(stat), ") Z ")
	}, 5*time.Second, 10*time.Millisecond, "the session's git is killed")
	_, err = s.info(h.c1)
	require.Error(t, err)
	require.ErrorIs(t, s.release(err), context.Canceled)
	require.Zero(t, keptSession(g.mirror), "a killed session is not kept")
	_, _, err = cf.ReadCommitFile(cctx, h.c1, "screwdriver.yaml")
	require.ErrorIs(t, err, context.Canceled, "a read under an ended context starts nothing")
	require.Zero(t, keptSession(g.mirror))

	// A new session, then the mirror set aside and cloned again.
	_, _, err = cf.ReadCommitFile(ctx, h.c1, "screwdriver.yaml")
	require.NoError(t, err)
	old := keptSession(g.mirror)
	require.NotZero(t, old)
	require.NoError(t, g.renew(ctx, time.Now()))
	_, data, err = cf.ReadCommitFile(ctx, c5, "screwdriver.yaml")
	require.NoError(t, err)
	require.Equal(t, "jobs: {}\n", string(data))
	require.NotEqual(t, old, keptSession(g.mirror), "the renewed mirror has a session of its own")
}

// TestCatFileSessionsOfConcurrentReads: reads at once on one mirror each
// get a session; one is kept, the others end.
func TestCatFileSessionsOfConcurrentReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	r := openRepo(t, h.dir)
	cf := r.(CommitFileReader)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			_, data, err := cf.ReadCommitFile(ctx, h.c2, "screwdriver.yaml")
			if err == nil && !strings.Contains(string(data), "node:22") {
				err = fmt.Errorf("read %q", data)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NotZero(t, keptSession(r.(*gitRepo).mirror))
}

// TestCatFileSessionsKeptAreBounded: reads of more mirrors than
// maxKeptCatFiles keep that many sessions at most, and the others still
// read. Not parallel: it fills the process's kept sessions, which the
// other tests count on (it closes its own at the end).
func TestCatFileSessionsKeptAreBounded(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t)
	mirror := openRepo(t, h.dir).(*gitRepo).mirror
	// Copies of one mirror under names of their own: sessions are kept
	// by directory.
	base := t.TempDir()
	t.Cleanup(func() {
		keptCatFiles.mu.Lock()
		var mine []*catFile
		for dir, s := range keptCatFiles.byDir {
			if strings.HasPrefix(dir, base) {
				s.idle.Stop()
				delete(keptCatFiles.byDir, dir)
				mine = append(mine, s)
			}
		}
		keptCatFiles.mu.Unlock()
		for _, s := range mine {
			_ = s.close()
		}
	})
	for i := range maxKeptCatFiles + 3 {
		dir := filepath.Join(base, fmt.Sprintf("m%d.git", i))
		gitIn(t, base, "clone", "--quiet", "--bare", mirror, dir)
		s, err := takeCatFile(ctx, dir)
		require.NoError(t, err)
		header, _, err := s.contents(h.c2+"^{commit}", maxCommitObject)
		require.NoError(t, s.release(err))
		require.Contains(t, header, " commit ")
	}
	keptCatFiles.mu.Lock()
	n := 0
	for dir := range keptCatFiles.byDir {
		if strings.HasPrefix(dir, base) {
			n++
		}
	}
	keptCatFiles.mu.Unlock()
	require.LessOrEqual(t, n, maxKeptCatFiles)
	require.Positive(t, n)
}
