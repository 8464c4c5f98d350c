package blobstore_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/internal/fakes3"
)

// stores opens one file bucket and one bucket on an in-process S3 server.
func stores(t *testing.T) map[string]*blobstore.Store {
	t.Helper()
	ctx := context.Background()
	u, err := blobstore.DefaultURL(t.TempDir())
	require.NoError(t, err)
	fs, err := blobstore.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })

	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "sluice")
	s3, err := blobstore.Open(ctx, srv.BucketURL("sluice"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s3.Close() })
	return map[string]*blobstore.Store{"file": fs, "s3": s3}
}

func read(t *testing.T, s *blobstore.Store, key string) string {
	t.Helper()
	r, info, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, int64(len(b)), info.Size)
	return string(b)
}

func TestStorePutGetListDelete(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			n, err := s.Put(ctx, "a/b/one.txt", strings.NewReader("hello"))
			require.NoError(t, err)
			require.Equal(t, int64(5), n)
			_, err = s.Put(ctx, "a/b/two.txt", strings.NewReader("world!"))
			require.NoError(t, err)
			_, err = s.Put(ctx, "a/c.txt", strings.NewReader(""))
			require.NoError(t, err)
			_, err = s.Put(ctx, "ab/other", strings.NewReader("x"))
			require.NoError(t, err)

			require.Equal(t, "hello", read(t, s, "a/b/one.txt"))
			require.Empty(t, read(t, s, "a/c.txt"))

			// Replacing an object replaces it whole.
			_, err = s.Put(ctx, "a/b/one.txt", strings.NewReader("hi"))
			require.NoError(t, err)
			require.Equal(t, "hi", read(t, s, "a/b/one.txt"))

			r, info, err := s.GetRange(ctx, "a/b/two.txt", 2, 3)
			require.NoError(t, err)
			b, err := io.ReadAll(r)
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.Equal(t, "rld", string(b))
			require.Equal(t, int64(6), info.Size)

			st, err := s.Stat(ctx, "a/b/two.txt")
			require.NoError(t, err)
			require.Equal(t, int64(6), st.Size)
			require.False(t, st.ModTime.IsZero())

			list, err := s.List(ctx, "a/")
			require.NoError(t, err)
			var keys []string
			var sizes []int64
			for _, i := range list {
				keys = append(keys, i.Key)
				sizes = append(sizes, i.Size)
			}
			require.Equal(t, []string{"a/b/one.txt", "a/b/two.txt", "a/c.txt"}, keys)
			require.Equal(t, []int64{2, 6, 0}, sizes)

			require.NoError(t, s.Delete(ctx, "a/b/one.txt"))
			require.NoError(t, s.Delete(ctx, "a/b/one.txt"), "deleting a missing object is not an error")
			_, _, err = s.Get(ctx, "a/b/one.txt")
			require.ErrorIs(t, err, blobstore.ErrNotFound)
			_, err = s.Stat(ctx, "a/b/one.txt")
			require.ErrorIs(t, err, blobstore.ErrNotFound)

			n2, err := s.DeletePrefix(ctx, "a/")
			require.NoError(t, err)
			require.Equal(t, 2, n2)
			list, err = s.List(ctx, "")
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, "ab/other", list[0].Key)
		})
	}
}

func TestStorePutMaxStoresNothingOverTheCap(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, err := s.Put(ctx, "k", strings.NewReader("old"))
			require.NoError(t, err)
			_, err = s.PutMax(ctx, "k", bytes.NewReader(make([]byte, 11)), 10)
			require.ErrorIs(t, err, blobstore.ErrTooLarge)
			require.Equal(t, "old", read(t, s, "k"), "a refused put keeps the old object")

			n, err := s.PutMax(ctx, "k", bytes.NewReader(make([]byte, 10)), 10)
			require.NoError(t, err)
			require.Equal(t, int64(10), n)

			_, err = s.PutMax(ctx, "new", bytes.NewReader(make([]byte, 11)), 10)
			require.ErrorIs(t, err, blobstore.ErrTooLarge)
			_, err = s.Stat(ctx, "new")
			require.ErrorIs(t, err, blobstore.ErrNotFound, "a refused put creates nothing")
			list, err := s.List(ctx, "")
			require.NoError(t, err)
			require.Len(t, list, 1)
		})
	}
}

func TestStoreRefusesKeysThatLeaveTheBucket(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for _, key := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", "a/", "a\\b", "a\x00b"} {
				_, err := s.Put(ctx, key, strings.NewReader("x"))
				require.ErrorIs(t, err, blobstore.ErrInvalidKey, "key %q", key)
				_, _, err = s.Get(ctx, key)
				require.ErrorIs(t, err, blobstore.ErrInvalidKey, "key %q", key)
				require.ErrorIs(t, s.Delete(ctx, key), blobstore.ErrInvalidKey, "key %q", key)
			}
		})
	}
}

func TestDefaultURLResolvesARelativeDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	u, err := blobstore.DefaultURL(".sluice")
	require.NoError(t, err)
	s, err := blobstore.Open(context.Background(), u)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	_, err = s.Put(context.Background(), "x/y", strings.NewReader("z"))
	require.NoError(t, err)

	// The object is under <cwd>/.sluice/blobs, wherever the reader runs.
	t.Chdir(t.TempDir())
	b, err := os.ReadFile(filepath.Join(dir, ".sluice", "blobs", "x", "y"))
	require.NoError(t, err)
	require.Equal(t, "z", string(b))
	require.Equal(t, "z", read(t, s, "x/y"))
}

func TestOpenRefusesBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"", "/var/lib/sluice", "ftp://host/x", "file://host/dir", "file:///definitely/not/here/sluice-blobs"} {
		_, err := blobstore.Open(ctx, u)
		require.ErrorIs(t, err, blobstore.ErrBadURL, "url %q", u)
	}
	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "present")
	_, err := blobstore.Open(ctx, srv.BucketURL("missing"))
	require.ErrorIs(t, err, blobstore.ErrBadURL, "a bucket that does not exist fails at open")
}

func TestStoreOutageIsAnError(t *testing.T) {
	fakes3.SetEnv(t)
	srv := fakes3.Start(t, "b")
	s, err := blobstore.Open(context.Background(), srv.BucketURL("b"))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	srv.SetDown(true)
	ctx := context.Background()
	_, err = s.Put(ctx, "k", strings.NewReader("x"))
	require.Error(t, err)
	_, _, err = s.Get(ctx, "k")
	require.Error(t, err)
	require.NotErrorIs(t, err, blobstore.ErrNotFound, "an outage is not a miss")
}
