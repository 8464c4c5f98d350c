package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
)

// oidcSite is an API with OIDC sign-in against an in-process provider.
type oidcSite struct {
	t    *testing.T
	idp  *mockoidc.MockOIDC
	url  string
	deps api.Deps
}

const machineToken = "machine-token-0123456789"

func newOIDCSite(t *testing.T) *oidcSite {
	t.Helper()
	idp, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Shutdown() })
	tokens, err := api.ParseTokens([]byte(`
tokens:
  - {user: machine, token: ` + machineToken + `}
people:
  grants:
    - {group: ops, privileges: [manage-executors]}
`))
	require.NoError(t, err)
	secrets, _, err := api.OpenSecretStore(t.TempDir(), "test key")
	require.NoError(t, err)
	t.Cleanup(func() { _ = secrets.Close() })
	srv := httptest.NewUnstartedServer(nil)
	site := &oidcSite{t: t, idp: idp, url: "http://" + srv.Listener.Addr().String()}
	cfg := idp.Config()
	site.deps = api.Deps{
		Authenticate: tokens.Authenticate, Secrets: secrets, Logger: slog.New(slog.DiscardHandler),
		People: &api.People{
			Grants: tokens.People(), SessionKey: []byte("session key for the oidc tests"),
			OIDC: api.NewOIDC(api.OIDCConfig{Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: site.url + "/ui/oidc/callback", Name: "MockID"}),
		},
	}
	srv.Config.Handler = newHandler(t, site.deps)
	srv.Start()
	t.Cleanup(srv.Close)
	return site
}

// browser is a cookie jar that follows no redirect by itself.
type browser struct {
	t *testing.T
	c *http.Client
	// header goes with every request.
	header http.Header
}

func (s *oidcSite) browser() *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(s.t, err)
	return &browser{t: s.t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// answer is a response, its body read and closed.
type answer struct {
	StatusCode int
	Header     http.Header
	cookies    []*http.Cookie
}

func (b *browser) do(method, target, form string, hdr http.Header) (answer, string) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, target, strings.NewReader(form))
	require.NoError(b.t, err)
	for k, v := range b.header {
		req.Header[k] = v
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if method == http.MethodPost && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	_ = resp.Body.Close()
	return answer{StatusCode: resp.StatusCode, Header: resp.Header, cookies: resp.Cookies()}, string(body)
}

// signIn goes through the flow as user; tamper may change the URL of the
// provider's authorization endpoint (auth) or of the callback (cb).
func (s *oidcSite) signIn(b *browser, user mockoidc.User, tamper func(step string, u *url.URL)) (answer, string) {
	s.t.Helper()
	s.idp.QueueUser(user)
	resp, _ := b.do(http.MethodGet, s.url+"/ui/oidc/login?next=/ui/tokens", "", nil)
	require.Equal(s.t, http.StatusFound, resp.StatusCode)
	auth, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(s.t, err)
	q := auth.Query()
	require.NotEmpty(s.t, q.Get("state"))
	require.NotEmpty(s.t, q.Get("nonce"))
	require.Equal(s.t, "S256", q.Get("code_challenge_method"), "PKCE")
	if tamper != nil {
		tamper("auth", auth)
	}
	resp, _ = b.do(http.MethodGet, auth.String(), "", nil)
	require.Equal(s.t, http.StatusFound, resp.StatusCode)
	cb, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(s.t, err)
	if tamper != nil {
		tamper("callback", cb)
	}
	return b.do(http.MethodGet, cb.String(), "", nil)
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrf reads the CSRF token of the browser's session from a page.
func (s *oidcSite) csrf(b *browser) string {
	s.t.Helper()
	resp, body := b.do(http.MethodGet, s.url+"/ui/tokens", "", nil)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, body)
	m := csrfMeta.FindStringSubmatch(body)
	require.NotNil(s.t, m, body)
	return m[1]
}

var mintedToken = regexp.MustCompile(`value="(sluice_pt_[A-Za-z0-9_-]+)"`)

// mint mints a personal token on the tokens page.
func (s *oidcSite) mint(b *browser) string {
	s.t.Helper()
	resp, body := b.do(http.MethodPost, s.url+"/ui/tokens", url.Values{"csrf": {s.csrf(b)}, "name": {"laptop"}, "days": {"7"}}.Encode(), nil)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, body)
	require.Equal(s.t, "no-store", resp.Header.Get("Cache-Control"))
	m := mintedToken.FindStringSubmatch(body)
	require.NotNil(s.t, m, body)
	return m[1]
}

func (s *oidcSite) api(method, path, token string) (answer, string) {
	s.t.Helper()
	b := &browser{t: s.t, c: http.DefaultClient}
	return b.do(method, s.url+path, "", http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}})
}

func sessionCookieOf(resp answer) *http.Cookie {
	for _, c := range resp.cookies {
		if c.Name == "sluice_session" && c.Value != "" {
			return c
		}
	}
	return nil
}

// A person signs in through the provider: the session cookie is HttpOnly,
// SameSite=Lax and expires; their grants decide what they may do, on the
// pages (a page action with their own CSRF token) and with the personal
// token they mint, which lists, revokes and stops working.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	s := newOIDCSite(t)

	resp, body := s.browser().do(http.MethodGet, s.url+"/ui/login", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Sign in with MockID")
	require.Contains(t, body, `name="token"`, "the API token form stays as a fallback")

	olga := s.browser()
	resp, body = s.signIn(olga, &mockoidc.MockUser{Subject: "1", Email: "olga@example.com", EmailVerified: true, Groups: []string{"ops", "unrelated"}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/ui/tokens", resp.Header.Get("Location"))
	c := sessionCookieOf(resp)
	require.NotNil(t, c)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
	require.Positive(t, c.MaxAge)
	require.False(t, c.Secure, "plain HTTP (Secure only over HTTPS)")
	// Behind a proxy that says the page was reached over HTTPS, the
	// cookies are Secure.
	tls := s.browser()
	tls.header = http.Header{"X-Forwarded-Proto": {"https"}}
	resp, body = s.signIn(tls, &mockoidc.MockUser{Subject: "1", Email: "olga@example.com", EmailVerified: true}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.True(t, sessionCookieOf(resp).Secure)

	// Her grant (group ops) gives manage-executors: the page action passes
	// its policy and the route itself answers (a bad action: 400).
	resp, body = olga.do(http.MethodPost, s.url+"/ui/executors/x/explode", url.Values{"csrf": {s.csrf(olga)}}.Encode(), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "want activate, deactivate or drain")

	// A personal token acts as her, on the API.
	token := s.mint(olga)
	resp, body = s.api(http.MethodPost, "/api/v1/executors/x/explode", token)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	resp, body = s.api(http.MethodGet, "/api/v1/tokens", token)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var list []api.PersonalToken
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list, 1)
	require.True(t, list[0].Active)
	require.Equal(t, "laptop", list[0].Name)
	require.NotContains(t, body, token, "the list never shows a token")
	// Nobody else revokes it; she does.
	resp, body = s.api(http.MethodPost, "/api/v1/tokens/"+list[0].ID+"/revoke", machineToken)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	resp, body = s.api(http.MethodPost, "/api/v1/tokens/"+list[0].ID+"/revoke", token)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = s.api(http.MethodGet, "/api/v1/tokens", token)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	require.Contains(t, body, "revoked")

	// Signing out ends the session.
	resp, _ = olga.do(http.MethodPost, s.url+"/ui/logout", "", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = olga.do(http.MethodGet, s.url+"/ui/tokens", "", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Location"), "/ui/login")
}

// A person no grant names signs in with no privileges: a forged page
// action carrying her own valid CSRF token is refused, and so is her
// personal token on the API route.
func TestOIDCUnmappedPersonHasNoPrivileges(t *testing.T) {
	t.Parallel()
	s := newOIDCSite(t)
	mia := s.browser()
	resp, body := s.signIn(mia, &mockoidc.MockUser{Subject: "2", Email: "mia@example.com", EmailVerified: true, Groups: []string{"dev"}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	resp, body = mia.do(http.MethodPost, s.url+"/ui/executors/x/explode", url.Values{"csrf": {s.csrf(mia)}}.Encode(), nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, `user &#34;mia@example.com&#34; lacks the manage-executors privilege`)
	token := s.mint(mia)
	resp, body = s.api(http.MethodPost, "/api/v1/executors/x/explode", token)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
}

// The flow refuses a callback whose state is not the one this browser
// started, an ID token whose nonce is not this sign-in's, an unverified
// email, one without the user claim, a name that is a tokens-file user, and a forged session cookie;
// none starts a session.
func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	s := newOIDCSite(t)
	olga := func() *mockoidc.MockUser {
		return &mockoidc.MockUser{Subject: "1", Email: "olga@example.com", EmailVerified: true, Groups: []string{"ops"}}
	}
	for _, tc := range []struct {
		name   string
		user   mockoidc.User
		tamper func(step string, u *url.URL)
		status int
		msg    string
	}{
		{"bad state", olga(), func(step string, u *url.URL) {
			if step == "callback" {
				q := u.Query()
				q.Set("state", "forged-state")
				u.RawQuery = q.Encode()
			}
		}, http.StatusBadRequest, "state does not match"},
		{"bad nonce", olga(), func(step string, u *url.URL) {
			if step == "auth" {
				q := u.Query()
				q.Set("nonce", "another-sign-ins-nonce")
				u.RawQuery = q.Encode()
			}
		}, http.StatusUnauthorized, "nonce mismatch"},
		{"unverified email", unverified{&mockoidc.MockUser{Subject: "5", Email: "eve@example.com"}}, nil, http.StatusForbidden, "does not name you"},
		{"no email", &mockoidc.MockUser{Subject: "3", PreferredUsername: "eve"}, nil, http.StatusForbidden, "does not name you"},
		{"a tokens-file user", &mockoidc.MockUser{Subject: "4", Email: "machine", EmailVerified: true}, nil, http.StatusForbidden, "does not name you"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s.browser()
			resp, body := s.signIn(b, tc.user, tc.tamper)
			require.Equal(t, tc.status, resp.StatusCode, body)
			require.Contains(t, body, tc.msg)
			require.Nil(t, sessionCookieOf(resp), "no session")
			resp, _ = b.do(http.MethodGet, s.url+"/ui/tokens", "", nil)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "not signed in")
		})
	}

	// A session cookie not signed by this server is no session.
	b := s.browser()
	resp, body := s.signIn(b, olga(), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	good := sessionCookieOf(resp)
	payload, _, _ := strings.Cut(good.Value, ".")
	resp, _ = b.do(http.MethodGet, s.url+"/ui/tokens", "", http.Header{"Cookie": {"sluice_session=" + payload + ".forged"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	// The flow cookie is good once: replaying the callback fails.
	b = s.browser()
	s.idp.QueueUser(olga())
	resp, _ = b.do(http.MethodGet, s.url+"/ui/oidc/login", "", nil)
	resp, _ = b.do(http.MethodGet, resp.Header.Get("Location"), "", nil)
	cb := resp.Header.Get("Location")
	resp, body = b.do(http.MethodGet, cb, "", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	resp, body = b.do(http.MethodGet, cb, "", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "not started here")
}

// Only a person signed in with the provider mints a personal token: a page
// signed in with an API token is refused, and so is one without a session.
func TestOIDCMintNeedsAPerson(t *testing.T) {
	t.Parallel()
	s := newOIDCSite(t)
	b := s.browser()
	resp, body := b.do(http.MethodPost, s.url+"/ui/tokens", "csrf=x", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	resp, _ = b.do(http.MethodPost, s.url+"/ui/login", url.Values{"token": {machineToken}, "next": {"/ui/tokens"}}.Encode(), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, body = b.do(http.MethodPost, s.url+"/ui/tokens", url.Values{"csrf": {s.csrf(b)}}.Encode(), nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, "only a person signed in with the identity provider mints personal tokens")
}

// unverified is a user whose ID token says email_verified: false.
type unverified struct{ *mockoidc.MockUser }

func (u unverified) Claims(_ []string, c *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	return &struct {
		*mockoidc.IDTokenClaims
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}{c, u.Email, false}, nil
}

// Without OIDC, or without a session key, no cookie is a session: not even
// one signed with the empty key anyone can compute.
func TestNoSessionWithoutOIDCOrKey(t *testing.T) {
	t.Parallel()
	tokens, err := api.ParseTokens([]byte("tokens:\n  - {user: machine, token: " + machineToken + "}\npeople:\n  grants:\n    - {user: eve@example.com, privileges: [manage-executors]}\n"))
	require.NoError(t, err)
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"u":"eve@example.com","e":4102444800,"i":"x"}`))
	m := hmac.New(sha256.New, nil)
	m.Write([]byte("sluice session v1\x00" + payload))
	forged := "sluice_session=" + payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	for name, p := range map[string]*api.People{
		"no OIDC":        {Grants: tokens.People()},
		"no session key": {Grants: tokens.People(), OIDC: api.NewOIDC(api.OIDCConfig{Issuer: "http://127.0.0.1:1/", ClientID: "c"})},
	} {
		h := newHandler(t, api.Deps{Authenticate: tokens.Authenticate, People: p})
		rec := call(t, h, http.MethodGet, "/ui/tokens", "", http.Header{"Cookie": {forged}})
		require.Equal(t, http.StatusSeeOther, rec.Code, "%s: not signed in", name)
		require.Contains(t, rec.Header().Get("Location"), "/ui/login")
	}
}
