package scm

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A branch's tip is asked of the remote before anything is fetched: `git
// ls-remote <remote> refs/heads/<branch>` reads one ref of the remote's
// advertisement and transfers no objects, where a fetch of mirrorRefspecs
// reads every branch, tag and pull request head (thousands on a busy
// GitHub repository) and negotiates a pack. When the mirror already holds
// that commit — a manual or periodic build, a restart, a remote trigger,
// the base branch of a pull request — it is the answer; otherwise Resolve
// fetches as before. The mirror's own refs are left as they are: every
// read takes a sha, and the next fetch brings them up to date.
//
// Callers in one process that ask about the same branch of the same mirror
// while an ls-remote is under way share the next one to start (as
// concurrent fetches share one, see fetch): an answer is never older than
// the request it serves.

// tipAsk is one ls-remote of a branch and what it said.
type tipAsk struct {
	started time.Time
	done    chan struct{}
	sha     string // "" when the remote has no such branch
	err     error
}

// tipAsks coalesces ls-remote calls for one branch of one mirror.
type tipAsks struct {
	mu       sync.Mutex
	inflight *tipAsk
	last     *tipAsk
	// callers in remoteTip now: the last one out removes the entry, so
	// that branches asked about once (every pushed branch's OnBranch) do
	// not pile up in a long-lived controller.
	callers int
}

// branchTips holds a tipAsks per mirror and branch ("<mirror>\x00<branch>")
// while someone asks about it.
var branchTips sync.Map

// remoteTip returns the sha of branch's tip on the remote ("" when it has
// no such branch), from an ls-remote that started at or after requested.
func (r *gitRepo) remoteTip(ctx context.Context, branch string, requested time.Time) (string, error) {
	key := r.mirror + "\x00" + branch
	v, _ := branchTips.LoadOrStore(key, &tipAsks{})
	s := v.(*tipAsks)
	s.mu.Lock()
	s.callers++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.callers--; s.callers == 0 && s.inflight == nil {
			// A caller that found the entry meanwhile still shares it
			// with those that find it now; later ones start afresh.
			branchTips.CompareAndDelete(key, s)
		}
	}()
	for {
		s.mu.Lock()
		if a := s.last; a != nil && !a.started.Before(requested) {
			s.mu.Unlock()
			return a.sha, nil
		}
		if a := s.inflight; a != nil {
			s.mu.Unlock()
			select {
			case <-a.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if !a.started.Before(requested) {
				return a.sha, a.err
			}
			continue // it started before this request: ask again
		}
		a := &tipAsk{started: time.Now(), done: make(chan struct{})}
		s.inflight = a
		s.mu.Unlock()
		r.tipAsks.Add(1)
		a.sha, a.err = r.lsRemoteBranch(ctx, branch)
		s.mu.Lock()
		s.inflight = nil
		if a.err == nil {
			s.last = a
		}
		s.mu.Unlock()
		close(a.done)
		return a.sha, a.err
	}
}

// lsRemoteBranch asks the remote for refs/heads/<branch>: from its files
// when it is a repository on this machine that keeps its refs as files
// (localBranchTip), otherwise by ls-remote.
func (r *gitRepo) lsRemoteBranch(ctx context.Context, branch string) (string, error) {
	name := "refs/heads/" + branch
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if sha, ok := localBranchTip(r.location, name); ok {
		return sha, nil
	}
	out, err := r.remoteGit(ctx, r.mirror, "ls-remote", "--quiet", r.remote, name)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(out)) {
		// The pattern matches ref names ending in it: take the exact one.
		if id, ref, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok && ref == name && isFullSHA(id) {
			return id, nil
		}
	}
	return "", nil
}

// heldTip answers Resolve for a branch from the remote's advertisement
// when the mirror has the commit its tip names; ok is false when a fetch
// is needed (no such branch on the remote, a commit not fetched yet, or a
// remote that could not be asked: the fetch reports its error).
func (r *gitRepo) heldTip(ctx context.Context, ref string, requested time.Time) (sha string, ok bool) {
	branch, isBranch := branchOf(ref)
	if !isBranch {
		return "", false
	}
	tip, err := r.remoteTip(ctx, branch, requested)
	if err != nil || tip == "" {
		return "", false
	}
	if r.refTip(tip) {
		return tip, true
	}
	full, found, err := r.commit(ctx, tip)
	if err != nil || !found {
		return "", false
	}
	return full, true
}

// branchOf returns the branch a ref Resolve was given names first: a
// refs/heads/ name, or a short name that does not look like a sha (a short
// name is a branch before it is a tag). "" and HEAD are the remote's HEAD.
func branchOf(ref string) (string, bool) {
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return b, b != ""
	}
	if ref == "" || ref == "HEAD" || strings.HasPrefix(ref, "refs/") || hexSHA.MatchString(ref) {
		return "", false
	}
	return ref, true
}

// localBranchTip reads a branch of a repository on this machine (location
// a path: its work tree or a bare repository) from its files, as
// ls-remote would advertise it: the loose ref, else the packed one; "" when
// it has neither. ls-remote of a local path costs three processes (git, a
// shell, git-upload-pack: ~8 ms here); this reads one or two files and
// runs nothing of the repository's. ok is false when the answer must come
// from git: a URL, a work tree whose .git is a file (a linked work tree, a
// submodule), a repository that keeps its refs in a reftable, a symbolic
// or unreadable ref.
func localBranchTip(location, name string) (sha string, ok bool) {
	if isRemote(location) || !filepath.IsAbs(location) || strings.Contains(name, "..") {
		return "", false
	}
	gitDir := filepath.Join(location, ".git")
	if st, err := os.Lstat(gitDir); err != nil || !st.IsDir() {
		if err == nil || !isGitDir(location) {
			return "", false
		}
		gitDir = location // bare
	}
	for _, other := range []string{"commondir", "reftable"} {
		if _, err := os.Lstat(filepath.Join(gitDir, other)); !errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
	}
	b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(name))) //nolint:gosec // a ref of the pipeline's own repository, read, never run
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		return id, isFullSHA(id)
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return "", false
	}
	// Not loose (a pack-refs moves refs from loose to packed, never back).
	f, err := os.Open(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", true
	}
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if id, ref, found := strings.Cut(sc.Text(), " "); found && ref == name {
			return id, isFullSHA(id)
		}
	}
	return "", sc.Err() == nil
}
