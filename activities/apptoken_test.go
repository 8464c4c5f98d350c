package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/scm"
)

type fakeApp struct {
	token string
	ok    bool
	err   error
	asked []string
}

func (f *fakeApp) RepoToken(_ context.Context, location string) (string, time.Time, bool, error) {
	f.asked = append(f.asked, location)
	return f.token, time.Time{}, f.ok, f.err
}

// TestRepoAuthOrAppPrecedence: the pipeline's own secret wins over the
// GitHub App, which is asked only without one; an App with nothing for
// the repository leaves the host's credentials (nil); an App that cannot
// answer is an error (the spec read is retried), not a silent fallback.
func TestRepoAuthOrAppPrecedence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const loc = "https://github.com/acme/app.git"
	secrets := map[string]string{}
	tokens := PipelineTokenFunc(func(_ context.Context, _, name string) (string, bool, error) {
		v, ok := secrets[name]
		return v, ok, nil
	})

	app := &fakeApp{token: "ghs_app", ok: true}
	auth, err := RepoAuthOrApp(ctx, tokens, app, "p", loc)
	require.NoError(t, err)
	require.Equal(t, &scm.Auth{Scope: "p", Username: "x-access-token", Password: "ghs_app", App: true}, auth)
	require.Equal(t, []string{loc}, app.asked)

	secrets["SLUICE_GITHUB_TOKEN"] = "ghp_own"
	app.asked = nil
	auth, err = RepoAuthOrApp(ctx, tokens, app, "p", loc)
	require.NoError(t, err)
	require.Equal(t, "ghp_own", auth.Password, "the pipeline's own secret wins")
	require.Empty(t, app.asked, "the App is not asked")
	delete(secrets, "SLUICE_GITHUB_TOKEN")

	auth, err = RepoAuthOrApp(ctx, tokens, &fakeApp{}, "p", loc)
	require.NoError(t, err)
	require.Nil(t, auth, "not installed: the host's credentials")
	auth, err = RepoAuthOrApp(ctx, tokens, nil, "p", loc)
	require.NoError(t, err)
	require.Nil(t, auth, "no App")

	_, err = RepoAuthOrApp(ctx, tokens, &fakeApp{err: errors.New("GitHub is down")}, "p", loc)
	require.ErrorContains(t, err, "GitHub is down")
}
