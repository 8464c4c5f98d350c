package workers

import (
	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/scm"
)

// AppTokens is the minter of cfg's GitHub App installation tokens, which
// read a repository for the pipelines without credentials of their own
// (nil when no App is configured, or SLUICE_GITHUB_APP_REPOS lists no
// repository for it to read). Controllers (the spec read) and the API
// (its own reads, the executors' checkouts) make one: the App's key stays
// with them.
func AppTokens(cfg *config.Config) (activities.AppTokens, error) {
	if cfg.GitHubAppID == 0 || len(cfg.GitHubAppRepos) == 0 {
		return nil, nil
	}
	t, err := scm.NewGitHubAppTokens(cfg.GitHubAPIURL, cfg.GitHubAppID, cfg.GitHubAppKeyFile, cfg.GitHubAppRepos, nil)
	if err != nil {
		return nil, err
	}
	return t, nil
}
