package cache

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Pack writes a gzip-compressed tar of rel (a file or a directory, relative
// to the workspace) to w. Entry names are relative to the workspace. Only
// directories, regular files and symbolic links are kept; links are stored
// as links, never followed, and nothing outside the workspace is read (an
// os.Root confines every open, so a link the build planted cannot make the
// executor archive its own files).
func Pack(workspace, rel string, w io.Writer) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	defer func() { _ = root.Close() }()
	if _, err := root.Lstat(rel); err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err = fs.WalkDir(root.FS(), rel, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := root.Lstat(name)
		if err != nil {
			return err
		}
		var link string
		switch {
		case fi.Mode().IsRegular(), fi.IsDir():
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = root.Readlink(name); err != nil {
				return err
			}
		default:
			return nil // sockets, devices, pipes: not cached
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
			return fmt.Errorf("%s changed while it was archived: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	return nil
}

// Unpack extracts a Pack archive into the workspace, replacing what is
// there. Every entry must lie inside the workspace: an os.Root refuses
// absolute names, "..", and writes through links that leave it.
func Unpack(r io.Reader, workspace string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer func() { _ = root.Close() }()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	tr := tar.NewReader(zr)
	type dirTime struct {
		name string
		hdr  *tar.Header
	}
	var dirs []dirTime
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if name == "" || path.IsAbs(name) || name != path.Clean(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("unpack: entry %q leaves the workspace", hdr.Name)
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
		}
		mode := hdr.FileInfo().Mode().Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
				if err := root.RemoveAll(name); err != nil {
					return fmt.Errorf("unpack %s: %w", name, err)
				}
			}
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
			dirs = append(dirs, dirTime{name, hdr})
		case tar.TypeReg:
			if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
				if err := root.RemoveAll(name); err != nil {
					return fmt.Errorf("unpack %s: %w", name, err)
				}
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
			// Bounded by the entry's size: an archive holds what a build
			// of the same pipeline left in its workspace.
			_, err = io.CopyN(f, tr, hdr.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
			if err := root.Chmod(name, mode); err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		case tar.TypeSymlink:
			if err := root.RemoveAll(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
		default:
			// Pack writes nothing else; skip what another tool added.
		}
	}
	// Directory times last: extracting into a directory changes its time.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].hdr.ModTime, dirs[i].hdr.ModTime)
	}
	return nil
}
