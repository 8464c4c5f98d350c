package scm

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/fakegithub"
)

// TestGitHubAppRepoToken: the App signs in with a JWT its key signed
// (the fake GitHub verifies it), finds its installation on the repository
// and mints a token scoped to that repository alone with contents: read,
// which a git server wanting it as x-access-token's password accepts. A
// repository it is not installed on or may not read contents of, another host, an ssh URL or a URL
// with its own credentials get no token and no error; a key that is not
// the App's is refused.
func TestGitHubAppRepoToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gh := fakegithub.New(t, true)
	h := newHistory(t)
	location := gh.AddRepo(t, h.dir, "acme/app")
	gh.Install("acme/app", 42)
	apps, err := NewGitHubAppTokens(gh.URL+"/api/v3/", gh.AppID, gh.KeyFile, []string{"acme/*", "ACME-LABS/tools"}, nil)
	require.NoError(t, err)

	// Without the token the private repository is refused.
	_, err = Open(ctx, location, t.TempDir())
	require.Error(t, err)
	require.True(t, IsAuthError(err), "%v", err)

	token, expires, ok, err := apps.RepoToken(ctx, location)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotEmpty(t, token)
	require.True(t, expires.After(time.Now()) && !expires.After(time.Now().Add(time.Hour+time.Minute)), "expires %s", expires)
	mints := gh.Mints()
	require.Len(t, mints, 1)
	require.Equal(t, fakegithub.MintedToken{
		Token: token, Installation: 42, Repositories: []string{"app"}, Permissions: map[string]string{"contents": "read"},
	}, mints[0], "one repository, read only")

	r, err := OpenAuth(ctx, location, t.TempDir(), &Auth{Scope: "app", Username: "x-access-token", Password: token})
	require.NoError(t, err)
	sha, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, h.c4, sha)
	used := false
	for _, q := range gh.GitRequests() {
		used = used || (q.Token == token && !q.Refused)
	}
	require.True(t, used, "git fetched with the installation token")

	// Each call mints a fresh token.
	again, _, ok, err := apps.RepoToken(ctx, location)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotEqual(t, token, again)

	gh.InstallWithoutContents("acme/statuses-only", 43)
	for _, loc := range []string{
		gh.URL + "/acme/statuses-only.git",                                           // installed, but may not read contents
		gh.URL + "/acme/other.git",                                                   // not installed there
		"https://gitlab.example/acme/app.git",                                        // another host
		"git@github.com:acme/app.git",                                                // ssh: a token does not fit
		"http://x-access-token:own@" + gh.Listener.Addr().String() + "/acme/app.git", // the URL's own credentials
	} {
		_, _, ok, err := apps.RepoToken(ctx, loc)
		require.NoError(t, err, loc)
		require.False(t, ok, loc)
	}
	require.Len(t, gh.Mints(), 2, "no token minted for the others")

	// A repository the App is installed on but SLUICE_GITHUB_APP_REPOS
	// does not list gets no token: whoever may create a pipeline builds
	// only what the operator listed.
	gh.AddRepo(t, h.dir, "secret-org/payroll")
	gh.Install("secret-org/payroll", 44)
	_, _, ok, err = apps.RepoToken(ctx, gh.URL+"/secret-org/payroll.git")
	require.NoError(t, err)
	require.False(t, ok, "an unlisted repository")
	gh.AddRepo(t, h.dir, "acme-labs/tools")
	gh.Install("acme-labs/tools", 45)
	_, _, ok, err = apps.RepoToken(ctx, gh.URL+"/acme-labs/tools.git")
	require.NoError(t, err)
	require.True(t, ok, "a listed repository, whatever the case")
	require.Len(t, gh.Mints(), 3)

	// A key that is not the App's: GitHub refuses its JWT.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "other.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)}), 0o600))
	forged, err := NewGitHubAppTokens(gh.URL+"/api/v3/", gh.AppID, keyFile, []string{"acme/*"}, nil)
	require.NoError(t, err)
	_, _, ok, err = forged.RepoToken(ctx, location)
	require.ErrorContains(t, err, "installation on acme/app")
	require.ErrorContains(t, err, "not signed by the App's key")
	require.False(t, ok)
	require.Len(t, gh.Mints(), 3)

	// Configuration errors name the setting.
	_, err = NewGitHubAppTokens(gh.URL+"/api/v3/", gh.AppID, filepath.Join(t.TempDir(), "missing.pem"), nil, nil)
	require.ErrorContains(t, err, "SLUICE_GITHUB_APP_KEY_FILE")
	_, err = NewGitHubAppTokens("ftp://x", gh.AppID, gh.KeyFile, nil, nil)
	require.ErrorContains(t, err, "SLUICE_GITHUB_API_URL")
	_, err = NewGitHubAppTokens(gh.URL+"/api/v3/", gh.AppID, gh.KeyFile, []string{"acme"}, nil)
	require.ErrorContains(t, err, `SLUICE_GITHUB_APP_REPOS: "acme" is not owner/repo or owner/*`)
}
