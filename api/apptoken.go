package api

import (
	"context"
	"fmt"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

// withAppToken completes a build's checkout credentials (values, from the
// pipeline's secrets) with the GitHub App's installation token for the
// pipeline's repository, when the App is configured (Service.AppTokens),
// the pipeline has no credentials of its own that fit its repository (its
// own secret wins), and the build is not a fork's pull request: a fork's
// build gets no credential the pipeline did not opt in for forks, and the
// App's token has no such opt-in. The token is minted for this checkout
// (it reads that repository alone and expires within an hour) and travels
// as the SLUICE_GITHUB_TOKEN value: the executor hands it to git as the
// pipeline's own token, through a credential helper. app reports whether
// it was added.
func (s *Service) withAppToken(ctx context.Context, pipeline string, fork bool, values map[string]string) (out map[string]string, app bool, err error) {
	if s == nil || s.AppTokens == nil || fork {
		return values, false, nil
	}
	_, info, err := s.queryPipeline(ctx, pipeline)
	if err != nil {
		return nil, false, err
	}
	location := info.Config.Repo
	if activities.RepoAuthFrom(pipeline, location, values) != nil {
		return values, false, nil // the pipeline's own credentials
	}
	token, _, ok, err := s.AppTokens.RepoToken(ctx, location)
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("the GitHub App's token for %s: %w", scm.RedactURL(location), err)
	case !ok:
		return values, false, nil
	}
	if values == nil {
		values = map[string]string{}
	}
	values[activities.TokenSecret(scm.ProviderGitHub)] = token
	return values, true, nil
}

// LocalSecretSource is secrets.LocalSource for an executor in the API's
// own process (sluice dev, tests), its checkouts also given the GitHub
// App's installation token as the API gives it to other executors
// (withAppToken).
func (s *Service) LocalSecretSource(secrets *SecretStore) activities.SecretSource {
	inner := secrets.LocalSource()
	return activities.SecretSourceFunc(func(ctx context.Context, req activities.SecretRequest) (map[string]string, []string, error) {
		values, withheld, err := inner.ResolveSecrets(ctx, req)
		if err != nil || !req.Checkout {
			return values, withheld, err
		}
		ref, err := workflows.ParseBuildRef(req.Build)
		if err != nil {
			return nil, nil, err
		}
		values, _, err = s.withAppToken(ctx, ref.Pipeline, req.Fork && ref.PR > 0, values)
		return values, withheld, err
	})
}
