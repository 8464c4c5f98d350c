package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
)

func TestSecretStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, generated, err := api.OpenSecretStore(dir, "")
	require.NoError(t, err)
	require.True(t, generated, "no key: one is generated")
	ann := queue.Identity{User: "ann"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	_, err = s.Set(ann, "app", "NPM_TOKEN", api.SetSecretRequest{Value: "hunter2-value"}, now)
	require.NoError(t, err)
	_, err = s.Set(ann, "app", "PR_OK", api.SetSecretRequest{Value: "in-prs", AllowInPR: true}, now)
	require.NoError(t, err)
	_, err = s.Set(ann, "app", "FORK_OK", api.SetSecretRequest{Value: "in-forks", AllowInForkPR: true}, now)
	require.NoError(t, err)
	_, err = s.Set(ann, "other", "NPM_TOKEN", api.SetSecretRequest{Value: "other-value"}, now)
	require.NoError(t, err)

	// Encrypted at rest: the database (and its journal) holds no value.
	var raw []byte
	for _, f := range []string{"sluice.db", "sluice.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
		raw = append(raw, b...)
	}
	require.Contains(t, string(raw), "NPM_TOKEN", "the rows are in these files")
	for _, v := range []string{"hunter2-value", "in-prs", "other-value"} {
		require.NotContains(t, string(raw), v)
	}

	list, err := s.List("app")
	require.NoError(t, err)
	require.Equal(t, []api.Secret{
		{Pipeline: "app", Name: "FORK_OK", AllowInPR: true, AllowInForkPR: true, UpdatedAt: now, UpdatedBy: "ann"},
		{Pipeline: "app", Name: "NPM_TOKEN", UpdatedAt: now, UpdatedBy: "ann"},
		{Pipeline: "app", Name: "PR_OK", AllowInPR: true, UpdatedAt: now, UpdatedBy: "ann"},
	}, list)

	vals, withheld, err := s.Resolve("app", []string{"NPM_TOKEN", "PR_OK"}, api.AudienceBranch)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"NPM_TOKEN": "hunter2-value", "PR_OK": "in-prs"}, vals)
	require.Empty(t, withheld)
	vals, withheld, err = s.Resolve("app", []string{"NPM_TOKEN", "PR_OK"}, api.AudiencePR)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"PR_OK": "in-prs"}, vals, "a pull request gets only allowed secrets")
	require.Equal(t, []string{"NPM_TOKEN"}, withheld)
	// A fork's pull request gets none of them, not even --allow-in-pr ones,
	// unless the secret is allowed in fork pull requests.
	vals, withheld, err = s.Resolve("app", []string{"NPM_TOKEN", "PR_OK", "FORK_OK"}, api.AudienceForkPR)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"FORK_OK": "in-forks"}, vals)
	require.Equal(t, []string{"NPM_TOKEN", "PR_OK"}, withheld)
	_, _, err = s.Resolve("app", []string{"NPM_TOKEN", "GHOST", "ALSO_GONE"}, api.AudienceBranch)
	require.ErrorIs(t, err, api.ErrNotFound)
	require.ErrorContains(t, err, "secret ALSO_GONE, GHOST of pipeline app is not set")

	// The same generated key opens the store again; another key cannot read it.
	again, generated, err := api.OpenSecretStore(dir, "")
	require.NoError(t, err)
	require.False(t, generated)
	vals, _, err = again.Resolve("other", []string{"NPM_TOKEN"}, api.AudienceBranch)
	require.NoError(t, err)
	require.Equal(t, "other-value", vals["NPM_TOKEN"])
	wrong, _, err := api.OpenSecretStore(dir, "another key")
	require.NoError(t, err)
	_, _, err = wrong.Resolve("app", []string{"NPM_TOKEN"}, api.AudienceBranch)
	require.ErrorContains(t, err, "cannot be decrypted: was SLUICE_SECRET_KEY changed?")

	require.NoError(t, s.Delete("app", "NPM_TOKEN"))
	require.ErrorIs(t, s.Delete("app", "NPM_TOKEN"), api.ErrNotFound)
	require.NoError(t, s.DeletePipeline("app"))
	list, err = s.List("app")
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestSecretStoreTwoReplicas: two API processes on one data directory
// (here two stores, each with its own database connections) set secrets at
// the same moment; nothing is lost and each reads what the other set. With
// the JSON file of before, this lost secrets or left the file unreadable.
func TestSecretStoreTwoReplicas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	one, _, err := api.OpenSecretStore(dir, "shared key")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, one.Close()) })
	two, _, err := api.OpenSecretStore(dir, "shared key")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, two.Close()) })
	const perReplica = 50
	var g errgroup.Group
	for i := range perReplica {
		for r, s := range []*api.SecretStore{one, two} {
			g.Go(func() error {
				name := fmt.Sprintf("R%d_%02d", r, i)
				_, err := s.Set(queue.Identity{User: "ann"}, "app", name, api.SetSecretRequest{Value: "value of " + name}, time.Now())
				return err
			})
		}
	}
	require.NoError(t, g.Wait())
	for _, s := range []*api.SecretStore{one, two} {
		list, err := s.List("app")
		require.NoError(t, err)
		require.Len(t, list, 2*perReplica)
	}
	vals, _, err := one.Resolve("app", []string{"R1_00", "R1_49"}, api.AudienceBranch)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"R1_00": "value of R1_00", "R1_49": "value of R1_49"}, vals)
}

func TestSecretStoreRefusesBadInput(t *testing.T) {
	t.Parallel()
	s, _, err := api.OpenSecretStore(t.TempDir(), "k")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, secret, value, want string
	}{
		{"lowercase name", "npm_token", "v", `secret name "npm_token"`},
		{"leading digit", "1TOKEN", "v", `secret name "1TOKEN"`},
		{"empty value", "TOKEN", "", "secret TOKEN: empty value"},
		{"too large", "TOKEN", strings.Repeat("x", 65<<10), "at most 65536"},
	} {
		_, err := s.Set(queue.Identity{}, "app", tc.secret, api.SetSecretRequest{Value: tc.value}, time.Now())
		require.ErrorIs(t, err, api.ErrInvalid, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// TestSecretRoutesNeedPrivileges: setting, listing and deleting need
// manage-secrets; reading values needs read-secrets; reading a pipeline's
// SCM token needs read-scm-tokens (read-secrets is not enough).
func TestSecretRoutesNeedPrivileges(t *testing.T) {
	t.Parallel()
	store, _, err := api.OpenSecretStore(t.TempDir(), "k")
	require.NoError(t, err)
	bob := queue.Identity{User: "bob", Privileges: []string{api.PrivilegeReadSecrets}}
	exec := queue.Identity{User: "exec", Privileges: []string{api.PrivilegeManageSecrets}}
	cases := []struct {
		name, method, path, body string
		who                      queue.Identity
		want                     string
	}{
		{"set", http.MethodPut, "/api/v1/pipelines/app/secrets/TOKEN", `{"value":"v"}`, bob, `user "bob" is not an admin of pipeline app (its owner owner, its admins, or the manage-pipelines or manage-secrets privilege)`},
		{"list", http.MethodGet, "/api/v1/pipelines/app/secrets", "", bob, `user "bob" is not an admin of pipeline app`},
		{"delete", http.MethodDelete, "/api/v1/pipelines/app/secrets/TOKEN", "", bob, `user "bob" is not an admin of pipeline app`},
		{"resolve", http.MethodPost, "/api/v1/secrets/resolve", `{"build":"app/deploy/1","names":["TOKEN"]}`, exec, `user "exec" lacks the read-secrets privilege`},
		// An executor's read-secrets does not give out SCM tokens.
		{"scm token", http.MethodPost, "/api/v1/secrets/scm-token", `{"pipeline":"app","name":"SLUICE_GITHUB_TOKEN"}`, bob, `user "bob" lacks the read-scm-tokens privilege`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{Secrets: store, Authenticate: func(*http.Request) (queue.Identity, error) { return tc.who, nil }})
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
			var body api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Contains(t, body.Error, tc.want)
		})
	}
}
