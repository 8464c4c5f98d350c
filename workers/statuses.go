package workers

import (
	"net/url"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/scm"
)

// StatusSettings builds a controller's commit status posters from its
// configuration: GitHub with a token or an App, GitLab with a token.
func StatusSettings(cfg *config.Config, tokens activities.PipelineTokens) (*activities.StatusSettings, error) {
	s := &activities.StatusSettings{PublicURL: cfg.PublicURL, GitHubHost: hostOf(cfg.GitHubAPIURL), GitLabHost: hostOf(cfg.GitLabURL)}
	// A pipeline secret SLUICE_GITHUB_TOKEN / SLUICE_GITLAB_TOKEN posts that
	// pipeline's statuses with its own token.
	s.PipelineTokens = tokens
	s.NewPoster = func(provider, token string) (scm.StatusPoster, error) {
		if provider == scm.ProviderGitLab {
			return scm.NewGitLabStatuses(scm.GitLabStatusConfig{URL: cfg.GitLabURL, Token: token}, nil)
		}
		return scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: cfg.GitHubAPIURL, Token: token}, nil)
	}
	if s.PublicURL == "" {
		s.PublicURL = cfg.APIURL
	}
	if s.GitHubHost == "api.github.com" {
		s.GitHubHost = "github.com"
	}
	gh := scm.GitHubStatusConfig{APIURL: cfg.GitHubAPIURL, Token: cfg.GitHubToken, AppID: cfg.GitHubAppID, AppKeyFile: cfg.GitHubAppKeyFile}
	if gh.Configured() {
		p, err := scm.NewGitHubStatuses(gh, nil)
		if err != nil {
			return s, err
		}
		s.Posters.GitHub = p
	}
	apps, err := AppTokens(cfg)
	if err != nil {
		return s, err
	}
	s.AppTokens = apps
	gl := scm.GitLabStatusConfig{URL: cfg.GitLabURL, Token: cfg.GitLabToken}
	if gl.Configured() {
		p, err := scm.NewGitLabStatuses(gl, nil)
		if err != nil {
			return s, err
		}
		s.Posters.GitLab = p
	}
	return s, nil
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
