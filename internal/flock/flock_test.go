package flock

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLockFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	held, err := Lock(context.Background(), path)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = Lock(ctx, path)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second holder waits, even in the same process")

	got := make(chan error, 1)
	go func() {
		l, err := Lock(context.Background(), path)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	require.NoError(t, held.Unlock())
	require.NoError(t, <-got)
}
