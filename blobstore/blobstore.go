// Package blobstore is sluice's store for large, opaque data: finished build
// logs, artifacts and caches. It wraps gocloud.dev/blob so the same code runs
// against a directory (file://, the default, under SLUICE_DATA_DIR/blobs) and
// against S3 or any S3-compatible server (s3://bucket?endpoint=…&region=…&
// use_path_style=true), chosen by SLUICE_BLOB_URL.
//
// Keys are '/'-separated relative paths ("logs/myapp/test/42/0/build.log").
// Keys that are empty, absolute, contain "." or ".." segments, empty
// segments, backslashes or NUL bytes are refused with ErrInvalidKey, so no key
// can leave the bucket's directory on file://.
//
// Put writes an object atomically: a reader sees either the old object or
// the whole new one. PutMax does the same with a size cap and stores nothing
// when the reader yields more than the cap (ErrTooLarge).
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// Sentinel errors; returned errors wrap them and name the key at fault.
var (
	// ErrInvalidKey means a key is not a clean relative path.
	ErrInvalidKey = errors.New("blobstore: invalid key")
	// ErrNotFound means no object has the key.
	ErrNotFound = errors.New("blobstore: not found")
	// ErrTooLarge means PutMax's reader yielded more than its cap.
	ErrTooLarge = errors.New("blobstore: too large")
	// ErrBadURL means SLUICE_BLOB_URL cannot be opened.
	ErrBadURL = errors.New("blobstore: bad URL")
)

// Info describes one stored object.
type Info struct {
	// Key is the object's key.
	Key string `json:"key"`
	// Size is its size in bytes.
	Size int64 `json:"size"`
	// ModTime is when it was last written.
	ModTime time.Time `json:"mod_time"`
}

// Store is an opened bucket. It is safe for concurrent use.
type Store struct {
	b      *blob.Bucket
	scheme string
	shown  string
}

// DefaultURL is the bucket used when SLUICE_BLOB_URL is empty: the directory
// blobs under dataDir (made absolute, so a relative data directory such as
// the default ".sluice" names the same place from every working directory),
// created on first use, with temporary files written next to their target
// so a rename never crosses file systems.
func DefaultURL(dataDir string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(dataDir, "blobs"))
	if err != nil {
		return "", fmt.Errorf("blob store under %q: %w", dataDir, err)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: "create_dir=1&dir_file_mode=0750&no_tmp_dir=1&metadata=skip"}
	return u.String(), nil
}

// Open opens the bucket at rawURL: file:///abs/dir (add create_dir=1 to
// create it), s3://bucket?region=…[&endpoint=…&use_path_style=true]. S3
// credentials come from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, a profile, an instance role), or anonymous=true.
// Open checks that the bucket answers, so a wrong URL fails at start-up.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: want a URL such as file:///var/lib/sluice/blobs or s3://bucket?region=eu-west-1, got %q", ErrBadURL, rawURL)
	}
	if u.Scheme == fileblob.Scheme && u.Host != "" && u.Host != "." && u.Host != "localhost" {
		return nil, fmt.Errorf("%w: %q: a file URL takes an absolute path (file:///dir), not a host %q", ErrBadURL, rawURL, u.Host)
	}
	if u.Scheme != fileblob.Scheme && u.Scheme != s3blob.Scheme {
		return nil, fmt.Errorf("%w: %q: scheme %q is not supported (file or s3)", ErrBadURL, rawURL, u.Scheme)
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrBadURL, shown, err)
	}
	ok, err := b.IsAccessible(ctx)
	if err != nil || !ok {
		_ = b.Close()
		if err == nil {
			err = errors.New("the bucket does not exist")
		}
		return nil, fmt.Errorf("%w: open %s: %w", ErrBadURL, shown, err)
	}
	return &Store{b: b, scheme: u.Scheme, shown: shown}, nil
}

// String names the bucket without its query (which may carry options).
func (s *Store) String() string { return s.shown }

// Close releases the bucket.
func (s *Store) Close() error { return s.b.Close() }

// CheckKey reports whether key is a clean relative path.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w: %q: want a relative '/'-separated path", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q: empty, \".\" or \"..\" segment", ErrInvalidKey, key)
		}
	}
	return nil
}

// Put stores r's bytes under key and returns how many were stored.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	return s.PutMax(ctx, key, r, -1)
}

// PutMax stores r's bytes under key unless r yields more than maxBytes
// (maxBytes < 0: no cap); then nothing is stored, an existing object is kept,
// and the error wraps ErrTooLarge.
func (s *Store) PutMax(ctx context.Context, key string, r io.Reader, maxBytes int64) (int64, error) {
	if err := CheckKey(key); err != nil {
		return 0, fmt.Errorf("put: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, s.wrap(err))
	}
	src := r
	if maxBytes >= 0 {
		src = io.LimitReader(r, maxBytes+1)
	}
	n, err := io.Copy(w, src)
	if err == nil && maxBytes >= 0 && n > maxBytes {
		err = fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	if err != nil {
		cancel() // abandons the write: the object is not created or replaced
		_ = w.Close()
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, s.wrap(err))
	}
	return n, nil
}

// Get opens the object under key; the caller closes it. Info gives its size.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange opens length bytes of the object from offset (length < 0: to the
// end). An offset beyond the end reads nothing.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, fmt.Errorf("get: %w", err)
	}
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, Info{}, fmt.Errorf("get %s: %w", key, s.wrap(err))
	}
	return r, Info{Key: key, Size: r.Size(), ModTime: r.ModTime()}, nil
}

// Stat describes the object under key.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, fmt.Errorf("stat: %w", err)
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, s.wrap(err))
	}
	return Info{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

// tmpName matches the temporary files fileblob writes next to their target
// (no_tmp_dir) while a Put is under way.
var tmpName = regexp.MustCompile(`\.[0-9a-f]+\.tmp$`)

// List returns every object whose key starts with prefix, in key order.
// A prefix should end in "/" to list a "directory".
func (s *Store) List(ctx context.Context, prefix string) ([]Info, error) {
	var out []Info
	err := s.Walk(ctx, prefix, func(i Info) error {
		out = append(out, i)
		return nil
	})
	return out, err
}

// Walk calls fn for every object whose key starts with prefix, in key order,
// and stops at fn's first error.
func (s *Store) Walk(ctx context.Context, prefix string, fn func(Info) error) error {
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %q: %w", prefix, s.wrap(err))
		}
		if obj.IsDir || (s.scheme == fileblob.Scheme && tmpName.MatchString(obj.Key)) {
			continue
		}
		if err := fn(Info{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime}); err != nil {
			return err
		}
	}
}

// Delete removes the object under key; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := s.b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("delete %s: %w", key, s.wrap(err))
	}
	return nil
}

// DeletePrefix removes every object whose key starts with prefix and returns
// how many it removed.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	infos, err := s.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, i := range infos {
		if err := s.Delete(ctx, i.Key); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// wrap maps the driver's not-found to ErrNotFound.
func (s *Store) wrap(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
