package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-ci/sluice/scm"
)

// DeployKeySecret is the pipeline secret holding an ssh private key (a
// deploy key) for its repository.
const DeployKeySecret = "SLUICE_DEPLOY_KEY" //nolint:gosec // G101: a secret's name, not a credential

// RepoAuthSecrets are the pipeline secrets that hold the credentials its
// repository is read with: a token for an http(s) URL, a deploy key for an
// ssh one.
var RepoAuthSecrets = []string{TokenSecret(scm.ProviderGitHub), TokenSecret(scm.ProviderGitLab), DeployKeySecret}

// repoAuthNames are the secrets that may hold location's credentials, in
// order of preference.
func repoAuthNames(location string) []string {
	switch {
	case scm.Kind(location) != scm.KindGitRemote:
		return nil
	case scm.IsHTTPURL(location):
		return []string{TokenSecret(scm.ProviderGitHub), TokenSecret(scm.ProviderGitLab)}
	case scm.IsSSHURL(location):
		return []string{DeployKeySecret}
	}
	return nil
}

// RepoAuthFrom makes a pipeline's repository credentials from the values of
// its secrets (name → value); nil when none fits location.
func RepoAuthFrom(pipeline, location string, values map[string]string) *scm.Auth {
	for _, name := range repoAuthNames(location) {
		v := values[name]
		if v == "" {
			continue
		}
		switch name {
		case DeployKeySecret:
			return &scm.Auth{Scope: pipeline, SSHKey: v}
		case TokenSecret(scm.ProviderGitLab):
			return &scm.Auth{Scope: pipeline, Username: "oauth2", Password: v}
		default:
			return &scm.Auth{Scope: pipeline, Username: "x-access-token", Password: v}
		}
	}
	return nil
}

// RepoAuth reads a pipeline's own repository credentials through tokens
// (nil: none); nil when the pipeline has none for location.
func RepoAuth(ctx context.Context, tokens PipelineTokens, pipeline, location string) (*scm.Auth, error) {
	if tokens == nil || pipeline == "" {
		return nil, nil
	}
	values := map[string]string{}
	for _, name := range repoAuthNames(location) {
		v, found, err := tokens.PipelineToken(ctx, pipeline, name)
		if err != nil {
			return nil, fmt.Errorf("cannot read the pipeline's %s secret: %w", name, err)
		}
		if found && v != "" {
			values[name] = v
			break
		}
	}
	return RepoAuthFrom(pipeline, location, values), nil
}

// AppTokens mints short-lived tokens that read one repository: a GitHub
// App's installation tokens (scm.GitHubAppTokens), minted where the App's
// key is (controllers, the API), never on an executor.
type AppTokens interface {
	// RepoToken mints a token for location; ok is false when the App has
	// none to give there (another host, not installed).
	RepoToken(ctx context.Context, location string) (token string, expires time.Time, ok bool, err error)
}

// AppTokenUser is the user name an App installation token is sent with.
const AppTokenUser = "x-access-token"

// RepoAuthOrApp is RepoAuth, then, when the pipeline has no credentials of
// its own for location, app's installation token for it (nil app: none).
// Precedence: the pipeline's own secret, the App, the host's credentials
// (nil).
func RepoAuthOrApp(ctx context.Context, tokens PipelineTokens, app AppTokens, pipeline, location string) (*scm.Auth, error) {
	auth, err := RepoAuth(ctx, tokens, pipeline, location)
	if err != nil || auth != nil || app == nil {
		return auth, err
	}
	token, _, ok, err := app.RepoToken(ctx, location)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, nil
	}
	return &scm.Auth{Scope: pipeline, Username: AppTokenUser, Password: token, App: true}, nil
}

// AuthRepoOpener opens a repository location with a pipeline's own
// credentials.
type AuthRepoOpener interface {
	OpenAuth(ctx context.Context, location string, auth *scm.Auth) (scm.Repo, error)
}

// openRepo opens location with auth when the opener takes credentials.
func openRepo(ctx context.Context, o RepoOpener, location string, auth *scm.Auth) (scm.Repo, error) {
	if ao, ok := o.(AuthRepoOpener); ok && auth != nil {
		return ao.OpenAuth(ctx, location, auth)
	}
	return o.Open(ctx, location)
}

// cachedRepos is CachedRepos.
type cachedRepos struct{ dir string }

func (c cachedRepos) Open(ctx context.Context, location string) (scm.Repo, error) {
	return scm.Open(ctx, location, c.dir)
}

func (c cachedRepos) OpenAuth(ctx context.Context, location string, auth *scm.Auth) (scm.Repo, error) {
	return scm.OpenAuth(ctx, location, c.dir, auth)
}

// appTokens is the controller's GitHub App token minter (nil: none).
func (a *Activities) appTokens() AppTokens {
	if a.Statuses == nil {
		return nil
	}
	return a.Statuses.AppTokens
}

// pipelineTokens is the controller's reader of pipeline secrets (nil: none).
func (a *Activities) pipelineTokens() PipelineTokens {
	if a.Statuses == nil {
		return nil
	}
	return a.Statuses.PipelineTokens
}
