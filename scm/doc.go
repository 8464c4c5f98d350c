// Package scm is sluice's access to source code: the repositories pipelines
// point at, and the GitHub and GitLab webhooks that start events.
//
// # Repositories
//
// A pipeline's location is one of three kinds (see Kind):
//
//   - git-remote: a git URL (https://, http://, ssh://, git://, file://) or
//     scp-like user@host:path;
//   - git-local: a local path to a git work tree (it holds .git) or a bare
//     repository; only committed content is seen, never the work tree;
//   - dir: any other local directory, read as-is.
//
// Open returns a Repo for any of them. Every method takes a context and is
// safe for concurrent use; errors name the operation and the location (with
// passwords redacted), wrap ErrNotFound, ErrInvalidArgument or ErrDirNotEmpty
// where they apply, and include git's stderr.
//
// # The cache directory
//
// Open's cacheDir holds:
//
//	git/<hash>-<suffix>.git      bare mirror of one git location
//	git/<hash>-<suffix>.lock     flock(2) file guarding that mirror's clone and fetches
//	git/<hash>-<suffix>.partial  a first clone in progress (renamed to .git when done)
//	snapshots/<sha>/             one snapshot of a plain directory
//	snapshots/.tmp-*             a snapshot being written
//
// <hash> is 16 hex digits of the SHA-256 of the location (user info dropped,
// so a rotated token keeps its mirror); <suffix> is the location's last two
// path elements, for people reading the cache. A mirror also holds
// sluice-location (the redacted location) and sluice-fetched (when its last
// fetch started).
//
// # Git mirrors
//
// The git CLI does the work, run with exec (no shell) with
// GIT_TERMINAL_PROMPT=0, LC_ALL=C, the variables that redirect git to another
// repository (GIT_DIR, GIT_WORK_TREE...) removed, and -c options for
// everything sluice relies on. The user's global configuration is still read,
// so credential helpers and url.insteadOf work; no git identity is needed.
// The URL is given to git on each fetch rather than stored in the mirror's
// configuration.
//
// A mirror fetches refs/heads/*, refs/tags/*, refs/pull/* (GitHub, Gitea) and
// refs/merge-requests/* (GitLab) with --prune, so deleted branches disappear
// and the head of a pull request from a fork can be resolved. Clone and fetch
// hold the mirror's lock (an exclusive flock, polled so that the context can
// cancel the wait); several processes may share one cache directory. Reads
// (rev-parse, cat-file, diff-tree, clone for Checkout) take no lock: git
// writes objects before it moves refs, and moves refs atomically. Fetches are
// shared: a caller that waited for the lock skips its own fetch when one that
// started after its request has completed meanwhile.
//
// Resolve answers a sha already in the mirror without network access, and
// a branch whose tip the remote names (git ls-remote of that one ref) when
// the mirror holds that commit: no fetch. Anything else fetches first, then
// tries refs/heads/<ref>, refs/tags/<ref> and <ref> itself (full ref names,
// shas); annotated tags peel to their commit. "" and HEAD ask the remote (git
// ls-remote) which commit its HEAD names: the default branch's tip, or a local
// repository's detached HEAD.
// ReadFile, Checkout and ChangedFiles take shas; a sha missing from the
// mirror causes one fetch (and, for a full sha, one attempt to fetch that
// commit by name, kept under refs/sluice/commits/), then an ErrNotFound error
// naming the repository and the sha.
//
// Checkout clones the mirror locally (objects hard-linked when on the same
// file system), sets origin to the location without user info, and detaches
// HEAD at the sha, so `git rev-parse HEAD` works in the build's directory.
// Submodules and Git LFS content are not fetched.
//
// ChangedFiles diffs two trees with git diff-tree (renames show as a deletion
// and an addition); from "" diffs a commit against its first parent, and a
// root commit lists every file. The list is sorted and never nil for git.
//
// # Plain directories
//
// A plain directory has no history, so Resolve("") (or "HEAD") takes a
// snapshot: the files are hashed and, when no snapshot with that hash exists
// yet, copied into snapshots/<sha>/, so that an event sees one stable tree
// even if the user edits the directory while it runs. The sha is the first 40
// hex digits of a SHA-256 over one line per file, sorted by path:
//
//	<mode> <path>\x00<hex SHA-256 of the content>\n
//
// with git's modes 100644, 100755 (owner may execute) and 120000 (symbolic
// link; the content is the link's target). It looks like a git sha but is not
// one. Entries named .git or .sluice are skipped at any depth, and so is the
// cache directory when it lies inside the directory; everything else
// (node_modules, build outputs) is included. Empty directories, sockets,
// devices and pipes are not part of a snapshot. Snapshots are content
// addressed and shared by every directory using the cache: the same content
// gives the same sha, and Resolve accepts the sha (or an unambiguous prefix)
// of any stored snapshot. ChangedFiles returns nil for directories: unknown,
// every job runs. Snapshots are never removed by this package.
//
// # Webhooks
//
// ParseGitHub and ParseGitLab verify a delivery (HMAC-SHA256 of the body in
// X-Hub-Signature-256; X-Gitlab-Token equal to the secret; both compared in
// constant time) and turn it into a Hook:
//
//	GitHub push to refs/heads/*            HookCommit
//	GitHub push to refs/tags/*             HookTag
//	GitHub pull_request opened, synchronize, reopened   HookPR
//	GitHub pull_request closed             HookPRClosed (Merged tells merged)
//	GitHub release published               HookRelease (SHA empty: resolve Ref)
//	GitLab Push Hook                       HookCommit
//	GitLab Tag Push Hook                   HookTag
//	GitLab Merge Request Hook open, reopen, update with new commits   HookPR
//	GitLab Merge Request Hook close, merge HookPRClosed
//	GitLab Release Hook create             HookRelease
//
// A GitLab System Hook carrying a push, tag push or merge request is read as
// that event. Everything else (ping, branch or tag deletion, other actions
// and events) returns ErrIgnored wrapped with the reason (answer 202), a
// missing or wrong signature ErrSignature (answer 401), and a malformed body
// or a missing header or field ErrBadPayload naming it (answer 400). Hook
// fields that do not apply are empty; Hook.Matches compares a pipeline's
// location with the payload's repository URLs.
package scm
