package scm_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/scm"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

func states(ps []testenv.PostedStatus) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.State
	}
	return out
}

func TestGitHubStatuses(t *testing.T) {
	t.Parallel()
	fake := testenv.NewFakeGitHub(t, "gh-token")
	g, err := scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: fake.URL(), Token: "gh-token"}, nil)
	require.NoError(t, err)
	target := scm.StatusTarget{Provider: scm.ProviderGitHub, Repo: "octo/app"}
	ctx := context.Background()
	long := strings.Repeat("é", 200)
	for _, st := range []scm.CommitStatus{
		{State: scm.StatePending, Context: "sluice/app/test", Description: "waiting for an executor"},
		{State: scm.StateRunning, Context: "sluice/app/test", Description: long, TargetURL: "http://ci.example/ui/builds/app/test/1"},
		{State: scm.StateFailure, Context: "sluice/app/test", Description: "step test exited 1"},
		{State: scm.StateSkipped, Context: "sluice/app/deploy", Description: "not run: requires test, which ended FAILURE"},
	} {
		require.NoError(t, g.PostStatus(ctx, target, sha, st))
	}
	require.Empty(t, fake.Problems())
	got := fake.Statuses()
	// GitHub has no running or skipped: they post as pending and error.
	require.Equal(t, []string{"pending", "pending", "failure", "error"}, states(got))
	require.Equal(t, "octo/app", got[0].Repo)
	require.Equal(t, sha, got[0].SHA)
	require.Len(t, []rune(got[1].Description), 140, "descriptions are cut to GitHub's 140 characters")
	require.True(t, strings.HasSuffix(got[1].Description, "…"))
	require.Equal(t, "http://ci.example/ui/builds/app/test/1", got[1].TargetURL)

	// A rate limit says how long to wait; an outage is transient; bad
	// credentials are refused for good.
	fake.FailFor(3*time.Second, http.StatusForbidden, true)
	err = g.PostStatus(ctx, target, sha, scm.CommitStatus{State: scm.StateSuccess, Context: "sluice/app/x"})
	var rl *scm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	require.InDelta(t, 4*time.Second, rl.Wait, float64(2*time.Second), rl.Error())

	fake2 := testenv.NewFakeGitHub(t, "gh-token")
	g2, err := scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: fake2.URL(), Token: "gh-token"}, nil)
	require.NoError(t, err)
	fake2.FailFor(time.Minute, http.StatusInternalServerError, false)
	err = g2.PostStatus(ctx, target, sha, scm.CommitStatus{State: scm.StateSuccess, Context: "sluice/app/x"})
	require.Error(t, err)
	require.NotErrorIs(t, err, scm.ErrStatusRefused, "a 500 is retried")
	require.NotErrorAs(t, err, &rl)

	bad, err := scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: fake.URL(), Token: "wrong"}, nil)
	require.NoError(t, err)
	time.Sleep(4 * time.Second) // let the rate limit pass
	err = bad.PostStatus(ctx, target, sha, scm.CommitStatus{State: scm.StateSuccess, Context: "sluice/app/x"})
	require.ErrorIs(t, err, scm.ErrStatusRefused)
	require.Contains(t, err.Error(), "401")
}

func TestGitHubAppStatuses(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	fake := testenv.NewFakeGitHub(t, "")
	fake.EnableApp(4242, &key.PublicKey)
	g, err := scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: fake.URL(), AppID: 4242, AppKeyFile: keyFile}, nil)
	require.NoError(t, err)
	target := scm.StatusTarget{Provider: scm.ProviderGitHub, Repo: "octo/app"}
	for _, state := range []string{scm.StatePending, scm.StateSuccess} {
		require.NoError(t, g.PostStatus(context.Background(), target, sha, scm.CommitStatus{State: state, Context: "sluice/app/test"}))
	}
	require.Empty(t, fake.Problems())
	require.Equal(t, []string{"pending", "success"}, states(fake.Statuses()), "posted with the installation token")

	_, err = scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: fake.URL(), AppID: 4242, AppKeyFile: filepath.Join(t.TempDir(), "missing.pem")}, nil)
	require.ErrorContains(t, err, "SLUICE_GITHUB_APP_KEY_FILE")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	fake.EnableApp(4242, &other.PublicKey)
	g2, err := scm.NewGitHubStatuses(scm.GitHubStatusConfig{APIURL: fake.URL(), AppID: 4242, AppKeyFile: keyFile}, nil)
	require.NoError(t, err)
	err = g2.PostStatus(context.Background(), target, sha, scm.CommitStatus{State: scm.StatePending, Context: "sluice/app/test"})
	require.ErrorIs(t, err, scm.ErrStatusRefused, "a key the App does not have is refused")
}

func TestGitLabStatuses(t *testing.T) {
	t.Parallel()
	fake := testenv.NewFakeGitLab(t, "gl-token")
	g, err := scm.NewGitLabStatuses(scm.GitLabStatusConfig{URL: fake.Server.URL, Token: "gl-token"}, nil)
	require.NoError(t, err)
	target := scm.StatusTarget{Provider: scm.ProviderGitLab, Repo: "group/sub/app"}
	ctx := context.Background()
	for _, st := range []scm.CommitStatus{
		{State: scm.StatePending, Context: "sluice/app/test", Description: "waiting"},
		{State: scm.StatePending, Context: "sluice/app/test", Description: "still waiting"}, // GitLab: no transition
		{State: scm.StateRunning, Context: "sluice/app/test"},
		{State: scm.StateFailure, Context: "sluice/app/test"},
		{State: scm.StateError, Context: "sluice/app/lint", Description: "collapsed into build app/lint/3"},
		{State: scm.StateSkipped, Context: "sluice/app/deploy"},
	} {
		require.NoError(t, g.PostStatus(ctx, target, sha, st))
	}
	require.Empty(t, fake.Problems())
	got := fake.Statuses()
	require.Equal(t, []string{"pending", "running", "failed", "canceled", "skipped"}, states(got))
	require.Equal(t, "group/sub/app", got[0].Repo, "the project path travels URL-encoded as the project ID")

	fake.FailFor(2*time.Second, http.StatusTooManyRequests, true)
	err = g.PostStatus(ctx, target, sha, scm.CommitStatus{State: scm.StateSuccess, Context: "sluice/app/x"})
	var rl *scm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	require.LessOrEqual(t, rl.Wait, 4*time.Second)

	bad, err := scm.NewGitLabStatuses(scm.GitLabStatusConfig{URL: fake.Server.URL, Token: "nope"}, nil)
	require.NoError(t, err)
	time.Sleep(3 * time.Second)
	require.ErrorIs(t, bad.PostStatus(ctx, target, sha, scm.CommitStatus{State: scm.StateSuccess, Context: "c"}), scm.ErrStatusRefused)
}

func TestStatusTargets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want, err string
	}{
		{in: "github:octo/app", want: "github:octo/app"},
		{in: "gitlab:group/sub/app", want: "gitlab:group/sub/app"},
		{in: "github:octo", err: "<owner>/<repo>"},
		{in: "bitbucket:a/b", err: `unknown provider "bitbucket"`},
		{in: "octo/app", err: "want github:"},
	} {
		got, err := scm.ParseStatusTarget(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got.String())
	}
	for _, tt := range []struct {
		url  string
		want string
	}{
		{"https://github.com/Octo/App.git", "github:octo/app"},
		{"git@github.com:octo/app.git", "github:octo/app"},
		{"https://gitlab.com/group/sub/app", "gitlab:group/sub/app"},
		{"https://git.corp.example/team/app.git", "gitlab:team/app"}, // the configured GitLab host
		{"https://ghe.corp.example/org/app", "github:org/app"},       // the configured GitHub host
		{"/srv/git/app", ""},
		{"https://bitbucket.org/a/b", ""},
	} {
		got, ok := scm.TargetFromRepoURL(tt.url, "ghe.corp.example", "git.corp.example")
		if tt.want == "" {
			require.False(t, ok, tt.url)
			continue
		}
		require.True(t, ok, tt.url)
		require.Equal(t, tt.want, got.String(), tt.url)
	}
}
