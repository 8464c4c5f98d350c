package scm

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Repo is read access to one pipeline repository: a git remote, a local git
// repository or a plain directory. Implementations are safe for concurrent use
// by several goroutines, and several processes may share one cache directory.
type Repo interface {
	// Resolve turns a ref (branch name, tag, full or short sha, or "" for the
	// default branch / HEAD) into a full commit sha.
	Resolve(ctx context.Context, ref string) (string, error)
	// ReadFile returns one file's content at sha (e.g. "screwdriver.yaml");
	// ErrNotFound wrapped when absent.
	ReadFile(ctx context.Context, sha, path string) ([]byte, error)
	// Checkout materialises the tree at sha into dir (created; must be empty or
	// absent). For git repositories dir is a real clone with HEAD detached at
	// sha, so `git rev-parse HEAD` in dir prints sha.
	Checkout(ctx context.Context, sha, dir string) error
	// ChangedFiles lists paths changed between from and to (from "" = the
	// commit's own diff against its first parent; a root commit lists all
	// files).
	ChangedFiles(ctx context.Context, from, to string) ([]string, error)
}

// CopyCheckouter is implemented by repositories whose Checkout shares files
// with their cache (git hard-links the mirror's objects): CheckoutCopy is
// Checkout sharing no file, for builds whose processes could write to files
// they do not own.
type CopyCheckouter interface {
	CheckoutCopy(ctx context.Context, sha, dir string) error
}

// BranchChecker is implemented by repositories with branches (git): whether
// a commit is on a branch.
type BranchChecker interface {
	OnBranch(ctx context.Context, sha, branch string) (bool, error)
}

// Repository kinds returned by Kind.
const (
	// KindGitRemote is a git URL: https://, http://, ssh://, git://, file://
	// or scp-like user@host:path.
	KindGitRemote = "git-remote"
	// KindGitLocal is a local path to a git work tree (holding .git) or to a
	// bare repository.
	KindGitLocal = "git-local"
	// KindDir is a local directory that is not a git repository; it is read
	// as-is through content-addressed snapshots.
	KindDir = "dir"
)

// Kind classifies location for display and for Open: KindGitRemote,
// KindGitLocal or KindDir. It looks at the file system for local paths; a path
// that does not exist is reported as KindDir (Open then fails).
func Kind(location string) string {
	if isRemote(location) {
		return KindGitRemote
	}
	if isGitDir(location) {
		return KindGitLocal
	}
	return KindDir
}

// Open returns the Repo for location. Git repositories (remote or local) are
// mirrored into a bare repository under cacheDir, cloned on first use and
// reused afterwards, also by other processes; plain directories are
// snapshotted into cacheDir/snapshots on Resolve.
func Open(ctx context.Context, location, cacheDir string) (Repo, error) {
	if err := checkArg("location", location); err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	if cacheDir == "" {
		return nil, fmt.Errorf("open %s: %w: empty cache directory", redact(location), ErrInvalidArgument)
	}
	cache, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("open %s: cache directory: %w", redact(location), err)
	}
	switch Kind(location) {
	case KindGitRemote:
		return openGit(ctx, location, cache)
	case KindGitLocal:
		abs, err := filepath.Abs(location)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", location, err)
		}
		return openGit(ctx, abs, cache)
	default:
		return openDir(location, cache)
	}
}

// checkArg refuses empty values and values git would read as an option.
func checkArg(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidArgument, what)
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("%w: %s %q starts with '-'", ErrInvalidArgument, what, v)
	case strings.ContainsAny(v, "\x00\n\r"):
		return fmt.Errorf("%w: %s %q contains a control character", ErrInvalidArgument, what, v)
	}
	return nil
}

// urlSchemes are the prefixes git understands as URLs.
var urlSchemes = []string{"https://", "http://", "ssh://", "git://", "file://", "git+ssh://", "ssh+git://"}

// isRemote reports whether location is a git URL rather than a local path.
func isRemote(location string) bool {
	lower := strings.ToLower(location)
	for _, s := range urlSchemes {
		if strings.HasPrefix(lower, s) {
			return true
		}
	}
	return isSCPLike(location)
}

// isSCPLike reports git's scp-like syntax [user@]host:path: a colon before
// any slash. A local path that happens to exist wins, as it does for git.
func isSCPLike(location string) bool {
	colon := strings.Index(location, ":")
	if colon <= 0 || strings.Contains(location[:colon], "/") || strings.Contains(location, "://") {
		return false
	}
	if _, err := os.Lstat(location); err == nil {
		return false
	}
	return true
}

// isGitDir reports whether path is the top of a git work tree (it holds a .git
// directory or file) or a bare repository.
func isGitDir(path string) bool {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return false
	}
	if _, err := os.Lstat(filepath.Join(path, ".git")); err == nil {
		return true
	}
	head, errHead := os.Stat(filepath.Join(path, "HEAD"))
	objects, errObjects := os.Stat(filepath.Join(path, "objects"))
	refs, errRefs := os.Stat(filepath.Join(path, "refs"))
	return errHead == nil && errObjects == nil && errRefs == nil &&
		head.Mode().IsRegular() && objects.IsDir() && refs.IsDir()
}

// redact hides a password or token in a URL's user info, for messages.
func redact(location string) string { return RedactURL(location) }

// CanonicalURL reduces a repository location to a form in which different
// spellings of one repository compare equal: "host/owner/name" in lower case
// for URLs (scheme, user info, port and a ".git" suffix dropped; scp-like
// git@host:owner/name included), and a cleaned absolute path for file:// URLs
// and local paths. Use it to match webhook RepoURLs against pipeline
// locations.
func CanonicalURL(location string) string {
	loc := strings.TrimSpace(location)
	lower := strings.ToLower(loc)
	switch {
	case strings.HasPrefix(lower, "file://"):
		if u, err := url.Parse(loc); err == nil && u.Path != "" {
			return filepath.Clean(u.Path)
		}
		return loc
	case isRemote(loc) && !isSCPLike(loc):
		u, err := url.Parse(loc)
		if err != nil {
			return lower
		}
		return strings.ToLower(u.Hostname() + "/" + trimRepoPath(u.Path))
	case isSCPLike(loc):
		hostPart, path, _ := strings.Cut(loc, ":")
		if at := strings.LastIndex(hostPart, "@"); at >= 0 {
			hostPart = hostPart[at+1:]
		}
		return strings.ToLower(hostPart + "/" + trimRepoPath(path))
	default:
		if abs, err := filepath.Abs(loc); err == nil {
			return abs
		}
		return filepath.Clean(loc)
	}
}

// trimRepoPath strips slashes and a ".git" suffix from a URL path.
func trimRepoPath(p string) string {
	p = strings.Trim(p, "/")
	p = strings.TrimSuffix(p, ".git")
	return strings.TrimSuffix(p, "/")
}
