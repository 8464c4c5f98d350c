package scm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// skippedNames are never part of a directory snapshot, at any depth: git's
// metadata (a directory, or a file in work trees and submodules) and sluice's
// own state. Everything else is included, node_modules and build outputs too:
// a plain directory is read as-is.
var skippedNames = []string{".git", ".sluice"}

// snapshotSHALen is how many hex digits of the SHA-256 tree hash name a
// snapshot: 40, so it looks like (and fits wherever sluice shows) a git sha.
const snapshotSHALen = 40

// dirRepo is a Repo over a plain directory, read through snapshots stored in
// cacheDir/snapshots/<sha>/.
type dirRepo struct {
	root      string // absolute directory
	snapshots string // cacheDir/snapshots
	cache     string // cacheDir, skipped when it lies inside root
}

// openDir opens the plain directory location.
func openDir(location, cache string) (*dirRepo, error) {
	root, err := filepath.Abs(location)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", location, err)
	}
	st, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("open %s: %w: no such directory (and not a git URL)", location, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", location, err)
	case !st.IsDir():
		return nil, fmt.Errorf("open %s: %w: not a directory", location, ErrInvalidArgument)
	}
	r := &dirRepo{root: root, snapshots: filepath.Join(cache, "snapshots"), cache: cache}
	if err := os.MkdirAll(r.snapshots, 0o755); err != nil {
		return nil, fmt.Errorf("open %s: create cache: %w", location, err)
	}
	return r, nil
}

// Resolve implements Repo. "" and "HEAD" snapshot the directory as it is now
// and return the snapshot's sha (unchanged content gives the same sha and
// reuses the stored snapshot); a full or unambiguous abbreviated sha of an
// existing snapshot returns that snapshot. Snapshots are content-addressed,
// so any snapshot in the cache names one exact tree. Other refs are errors.
func (r *dirRepo) Resolve(ctx context.Context, ref string) (string, error) {
	if ref == "" || ref == "HEAD" {
		sha, err := r.snapshot(ctx)
		if err != nil {
			return "", fmt.Errorf("resolve %q in %s: snapshot: %w", ref, r.root, err)
		}
		return sha, nil
	}
	if hexSHA.MatchString(ref) {
		return r.lookup(ref)
	}
	return "", fmt.Errorf("resolve %q in %s: %w: a plain directory has no branches or tags; use \"\" or HEAD for its current content, or a snapshot sha",
		ref, r.root, ErrNotFound)
}

// lookup finds the snapshot a full or abbreviated sha names.
func (r *dirRepo) lookup(sha string) (string, error) {
	sha = strings.ToLower(sha)
	if !hexSHA.MatchString(sha) {
		return "", fmt.Errorf("%w: %q is not a snapshot sha", ErrInvalidArgument, sha)
	}
	if len(sha) == snapshotSHALen {
		if st, err := os.Stat(filepath.Join(r.snapshots, sha)); err == nil && st.IsDir() {
			return sha, nil
		}
		return "", fmt.Errorf("%w: no snapshot %s of %s", ErrNotFound, sha, r.root)
	}
	entries, err := os.ReadDir(r.snapshots)
	if err != nil {
		return "", fmt.Errorf("list snapshots: %w", err)
	}
	var found []string
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == snapshotSHALen && strings.HasPrefix(e.Name(), sha) {
			found = append(found, e.Name())
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no snapshot %s of %s", ErrNotFound, sha, r.root)
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("%w: snapshot sha %s is ambiguous (%d matches)", ErrInvalidArgument, sha, len(found))
	}
}

// snapshot hashes the directory; when no snapshot with that hash exists it
// copies the directory into a temporary directory, hashing what it copies, and
// renames it into place under the hash of the copy (so the sha always
// describes exactly what was stored, even if files changed meanwhile).
// Concurrent snapshots of the same content are harmless: the first rename wins
// and the others discard their copy.
func (r *dirRepo) snapshot(ctx context.Context) (string, error) {
	sha, err := r.walk(ctx, "")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(r.snapshots, sha)); err == nil {
		return sha, nil
	}
	tmp, err := os.MkdirTemp(r.snapshots, ".tmp-")
	if err != nil {
		return "", err
	}
	sha, err = r.walk(ctx, tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(r.snapshots, sha)); err != nil {
		_ = os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(r.snapshots, sha)); statErr != nil {
			return "", fmt.Errorf("store snapshot %s: %w", sha, err)
		}
	}
	return sha, nil
}

// snapshotEntry is one file of a directory tree.
type snapshotEntry struct {
	rel  string // slash-separated path below the root
	mode string // git's notation: 100644, 100755 or 120000 (symbolic link)
}

// walk computes the tree hash of the directory and, when dest is not "",
// copies the files into dest while hashing them.
//
// The hash is SHA-256 over one line per file, in byte order of the
// slash-separated paths: "<mode> <path>\x00<hex SHA-256 of content>\n", where
// mode is 100644, 100755 (owner may execute) or 120000 (symbolic link, whose
// content is its target). Directories are not entries (empty ones are
// dropped, as in git); sockets, devices and pipes are skipped. The sha is the
// first 40 hex digits.
func (r *dirRepo) walk(ctx context.Context, dest string) (string, error) {
	entries, err := r.list(ctx)
	if err != nil {
		return "", err
	}
	tree := sha256.New()
	content := sha256.New()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		content.Reset()
		if err := r.hashEntry(e, dest, content); err != nil {
			return "", err
		}
		_, _ = fmt.Fprintf(tree, "%s %s\x00%x\n", e.mode, e.rel, content.Sum(nil)) // a hash.Hash's Write never fails
	}
	return hex.EncodeToString(tree.Sum(nil))[:snapshotSHALen], nil
}

// list returns the directory's files sorted by path.
func (r *dirRepo) list(ctx context.Context) ([]snapshotEntry, error) {
	var entries []snapshotEntry
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == r.root {
			return nil
		}
		if slices.Contains(skippedNames, d.Name()) || p == r.cache {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := "100644"
			if info.Mode().Perm()&0o100 != 0 {
				mode = "100755"
			}
			entries = append(entries, snapshotEntry{rel: rel, mode: mode})
		case t&fs.ModeSymlink != 0:
			entries = append(entries, snapshotEntry{rel: rel, mode: "120000"})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.root, err)
	}
	slices.SortFunc(entries, func(a, b snapshotEntry) int { return strings.Compare(a.rel, b.rel) })
	return entries, nil
}

// hashEntry writes one entry's content into h and, when dest is not "", a
// copy of the entry below dest.
func (r *dirRepo) hashEntry(e snapshotEntry, dest string, h hash.Hash) error {
	src := filepath.Join(r.root, filepath.FromSlash(e.rel))
	var dst string
	if dest != "" {
		dst = filepath.Join(dest, filepath.FromSlash(e.rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
	}
	if e.mode == "120000" {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		_, _ = io.WriteString(h, target)
		if dst != "" {
			return os.Symlink(target, dst)
		}
		return nil
	}
	return copyFile(src, dst, e.mode, h)
}

// copyFile streams src into h and, when dst is not "", into a new file dst.
func copyFile(src, dst, mode string, h io.Writer) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if dst == "" {
		_, err = io.Copy(h, in)
		return err
	}
	perm := os.FileMode(0o644)
	if mode == "100755" {
		perm = 0o755
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	return err
}

// ReadFile implements Repo, reading from the snapshot (never the live
// directory). Symbolic links leaving the snapshot read as absent.
func (r *dirRepo) ReadFile(_ context.Context, sha, p string) ([]byte, error) {
	clean, err := cleanRepoPath(p)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", p, sha, r.root, err)
	}
	full, err := r.lookup(sha)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.root, err)
	}
	root, err := os.OpenRoot(filepath.Join(r.snapshots, full))
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, full, r.root, err)
	}
	defer func() { _ = root.Close() }()
	b, err := readBounded(root, filepath.FromSlash(clean))
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, full, r.root, err)
	}
	if errors.Is(err, syscall.EISDIR) {
		return nil, fmt.Errorf("read %s at %s in %s: %w: a directory, not a file", clean, full, r.root, ErrNotFound)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "read" {
			// Absent, a dangling link, or a link escaping the snapshot.
			return nil, fmt.Errorf("read %s at %s in %s: %w: %w", clean, full, r.root, ErrNotFound, err)
		}
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, full, r.root, err)
	}
	return b, nil
}

// Checkout implements Repo: a copy of the snapshot (modes and symbolic links
// kept). There is no .git in dir.
func (r *dirRepo) Checkout(ctx context.Context, sha, dir string) (err error) {
	full, err := r.lookup(sha)
	if err != nil {
		return fmt.Errorf("checkout %s of %s: %w", sha, r.root, err)
	}
	cleanup, err := prepareCheckoutDir(dir)
	if err != nil {
		return fmt.Errorf("checkout %s of %s: %w", full, r.root, err)
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if err := copyTree(ctx, filepath.Join(r.snapshots, full), dir); err != nil {
		return fmt.Errorf("checkout %s of %s into %s: %w", full, r.root, dir, err)
	}
	return nil
}

// copyTree copies the directory from into the existing directory to,
// keeping symbolic links and the owner's execute bit. Both trees are opened
// as os.Root, so a link swapped in during the copy cannot redirect it
// outside either of them.
func copyTree(ctx context.Context, from, to string) error {
	src, err := os.OpenRoot(from)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenRoot(to)
	if err != nil {
		return err
	}
	defer func() { _ = dst.Close() }()
	return fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		name := filepath.FromSlash(p)
		switch t := d.Type(); {
		case t.IsDir():
			return dst.MkdirAll(name, 0o755)
		case t&fs.ModeSymlink != 0:
			target, err := src.Readlink(name)
			if err != nil {
				return err
			}
			return dst.Symlink(target, name)
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			perm := os.FileMode(0o644)
			if info.Mode().Perm()&0o100 != 0 {
				perm = 0o755
			}
			return copyInRoots(src, dst, name, perm)
		}
		return nil
	})
}

// copyInRoots copies the regular file name of src into a new file of dst.
func copyInRoots(src, dst *os.Root, name string, perm os.FileMode) (err error) {
	in, err := src.Open(name)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(out, in)
	return err
}

// ChangedFiles implements Repo: a plain directory has no history, so it
// returns nil ("unknown": every job runs) and no error.
func (r *dirRepo) ChangedFiles(context.Context, string, string) ([]string, error) {
	return nil, nil
}

// readBounded reads name under root like root.ReadFile, refusing a file over
// MaxFileBytes (ErrTooLarge) without reading it.
func readBounded(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err //nolint:wrapcheck // classified by the caller
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err //nolint:wrapcheck // classified by the caller
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	if fi.Size() > MaxFileBytes {
		return nil, tooLarge(fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err //nolint:wrapcheck // classified by the caller
	}
	if len(b) > MaxFileBytes { // it grew since Stat
		return nil, tooLarge(int64(len(b)))
	}
	return b, nil
}
