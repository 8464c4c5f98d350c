package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

const (
	aliceToken = "alice-0123456789abcdef"
	bobToken   = "bob-0123456789abcdef"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func testTokens(t *testing.T) *api.Tokens {
	t.Helper()
	tokens, err := api.ParseTokens([]byte(`
tokens:
  - user: alice
    token: ` + aliceToken + `
    roles: [dev]
    privileges: [define-queues, manage-executors]
  - user: bob
    sha256: ` + strings.ToUpper(sum(bobToken)) + `
    roles: [qa]
`))
	require.NoError(t, err)
	require.Equal(t, 2, tokens.Len())
	return tokens
}

func TestTokensAuthenticate(t *testing.T) {
	t.Parallel()
	tokens := testTokens(t)
	tests := []struct {
		name    string
		header  string
		want    queue.Identity
		wantErr string
	}{
		{name: "plain token", header: "Bearer " + aliceToken, want: queue.Identity{User: "alice", Roles: []string{"dev"}, Privileges: []string{"define-queues", "manage-executors"}}},
		{name: "hashed token, scheme in any case", header: "bearer " + bobToken, want: queue.Identity{User: "bob", Roles: []string{"qa"}}},
		{name: "missing", header: "", wantErr: "missing Authorization header"},
		{name: "basic auth", header: "Basic YWxpY2U6eA==", wantErr: "malformed Authorization header: want 'Bearer <token>'"},
		{name: "no token", header: "Bearer ", wantErr: "malformed Authorization header"},
		{name: "unknown", header: "Bearer " + aliceToken + "x", wantErr: "unknown token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/api/v1/queues", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			id, err := tokens.Authenticate(r)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, id)
		})
	}
}

func TestParseTokensErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		want       []string
	}{
		{name: "empty", file: "", want: []string{"empty file, want a 'tokens:' list"}},
		{name: "no tokens", file: "tokens: []", want: []string{"no tokens"}},
		{name: "not YAML", file: "tokens: [", want: []string{"malformed YAML"}},
		{name: "unknown field", file: "tokens:\n  - user: a\n    token: 0123456789abcdef\n    group: x\n", want: []string{"field group not found"}},
		{name: "several problems at once", file: `
tokens:
  - user: a
  - token: 0123456789abcdef-x
  - user: c
    token: short
  - user: d
    sha256: xyz
  - user: e
    token: 0123456789abcdef-e
    sha256: ` + sum("x") + `
  - user: system
    token: 0123456789abcdef-s
  - user: f
    token: 0123456789abcdef-f
  - user: g
    token: 0123456789abcdef-g
    privileges: [launch-missiles]
  - user: h
    token: 0123456789abcdef-f
  - user: i
    token: 0123456789abcdef-i
    roles: [""]
`, want: []string{
			`tokens[0] (user "a"): missing token or sha256`,
			`tokens[1]: missing user`,
			`tokens[2] (user "c"): token is 5 characters, want at least 16`,
			`tokens[3] (user "d"): sha256 "xyz" is not 64 hex digits`,
			`tokens[4] (user "e"): set token or sha256, not both`,
			`tokens[5] (user "system"): user "system" is reserved for sluice itself`,
			`tokens[7] (user "g"): unknown privilege "launch-missiles" (known: define-queues, manage-executors, manage-secrets, read-secrets, manage-pipelines, read-scm-tokens)`,
			`tokens[8] (user "h"): same token as user "f"`,
			`tokens[9] (user "i"): empty role`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tokens, err := api.ParseTokens([]byte(tt.file))
			require.Nil(t, tokens)
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadTokensNamesTheFile(t *testing.T) {
	t.Parallel()
	_, err := api.LoadTokens(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "SLUICE_API_TOKENS_FILE: open ")
	p := filepath.Join(t.TempDir(), "tokens.yaml")
	require.NoError(t, os.WriteFile(p, []byte("tokens:\n  - user: a\n"), 0o600))
	_, err = api.LoadTokens(p)
	require.ErrorContains(t, err, "SLUICE_API_TOKENS_FILE "+p+`: tokens[0] (user "a"): missing token or sha256`)
}

// TestTokensGuardTheAPI serves the real handler over HTTP with a tokens file:
// every /api/v1 route needs a token, health checks do not, and an executor's
// log shipping gets through with its token in BearerTransport and its
// attempt's credential.
func TestTokensGuardTheAPI(t *testing.T) {
	t.Parallel()
	store, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	// Build app/test/1 runs its attempt 1 on the executor holding "cred".
	c := newMockClient(t)
	answerQuery(t, c, "build/app/test/1", workflows.QueryBuild, workflows.BuildState{
		ID: "app/test/1", Status: workflows.StatusRunning, Branch: "main",
		Attempts: []workflows.Attempt{{Number: 1, Executor: "exec", CredentialHash: activities.CredentialHash("cred")}},
	}, 1)
	srv := httptest.NewServer(newHandler(t, api.Deps{Service: newService(t, c), Logs: store, Authenticate: testTokens(t).Authenticate}))
	defer srv.Close()

	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}

	status, _ := do(http.MethodGet, "/healthz", "", "")
	require.Equal(t, http.StatusOK, status)
	for _, path := range []string{"/api/v1/pipelines", "/api/v1/queues", "/api/v1/builds/app/test/1/logs", "/api/v1/nowhere"} {
		status, body := do(http.MethodGet, path, "", "")
		require.Equal(t, http.StatusUnauthorized, status, path)
		require.Contains(t, body, "unauthorized: missing Authorization header", path)
		status, body = do(http.MethodGet, path, "not-a-token", "")
		require.Equal(t, http.StatusUnauthorized, status, path)
		require.Contains(t, body, "unauthorized: unknown token", path)
	}
	status, body := do(http.MethodPost, "/api/v1/builds/app/test/1/logs/unit?offset=0", "", "x")
	require.Equal(t, http.StatusUnauthorized, status, body)

	// A known token reaches the route: here, validation of the body.
	status, body = do(http.MethodPost, "/api/v1/queues", aliceToken, `{"name": "gpu", "rules": ["run-on=moon"]}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, `must be one of controller, executors, any`)

	hc := &http.Client{Transport: api.BearerTransport{Token: bobToken}}
	w, err := logstore.NewRemoteSink(srv.URL, "app/test/1/1", hc, logstore.RemoteOptions{Logger: slog.New(slog.DiscardHandler), Credential: "cred"}).Open("unit")
	require.NoError(t, err)
	_, err = io.WriteString(w, "hello through the token\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	chunk, err := store.Read("app/test/1/1", "unit", 0, 1<<10)
	require.NoError(t, err)
	require.Equal(t, "hello through the token\n", string(chunk.Data))
}
