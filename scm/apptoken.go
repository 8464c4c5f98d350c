package scm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// GitHubAppTokens mints a GitHub App's installation tokens that read one
// repository (permission contents: read, that repository alone), for the
// checkouts and spec reads of pipelines that have no credentials of their
// own. It runs where the App's private key is (controllers, the API);
// the key never leaves it. Each token is minted when asked (GitHub makes
// it expire within an hour), never cached: a build gets a fresh one.
type GitHubAppTokens struct {
	apps *github.Client
	// host is the web host of the repositories on this GitHub (github.com
	// for api.github.com, else the API's own host, GitHub Enterprise
	// Server's https://<host>/api/v3/).
	host string
	// repos are the repositories (owner/repo, owner/*; case-insensitive)
	// the tokens may read: the operator's choice of what anyone who may
	// create a pipeline may build with the App's access.
	repos []string
}

// NewGitHubAppTokens reads the App's private key (PEM) from keyFile; apiURL
// is GitHub's REST API base ("" is https://api.github.com/). repos lists
// the repositories (owner/repo or owner/*) the tokens may read; none, no
// token is ever minted.
func NewGitHubAppTokens(apiURL string, appID int64, keyFile string, repos []string, hc *http.Client) (*GitHubAppTokens, error) {
	if appID <= 0 || keyFile == "" {
		return nil, errors.New("a GitHub App needs SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_APP_KEY_FILE")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	if apiURL == "" {
		apiURL = "https://api.github.com/"
	}
	base, err := apiBase("SLUICE_GITHUB_API_URL", apiURL)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_GITHUB_APP_KEY_FILE: %w", err)
	}
	tr := hc.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	atr, err := ghinstallation.NewAppsTransport(tr, appID, key)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_GITHUB_APP_KEY_FILE %s: %w", keyFile, err)
	}
	atr.BaseURL = strings.TrimSuffix(base.String(), "/")
	apps, err := newGitHubClient(base.String(), github.WithHTTPClient(&http.Client{Transport: atr, Timeout: hc.Timeout}))
	if err != nil {
		return nil, err
	}
	host := base.Hostname()
	if strings.EqualFold(host, "api.github.com") {
		host = "github.com"
	}
	for _, r := range repos {
		if err := CheckAppRepoPattern(r); err != nil {
			return nil, fmt.Errorf("SLUICE_GITHUB_APP_REPOS: %w", err)
		}
	}
	return &GitHubAppTokens{apps: apps, host: host, repos: repos}, nil
}

// CheckAppRepoPattern checks one entry of SLUICE_GITHUB_APP_REPOS: owner/repo
// or owner/*.
func CheckAppRepoPattern(p string) error {
	owner, repo, ok := strings.Cut(p, "/")
	if !ok || !reGitHubName.MatchString(owner) || (repo != "*" && !reGitHubName.MatchString(repo)) {
		return fmt.Errorf("%q is not owner/repo or owner/*", p)
	}
	return nil
}

var reGitHubName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// listed reports whether repo (owner/name) is among the repositories the
// tokens may read.
func (g *GitHubAppTokens) listed(repo string) bool {
	owner, _, _ := strings.Cut(repo, "/")
	for _, p := range g.repos {
		if strings.EqualFold(p, repo) || strings.EqualFold(p, owner+"/*") {
			return true
		}
	}
	return false
}

// RepoToken mints an installation token that reads the repository at
// location. ok is false, with no error, when the App has nothing to give
// there: location is not an http(s) URL of a repository on the App's
// GitHub, the App is not installed on it, or its installation may not read
// contents (an App for commit statuses only; GitHub answers 422), or the
// repository is not in SLUICE_GITHUB_APP_REPOS: the
// host's credentials then apply. An error is GitHub not answering, or refusing the App.
func (g *GitHubAppTokens) RepoToken(ctx context.Context, location string) (token string, expires time.Time, ok bool, err error) {
	if !IsHTTPURL(location) || hasCredentials(location) {
		return "", time.Time{}, false, nil
	}
	t, found := TargetFromRepoURL(location, g.host, "")
	if !found || t.Provider != ProviderGitHub {
		return "", time.Time{}, false, nil
	}
	if !g.listed(t.Repo) {
		return "", time.Time{}, false, nil // not in SLUICE_GITHUB_APP_REPOS
	}
	owner, repo, _ := strings.Cut(t.Repo, "/")
	inst, _, err := g.apps.Apps.GetRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound {
			return "", time.Time{}, false, nil // not installed there
		}
		return "", time.Time{}, false, fmt.Errorf("find the GitHub App's installation on %s: %w", t.Repo, err)
	}
	read := "read"
	tok, _, err := g.apps.Apps.CreateInstallationToken(ctx, inst.GetID(), &github.InstallationTokenOptions{
		Repositories: []string{repo},
		Permissions:  &github.InstallationPermissions{Contents: &read},
	})
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusUnprocessableEntity {
			// The installation lacks Contents: read (an App for commit
			// statuses only): it has nothing to give here.
			return "", time.Time{}, false, nil
		}
		return "", time.Time{}, false, fmt.Errorf("mint the GitHub App's installation token for %s: %w", t.Repo, err)
	}
	if tok.GetToken() == "" {
		return "", time.Time{}, false, fmt.Errorf("mint the GitHub App's installation token for %s: GitHub answered no token", t.Repo)
	}
	return tok.GetToken(), tok.GetExpiresAt().Time, true, nil
}
