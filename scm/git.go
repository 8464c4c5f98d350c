package scm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-ci/sluice/internal/flock"
)

// mirrorRefspecs are what a mirror fetches: branches, tags, and the pull /
// merge request heads GitHub, Gitea and GitLab publish, so that the head sha
// of a pull request from a fork can be resolved. --prune removes what the
// remote deleted within these namespaces only.
// fetchConfig goes before every fetch into a mirror. Reads of the mirror
// take no lock (a cat-file of the commit an event names, an executor's
// checkout), so a fetch must not show them half of what it brings: git
// writes a fetch of fewer than fetch.unpackLimit (100) objects as loose
// objects one by one, commits first, and a reader could find a commit whose
// tree was not written yet — "screwdriver.yaml not found" at a commit that
// has it. Kept as a pack, the objects appear together when its index is
// renamed into place. (maintain repacks the small packs this leaves.)
var fetchConfig = []string{"-c", "maintenance.auto=false", "-c", "fetch.unpackLimit=1"}

var mirrorRefspecs = []string{
	"+refs/heads/*:refs/heads/*",
	"+refs/tags/*:refs/tags/*",
	"+refs/pull/*:refs/pull/*",
	"+refs/merge-requests/*:refs/merge-requests/*",
}

// Files kept in a mirror beside git's own.
const (
	locationFile = "sluice-location" // the (redacted) location, for people looking at the cache
	fetchedFile  = "sluice-fetched"  // start time (Unix ns) of the last successful fetch
	// maintainedFile's modification time is the last run of git's automatic maintenance.
	maintainedFile = "sluice-maintained"
)

// gitRepo is a Repo backed by a bare mirror of a git repository.
type gitRepo struct {
	location string       // URL (with any credentials) or absolute path
	remote   string       // location as git's command line shows it: no credentials
	credEnv  []string     // the credentials, handed to git in its environment
	sshKey   string       // a deploy key, written to a file for each command that reaches the remote
	display  string       // location with any password redacted
	mirror   string       // cacheDir/git/<hash>-<suffix>.git
	lockPath string       // cacheDir/git/<hash>-<suffix>.lock
	cloned   bool         // whether this Open created the mirror
	fetches  atomic.Int64 // fetches run through this value, for tests
	tipAsks  atomic.Int64 // ls-remote calls of a branch's tip run through it, for tests
}

// openGit opens (cloning on first use) the mirror of location under cache.
func openGit(ctx context.Context, location, cache string) (*gitRepo, error) {
	return openGitAuth(ctx, location, cache, nil)
}

// openGitAuth is openGit with a pipeline's own credentials (see OpenAuth;
// the caller checked they fit location).
func openGitAuth(ctx context.Context, location, cache string, auth *Auth) (*gitRepo, error) {
	if err := gitAvailable(); err != nil {
		return nil, err
	}
	name := mirrorName(location)
	base := filepath.Join(cache, "git")
	remote, credEnv, err := remoteCredentials(location)
	if err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	r := &gitRepo{
		location: location,
		remote:   remote,
		credEnv:  credEnv,
		display:  redact(location),
	}
	if auth != nil {
		// The pipeline's own mirror: a reader without its credentials
		// never gets what they fetched.
		name = mirrorName(location + "#" + auth.Scope)
		switch {
		case auth.HTTP():
			if r.credEnv, err = authEnv(auth); err != nil {
				return nil, fmt.Errorf("open %s: %w", r.display, err)
			}
		case auth.SSH():
			r.sshKey = auth.SSHKey
		}
	}
	r.mirror = filepath.Join(base, name+".git")
	r.lockPath = filepath.Join(base, name+".lock")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("open %s: create cache: %w", r.display, err)
	}
	if r.mirrorExists() {
		return r, nil
	}
	lock, err := flock.Lock(ctx, r.lockPath)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", r.display, err)
	}
	defer func() { _ = lock.Unlock() }()
	if r.mirrorExists() { // another process cloned it while we waited
		return r, nil
	}
	if err := r.clone(ctx); err != nil {
		return nil, fmt.Errorf("open %s: clone into %s: %w", r.display, r.mirror, err)
	}
	r.cloned = true
	return r, nil
}

// remoteGit runs a git command that reaches the remote, with its
// credentials: a deploy key lives in a file for the command's duration.
func (r *gitRepo) remoteGit(ctx context.Context, dir string, args ...string) ([]byte, error) {
	env := r.credEnv
	if r.sshKey != "" {
		keyEnv, cleanup, err := sshKeyEnv(r.sshKey)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		env = append(slices.Clone(env), keyEnv...)
	}
	return runGitEnv(ctx, dir, nil, env, args...)
}

// mirrorName derives the cache entry name of location: a hash of the location
// (user info dropped, so a rotated token keeps its mirror) and a readable
// suffix made of its last two path elements.
func mirrorName(location string) string {
	key := location
	if u, err := url.Parse(location); err == nil && u.User != nil && u.Scheme != "" {
		u.User = nil
		key = u.String()
	}
	sum := sha256.Sum256([]byte(key))
	canon := strings.TrimSuffix(CanonicalURL(location), "/")
	parts := strings.Split(filepath.ToSlash(canon), "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	suffix := unsafeNameChars.ReplaceAllString(strings.Join(parts, "-"), "-")
	suffix = strings.Trim(suffix, "-.")
	if len(suffix) > 48 {
		suffix = suffix[len(suffix)-48:]
	}
	if suffix == "" {
		suffix = "repo"
	}
	return hex.EncodeToString(sum[:8]) + "-" + suffix
}

// unsafeNameChars are replaced in cache entry names.
var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// mirrorExists reports whether the mirror is complete: it is renamed into
// place only after its first fetch succeeded.
func (r *gitRepo) mirrorExists() bool {
	st, err := os.Stat(filepath.Join(r.mirror, "HEAD"))
	return err == nil && st.Mode().IsRegular()
}

// clone creates the mirror: init a bare repository beside it, fetch, rename
// into place. The caller holds the lock.
func (r *gitRepo) clone(ctx context.Context) error {
	partial := strings.TrimSuffix(r.mirror, ".git") + ".partial"
	if err := os.RemoveAll(partial); err != nil { // left by a crashed clone
		return err
	}
	if _, err := runGit(ctx, "", nil, "init", "--quiet", "--bare", partial); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(partial, locationFile), []byte(r.display+"\n"), 0o644); err != nil {
		return err
	}
	if err := r.fetchInto(ctx, partial); err != nil {
		_ = os.RemoveAll(partial)
		return err
	}
	if err := os.Rename(partial, r.mirror); err != nil {
		_ = os.RemoveAll(partial)
		return err
	}
	return nil
}

// fetchInto fetches mirrorRefspecs from the location into the bare repository
// dir and records when it started.
func (r *gitRepo) fetchInto(ctx context.Context, dir string) error {
	start := time.Now()
	r.fetches.Add(1)
	args := append(append(slices.Clone(fetchConfig), "fetch", "--quiet", "--prune", "--no-write-fetch-head", r.remote), mirrorRefspecs...)
	if _, err := r.remoteGit(ctx, dir, args...); err != nil {
		return err
	}
	stamp := strconv.FormatInt(start.UnixNano(), 10) + "\n"
	if err := os.WriteFile(filepath.Join(dir, fetchedFile), []byte(stamp), 0o644); err != nil {
		return err
	}
	maintain(ctx, dir, time.Now())
	return nil
}

// maintainEvery is how often a mirror gets git's automatic maintenance
// (packing loose objects and refs once they pile up past gc.auto or
// gc.autoPackLimit). git runs it after every fetch by default, a process
// that nearly always finds nothing to do; a mirror fetched for every event
// takes it at most this often.
const maintainEvery = 10 * time.Minute

// maintain runs `git maintenance run --auto` in the mirror dir when its
// last run is older than maintainEvery (in the foreground: the caller
// holds the mirror's lock). A failure is tried again at the next fetch.
func maintain(ctx context.Context, dir string, now time.Time) {
	stampPath := filepath.Join(dir, maintainedFile)
	if st, err := os.Stat(stampPath); err == nil && now.Sub(st.ModTime()) < maintainEvery && !st.ModTime().After(now) {
		return
	}
	if _, err := runGit(ctx, dir, nil, "maintenance", "run", "--auto", "--quiet"); err != nil {
		return
	}
	_ = os.WriteFile(stampPath, []byte(now.UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// lastFetch returns when the last successful fetch into the mirror started.
func (r *gitRepo) lastFetch() (time.Time, bool) {
	b, err := os.ReadFile(filepath.Join(r.mirror, fetchedFile))
	if err != nil {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// fetch updates the mirror under its lock. It is skipped when a fetch that
// started at or after requested has completed meanwhile (several goroutines or
// processes asking at once share one fetch), or when done reports that what
// the caller needs is already there.
func (r *gitRepo) fetch(ctx context.Context, requested time.Time, done func() bool) error {
	lock, err := flock.Lock(ctx, r.lockPath)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	// A start time in the future means the clock went back: do not trust it.
	if last, ok := r.lastFetch(); ok && !last.Before(requested) && !last.After(time.Now()) {
		return nil
	}
	if done != nil && done() {
		return nil
	}
	return r.fetchInto(ctx, r.mirror)
}

// fetchOne fetches one object by name (a full sha, or HEAD) into ref, for
// commits no fetched ref points at (a detached HEAD, a commit only reachable
// from a ref outside mirrorRefspecs). Servers may refuse unadvertised shas.
func (r *gitRepo) fetchOne(ctx context.Context, src, ref string) error {
	lock, err := flock.Lock(ctx, r.lockPath)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	_, err = r.remoteGit(ctx, r.mirror, append(slices.Clone(fetchConfig), "fetch", "--quiet", "--no-write-fetch-head", r.remote, "+"+src+":"+ref)...)
	if err == nil {
		maintain(ctx, r.mirror, time.Now())
	}
	return err
}

// commit returns the full sha of the commit rev names in the mirror, or
// found=false when there is none.
func (r *gitRepo) commit(ctx context.Context, rev string) (sha string, found bool, err error) {
	out, err := runGit(ctx, r.mirror, nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 && ctx.Err() == nil {
			return "", false, nil
		}
		return "", false, err
	}
	return strings.TrimSpace(string(out)), true, nil
}

// hexSHA matches full and abbreviated commit names (SHA-1 or SHA-256).
var hexSHA = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// isFullSHA reports whether s is a complete SHA-1 or SHA-256 object name.
func isFullSHA(s string) bool {
	return hexSHA.MatchString(s) && (len(s) == 40 || len(s) == 64)
}

// Resolve implements Repo. A sha already in the mirror is answered without
// network access; a branch whose tip (asked of the remote, see heldTip) is
// in the mirror without a fetch; anything else fetches first (shared with
// concurrent callers), then looks for refs/heads/<ref>, refs/tags/<ref>,
// then <ref> itself (full ref names such as refs/pull/7/head, or a sha). "" and "HEAD"
// ask the remote which commit its HEAD names.
func (r *gitRepo) Resolve(ctx context.Context, ref string) (string, error) {
	requested := time.Now()
	if err := checkRef(ref); err != nil {
		return "", fmt.Errorf("resolve %q in %s: %w", ref, r.display, err)
	}
	if hexSHA.MatchString(ref) {
		if sha, ok, err := r.commit(ctx, ref); err != nil {
			return "", fmt.Errorf("resolve %q in %s: %w", ref, r.display, err)
		} else if ok {
			return sha, nil
		}
	}
	if sha, ok := r.heldTip(ctx, ref, requested); ok {
		return sha, nil
	}
	if err := r.fetch(ctx, requested, nil); err != nil {
		return "", fmt.Errorf("resolve %q in %s: fetch: %w", ref, r.display, err)
	}
	if ref == "" || ref == "HEAD" {
		return r.resolveHead(ctx, ref)
	}
	candidates := []string{ref}
	if !strings.HasPrefix(ref, "refs/") {
		candidates = []string{"refs/heads/" + ref, "refs/tags/" + ref, ref}
	}
	for _, c := range candidates {
		sha, ok, err := r.commit(ctx, c)
		if err != nil {
			return "", fmt.Errorf("resolve %q in %s: %w", ref, r.display, err)
		}
		if ok {
			return sha, nil
		}
	}
	if isFullSHA(ref) {
		if sha, err := r.fetchMissing(ctx, ref); err == nil {
			return sha, nil
		}
	}
	return "", fmt.Errorf("resolve %q in %s: %w: no branch, tag or commit of that name", ref, r.display, ErrNotFound)
}

// resolveHead asks the remote for its HEAD commit (the default branch's tip,
// or a local repository's detached HEAD) and makes sure the mirror holds it.
func (r *gitRepo) resolveHead(ctx context.Context, ref string) (string, error) {
	out, err := r.remoteGit(ctx, r.mirror, "ls-remote", "--quiet", r.remote, "HEAD")
	if err != nil {
		return "", fmt.Errorf("resolve %q in %s: %w", ref, r.display, err)
	}
	var sha string
	for line := range strings.Lines(string(out)) {
		if id, name, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok && name == "HEAD" {
			sha = id
			break
		}
	}
	if !isFullSHA(sha) {
		return "", fmt.Errorf("resolve %q in %s: %w: the repository has no HEAD commit (empty repository?)", ref, r.display, ErrNotFound)
	}
	if full, ok, err := r.commit(ctx, sha); err != nil {
		return "", fmt.Errorf("resolve %q in %s: %w", ref, r.display, err)
	} else if ok {
		return full, nil
	}
	if err := r.fetchOne(ctx, "HEAD", "refs/sluice/HEAD"); err != nil {
		return "", fmt.Errorf("resolve %q in %s: fetch HEAD: %w", ref, r.display, err)
	}
	full, ok, err := r.commit(ctx, sha)
	if err != nil {
		return "", fmt.Errorf("resolve %q in %s: %w", ref, r.display, err)
	}
	if !ok {
		return "", fmt.Errorf("resolve %q in %s: %w: HEAD commit %s missing after fetch", ref, r.display, ErrNotFound, sha)
	}
	return full, nil
}

// fetchMissing fetches a full sha that no fetched ref reaches, keeping it
// under refs/sluice/commits/ so that gc does not drop it.
func (r *gitRepo) fetchMissing(ctx context.Context, sha string) (string, error) {
	sha = strings.ToLower(sha)
	if err := r.fetchOne(ctx, sha, "refs/sluice/commits/"+sha); err != nil {
		return "", err
	}
	full, ok, err := r.commit(ctx, sha)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("commit %s missing after fetch", sha)
	}
	return full, nil
}

// ensureCommit returns the full sha of the commit sha names, fetching once
// when the mirror lacks it.
func (r *gitRepo) ensureCommit(ctx context.Context, sha string) (string, error) {
	requested := time.Now()
	if !hexSHA.MatchString(sha) {
		return "", fmt.Errorf("%w: %q is not a commit sha (resolve refs with Resolve first)", ErrInvalidArgument, sha)
	}
	full, ok, err := r.commit(ctx, sha)
	if err != nil || ok {
		return full, err
	}
	err = r.fetch(ctx, requested, func() bool {
		_, ok, _ := r.commit(ctx, sha)
		return ok
	})
	if err != nil {
		return "", fmt.Errorf("commit %s is not in the mirror and fetching failed: %w", sha, err)
	}
	if full, ok, err = r.commit(ctx, sha); err != nil || ok {
		return full, err
	}
	if isFullSHA(sha) {
		if full, err := r.fetchMissing(ctx, sha); err == nil {
			return full, nil
		}
	}
	return "", fmt.Errorf("%w: commit %s is not in %s, even after fetching (never pushed, or force-pushed away?)", ErrNotFound, sha, r.display)
}

// ReadFile implements Repo. Symbolic links inside the tree are followed; one
// pointing outside the repository reads as absent.
func (r *gitRepo) ReadFile(ctx context.Context, sha, p string) ([]byte, error) {
	clean, err := cleanRepoPath(p)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", p, sha, r.display, err)
	}
	full, err := r.ensureCommit(ctx, sha)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.display, err)
	}
	// The object's type and size first: a blob over MaxFileBytes is refused
	// without git printing it (the object a full sha and path name never
	// changes between the two commands).
	object := full + ":" + clean + "\n"
	out, err := runGit(ctx, r.mirror, strings.NewReader(object), "cat-file", "--batch-check", "--follow-symlinks")
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.display, err)
	}
	if _, err := parseCatFileHeader(out); err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, full, r.display, err)
	}
	out, err = runGit(ctx, r.mirror, strings.NewReader(object), "cat-file", "--batch", "--follow-symlinks")
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, sha, r.display, err)
	}
	content, err := parseCatFile(out)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in %s: %w", clean, full, r.display, err)
	}
	return content, nil
}

// parseCatFile reads one answer of `git cat-file --batch --follow-symlinks`.
func parseCatFile(out []byte) ([]byte, error) {
	header, rest, _ := bytes.Cut(out, []byte("\n"))
	size, err := parseCatFileHeader(header)
	if err != nil {
		return nil, err
	}
	if size > len(rest) {
		return nil, fmt.Errorf("unexpected git cat-file output %q", header)
	}
	return rest[:size:size], nil
}

// parseCatFileHeader reads the header line of one answer of `git cat-file
// --batch[-check] --follow-symlinks` and returns the blob's size; a blob
// over MaxFileBytes is ErrTooLarge.
func parseCatFileHeader(out []byte) (int, error) {
	header, _, _ := bytes.Cut(out, []byte("\n"))
	fields := strings.Fields(string(header))
	switch {
	case len(fields) == 0:
		return 0, errors.New("git cat-file printed nothing")
	case fields[len(fields)-1] == "missing":
		return 0, fmt.Errorf("%w: no such file", ErrNotFound)
	case fields[0] == "symlink":
		return 0, fmt.Errorf("%w: symbolic link pointing outside the repository", ErrNotFound)
	case fields[0] == "dangling" || fields[0] == "loop" || fields[0] == "notdir":
		return 0, fmt.Errorf("%w: %s symbolic link", ErrNotFound, fields[0])
	case len(fields) != 3:
		return 0, fmt.Errorf("unexpected git cat-file output %q", header)
	case fields[1] == "tree":
		return 0, fmt.Errorf("%w: a directory, not a file", ErrNotFound)
	case fields[1] != "blob":
		return 0, fmt.Errorf("%w: a %s, not a file", ErrNotFound, fields[1])
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	switch {
	case err != nil || size < 0:
		return 0, fmt.Errorf("unexpected git cat-file output %q", header)
	case size > MaxFileBytes:
		return 0, tooLarge(size)
	}
	return int(size), nil
}

// cleanRepoPath validates a slash-separated path inside a repository and
// returns it cleaned.
func cleanRepoPath(p string) (string, error) {
	if p == "" || strings.ContainsAny(p, "\x00\n\r") {
		return "", fmt.Errorf("%w: path %q is empty or has control characters", ErrInvalidArgument, p)
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: path %q must be relative to the repository root", ErrInvalidArgument, p)
	}
	clean := path.Clean(filepath.ToSlash(p))
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: path %q is outside the repository", ErrInvalidArgument, p)
	}
	return clean, nil
}

// checkRef rejects refs git would read as an option or as revision syntax
// (ranges, reflog, searches) rather than a name; "" is allowed.
func checkRef(ref string) error {
	if ref == "" {
		return nil
	}
	if err := checkArg("ref", ref); err != nil {
		return err
	}
	if strings.ContainsAny(ref, " ~^:?*[\\\t") || strings.Contains(ref, "..") ||
		strings.Contains(ref, "@{") || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".lock") {
		return fmt.Errorf("%w: %q is not a valid ref name", ErrInvalidArgument, ref)
	}
	return nil
}

// Checkout implements Repo: a local clone of the mirror (objects hard-linked
// when on the same file system) with HEAD detached at sha and origin pointing
// at the repository's location (user info removed).
//
// Two git processes in the common case (the commit is in the mirror): the
// clone and the checkout; origin's URL is written into the clone's config
// directly. A commit the mirror lacks is fetched first (ensureCommit). A
// mirror git cannot clone or check out from (damaged on disk) is set aside
// and cloned afresh, once.
func (r *gitRepo) Checkout(ctx context.Context, sha, dir string) error {
	return r.checkout(ctx, sha, dir, false)
}

// CheckoutCopy is Checkout with the checkout's objects copied rather than
// hard-linked to the mirror's files: for a build whose processes could write
// to files they do not own (a pull request from a fork, in a container that
// runs as the executor's user). A hard link shares the file: a write through
// it would change the mirror's object, and so every later build of the
// repository on this executor.
func (r *gitRepo) CheckoutCopy(ctx context.Context, sha, dir string) error {
	return r.checkout(ctx, sha, dir, true)
}

func (r *gitRepo) checkout(ctx context.Context, sha, dir string, copyObjects bool) (err error) {
	if !hexSHA.MatchString(sha) {
		return fmt.Errorf("checkout %s of %s: %w: %q is not a commit sha (resolve refs with Resolve first)", sha, r.display, ErrInvalidArgument, sha)
	}
	cleanup, err := prepareCheckoutDir(dir)
	if err != nil {
		return fmt.Errorf("checkout %s of %s: %w", sha, r.display, err)
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	// attempt clones and checks out; with fast set, a full sha that a
	// branch or tag of the mirror points at skips asking git whether the
	// mirror holds it.
	attempt := func(fast bool) error {
		full := strings.ToLower(sha)
		// The mirror's refs, read for the fast check, are the clone's too.
		var refs *mirrorRefs
		if fast && isFullSHA(sha) {
			if rs, err := readMirrorRefs(r.mirror); err == nil && rs.tip(full) {
				refs = rs
			}
		}
		if refs == nil {
			var err error
			if full, err = r.ensureCommit(ctx, sha); err != nil {
				return err
			}
		}
		if _, err := prepareCheckoutDir(dir); err != nil {
			return err
		}
		return r.cloneAt(ctx, full, dir, copyObjects, refs)
	}
	begun := time.Now()
	giveUp := func(err error) bool { return err == nil || ctx.Err() != nil || errors.Is(err, ErrNotFound) }
	// The commit may be missing from the mirror (ensureCommit fetches it),
	// or the mirror damaged or deleted: the second attempt asks git first;
	// when that fails too, for another reason than a commit the repository
	// does not have, the mirror is set aside and cloned afresh, once.
	for i, step := range []func() error{
		func() error { return attempt(true) },
		func() error { return attempt(false) },
		func() error {
			if err := r.renew(ctx, begun); err != nil {
				return fmt.Errorf("clone the mirror afresh: %w", err)
			}
			return attempt(false)
		},
	} {
		if i > 0 {
			cleanup()
		}
		if err = step(); giveUp(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("checkout %s of %s: %w", sha, r.display, err)
	}
	return nil
}

// refTip reports whether a branch or tag of the mirror points at the full
// sha, from the ref files alone (no git process): such a commit is in the
// mirror, since a fetch writes a ref only once its objects are in.
func (r *gitRepo) refTip(sha string) bool {
	refs, err := readMirrorRefs(r.mirror)
	return err == nil && refs.tip(sha)
}

// renew sets a damaged mirror aside and clones it again, under the lock,
// unless a fetch that started after since succeeded meanwhile (another build
// renewed it while this one waited for the lock).
func (r *gitRepo) renew(ctx context.Context, since time.Time) error {
	lock, err := flock.Lock(ctx, r.lockPath)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	if last, ok := r.lastFetch(); ok && last.After(since) && r.mirrorExists() {
		return nil
	}
	aside := strings.TrimSuffix(r.mirror, ".git") + ".damaged"
	if err := os.RemoveAll(aside); err != nil {
		return err
	}
	if err := os.Rename(r.mirror, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := r.clone(ctx); err != nil {
		return err
	}
	return os.RemoveAll(aside)
}

// cloneAt clones the mirror into the empty dir and checks out sha there.
// refs are the mirror's refs when just read (nil: read them).
func (r *gitRepo) cloneAt(ctx context.Context, sha, dir string, copyObjects bool, refs *mirrorRefs) error {
	err := r.assemble(ctx, dir, stripUserInfo(r.location), copyObjects, refs)
	if errors.Is(err, errCloneInstead) {
		if err = r.gitClone(ctx, dir, copyObjects); err == nil {
			err = r.setOrigin(ctx, dir)
		}
	}
	if err != nil {
		return fmt.Errorf("into %s: %w", dir, err)
	}
	if _, err := runGit(ctx, dir, nil, "checkout", "--quiet", "--detach", sha); err != nil {
		return fmt.Errorf("into %s: %w", dir, err)
	}
	return nil
}

// gitClone is assemble by `git clone --no-checkout` of the mirror.
func (r *gitRepo) gitClone(ctx context.Context, dir string, copyObjects bool) error {
	args := []string{"clone", "--quiet", "--no-checkout"}
	if copyObjects {
		args = append(args, "--no-hardlinks")
	}
	_, err := runGit(ctx, "", nil, append(args, r.mirror, dir)...)
	return err
}

// setOrigin points the clone's origin at the repository's location instead
// of the mirror, by rewriting the one url line git clone wrote (saving a git
// process per build); `git remote set-url` when the line is not as expected.
func (r *gitRepo) setOrigin(ctx context.Context, dir string) error {
	url := stripUserInfo(r.location)
	path := filepath.Join(dir, ".git", "config")
	b, err := os.ReadFile(path)
	if err == nil {
		old := "\turl = " + r.mirror + "\n"
		if strings.Count(string(b), old) == 1 && !strings.ContainsAny(url, "\n\x00") {
			return os.WriteFile(path, []byte(strings.Replace(string(b), old, "\turl = "+gitConfigValue(url)+"\n", 1)), 0o644) //nolint:gosec // git's own mode for its config
		}
	}
	_, err = runGit(ctx, dir, nil, "remote", "set-url", "origin", url)
	return err
}

// gitConfigValue quotes a value for a git config file.
func gitConfigValue(v string) string {
	v = strings.ReplaceAll(v, "\\", "\\\\")
	v = strings.ReplaceAll(v, "\"", "\\\"")
	v = strings.ReplaceAll(v, "\t", "\\t")
	return "\"" + v + "\""
}

// stripUserInfo removes credentials from a URL so that they are not written
// into a build's checkout.
func stripUserInfo(location string) string {
	u, err := url.Parse(location)
	if err != nil || u.User == nil || u.Scheme == "" {
		return location
	}
	u.User = nil
	return u.String()
}

// prepareCheckoutDir makes sure dir exists and is empty, and returns a
// function that undoes a failed checkout (removing dir if it was created,
// emptying it otherwise).
func prepareCheckoutDir(dir string) (cleanup func(), err error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty checkout directory", ErrInvalidArgument)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return func() { _ = os.RemoveAll(dir) }, nil
	case err != nil:
		return nil, fmt.Errorf("checkout directory: %w", err)
	case len(entries) > 0:
		return nil, fmt.Errorf("%w: %s holds %s", ErrDirNotEmpty, dir, entries[0].Name())
	}
	return func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}, nil
}

// ChangedFiles implements Repo with `git diff-tree` (renames listed as a
// deletion plus an addition). The list is sorted and never nil for git.
func (r *gitRepo) ChangedFiles(ctx context.Context, from, to string) ([]string, error) {
	toFull, err := r.ensureCommit(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("changed files %s..%s in %s: %w", from, to, r.display, err)
	}
	var args []string
	if from == "" {
		out, err := runGit(ctx, r.mirror, nil, "rev-list", "--parents", "-n", "1", toFull)
		if err != nil {
			return nil, fmt.Errorf("changed files in %s of %s: %w", toFull, r.display, err)
		}
		parents := strings.Fields(string(out))
		if len(parents) < 2 {
			args = []string{"ls-tree", "-r", "-z", "--name-only", toFull}
		} else {
			args = []string{"diff-tree", "-r", "-z", "--name-only", "--no-renames", parents[1], toFull}
		}
	} else {
		fromFull, err := r.ensureCommit(ctx, from)
		if err != nil {
			return nil, fmt.Errorf("changed files %s..%s in %s: %w", from, to, r.display, err)
		}
		args = []string{"diff-tree", "-r", "-z", "--name-only", "--no-renames", fromFull, toFull}
	}
	out, err := runGit(ctx, r.mirror, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("changed files %s..%s in %s: %w", from, to, r.display, err)
	}
	return splitNUL(out), nil
}

// splitNUL splits NUL-terminated git output into a sorted, duplicate-free,
// non-nil list.
func splitNUL(out []byte) []string {
	files := []string{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// OnBranch reports whether commit sha is reachable from branch's tip (after
// a fetch): a push names a commit of its branch, and a commit reachable only
// from a pull request's head (refs/pull/*) is not on any branch.
func (r *gitRepo) OnBranch(ctx context.Context, sha, branch string) (bool, error) {
	tip, err := r.Resolve(ctx, "refs/heads/"+branch)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(tip, sha) {
		// A push's commit is usually its branch's tip: no git needed.
		return true, nil
	}
	if _, err := r.ensureCommit(ctx, sha); err != nil {
		return false, err
	}
	_, err = runGit(ctx, r.mirror, nil, "merge-base", "--is-ancestor", sha, tip)
	var ge *gitError
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ge) && errors.As(ge.err, &ee) && ee.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("is %s on branch %s of %s: %w", sha, branch, r.display, err)
}
