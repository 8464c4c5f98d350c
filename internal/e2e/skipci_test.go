package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// pushWithMessage is a signed GitHub push delivery of repoDir's main at
// sha whose head commit has message.
func pushWithMessage(t *testing.T, e *testenv.Env, secret, repoDir, sha, message, delivery string) api.WebhookResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000", "after": sha,
		"repository":  map[string]any{"full_name": "team/" + filepath.Base(repoDir), "clone_url": repoDir, "default_branch": "main"},
		"head_commit": map[string]any{"id": sha, "message": message},
		"sender":      map[string]any{"login": "pusher"},
	})
	require.NoError(t, err)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(e.Context(), http.MethodPost, e.APIURL+"/webhooks/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var res api.WebhookResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%+v", res)
	return res
}

// TestSkipCIPush: a push whose head commit's message says [skip ci] (or
// [ci skip], any case) starts no job; the webhook's answer says so, and
// the pipeline keeps the event, SKIPPED with the reason. A push without
// the marker runs.
func TestSkipCIPush(t *testing.T) {
	t.Parallel()
	const secret = "skip-secret"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: secret})
	ctx := e.Context()
	rec := recordsFile(t)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "jobs:\n  main:\n    requires: [~commit]\n    image: alpine\n    steps:\n      - run: " + record(rec, "true") + "\n"})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "skippy", Repo: repo.Dir})
	require.NoError(t, err)

	res := pushWithMessage(t, e, secret, repo.Dir, repo.Head(), "docs: typo\n\n[Skip CI]", "skip-1")
	require.Len(t, res.Events, 1)
	require.Len(t, res.Skipped, 1)
	require.Contains(t, res.Skipped[0], "skipped, the head commit")
	require.Contains(t, res.Skipped[0], "says [Skip CI]")
	ev := e.WaitEvent(res.Events[0].ID, time.Minute)
	require.Equal(t, workflows.StatusSkipped, ev.Status)
	require.Equal(t, "skipped: the head commit's message says [Skip CI]", ev.Reason)
	require.Empty(t, ev.Builds)
	list, err := e.API.ListEvents(ctx, "skippy", 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, workflows.StatusSkipped, list[0].Status, "the pipeline's record keeps the skipped push")

	sha := repo.Commit(map[string]string{"README": "x"}, "feat: run me")
	res = pushWithMessage(t, e, secret, repo.Dir, sha, "feat: run me", "skip-2")
	require.Len(t, res.Events, 1)
	require.Empty(t, res.Skipped)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(res.Events[0].ID, 2*time.Minute).Status)
	require.Len(t, readSpans(t, rec), 1, "only the push without the marker ran a build")
}

// TestBadges: a pipeline's and a job's status badge is an SVG of the
// latest status; without a token it is served only once a pipeline admin
// marks the pipeline public, and an outsider (no token, a bad token) is
// refused for a pipeline that is not, as for one that does not exist.
func TestBadges(t *testing.T) {
	t.Parallel()
	const ownerToken, rootToken = "badge-owner-0123456789", "badge-root-0123456789"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Token: rootToken, Tokens: `
tokens:
  - {user: owner, token: ` + ownerToken + `}
  - {user: root, token: ` + rootToken + `, privileges: [manage-pipelines, manage-executors, define-queues]}
`})
	ctx := e.Context()
	owner := api.NewClient(e.APIURL)
	owner.Token = ownerToken
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "jobs:\n  main:\n    requires: [~commit]\n    image: alpine\n    steps:\n      - run: 'true'\n"})
	_, err := owner.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "shiny", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := owner.StartEvent(ctx, "shiny", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev.ID, 2*time.Minute).Status)

	get := func(path, token string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.APIURL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String(), resp.Header
	}
	// Not public: a token reads it, outsiders are refused.
	code, body, hdr := get("/api/v1/pipelines/shiny/badge.svg", ownerToken)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "image/svg+xml", hdr.Get("Content-Type"))
	require.Contains(t, body, "<svg")
	require.Contains(t, body, ">shiny</text>")
	require.Contains(t, body, ">SUCCESS</text>")
	code, body, _ = get("/api/v1/pipelines/shiny/badge.svg?job=main", ownerToken)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, ">shiny:main</text>")
	require.Contains(t, body, ">SUCCESS</text>")
	for _, token := range []string{"", "not-a-token-0123456789"} {
		code, body, _ = get("/api/v1/pipelines/shiny/badge.svg", token)
		require.Equal(t, http.StatusUnauthorized, code, "an outsider is refused a badge of a pipeline that is not public: %s", body)
		require.NotContains(t, body, "<svg")
		code, _, _ = get("/api/v1/pipelines/nosuch/badge.svg", token)
		require.Equal(t, http.StatusUnauthorized, code, "the same answer as for a pipeline that does not exist")
	}

	// Only a pipeline admin marks it public.
	mallory := api.NewClient(e.APIURL)
	mallory.Token = "not-a-token-0123456789"
	yes := true
	_, err = mallory.UpdatePipeline(ctx, "shiny", api.UpdatePipelineRequest{Public: &yes})
	require.Error(t, err)
	p, err := owner.UpdatePipeline(ctx, "shiny", api.UpdatePipelineRequest{Public: &yes})
	require.NoError(t, err)
	require.True(t, p.Public)
	code, body, _ = get("/api/v1/pipelines/shiny/badge.svg?job=main", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, ">SUCCESS</text>")
	// Public covers the badge only.
	code, _, _ = get("/api/v1/pipelines/shiny", "")
	require.Equal(t, http.StatusUnauthorized, code)
	// A bad job name is named.
	code, body, _ = get("/api/v1/pipelines/shiny/badge.svg?job=%3Cscript%3E", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "not a job name")
}

// TestCompletion: `sluice completion` writes bash, zsh and fish scripts
// (cobra's).
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "# bash completion V2 for sluice", "zsh": "#compdef sluice", "fish": "# fish completion for sluice"} {
		out, stderr, code := sluice(t, nil, "completion", shell)
		require.Zero(t, code, stderr)
		require.Contains(t, out, want)
	}
}
