package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Time{
		"90m":                  testNow.Add(-90 * time.Minute),
		"24h":                  testNow.Add(-24 * time.Hour),
		"30d":                  testNow.Add(-30 * 24 * time.Hour),
		"2024-12-31":           time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC),
		"2025-02-28T10:00:00Z": time.Date(2025, 2, 28, 10, 0, 0, 0, time.UTC),
	} {
		got, err := api.ParseSince(in, testNow)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: got %s, want %s", in, got, want)
	}
	for in, msg := range map[string]string{
		"yesterday": `since "yesterday": want a duration back from now (90m, 24h, 30d) or a time`,
		"-1h":       `since "-1h": want a positive duration back from now`,
		"0s":        "want a positive duration",
		"":          "want a duration",
		"3w":        "want a duration",
	} {
		_, err := api.ParseSince(in, testNow)
		require.ErrorContains(t, err, msg, in)
	}
}

// TestAuditRecordsSuccessOnly: deleting a secret through its route leaves
// one record with the caller and the secret's name; a refused and a failed
// request leave none. Who reads the trail.
func TestAuditRecordsSuccessOnly(t *testing.T) {
	t.Parallel()
	secrets, _, err := api.OpenSecretStore(t.TempDir(), "k")
	require.NoError(t, err)
	_, err = secrets.Set(queue.Identity{User: "owner"}, "app", "NPM_TOKEN", api.SetSecretRequest{Value: "hunter2-value"}, testNow)
	require.NoError(t, err)
	svc := newService(t, nil)
	svc.Audit = secrets.AuditTrail()
	require.NotNil(t, svc.Audit)
	who := map[string]queue.Identity{"owner": {User: "owner"}, "mallory": {User: "mallory"}, "root": {User: "root", Privileges: []string{api.PrivilegeManagePipelines}}}
	h := newHandler(t, api.Deps{Service: svc, Secrets: secrets, Authenticate: func(r *http.Request) (queue.Identity, error) {
		return who[r.Header.Get("X-Test-User")], nil
	}})
	as := func(user string) http.Header { return http.Header{"X-Test-User": {user}} }

	rec := call(t, h, http.MethodDelete, "/api/v1/pipelines/app/secrets/NPM_TOKEN", "", as("mallory"))
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	rec = call(t, h, http.MethodDelete, "/api/v1/pipelines/app/secrets/NOT_SET", "", as("owner"))
	require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
	rec = call(t, h, http.MethodDelete, "/api/v1/pipelines/app/secrets/NPM_TOKEN", "", as("owner"))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

	rec = call(t, h, http.MethodGet, "/api/v1/audit", "", as("root"))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	rs, err := svc.ListAudit(t.Context(), url.Values{})
	require.NoError(t, err)
	require.Len(t, rs, 1, "%+v", rs)
	require.Equal(t, api.AuditRecord{ID: rs[0].ID, At: testNow, Actor: "owner", Action: api.AuditSecretDelete, Pipeline: "app", Target: "NPM_TOKEN"}, rs[0])

	// The whole trail is manage-pipelines'; the pipeline's owner reads its own.
	rec = call(t, h, http.MethodGet, "/api/v1/audit", "", as("owner"))
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "needs the manage-pipelines privilege")
	rec = call(t, h, http.MethodGet, "/api/v1/audit?pipeline=app", "", as("owner"))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"secret.delete"`)
	rec = call(t, h, http.MethodGet, "/api/v1/audit?pipeline=app", "", as("mallory"))
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
}

// FuzzParseSince: --since never panics, and a time it answers from a
// duration lies before now.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"24h", "30d", "99999d", "2026-11-26", "2026-11-26T14:00:00Z", "-1h", "", "d", "1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := api.ParseSince(s, testNow)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		if !strings.Contains(s, "-") && !strings.Contains(s, ":") {
			require.False(t, got.After(testNow), "%q: %s", s, got)
		}
	})
}
