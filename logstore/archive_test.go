package logstore_test

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/internal/fakes3"
	"github.com/sluice-ci/sluice/logstore"
)

// buckets opens a file bucket and a bucket on an in-process S3 server.
func buckets(t *testing.T) map[string]*blobstore.Store {
	t.Helper()
	ctx := context.Background()
	u, err := blobstore.DefaultURL(t.TempDir())
	require.NoError(t, err)
	fb, err := blobstore.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fb.Close() })
	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "logs")
	sb, err := blobstore.Open(ctx, srv.BucketURL("logs"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	return map[string]*blobstore.Store{"file": fb, "s3": sb}
}

// replica is one API replica: its own directory, the shared bucket.
func replica(t *testing.T, b *blobstore.Store) *logstore.Store {
	t.Helper()
	s, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	s.SetArchive(b, func(err error) { t.Errorf("archive: %v", err) })
	return s
}

func writeStep(t *testing.T, s *logstore.Store, build, step, text string, finish bool) {
	t.Helper()
	w, err := s.Sink(build).Open(step)
	require.NoError(t, err)
	_, err = io.WriteString(w, text)
	require.NoError(t, err)
	if finish {
		require.NoError(t, w.Close())
	}
}

// Replicas without a shared volume: a finished step log written through one
// replica is listed, read, stat'ed and waited for on another; a live one is
// not (it lives where it is written).
func TestArchiveServesFinishedLogsToAnotherReplica(t *testing.T) {
	for name, b := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			a, other := replica(t, b), replica(t, b)
			const build = "app/test/7/1"
			writeStep(t, a, build, "sd-setup", "checking out\n", true)
			writeStep(t, a, build, "test", "ok 1\n", false)

			steps, err := other.Steps(build)
			require.NoError(t, err)
			require.Equal(t, []logstore.StepInfo{{Name: "sd-setup", Size: 13, Complete: true}}, steps)
			text, complete := readAll(t, other, build, "sd-setup")
			require.Equal(t, "checking out\n", text)
			require.True(t, complete)
			c, err := other.Read(build, "sd-setup", 9, 3)
			require.NoError(t, err)
			require.Equal(t, "out", string(c.Data))
			require.Equal(t, int64(12), c.NextOffset)
			_, err = other.Read(build, "sd-setup", 14, 0)
			require.ErrorIs(t, err, logstore.ErrBadOffset)
			info, err := other.Stat(build, "sd-setup")
			require.NoError(t, err)
			require.Equal(t, logstore.StepInfo{Name: "sd-setup", Size: 13, Complete: true}, info)
			_, err = other.Stat(build, "test")
			require.ErrorIs(t, err, logstore.ErrNotFound)
			_, err = other.Read(build, "test", 0, 0)
			require.ErrorIs(t, err, logstore.ErrNotFound)
			_, err = other.Steps("app/test/7/2")
			require.ErrorIs(t, err, logstore.ErrNotFound)
			// A build ID that is a prefix of another lists only its own.
			_, err = other.Steps("app/test/7")
			require.ErrorIs(t, err, logstore.ErrNotFound)

			// A follower on the other replica blocks until the live step is
			// finished on the first, then sees it complete.
			waiting := make(chan struct{})
			var once sync.Once
			logstore.SetWaiting(other, func() { once.Do(func() { close(waiting) }) })
			done := make(chan error, 1)
			go func() { done <- other.Wait(context.Background(), build, "test", 0) }()
			<-waiting
			require.NoError(t, a.Append(build, "test", []byte("ok 2\n")))
			require.NoError(t, a.Finish(build, "test"))
			require.NoError(t, <-done)

			steps, err = other.Steps(build)
			require.NoError(t, err)
			require.Equal(t, []logstore.StepInfo{
				{Name: "sd-setup", Size: 13, Complete: true},
				{Name: "test", Size: 10, Complete: true},
			}, steps, "in creation order")
			text, _ = readAll(t, other, build, "test")
			require.Equal(t, "ok 1\nok 2\n", text)

			// The writing replica loses its directory: the archive serves.
			require.NoError(t, os.RemoveAll(a.Dir()))
			text, complete = readAll(t, a, build, "test")
			require.Equal(t, "ok 1\nok 2\n", text)
			require.True(t, complete)
		})
	}
}

func TestArchivePruneAndDeletePipeline(t *testing.T) {
	for name, b := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			a, other := replica(t, b), replica(t, b)
			writeStep(t, a, "app/build/1/1", "main", "one", true)
			writeStep(t, a, "lib/build/1/1", "main", "two", true)
			require.NoError(t, os.RemoveAll(a.Dir()))

			// Nothing is older than an hour ago: nothing goes.
			n, err := other.Prune(time.Now().Add(-time.Hour))
			require.NoError(t, err)
			require.Zero(t, n)
			_, err = other.Steps("app/build/1/1")
			require.NoError(t, err)

			// Deleting a pipeline deletes its archived logs, and only its.
			require.NoError(t, other.DeletePipeline("app"))
			_, err = a.Steps("app/build/1/1")
			require.ErrorIs(t, err, logstore.ErrNotFound)
			_, err = a.Steps("lib/build/1/1")
			require.NoError(t, err)

			// Everything is older than an hour from now: all goes.
			n, err = other.Prune(time.Now().Add(time.Hour))
			require.NoError(t, err)
			require.Equal(t, 1, n)
			_, err = a.Steps("lib/build/1/1")
			require.ErrorIs(t, err, logstore.ErrNotFound)
			left, err := b.List(context.Background(), "")
			require.NoError(t, err)
			require.Empty(t, left)
		})
	}
}

// A blob store outage does not fail Finish: the log is complete locally and
// the failure is reported.
func TestArchiveOutageKeepsTheLocalLog(t *testing.T) {
	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "logs")
	b, err := blobstore.Open(context.Background(), srv.BucketURL("logs"))
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	s, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	var failures []string
	s.SetArchive(b, func(err error) { failures = append(failures, err.Error()) })
	srv.SetDown(true)
	writeStep(t, s, "app/build/1/1", "main", "hello", true)
	require.Len(t, failures, 1)
	require.Contains(t, failures[0], "archive log app/build/1/1/main")
	text, complete := readAll(t, s, "app/build/1/1", "main")
	require.Equal(t, "hello", text)
	require.True(t, complete)
}
