package scm

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// newPlainDir creates a directory (not a git repository) holding files.
func newPlainDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	writeFiles(t, dir, files)
	return dir
}

// writeFiles creates or replaces files below dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
}

var plainFiles = map[string]string{
	"screwdriver.yaml": "jobs:\n  main:\n    image: alpine\n    steps:\n      - hi: echo hi\n",
	"src/main.sh":      "echo main\n",
}

func TestDirSnapshotSHA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
		same   bool
	}{
		{name: "unchanged", change: func(*testing.T, string) {}, same: true},
		{name: "touching mtime only", same: true, change: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"src/main.sh": "echo main\n"})
		}},
		{name: ".git is skipped", same: true, change: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{".git/HEAD": "ref: refs/heads/x\n", "sub/.git": "gitdir: ../x\n"})
		}},
		{name: ".sluice is skipped", same: true, change: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{".sluice/state.json": "{}"})
		}},
		{name: "empty directory is not content", same: true, change: func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
		}},
		{name: "content edit", change: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"src/main.sh": "echo changed\n"})
		}},
		{name: "new file", change: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"node_modules/x/index.js": "1\n"})
		}},
		{name: "rename", change: func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, "src/main.sh"), filepath.Join(dir, "src/other.sh")))
		}},
		{name: "executable bit", change: func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(filepath.Join(dir, "src/main.sh"), 0o755))
		}},
		{name: "symlink", change: func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("src/main.sh", filepath.Join(dir, "link")))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newPlainDir(t, plainFiles)
			r := openRepo(t, dir)
			before, err := r.Resolve(ctx, "")
			require.NoError(t, err)
			require.Regexp(t, `^[0-9a-f]{40}$`, before)
			tc.change(t, dir)
			after, err := r.Resolve(ctx, "HEAD")
			require.NoError(t, err)
			require.Equal(t, tc.same, before == after)

			// Same content elsewhere, in another cache: same sha.
			if tc.same {
				again, err := openRepo(t, newPlainDir(t, plainFiles)).Resolve(ctx, "")
				require.NoError(t, err)
				require.Equal(t, before, again)
			}
		})
	}
}

func TestDirSnapshotIsStable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newPlainDir(t, plainFiles)
	require.NoError(t, os.Symlink("screwdriver.yaml", filepath.Join(dir, "sd.yaml")))
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(dir, "outside")))
	require.NoError(t, os.Chmod(filepath.Join(dir, "src/main.sh"), 0o755))
	r := openRepo(t, dir)

	old, err := r.Resolve(ctx, "")
	require.NoError(t, err)
	writeFiles(t, dir, map[string]string{"screwdriver.yaml": "jobs: {}\n", "new.txt": "new\n"})
	cur, err := r.Resolve(ctx, "")
	require.NoError(t, err)
	require.NotEqual(t, old, cur)

	reads := []struct {
		name, sha, path, want string
		wantErr               error
	}{
		{name: "old snapshot keeps old content", sha: old, path: "screwdriver.yaml", want: plainFiles["screwdriver.yaml"]},
		{name: "new snapshot has new content", sha: cur, path: "screwdriver.yaml", want: "jobs: {}\n"},
		{name: "short sha", sha: old[:7], path: "src/main.sh", want: "echo main\n"},
		{name: "symlink inside", sha: old, path: "sd.yaml", want: plainFiles["screwdriver.yaml"]},
		{name: "file added later is absent from the old snapshot", sha: old, path: "new.txt", wantErr: ErrNotFound},
		{name: "symlink outside", sha: old, path: "outside", wantErr: ErrNotFound},
		{name: "directory", sha: old, path: "src", wantErr: ErrNotFound},
		{name: "escape", sha: old, path: "../../x", wantErr: ErrInvalidArgument},
		{name: "unknown snapshot", sha: "0123456789012345678901234567890123456789", path: "screwdriver.yaml", wantErr: ErrNotFound},
		{name: "not a sha", sha: "main", path: "screwdriver.yaml", wantErr: ErrInvalidArgument},
	}
	for _, tc := range reads {
		t.Run("read "+tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.ReadFile(ctx, tc.sha, tc.path)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorContains(t, err, dir)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}

	resolves := []struct {
		name, ref, want string
		wantErr         error
	}{
		{name: "existing snapshot sha", ref: old, want: old},
		{name: "abbreviated snapshot sha", ref: old[:8], want: old},
		{name: "branch name", ref: "main", wantErr: ErrNotFound},
		{name: "unknown sha", ref: "deadbeef", wantErr: ErrNotFound},
	}
	for _, tc := range resolves {
		t.Run("resolve "+tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Resolve(ctx, tc.ref)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("checkout", func(t *testing.T) {
		t.Parallel()
		co := filepath.Join(t.TempDir(), "co")
		require.NoError(t, r.Checkout(ctx, old, co))
		got, err := os.ReadFile(filepath.Join(co, "screwdriver.yaml"))
		require.NoError(t, err)
		require.Equal(t, plainFiles["screwdriver.yaml"], string(got))
		st, err := os.Stat(filepath.Join(co, "src/main.sh"))
		require.NoError(t, err)
		require.NotZero(t, st.Mode().Perm()&0o100, "executable bit kept")
		target, err := os.Readlink(filepath.Join(co, "sd.yaml"))
		require.NoError(t, err)
		require.Equal(t, "screwdriver.yaml", target)
		require.NoFileExists(t, filepath.Join(co, "new.txt"))
		require.ErrorIs(t, r.Checkout(ctx, old, co), ErrDirNotEmpty)
	})

	t.Run("changed files unknown", func(t *testing.T) {
		t.Parallel()
		files, err := r.ChangedFiles(ctx, old, cur)
		require.NoError(t, err)
		require.Nil(t, files)
	})
}

func TestDirCacheInsideDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newPlainDir(t, plainFiles)
	r, err := Open(ctx, dir, filepath.Join(dir, "cache"))
	require.NoError(t, err)
	first, err := r.Resolve(ctx, "")
	require.NoError(t, err)
	second, err := r.Resolve(ctx, "")
	require.NoError(t, err)
	require.Equal(t, first, second, "the cache must not snapshot itself")
}

func TestDirConcurrentSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newPlainDir(t, plainFiles)
	cache := t.TempDir()
	const workers = 8
	shas := make([]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			r, err := Open(ctx, dir, cache)
			if err == nil {
				shas[i], err = r.Resolve(ctx, "")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range workers {
		require.NoError(t, errs[i])
		require.Equal(t, shas[0], shas[i])
	}
	entries, err := os.ReadDir(filepath.Join(cache, "snapshots"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "temporary copies are removed")
}
