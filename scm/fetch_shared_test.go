package scm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/flock"
)

func TestFetchesAreShared(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, h.dir).(*gitRepo)
	ctx := context.Background()
	require.Equal(t, int64(1), r.fetches.Load(), "the clone")

	requested := time.Now()
	held, err := flock.Lock(ctx, r.lockPath)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = r.fetch(ctx, requested, nil) })
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, held.Unlock())
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(2), r.fetches.Load(), "callers waiting together share one fetch")

	require.NoError(t, r.fetch(ctx, time.Now(), nil))
	require.Equal(t, int64(3), r.fetches.Load(), "a later request fetches again")
}
