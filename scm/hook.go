package scm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// HookKind is what a webhook delivery asks sluice to do, in the vocabulary of
// screwdriver.yaml's requires (~commit, ~pr, ~pr-closed, ~tag, ~release).
type HookKind string

// Hook kinds.
const (
	// HookCommit is a push to a branch.
	HookCommit HookKind = "commit"
	// HookPR is a pull (merge) request opened, reopened or updated with new
	// commits.
	HookPR HookKind = "pr"
	// HookPRClosed is a pull (merge) request closed or merged.
	HookPRClosed HookKind = "pr-closed"
	// HookTag is a tag pushed.
	HookTag HookKind = "tag"
	// HookRelease is a release published.
	HookRelease HookKind = "release"
)

// Providers named in Hook.Provider.
const (
	// ProviderGitHub marks hooks parsed by ParseGitHub.
	ProviderGitHub = "github"
	// ProviderGitLab marks hooks parsed by ParseGitLab.
	ProviderGitLab = "gitlab"
)

// Hook is one webhook delivery in provider-neutral form.
type Hook struct {
	// Provider is ProviderGitHub or ProviderGitLab.
	Provider string
	// DeliveryID is X-GitHub-Delivery / X-Gitlab-Event-UUID, or "body-" and a
	// hash of the body when the header is absent; redeliveries keep it, so it
	// deduplicates events.
	DeliveryID string
	// BodyHash is a hash of the delivery's body (covered by GitHub's
	// signature, unlike the delivery header): a redelivery or a replay has
	// the same one, so it, not DeliveryID, deduplicates events.
	BodyHash string
	// Kind is what happened.
	Kind HookKind
	// RepoURLs are the repository URLs the payload names (clone, ssh, web),
	// for matching pipelines; see Matches.
	RepoURLs []string
	// RepoFullName is owner/name (GitLab: the full namespace path).
	RepoFullName string
	// Branch is the branch pushed, the pull request's target (base) branch,
	// or for tags and releases the branch the provider names (GitHub's
	// base_ref) or else the repository's default branch.
	Branch string
	// DefaultBranch is the repository's default branch, when the payload
	// names it.
	DefaultBranch string
	// Ref is the tag name for tag and release hooks, the head (source) branch
	// for pull requests, and empty for commits.
	Ref string
	// PRRef is the ref under which the provider publishes a pull request's
	// head in the target repository (refs/pull/N/head,
	// refs/merge-requests/N/head): Repo.Resolve finds it even for forks.
	PRRef string
	// SHA is the head commit. It is empty only for GitHub releases, whose
	// payload does not name one: resolve Ref instead.
	SHA string
	// Before is the previous sha of a push or of an updated pull request; ""
	// when the branch was created (all zeros) or unknown.
	Before string
	// SkipCI is the skip marker ("[skip ci]" or "[ci skip]", as written)
	// that a pushed branch's head commit message carries, or "". Only
	// pushes to branches set it: a pull request delivery does not carry
	// its head commit's message, and tags and releases always run.
	SkipCI string
	// PRNumber is the pull request number (GitLab: the merge request iid).
	PRNumber int
	// Fork is true when a pull request's head lives in another repository.
	Fork bool
	// Merged is true for a pull request closed by merging.
	Merged bool
	// ChangedFiles is the sorted union of files added, modified or removed by
	// the pushed commits. It is nil when the payload does not list them
	// completely (tags, releases, pull requests, forced pushes, truncated
	// commit lists): use Repo.ChangedFiles then.
	ChangedFiles []string
	// Sender is the login of the user who caused the delivery, when known.
	Sender string
	// Title is a pull request's title; Author the head commit's author
	// (login when the payload names one, else name) or a pull request's
	// author; Message the pushed head commit's message. "" when the
	// payload does not say (a pull request carries no commit message).
	Title, Author, Message string
}

// Matches reports whether location (a pipeline's repository URL or path)
// names the hook's repository, comparing CanonicalURL forms.
func (h *Hook) Matches(location string) bool {
	want := CanonicalURL(location)
	for _, u := range h.RepoURLs {
		if CanonicalURL(u) == want {
			return true
		}
	}
	return false
}

// maxDeliveryID bounds a delivery header (providers send UUIDs).
const maxDeliveryID = 64

// deliveryHeader matches a well-formed delivery ID.
var deliveryHeader = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// newHook starts a Hook for a delivery: its delivery ID is the delivery
// header's value (refused when longer than 64 bytes or not a UUID-like
// token), or "body-" and a hash of the body when the header is absent.
func newHook(provider string, h http.Header, header string, body []byte) (*Hook, error) {
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:16])
	hook := &Hook{Provider: provider, DeliveryID: "body-" + hash, BodyHash: hash}
	if id := strings.TrimSpace(h.Get(header)); id != "" {
		if len(id) > maxDeliveryID || !deliveryHeader.MatchString(id) {
			return nil, fmt.Errorf("%w: header %s: want a delivery ID of at most %d letters, digits and -._: (a UUID), got %d bytes", ErrBadPayload, header, maxDeliveryID, len(id))
		}
		hook.DeliveryID = id
	}
	return hook, nil
}

// decodeJSON unmarshals a payload, turning failures into ErrBadPayload errors
// that name the event and, for type mismatches, the field.
func decodeJSON(what string, body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Errorf("%w: %s: field %q is a JSON %s, want %s", ErrBadPayload, what, typeErr.Field, typeErr.Value, typeErr.Type)
	}
	return fmt.Errorf("%w: %s: malformed JSON: %w", ErrBadPayload, what, err)
}

// missingField reports a required JSON field that is absent or empty.
func missingField(what, field string) error {
	return fmt.Errorf("%w: %s: missing field %q", ErrBadPayload, what, field)
}

// ignoredf wraps ErrIgnored with a reason.
func ignoredf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrIgnored, fmt.Sprintf(format, args...))
}

// commitSHA matches a full SHA-1 or SHA-256 hex object name.
var commitSHA = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// isZeroSHA reports the all-zeros sha providers send for a ref that did not
// exist before or no longer exists after a push.
func isZeroSHA(s string) bool {
	return s != "" && strings.Trim(s, "0") == ""
}

// requireSHA checks that a payload's sha field is present and well formed.
func requireSHA(what, field, v string) error {
	if v == "" {
		return missingField(what, field)
	}
	if !commitSHA.MatchString(v) {
		return fmt.Errorf("%w: %s: field %q is %q, not a commit sha", ErrBadPayload, what, field, v)
	}
	return nil
}

// optionalSHA returns v when it is a real previous sha, "" otherwise.
func optionalSHA(v string) string {
	if isZeroSHA(v) || !commitSHA.MatchString(v) {
		return ""
	}
	return v
}

// pushCommit is the part of a pushed commit both providers describe alike.
type pushCommit struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	Author  struct {
		Name     string `json:"name"`
		Username string `json:"username"`
	} `json:"author"`
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Removed  []string `json:"removed"`
}

// authorOf names a pushed commit's author: login, else name.
func (c pushCommit) authorOf() string {
	if c.Author.Username != "" {
		return c.Author.Username
	}
	return c.Author.Name
}

// unionFiles returns the sorted union of the commits' file lists, or nil when
// there are no commits.
func unionFiles(commits []pushCommit) []string {
	if len(commits) == 0 {
		return nil
	}
	files := []string{}
	for _, c := range commits {
		files = append(files, c.Added...)
		files = append(files, c.Modified...)
		files = append(files, c.Removed...)
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// urls returns the non-empty values, without duplicates, in order.
func urls(values ...string) []string {
	var out []string
	for _, v := range values {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// splitRef returns the short name of a branch or tag ref and which it is.
func splitRef(ref string) (name string, branch, tag bool) {
	if name, ok := strings.CutPrefix(ref, "refs/heads/"); ok && name != "" {
		return name, true, false
	}
	if name, ok := strings.CutPrefix(ref, "refs/tags/"); ok && name != "" {
		return name, false, true
	}
	return "", false, false
}

// skipCIMarkers are the commit message markers that skip CI for a push,
// as GitHub Actions, GitLab and Screwdriver read them.
var skipCIMarkers = []string{"[skip ci]", "[ci skip]"}

// SkipCIMarker returns the skip marker message carries (matched without
// regard to case, anywhere in the message), or "".
func SkipCIMarker(message string) string {
	lower := strings.ToLower(message)
	for _, m := range skipCIMarkers {
		if i := strings.Index(lower, m); i >= 0 {
			return message[i : i+len(m)]
		}
	}
	return ""
}
