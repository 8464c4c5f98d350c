package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/sluice-ci/sluice/queue"
)

// Sign-in with OpenID Connect (authorization code flow with PKCE):
//
//	GET /ui/oidc/login?next=…  sets the flow cookie (state, nonce, PKCE
//	                           verifier, where to go next; signed, 10
//	                           minutes, SameSite=Lax, path /ui/oidc/) and
//	                           sends the browser to the provider;
//	GET /ui/oidc/callback      takes the flow cookie (once), checks the
//	                           state, exchanges the code with the
//	                           verifier, verifies the ID token (issuer,
//	                           audience, signature, expiry) and its nonce,
//	                           reads the user and groups claims, and starts
//	                           a session (sessions.go).
//
// Anything amiss shows the sign-in page with a fixed reason and starts no
// session.

// OIDCConfig is sluice's client at an OpenID Connect provider.
type OIDCConfig struct {
	Issuer, ClientID, ClientSecret string
	// RedirectURL is .../ui/oidc/callback as the provider sends people
	// back.
	RedirectURL string
	// Name is the provider on the sign-in page (default: the issuer's
	// host).
	Name string
	// Scopes are asked for (default: openid, profile, email, groups).
	Scopes []string
	// HTTPClient talks to the provider (default: 30-second timeout).
	HTTPClient *http.Client
}

// OIDC is an OpenID Connect provider, discovered on first use (and again
// after a failed discovery), so that the API starts while the provider is
// unreachable.
type OIDC struct {
	cfg      OIDCConfig
	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// NewOIDC returns the provider of cfg.
func NewOIDC(cfg OIDCConfig) *OIDC {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "profile", "email", "groups"}
	}
	return &OIDC{cfg: cfg}
}

// Name is the provider's name on the sign-in page.
func (o *OIDC) Name() string {
	if o.cfg.Name != "" {
		return o.cfg.Name
	}
	if u, err := url.Parse(o.cfg.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return "OpenID Connect"
}

func (o *OIDC) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, o.cfg.HTTPClient)
}

// discover reads the provider's configuration once.
func (o *OIDC) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(o.ctx(ctx), o.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("OIDC discovery at %s: %w", o.cfg.Issuer, err)
	}
	o.oauth = &oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: o.cfg.Scopes,
	}
	o.verifier = p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID})
	return o.oauth, o.verifier, nil
}

// oidcCookie carries one sign-in's state, nonce and PKCE verifier from
// /ui/oidc/login to /ui/oidc/callback.
const oidcCookie = "sluice_oidc"

// oidcFlow is what the flow cookie holds.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Exp      int64  `json:"e"`
}

const oidcFlowTTL = 10 * time.Minute

// oidcReasons are the messages a failed sign-in shows (never text the
// provider or a link chose).
var oidcReasons = map[string]string{
	"off":      "sign-in with an identity provider is not configured",
	"provider": "the identity provider cannot be reached: try again, or sign in with an API token",
	"flow":     "this sign-in was not started here, or took too long: sign in again",
	"state":    "the sign-in's state does not match the one this browser started: sign in again",
	"refused":  "the identity provider did not sign you in",
	"exchange": "the identity provider did not confirm the sign-in",
	"token":    "the identity provider's ID token is not valid for sluice",
	"nonce":    "the ID token was not issued for this sign-in (nonce mismatch): sign in again",
	"claims":   "the identity provider's answer does not name you in a way sluice accepts",
	"session":  "cannot start a session",
}

// oidcLogin starts a sign-in at the provider.
func (wh *webHandler) oidcLogin(w http.ResponseWriter, r *http.Request) {
	p := wh.h.d.People
	if p == nil || p.OIDC == nil || wh.h.d.Authenticate == nil {
		wh.oidcFail(w, r, http.StatusNotFound, "off", nil)
		return
	}
	oauth, _, err := p.OIDC.discover(r.Context())
	if err != nil {
		wh.oidcFail(w, r, http.StatusBadGateway, "provider", err)
		return
	}
	flow := oidcFlow{
		State: randomString(24), Nonce: randomString(24), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(r.URL.Query().Get("next")), Exp: p.now().Add(oidcFlowTTL).Unix(),
	}
	v, err := p.seal("oidc-flow", flow)
	if err != nil {
		wh.oidcFail(w, r, http.StatusInternalServerError, "session", err)
		return
	}
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: HttpOnly and SameSite=Lax always; Secure over HTTPS
		Name: oidcCookie, Value: v, Path: "/ui/oidc/", HttpOnly: true, Secure: secureRequest(r),
		SameSite: http.SameSiteLaxMode, MaxAge: int(oidcFlowTTL.Seconds()),
	})
	to := oauth.AuthCodeURL(flow.State, oidc.Nonce(flow.Nonce), oauth2.S256ChallengeOption(flow.Verifier))
	http.Redirect(w, r, to, http.StatusFound)
}

// oidcCallback finishes a sign-in.
func (wh *webHandler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	p := wh.h.d.People
	if p == nil || p.OIDC == nil || wh.h.d.Authenticate == nil {
		wh.oidcFail(w, r, http.StatusNotFound, "off", nil)
		return
	}
	// The flow cookie is good for one callback.
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: HttpOnly and SameSite=Lax always; Secure over HTTPS
		Name: oidcCookie, Value: "", Path: "/ui/oidc/", HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode, MaxAge: -1,
	})
	var flow oidcFlow
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		wh.oidcFail(w, r, http.StatusBadRequest, "flow", err)
		return
	}
	if err := p.unseal("oidc-flow", c.Value, &flow); err != nil {
		wh.oidcFail(w, r, http.StatusBadRequest, "flow", err)
		return
	}
	if p.now().Unix() >= flow.Exp {
		wh.oidcFail(w, r, http.StatusBadRequest, "flow", errors.New("flow cookie expired"))
		return
	}
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.State)) != 1 {
		wh.oidcFail(w, r, http.StatusBadRequest, "state", errors.New("state mismatch"))
		return
	}
	if e := q.Get("error"); e != "" {
		wh.oidcFail(w, r, http.StatusUnauthorized, "refused", fmt.Errorf("provider error %q", e))
		return
	}
	oauth, verifier, err := p.OIDC.discover(r.Context())
	if err != nil {
		wh.oidcFail(w, r, http.StatusBadGateway, "provider", err)
		return
	}
	ctx, cancel := context.WithTimeout(p.OIDC.ctx(r.Context()), 30*time.Second)
	defer cancel()
	tok, err := oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		wh.oidcFail(w, r, http.StatusUnauthorized, "exchange", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		wh.oidcFail(w, r, http.StatusUnauthorized, "token", errors.New("no id_token in the token response"))
		return
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		wh.oidcFail(w, r, http.StatusUnauthorized, "token", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.Nonce)) != 1 {
		wh.oidcFail(w, r, http.StatusUnauthorized, "nonce", errors.New("nonce mismatch"))
		return
	}
	user, groups, err := personClaims(idt, p.Grants)
	if err != nil {
		wh.oidcFail(w, r, http.StatusForbidden, "claims", err)
		return
	}
	if err := p.startSession(w, r, user, groups); err != nil {
		wh.oidcFail(w, r, http.StatusInternalServerError, "session", err)
		return
	}
	wh.signedIn(r, p.Grants.Identity(user, groups), "oidc")
	http.Redirect(w, r, flow.Next, http.StatusSeeOther) //nolint:gosec // G710: safeNext kept only paths under /ui/
}

// signedIn is where every sign-in to the pages succeeds (OIDC, or an API
// token pasted on the sign-in page).
func (wh *webHandler) signedIn(r *http.Request, id queue.Identity, how string) {
	wh.h.log.InfoContext(r.Context(), "signed_in", "user", id.User, "how", how, "roles", id.Roles, "privileges", id.Privileges)
	wh.h.svc.audit(r.Context(), id.User, AuditSignIn, "", id.User, how)
}

// personClaims reads the person's name and groups from the ID token.
func personClaims(idt *oidc.IDToken, g *Grants) (user string, groups []string, err error) {
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", nil, fmt.Errorf("ID token claims: %w", err)
	}
	user, _ = claims[g.UserClaim].(string)
	if g.UserClaim == "email" {
		// An address the provider has not verified names nobody.
		if v, present := claims["email_verified"]; present && v != true {
			return "", nil, fmt.Errorf("email %q is not verified by the identity provider", user)
		}
	}
	if err := g.Check(user); err != nil {
		return "", nil, err
	}
	switch v := claims[g.GroupsClaim].(type) {
	case string:
		groups = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	return user, groups, nil
}

// oidcFail shows the sign-in page with a failed sign-in's reason.
func (wh *webHandler) oidcFail(w http.ResponseWriter, r *http.Request, status int, reason string, err error) {
	if err != nil {
		wh.h.log.WarnContext(r.Context(), "oidc_sign_in_failed", "reason", reason, "error", err)
	}
	wh.render(w, status, "login.html", pageData{Title: "sign in", Data: wh.loginData("/ui/", oidcReasons[reason])})
}

// loginData is what the sign-in page shows.
func (wh *webHandler) loginData(next, msg string) map[string]any {
	d := map[string]any{"Next": next, "Error": msg, "Open": wh.h.d.Authenticate == nil}
	if p := wh.h.d.People; p != nil && p.OIDC != nil && wh.h.d.Authenticate != nil {
		d["OIDC"] = p.OIDC.Name()
		d["OIDCLogin"] = "/ui/oidc/login?next=" + url.QueryEscape(next)
	}
	return d
}
