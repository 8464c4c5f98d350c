package logstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// age sets every file of a build attempt's logs (and its directory) to t.
func age(t *testing.T, s *Store, build string, at time.Time) {
	t.Helper()
	dir, err := s.buildDir(build)
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Chtimes(filepath.Join(dir, e.Name()), at, at))
	}
	require.NoError(t, os.Chtimes(dir, at, at))
}

func TestPruneAndDeletePipeline(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	now := time.Now()
	for _, b := range []string{"app/test/1/1", "app/test/1/2", "app/test/2/1", "other/build/7/1"} {
		require.NoError(t, s.Append(b, "main", []byte("log of "+b+"\n")))
	}
	age(t, s, "app/test/1/1", now.Add(-40*24*time.Hour))
	age(t, s, "app/test/1/2", now.Add(-40*24*time.Hour))
	age(t, s, "other/build/7/1", now.Add(-31*24*time.Hour))

	n, err := s.Prune(now.Add(-30 * 24 * time.Hour))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, gone := range []string{"app/test/1/1", "app/test/1/2", "other/build/7/1"} {
		_, err := s.Steps(gone)
		require.ErrorIs(t, err, ErrNotFound, gone)
	}
	steps, err := s.Steps("app/test/2/1")
	require.NoError(t, err, "a recent log stays")
	require.Len(t, steps, 1)
	_, err = os.Stat(filepath.Join(s.Dir(), "other"))
	require.ErrorIs(t, err, os.ErrNotExist, "no empty directory is left behind")

	require.NoError(t, s.DeletePipeline("app"))
	_, err = s.Steps("app/test/2/1")
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, s.DeletePipeline("../etc"), ErrInvalidID)
}

func TestKeepPruned(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.Append("app/old/1/1", "main", []byte("old\n")))
	age(t, s, "app/old/1/1", time.Now().Add(-48*time.Hour))

	ctx, cancel := context.WithCancel(context.Background())
	s.KeepPruned(ctx, 0, time.Millisecond, func(int, error) { t.Error("retention 0 prunes nothing") })
	reports := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.KeepPruned(ctx, 24*time.Hour, time.Hour, func(n int, err error) {
			assert.NoError(t, err)
			reports <- n
		})
	}()
	require.Equal(t, 1, <-reports, "the first pass runs at once")
	cancel()
	<-done
	_, err = s.Steps("app/old/1/1")
	require.ErrorIs(t, err, ErrNotFound)
}
