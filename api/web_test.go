package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
)

// tokenAuth accepts one bearer token.
func tokenAuth(token string) func(*http.Request) (queue.Identity, error) {
	return func(r *http.Request) (queue.Identity, error) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			return queue.Identity{}, errors.New("unknown token")
		}
		return queue.Identity{User: "ann"}, nil
	}
}

func TestWebPagesNeedATokenCookie(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{Authenticate: tokenAuth("good-token")})
	for _, cookie := range []string{"", "sluice_token=bad"} {
		rec := call(t, h, http.MethodGet, "/ui/pipelines/app?x=1", "", http.Header{"Cookie": {cookie}})
		require.Equal(t, http.StatusSeeOther, rec.Code, "cookie %q", cookie)
		require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/pipelines/app?x=1"), rec.Header().Get("Location"))
	}
	rec := call(t, h, http.MethodGet, "/ui/builds/app/test/1/log-follow", "", nil)
	require.Equal(t, http.StatusUnauthorized, rec.Code, "the log's follow answers 401, not a redirect")

	// A valid cookie reaches the page: a bad ID is a 400 page naming it.
	rec = call(t, h, http.MethodGet, "/ui/pipelines/app/events/zero", "", http.Header{"Cookie": {"sluice_token=good-token"}})
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Body.String(), "want &lt;pipeline&gt;/&lt;number&gt;")
	rec = call(t, h, http.MethodGet, "/ui/nothing/here", "", http.Header{"Cookie": {"sluice_token=good-token"}})
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), "no page at /ui/nothing/here")
}

func TestWebLogin(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{Authenticate: tokenAuth("good-token")})
	form := func(v url.Values) string { return v.Encode() }
	hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

	rec := call(t, h, http.MethodGet, "/ui/login?next=/ui/queues/default", "", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `name="next" value="/ui/queues/default"`)
	require.NotEmpty(t, rec.Header().Get("Content-Security-Policy"))

	rec = call(t, h, http.MethodPost, "/ui/login", form(url.Values{"token": {"wrong"}, "next": {"/ui/"}}), hdr)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "that token is not valid")
	require.Empty(t, rec.Result().Cookies())

	rec = call(t, h, http.MethodPost, "/ui/login", form(url.Values{"token": {""}}), hdr)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "enter an API token")

	rec = call(t, h, http.MethodPost, "/ui/login", form(url.Values{"token": {"good-token"}, "next": {"/ui/queues/default"}}), hdr)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/ui/queues/default", rec.Header().Get("Location"))
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, "sluice_token", c.Name)
	require.Equal(t, "good-token", c.Value)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/ui/", c.Path)

	// Only pages of this site are followed after sign-in.
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/ui/\\evil", "/api/v1/pipelines"} {
		rec = call(t, h, http.MethodPost, "/ui/login", form(url.Values{"token": {"good-token"}, "next": {next}}), hdr)
		require.Equal(t, "/ui/", rec.Header().Get("Location"), next)
	}

	rec = call(t, h, http.MethodPost, "/ui/logout", "", nil)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, -1, rec.Result().Cookies()[0].MaxAge)
}

func TestWebAssetsAndRoot(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{})
	rec := call(t, h, http.MethodGet, "/", "", nil)
	require.Equal(t, http.StatusFound, rec.Code)
	require.Equal(t, "/ui/", rec.Header().Get("Location"))
	rec = call(t, h, http.MethodGet, "/ui/static/style.css", "", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), ".s-success")
	rec = call(t, h, http.MethodGet, "/ui/static/live.js", "", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "location.reload")
	// Auth off: the login page says so and sign-in goes straight on.
	rec = call(t, h, http.MethodPost, "/ui/login", "token=x&next=/ui/queues/q", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/ui/queues/q", rec.Header().Get("Location"))
}

// TestWebActionsNeedTheSessionsCSRFToken: with authentication off (sluice
// dev), a page action needs the token derived from the visitor's own
// sluice_csrf cookie: none, or another session's, is refused before the
// route runs; the right one reaches the route (here refusing a bad ID).
func TestWebActionsNeedTheSessionsCSRFToken(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{})
	csrf := func(session string) string {
		m := hmac.New(sha256.New, []byte(session))
		m.Write([]byte("sluice page action v1"))
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	post := func(cookie, token string, hdr http.Header) *httptest.ResponseRecorder {
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			hdr.Set("Cookie", "sluice_csrf="+cookie)
		}
		return call(t, h, http.MethodPost, "/ui/events/app/zero/cancel", url.Values{"csrf": {token}}.Encode(), hdr)
	}
	for _, c := range []struct{ cookie, token string }{
		{"", ""}, {"", csrf("")}, {"session-1", ""}, {"session-1", csrf("session-2")}, {"session-1", "session-1"},
	} {
		rec := post(c.cookie, c.token, nil)
		require.Equal(t, http.StatusForbidden, rec.Code, "%+v: %s", c, rec.Body.String())
		require.Contains(t, rec.Body.String(), "CSRF token is missing or not this session")
	}
	rec := post("session-1", csrf("session-1"), http.Header{"Referer": {"https://evil.example/"}})
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "Referer")
	rec = post("session-1", csrf("session-1"), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, "the route itself answers: %s", rec.Body.String())
	require.Contains(t, rec.Body.String(), "zero")
}
