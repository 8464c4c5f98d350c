package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
)

// request builds a request as a browser or a stranger would send it: no
// defaults from the CLI.
func request(method, target, body string, hdr map[string]string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequestWithContext(context.Background(), method, target, rd)
	req.RemoteAddr = "127.0.0.1:50000"
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// Attacks on `sluice dev` from a web page in its user's browser: each used
// to start a pipeline (review finding 4) and is now refused before any
// route runs.
func TestBrowserGuardsRefuseDriveByRequests(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{LoopbackOnly: true})
	create := `{"name":"drive-by","repo":"/tmp/evil"}`
	cases := []struct {
		name   string
		req    *http.Request
		status int
		msg    string
	}{
		{"cross-origin text/plain POST (a CORS simple request)", request(http.MethodPost, "http://127.0.0.1:8080/api/v1/pipelines", create,
			map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain;charset=UTF-8"}), http.StatusForbidden, "cross-origin request refused: Origin"},
		{"cross-origin JSON POST", request(http.MethodPost, "http://127.0.0.1:8080/api/v1/pipelines", create,
			map[string]string{"Origin": "https://evil.example", "Content-Type": "application/json"}), http.StatusForbidden, "cross-origin request refused"},
		{"sandboxed page (Origin: null)", request(http.MethodPost, "http://127.0.0.1:8080/api/v1/builds/a/b/1/cancel", "",
			map[string]string{"Origin": "null"}), http.StatusForbidden, "cross-origin request refused"},
		{"cross-site fetch without Origin", request(http.MethodDelete, "http://127.0.0.1:8080/api/v1/pipelines/x", "",
			map[string]string{"Sec-Fetch-Site": "cross-site"}), http.StatusForbidden, "cross-site request refused"},
		{
			"no-cors POST without a body", request(http.MethodPost, "http://127.0.0.1:8080/api/v1/builds/a/b/1/cancel", "", nil),
			http.StatusUnsupportedMediaType, "needs Content-Type: application/json",
		},
		{"form POST", request(http.MethodPost, "http://127.0.0.1:8080/api/v1/pipelines", "name=x",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), http.StatusUnsupportedMediaType, "needs Content-Type: application/json"},
		{"text/plain log write", request(http.MethodPost, "http://127.0.0.1:8080/api/v1/builds/a/b/1/logs/s?offset=0", "x",
			map[string]string{"Content-Type": "text/plain"}), http.StatusUnsupportedMediaType, "needs Content-Type: application/octet-stream"},
		{"DNS rebinding: a page of evil.example resolved to 127.0.0.1", request(http.MethodGet, "http://evil.example:8080/api/v1/pipelines", "",
			map[string]string{"Origin": "http://evil.example:8080"}), http.StatusForbidden, "evil.example:8080"},
		{
			"DNS rebinding reads the pages too", request(http.MethodGet, "http://evil.example:8080/ui/", "", nil),
			http.StatusForbidden, "answers only to localhost",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.req)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), tc.msg)
		})
	}
}

// What the CLI and a same-origin page send still works.
func TestBrowserGuardsLetTheCLIAndSameOriginThrough(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{LoopbackOnly: true})
	for _, req := range []*http.Request{
		// Reaches the route: validation answers, not a guard.
		request(http.MethodPost, "http://localhost:8080/api/v1/pipelines", `{"name":"bad/name","repo":"x"}`,
			map[string]string{"Content-Type": "application/json"}),
		request(http.MethodPost, "http://127.0.0.1:8080/api/v1/pipelines", `{"name":"bad/name","repo":"x"}`,
			map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": "http://127.0.0.1:8080"}),
		request(http.MethodPost, "http://[::1]:8080/api/v1/pipelines", `{"name":"bad/name","repo":"x"}`,
			map[string]string{"Content-Type": "application/json"}),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
		require.Contains(t, rec.Body.String(), "name")
	}
	// Without LoopbackOnly (an API behind a load balancer) any Host is fine.
	open := newHandler(t, api.Deps{})
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, request(http.MethodGet, "http://ci.example.com/healthz", "", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}

func TestLoopbackAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.5:8080": false, "garbage": false,
	} {
		require.Equal(t, want, api.LoopbackAddr(addr), addr)
	}
}

// Unsigned webhooks (review finding 3): with authentication on, a provider
// without a secret takes no delivery at all; without authentication (sluice
// dev) only this machine may send them.
func TestUnsignedWebhooksRefused(t *testing.T) {
	t.Parallel()
	authOn := newHandler(t, api.Deps{Authenticate: func(*http.Request) (queue.Identity, error) { return queue.System(), nil }})
	authOff := newHandler(t, api.Deps{})
	hdr := map[string]string{"X-Github-Event": "push", "X-Github-Delivery": "d-1", "Content-Type": "application/json"}

	rec := httptest.NewRecorder()
	authOn.ServeHTTP(rec, request(http.MethodPost, "/webhooks/github", pushBody, hdr))
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "github webhooks are refused: SLUICE_GITHUB_SECRET is not set")

	rec = httptest.NewRecorder()
	authOn.ServeHTTP(rec, request(http.MethodPost, "/webhooks/gitlab", gitlabPushBody, map[string]string{"X-Gitlab-Event": "Push Hook"}))
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "SLUICE_GITLAB_SECRET is not set")

	remote := request(http.MethodPost, "/webhooks/github", pushBody, hdr)
	remote.RemoteAddr = "203.0.113.7:40000"
	rec = httptest.NewRecorder()
	authOff.ServeHTTP(rec, remote)
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "only from this machine")

	// From this machine without authentication, the delivery passes the
	// guard (what follows needs Temporal, which this handler lacks).
	rec = httptest.NewRecorder()
	authOff.ServeHTTP(rec, request(http.MethodPost, "/webhooks/github", pushBody, hdr))
	require.NotEqual(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.NotContains(t, rec.Body.String(), "refused")
}

// Made-up methods do not grow the metrics (review finding 8).
func TestMetricsMethodLabelBounded(t *testing.T) {
	t.Parallel()
	svc := newService(t, nil)
	h := newHandler(t, api.Deps{Service: svc, Metrics: api.NewMetrics(svc)})
	for _, m := range []string{"M1", "M2", "BREW", "M1"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request(m, "/healthz", "", nil))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request(http.MethodGet, "/metrics", "", nil))
	body := rec.Body.String()
	require.Contains(t, body, `method="other"`)
	for _, m := range []string{"M1", "M2", "BREW"} {
		require.NotContains(t, body, `method="`+m+`"`)
	}
}

// The sign-in page shows only its own messages, never text from the link
// (review finding 17).
func TestLoginPageDoesNotReflectText(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{Authenticate: func(*http.Request) (queue.Identity, error) { return queue.System(), nil }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request(http.MethodGet, "/ui/login?error=Session+expired,+sign+in+at+https://evil.example", "", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotContains(t, rec.Body.String(), "evil.example")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, request(http.MethodGet, "/ui/login?error=expired", "", nil))
	require.Contains(t, rec.Body.String(), "your session ended")
}

// Repositories on the API's machine are allowed only under
// SLUICE_LOCAL_REPOS (review finding 12: a pipeline on /etc copied it,
// shadow included, into the data directory), symbolic links resolved and
// file:// URLs included.
func TestLocalRepositoriesOnlyUnderAllowedPrefixes(t *testing.T) {
	t.Parallel()
	allowed := t.TempDir()
	link := filepath.Join(allowed, "sneaky")
	require.NoError(t, os.Symlink("/etc", link))
	h := newHandler(t, api.Deps{Service: &api.Service{LocalRepos: []string{allowed}, Logger: slog.New(slog.DiscardHandler)}})
	for _, repo := range []string{"/etc", "file:///etc", link, filepath.Join(allowed, "..", "x")} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request(http.MethodPost, "/api/v1/pipelines", `{"name":"probe","repo":"`+repo+`"}`, map[string]string{"Content-Type": "application/json"}))
		require.Equal(t, http.StatusForbidden, rec.Code, "%s: %s", repo, rec.Body.String())
		require.Contains(t, rec.Body.String(), "SLUICE_LOCAL_REPOS does not allow it", repo)
	}
	// None allowed at all: the default of sluice api.
	none := newHandler(t, api.Deps{Service: &api.Service{Logger: slog.New(slog.DiscardHandler)}})
	rec := httptest.NewRecorder()
	none.ServeHTTP(rec, request(http.MethodPost, "/api/v1/pipelines", `{"name":"probe","repo":"`+filepath.Join(allowed, "x")+`"}`, map[string]string{"Content-Type": "application/json"}))
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "(allowed: none)")
}
