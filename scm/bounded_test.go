package scm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadFileRefusesBigFiles: a file over MaxFileBytes is refused with
// ErrTooLarge naming its size, and git's copy of a big blob is never read
// into memory (the spec of a pull request could be a 2 GiB blob).
func TestReadFileRefusesBigFiles(t *testing.T) { //nolint:paralleltest // measures the allocations of one ReadFile
	const big = 48 << 20
	s := newSource(t)
	f, err := os.Create(filepath.Join(s.dir, "screwdriver.yaml"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(big)) // zeros: git compresses them fast
	require.NoError(t, f.Close())
	s.write(map[string]string{"limit.yaml": strings.Repeat("x", MaxFileBytes), "over.yaml": strings.Repeat("x", MaxFileBytes+1)})
	sha := s.commit("big", nil)
	r := openRepo(t, s.dir)
	ctx := context.Background()

	b, err := r.ReadFile(ctx, sha, "limit.yaml")
	require.NoError(t, err, "a file of exactly the limit is read")
	require.Len(t, b, MaxFileBytes)

	_, err = r.ReadFile(ctx, sha, "over.yaml")
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorIs(t, err, ErrInvalidArgument, "retrying cannot help")
	require.ErrorContains(t, err, "1048577 bytes, the limit is 1048576")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = r.ReadFile(ctx, sha, "screwdriver.yaml")
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, "screwdriver.yaml")
	require.ErrorContains(t, err, "50331648 bytes")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "the blob was read into memory")
}

func TestDirReadFileRefusesBigFiles(t *testing.T) {
	t.Parallel()
	dir := newPlainDir(t, map[string]string{"ok.yaml": "x", "over.yaml": strings.Repeat("x", MaxFileBytes+1)})
	r := openRepo(t, dir)
	ctx := context.Background()
	sha, err := r.Resolve(ctx, "")
	require.NoError(t, err)
	_, err = r.ReadFile(ctx, sha, "over.yaml")
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, "over.yaml")
	require.ErrorContains(t, err, "1048577 bytes")
	b, err := r.ReadFile(ctx, sha, "ok.yaml")
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
	_, err = r.ReadFile(ctx, sha, "absent.yaml")
	require.ErrorIs(t, err, ErrNotFound)
}
