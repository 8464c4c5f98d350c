package scm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Commit status states, as sluice names them. Each provider maps them onto
// its own: GitHub has pending/success/failure/error (running is pending
// there); GitLab has pending/running/success/failed/canceled/skipped.
const (
	StatePending = "pending"
	StateRunning = "running"
	StateSuccess = "success"
	StateFailure = "failure"
	// StateError is a build that ended without a verdict: aborted, collapsed.
	StateError = "error"
	// StateSkipped is a job that did not run (GitHub: error).
	StateSkipped = "skipped"
)

// CommitStatus is one status of one commit.
type CommitStatus struct {
	// State is one of the State constants.
	State string `json:"state"`
	// Context names the check, e.g. "sluice/myapp/test".
	Context     string `json:"context"`
	Description string `json:"description,omitempty"`
	TargetURL   string `json:"target_url,omitempty"`
}

// Final reports whether the state ends the check.
func (s CommitStatus) Final() bool {
	return s.State != StatePending && s.State != StateRunning
}

// StatusTarget is where a pipeline's statuses go: a provider and the
// repository there ("owner/name" on GitHub, the project's full path on
// GitLab).
type StatusTarget struct {
	Provider string `json:"provider"`
	Repo     string `json:"repo"`
}

func (t StatusTarget) String() string { return t.Provider + ":" + t.Repo }

// ParseStatusTarget reads "github:owner/name" or "gitlab:group/project".
func ParseStatusTarget(s string) (StatusTarget, error) {
	p, repo, ok := strings.Cut(strings.TrimSpace(s), ":")
	repo = strings.Trim(repo, "/")
	switch {
	case !ok || repo == "":
		return StatusTarget{}, fmt.Errorf("status target %q: want github:<owner>/<repo> or gitlab:<group>/<project>", s)
	case p == ProviderGitHub:
		if parts := strings.Split(repo, "/"); len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			return StatusTarget{}, fmt.Errorf("status target %q: a GitHub repository is <owner>/<repo>", s)
		}
	case p == ProviderGitLab:
		if !strings.Contains(repo, "/") {
			return StatusTarget{}, fmt.Errorf("status target %q: a GitLab project is <group>/<project>", s)
		}
	default:
		return StatusTarget{}, fmt.Errorf("status target %q: unknown provider %q (github or gitlab)", s, p)
	}
	return StatusTarget{Provider: p, Repo: strings.TrimSuffix(repo, ".git")}, nil
}

// TargetFromRepoURL guesses where a repository's statuses go from its URL:
// github.com (or githubHost, a GitHub Enterprise host) is GitHub, gitlab.com
// (or gitlabHost) is GitLab. ok is false for any other location (a local
// directory, an unknown host).
func TargetFromRepoURL(location, githubHost, gitlabHost string) (StatusTarget, bool) {
	if !isRemote(strings.TrimSpace(location)) {
		return StatusTarget{}, false
	}
	// host/path in lower case: both providers match paths case-insensitively.
	host, path, found := strings.Cut(CanonicalURL(location), "/")
	if !found || path == "" {
		return StatusTarget{}, false
	}
	switch host {
	case "github.com", strings.ToLower(githubHost):
		if strings.Count(path, "/") == 1 {
			return StatusTarget{Provider: ProviderGitHub, Repo: path}, true
		}
	case "gitlab.com", strings.ToLower(gitlabHost):
		if strings.Contains(path, "/") {
			return StatusTarget{Provider: ProviderGitLab, Repo: path}, true
		}
	}
	return StatusTarget{}, false
}

// StatusPoster posts commit statuses.
type StatusPoster interface {
	// PostStatus sets one status of sha. Errors wrap ErrRateLimited (retry
	// after the time it says) or ErrStatusRefused (retrying cannot help);
	// other errors are transient.
	PostStatus(ctx context.Context, target StatusTarget, sha string, st CommitStatus) error
}

// ErrStatusRefused is wrapped by a provider's refusal that retrying cannot
// change: bad credentials, no access, an unknown repository or commit.
var ErrStatusRefused = errors.New("refused")

// RateLimitedError says the provider asked to wait before the next request.
type RateLimitedError struct {
	Provider string
	Wait     time.Duration
	Message  string
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s rate limit: %s (retry in %s)", e.Provider, e.Message, e.Wait.Round(time.Second))
}

// maxRateLimitWait bounds how long a rate limit may delay a status.
const maxRateLimitWait = time.Hour

// rateLimitWait reads how long a response asks to wait: Retry-After
// (seconds or an HTTP date), or X-RateLimit-Reset / RateLimit-Reset (a Unix
// time) when the remaining count is 0. ok is false when the response says
// nothing about rate limits.
func rateLimitWait(h http.Header, now time.Time) (time.Duration, bool) {
	clamp := func(d time.Duration) time.Duration { return min(max(d, time.Second), maxRateLimitWait) }
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil {
			return clamp(time.Duration(secs) * time.Second), true
		}
		if at, err := http.ParseTime(ra); err == nil {
			return clamp(at.Sub(now)), true
		}
	}
	for _, p := range []string{"X-RateLimit-", "RateLimit-"} {
		if strings.TrimSpace(h.Get(p+"Remaining")) != "0" {
			continue
		}
		if reset, err := strconv.ParseInt(strings.TrimSpace(h.Get(p+"Reset")), 10, 64); err == nil {
			return clamp(time.Unix(reset, 0).Sub(now)), true
		}
		return time.Minute, true
	}
	return 0, false
}

// truncate shortens s to at most n characters (runes), marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// apiBase parses a provider's API base URL, naming the setting when it is bad.
func apiBase(setting, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want an http(s) URL", setting, raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// Statuses posts to whichever provider a target names. A nil field means
// that provider has no credentials.
type Statuses struct {
	GitHub StatusPoster
	GitLab StatusPoster
}

// Poster returns the poster for provider, or why there is none.
func (s Statuses) Poster(provider string) (StatusPoster, string) {
	switch provider {
	case ProviderGitHub:
		if s.GitHub == nil {
			return nil, "no GitHub credentials (set SLUICE_GITHUB_TOKEN, or SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_APP_KEY_FILE, on the controllers)"
		}
		return s.GitHub, ""
	case ProviderGitLab:
		if s.GitLab == nil {
			return nil, "no GitLab credentials (set SLUICE_GITLAB_TOKEN on the controllers)"
		}
		return s.GitLab, ""
	}
	return nil, fmt.Sprintf("unknown provider %q", provider)
}

// PostStatus implements StatusPoster.
func (s Statuses) PostStatus(ctx context.Context, t StatusTarget, sha string, st CommitStatus) error {
	p, why := s.Poster(t.Provider)
	if p == nil {
		return fmt.Errorf("%w: %s", ErrStatusRefused, why)
	}
	return p.PostStatus(ctx, t, sha, st)
}
