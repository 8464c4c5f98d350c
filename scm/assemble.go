package scm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A build's checkout is the repository git clone would make of the mirror
// (its objects hard-linked or copied, the mirror's branches as
// refs/remotes/origin/*, its tags, origin's HEAD, the remote's
// configuration) with the commit checked out, detached. `git clone` of a
// local mirror costs two git processes and a shell besides the checkout's
// (upload-pack lists the refs through sh) and about three times the
// checkout's time: the repository is laid out here instead, around one
// `git init` (which applies the user's templates, sluice's lean one
// otherwise (template.go), and probes the file system as clone does) and
// the `git checkout`.

// errCloneInstead: the mirror has something assemble does not lay out (a
// shallow or SHA-256 mirror): git clone makes the checkout's repository.
var errCloneInstead = errors.New("the mirror needs git clone")

// assemble makes dir (empty) the repository `git clone --no-checkout` of
// the mirror would make, with origin pointing at origin; refs are the
// mirror's refs when the caller just read them (nil: read here).
func (r *gitRepo) assemble(ctx context.Context, dir, origin string, copyObjects bool, refs *mirrorRefs) error {
	if _, err := os.Stat(filepath.Join(r.mirror, "shallow")); err == nil {
		return errCloneInstead
	}
	if cfg, err := os.ReadFile(filepath.Join(r.mirror, "config")); err != nil || strings.Contains(strings.ToLower(string(cfg)), "objectformat") {
		return errCloneInstead
	}
	// The refs first, the objects after: whatever the refs name was in
	// the mirror's objects before its refs named it.
	if refs == nil {
		var err error
		if refs, err = readMirrorRefs(r.mirror); err != nil {
			return err
		}
	}
	heads, tags, head := refs.heads, refs.tags, refs.head
	initArgs := append([]string{"init", "--quiet"}, initTemplateArgs(filepath.Dir(r.mirror))...)
	if _, err := runGit(ctx, "", nil, append(initArgs, dir)...); err != nil {
		return err
	}
	gitDir := filepath.Join(dir, ".git")
	if err := linkObjects(filepath.Join(r.mirror, "objects"), filepath.Join(gitDir, "objects"), copyObjects); err != nil {
		return fmt.Errorf("objects of %s: %w", r.mirror, err)
	}
	var packed strings.Builder
	packed.WriteString("# pack-refs with: sorted \n")
	var lines []packedRef
	for name, id := range heads {
		lines = append(lines, packedRef{name: "refs/remotes/origin/" + strings.TrimPrefix(name, "refs/heads/"), id: id})
	}
	// Like clone, a local branch for the one origin's HEAD names.
	headID, headOK := heads[head]
	if headOK {
		lines = append(lines, packedRef{name: head, id: headID})
	}
	for name, t := range tags {
		lines = append(lines, packedRef{name: name, id: t.id, peeled: t.peeled})
	}
	slices.SortFunc(lines, func(a, b packedRef) int { return strings.Compare(a.name, b.name) })
	for _, ref := range lines {
		fmt.Fprintf(&packed, "%s %s\n", ref.id, ref.name)
		if ref.peeled != "" {
			fmt.Fprintf(&packed, "^%s\n", ref.peeled)
		}
	}
	if err := os.WriteFile(filepath.Join(gitDir, "packed-refs"), []byte(packed.String()), 0o644); err != nil { //nolint:gosec // git's own mode for its files
		return err
	}
	if headOK {
		if err := os.MkdirAll(filepath.Join(gitDir, "refs", "remotes", "origin"), 0o755); err != nil { //nolint:gosec // as git makes it
			return err
		}
		target := "ref: refs/remotes/origin/" + strings.TrimPrefix(head, "refs/heads/") + "\n"
		if err := os.WriteFile(filepath.Join(gitDir, "refs", "remotes", "origin", "HEAD"), []byte(target), 0o644); err != nil { //nolint:gosec // as above
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(gitDir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "[remote \"origin\"]\n\turl = %s\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", gitConfigValue(origin))
	if branch := strings.TrimPrefix(head, "refs/heads/"); err == nil && headOK {
		_, err = fmt.Fprintf(f, "[branch %s]\n\tremote = origin\n\tmerge = %s\n", gitConfigValue(branch), head)
	}
	return errors.Join(err, f.Close())
}

// packedRef is one line of a packed-refs file (and its peeled line).
type packedRef struct{ name, id, peeled string }

// mirrorRefs are the mirror's branches and tags (name → id; a tag with
// the commit it peels to, when the mirror's packed-refs says) and the
// branch its HEAD names.
type mirrorRefs struct {
	heads map[string]string
	tags  map[string]packedRef
	head  string
}

// tip reports whether a branch or tag points at sha (a full sha): such a
// commit is in the mirror, since a fetch writes a ref only once its
// objects are in.
func (m *mirrorRefs) tip(sha string) bool {
	for _, id := range m.heads {
		if id == sha {
			return true
		}
	}
	for _, t := range m.tags {
		if t.id == sha || t.peeled == sha {
			return true
		}
	}
	return false
}

// readMirrorRefs reads the mirror's refs from its files (no git process):
// loose refs over packed ones.
func readMirrorRefs(mirror string) (*mirrorRefs, error) {
	heads, tags := map[string]string{}, map[string]packedRef{}
	for _, kind := range []string{"heads", "tags"} {
		root := filepath.Join(mirror, "refs", kind)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() || strings.HasSuffix(p, ".lock") {
				return nil
			}
			b, err := os.ReadFile(p) //nolint:gosec // the mirror is the executor's own directory, which no build writes (docs/security.md)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // packed meanwhile: read below
			}
			if err != nil {
				return err
			}
			id := strings.TrimSpace(string(b))
			if !hexSHA.MatchString(id) {
				return nil // a symbolic ref: clone leaves those too
			}
			rel, err := filepath.Rel(mirror, p)
			if err != nil {
				return err
			}
			name := filepath.ToSlash(rel)
			if kind == "heads" {
				heads[name] = id
			} else {
				tags[name] = packedRef{name: name, id: id} // peeled by git on demand
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("refs of %s: %w", mirror, err)
		}
	}
	// Loose refs first, then the packed ones they do not override: a
	// pack-refs running meanwhile moves refs from the first to the second,
	// never the other way.
	if f, err := os.Open(filepath.Join(mirror, "packed-refs")); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		last, lastID := "", ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "^"):
				if t, ok := tags[last]; ok && t.id == lastID {
					t.peeled = strings.TrimPrefix(line, "^")
					tags[last] = t
				}
			default:
				id, name, ok := strings.Cut(line, " ")
				last, lastID = name, id
				switch {
				case !ok || !hexSHA.MatchString(id):
				case strings.HasPrefix(name, "refs/heads/"):
					if _, loose := heads[name]; !loose {
						heads[name] = id
					}
				case strings.HasPrefix(name, "refs/tags/"):
					if _, loose := tags[name]; !loose {
						tags[name] = packedRef{name: name, id: id}
					}
				}
			}
		}
		err = errors.Join(sc.Err(), f.Close())
		if err != nil {
			return nil, fmt.Errorf("packed refs of %s: %w", mirror, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	refs := &mirrorRefs{heads: heads, tags: tags}
	if b, err := os.ReadFile(filepath.Join(mirror, "HEAD")); err == nil {
		refs.head = strings.TrimSpace(strings.TrimPrefix(string(b), "ref:"))
	}
	return refs, nil
}

// linkObjects hard-links (or, with copyObjects or across file systems,
// copies) every file of the mirror's objects directory into dst, as a local
// git clone does; objects being written by a fetch (tmp_*) are left out.
func linkObjects(src, dst string, copyObjects bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755) //nolint:gosec // as git makes its object directories
		}
		if strings.HasPrefix(d.Name(), "tmp_") || !d.Type().IsRegular() {
			return nil
		}
		if !copyObjects {
			err := os.Link(p, target) //nolint:gosec // as for the refs above: the mirror is the executor's own
			switch {
			case err == nil, errors.Is(err, fs.ErrExist): // git init wrote it: keep git's
				return nil
			case errors.Is(err, fs.ErrNotExist):
				// A pack a repack replaced since the listing: its objects
				// are in the new one, or the checkout fails and is tried
				// again (gitRepo.checkout).
				return nil
			}
		}
		if err := copyObject(p, target); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// copyObject copies src to dst (created, read-only as git's objects are).
func copyObject(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, in.Close()) }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444) //nolint:gosec // git's mode for its object files
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
