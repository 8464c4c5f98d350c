package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/scm"
)

func TestRepoAuthFrom(t *testing.T) {
	t.Parallel()
	all := map[string]string{"SLUICE_GITHUB_TOKEN": "gh", "SLUICE_GITLAB_TOKEN": "gl", "SLUICE_DEPLOY_KEY": "key"}
	require.Equal(t, &scm.Auth{Scope: "app", Username: "x-access-token", Password: "gh"}, RepoAuthFrom("app", "https://github.com/a/b.git", all))
	require.Equal(t, &scm.Auth{Scope: "app", Username: "oauth2", Password: "gl"},
		RepoAuthFrom("app", "https://gitlab.com/a/b.git", map[string]string{"SLUICE_GITLAB_TOKEN": "gl", "SLUICE_DEPLOY_KEY": "key"}))
	require.Equal(t, &scm.Auth{Scope: "app", SSHKey: "key"}, RepoAuthFrom("app", "git@github.com:a/b.git", all))
	require.Nil(t, RepoAuthFrom("app", "git@github.com:a/b.git", map[string]string{"SLUICE_GITHUB_TOKEN": "gh"}))
	require.Nil(t, RepoAuthFrom("app", t.TempDir(), all), "a local path takes no credentials")

	// RepoAuth reads only what fits the URL, and says when the API failed.
	var asked []string
	tokens := PipelineTokenFunc(func(_ context.Context, pipeline, name string) (string, bool, error) {
		asked = append(asked, pipeline+"/"+name)
		return all[name], name != "SLUICE_GITHUB_TOKEN", nil
	})
	auth, err := RepoAuth(context.Background(), tokens, "app", "https://example.com/a/b.git")
	require.NoError(t, err)
	require.Equal(t, &scm.Auth{Scope: "app", Username: "oauth2", Password: "gl"}, auth)
	require.Equal(t, []string{"app/SLUICE_GITHUB_TOKEN", "app/SLUICE_GITLAB_TOKEN"}, asked)
	auth, err = RepoAuth(context.Background(), nil, "app", "https://example.com/a/b.git")
	require.NoError(t, err)
	require.Nil(t, auth)
}
