package scm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// GitHubStatusConfig is how sluice signs in to GitHub's API to post commit
// statuses: a token, or a GitHub App (its ID and private key), which
// gets an installation token per repository.
type GitHubStatusConfig struct {
	// APIURL is the REST API's base: https://api.github.com/ (default) or a
	// GitHub Enterprise Server's https://<host>/api/v3/.
	APIURL string
	// Token is a personal access or fine-grained token with the
	// "Commit statuses: write" permission (classic: repo:status).
	Token string
	// AppID and AppKeyFile are a GitHub App's ID and private key (PEM); the
	// App needs "Commit statuses: write" and an installation on the repository.
	AppID      int64
	AppKeyFile string
}

// Configured reports whether any GitHub credentials are set.
func (c GitHubStatusConfig) Configured() bool { return c.Token != "" || c.AppID != 0 }

// GitHubStatuses posts commit statuses through GitHub's REST API
// (google/go-github; GitHub App installation tokens through ghinstallation).
type GitHubStatuses struct {
	cfg  GitHubStatusConfig
	hc   *http.Client
	base string
	now  func() time.Time
	// client signs in with the token; appKey and apps are the App's.
	client *github.Client
	appKey []byte
	apps   *github.Client
	mu     sync.Mutex
	// installs caches one client per repository owner/name for an App.
	installs map[string]*github.Client
}

// NewGitHubStatuses checks cfg and returns a poster.
func NewGitHubStatuses(cfg GitHubStatusConfig, hc *http.Client) (*GitHubStatuses, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api.github.com/"
	}
	base, err := apiBase("SLUICE_GITHUB_API_URL", cfg.APIURL)
	if err != nil {
		return nil, err
	}
	g := &GitHubStatuses{cfg: cfg, hc: hc, base: base.String(), now: time.Now, installs: map[string]*github.Client{}}
	switch {
	case cfg.Token != "":
		g.client, err = newGitHubClient(g.base, github.WithHTTPClient(hc), github.WithAuthToken(cfg.Token))
	case cfg.AppID != 0:
		if cfg.AppKeyFile == "" {
			return nil, errors.New("SLUICE_GITHUB_APP_ID is set but SLUICE_GITHUB_APP_KEY_FILE is not: a GitHub App signs in with its private key")
		}
		g.appKey, err = os.ReadFile(cfg.AppKeyFile)
		if err != nil {
			return nil, fmt.Errorf("SLUICE_GITHUB_APP_KEY_FILE: %w", err)
		}
		atr, aerr := ghinstallation.NewAppsTransport(g.transport(), cfg.AppID, g.appKey)
		if aerr != nil {
			return nil, fmt.Errorf("SLUICE_GITHUB_APP_KEY_FILE %s: %w", cfg.AppKeyFile, aerr)
		}
		atr.BaseURL = strings.TrimSuffix(g.base, "/")
		g.apps, err = newGitHubClient(g.base, github.WithHTTPClient(&http.Client{Transport: atr, Timeout: hc.Timeout}))
	default:
		return nil, errors.New("no GitHub credentials: set SLUICE_GITHUB_TOKEN, or SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_APP_KEY_FILE")
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (g *GitHubStatuses) transport() http.RoundTripper {
	if g.hc.Transport != nil {
		return g.hc.Transport
	}
	return http.DefaultTransport
}

// newGitHubClient makes a client of the REST API at base (kept as given:
// GitHub Enterprise Server's is https://<host>/api/v3/).
func newGitHubClient(base string, opts ...github.ClientOptionsFunc) (*github.Client, error) {
	c, err := github.NewClient(append(opts, github.WithURLs(&base, &base))...)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_GITHUB_API_URL %q: %w", base, err)
	}
	return c, nil
}

// clientFor returns the client that may post to repo.
func (g *GitHubStatuses) clientFor(ctx context.Context, owner, repo string) (*github.Client, error) {
	if g.client != nil {
		return g.client, nil
	}
	key := strings.ToLower(owner + "/" + repo)
	g.mu.Lock()
	c := g.installs[key]
	g.mu.Unlock()
	if c != nil {
		return c, nil
	}
	inst, _, err := g.apps.Apps.GetRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		return nil, g.classify(fmt.Sprintf("find the GitHub App's installation on %s/%s", owner, repo), err)
	}
	atr, err := ghinstallation.NewAppsTransport(g.transport(), g.cfg.AppID, g.appKey)
	if err != nil {
		return nil, err
	}
	atr.BaseURL = strings.TrimSuffix(g.base, "/")
	itr := ghinstallation.NewFromAppsTransport(atr, inst.GetID())
	c, err = newGitHubClient(g.base, github.WithHTTPClient(&http.Client{Transport: itr, Timeout: g.hc.Timeout}))
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.installs[key] = c
	g.mu.Unlock()
	return c, nil
}

// GitHub's limits on a status.
const (
	githubDescriptionMax = 140
)

// PostStatus implements StatusPoster.
func (g *GitHubStatuses) PostStatus(ctx context.Context, t StatusTarget, sha string, st CommitStatus) error {
	owner, repo, ok := strings.Cut(t.Repo, "/")
	if !ok {
		return fmt.Errorf("%w: GitHub repository %q is not <owner>/<repo>", ErrStatusRefused, t.Repo)
	}
	c, err := g.clientFor(ctx, owner, repo)
	if err != nil {
		return err
	}
	state := st.State
	switch state {
	case StateRunning:
		state = StatePending
	case StateSkipped:
		state = StateError
	}
	body := github.RepoStatus{State: &state, Context: &st.Context}
	if st.Description != "" {
		d := truncate(st.Description, githubDescriptionMax)
		body.Description = &d
	}
	if st.TargetURL != "" {
		body.TargetURL = &st.TargetURL
	}
	_, _, err = c.Repositories.CreateStatus(ctx, owner, repo, sha, body)
	if err != nil {
		return g.classify(fmt.Sprintf("post status %s of %s to github:%s", st.Context, short(sha), t.Repo), err)
	}
	return nil
}

// classify turns go-github's errors into the StatusPoster contract.
func (g *GitHubStatuses) classify(what string, err error) error {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		wait := rl.Rate.Reset.Sub(g.now())
		return &RateLimitedError{Provider: "GitHub", Wait: min(max(wait, time.Second), maxRateLimitWait), Message: what + ": " + rl.Message}
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		wait := time.Minute
		if abuse.RetryAfter != nil {
			wait = *abuse.RetryAfter
		}
		return &RateLimitedError{Provider: "GitHub", Wait: min(max(wait, time.Second), maxRateLimitWait), Message: what + ": " + abuse.Message}
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		code := er.Response.StatusCode
		if wait, ok := rateLimitWait(er.Response.Header, g.now()); ok && (code == http.StatusForbidden || code == http.StatusTooManyRequests) {
			return &RateLimitedError{Provider: "GitHub", Wait: wait, Message: what + ": " + er.Message}
		}
		if code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests {
			return fmt.Errorf("%w: %s: GitHub answered %d %s", ErrStatusRefused, what, code, er.Message)
		}
		return fmt.Errorf("%s: GitHub answered %d %s", what, code, er.Message)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
