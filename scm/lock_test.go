package scm

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLockFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	held, err := lockFile(context.Background(), path)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = lockFile(ctx, path)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second holder waits, even in the same process")

	got := make(chan error, 1)
	go func() {
		l, err := lockFile(context.Background(), path)
		if err == nil {
			err = l.unlock()
		}
		got <- err
	}()
	require.NoError(t, held.unlock())
	require.NoError(t, <-got)
}

func TestFetchesAreShared(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, h.dir).(*gitRepo)
	ctx := context.Background()
	require.Equal(t, int64(1), r.fetches.Load(), "the clone")

	requested := time.Now()
	held, err := lockFile(ctx, r.lockPath)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = r.fetch(ctx, requested, nil) })
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, held.unlock())
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(2), r.fetches.Load(), "callers waiting together share one fetch")

	require.NoError(t, r.fetch(ctx, time.Now(), nil))
	require.Equal(t, int64(3), r.fetches.Load(), "a later request fetches again")
}
