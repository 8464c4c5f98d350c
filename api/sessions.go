package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-ci/sluice/queue"
)

// Sessions of people signed in with OIDC: a cookie holding who signed in
// (their name and the groups some grant names), when the session ends and
// a random ID, signed with HMAC-SHA256 under People.SessionKey. It is
// HttpOnly, Secure when the page was reached over HTTPS, SameSite=Lax, and
// expires; the server keeps no state, so signing out clears the cookie and
// a copy taken before stays good until it expires (12 hours by default).
// The person's roles and privileges are computed from the grants at each
// request, so they follow the tokens file.

// sessionCookie is the signed session of a person signed in with OIDC.
const sessionCookie = "sluice_session"

// minSessionKey is the shortest session key that signs anything.
const minSessionKey = 16

// session is what the session cookie holds.
type session struct {
	User   string   `json:"u"`
	Groups []string `json:"g,omitempty"`
	// Exp is when the session ends (Unix seconds).
	Exp int64 `json:"e"`
	// ID is random: two sessions of one person differ (and so do their
	// CSRF tokens).
	ID string `json:"i"`
}

// seal signs v as "<payload>.<mac>"; kind keeps one kind of cookie from
// being taken for another.
func (p *People) seal(kind string, v any) (string, error) {
	if len(p.SessionKey) < minSessionKey {
		return "", fmt.Errorf("seal %s: the session key is %d bytes, want at least %d", kind, len(p.SessionKey), minSessionKey)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", kind, err)
	}
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + p.mac(kind, payload), nil
}

func (p *People) mac(kind, payload string) string {
	m := hmac.New(sha256.New, p.SessionKey)
	m.Write([]byte("sluice " + kind + " v1\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// unseal checks the signature of a sealed value and decodes it into v.
func (p *People) unseal(kind, sealed string, v any) error {
	payload, mac, ok := strings.Cut(sealed, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(p.mac(kind, payload))) {
		return fmt.Errorf("the %s cookie is not signed by this server", kind)
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return fmt.Errorf("the %s cookie: %w", kind, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("the %s cookie: %w", kind, err)
	}
	return nil
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// secureRequest reports whether the page was reached over HTTPS (directly
// or through a proxy that says so); plain HTTP stays possible for
// localhost.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// startSession sets the session cookie of a person who just signed in.
func (p *People) startSession(w http.ResponseWriter, r *http.Request, user string, groups []string) error {
	ttl := p.sessionTTL()
	v, err := p.seal("session", session{User: user, Groups: p.Grants.Relevant(groups), Exp: p.now().Add(ttl).Unix(), ID: randomString(16)})
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: HttpOnly and SameSite=Lax always; Secure over HTTPS
		Name: sessionCookie, Value: v, Path: "/ui/", HttpOnly: true, Secure: secureRequest(r),
		SameSite: http.SameSiteLaxMode, MaxAge: int(ttl.Seconds()), Expires: p.now().Add(ttl),
	})
	return nil
}

// endSession clears the session cookie.
func endSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: HttpOnly and SameSite=Lax always; Secure over HTTPS
		Name: sessionCookie, Value: "", Path: "/ui/", HttpOnly: true, Secure: secureRequest(r),
		SameSite: http.SameSiteLaxMode, MaxAge: -1,
	})
}

// errNoSession: the request carries no session cookie.
var errNoSession = errors.New("no session")

// session reads and checks the request's session cookie.
func (p *People) session(r *http.Request) (session, string, error) {
	if p.OIDC == nil || len(p.SessionKey) < minSessionKey {
		// No sign-in with OIDC, or no key to check a signature with: no
		// cookie is a session.
		return session{}, "", errNoSession
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return session{}, "", errNoSession
	}
	var s session
	if err := p.unseal("session", c.Value, &s); err != nil {
		return session{}, "", err
	}
	if p.now().Unix() >= s.Exp {
		return session{}, "", errors.New("the session ended: sign in again")
	}
	if err := p.Grants.Check(s.User); err != nil {
		return session{}, "", err
	}
	return s, c.Value, nil
}

// personOf answers the identity of the request's signed-in person and the
// session cookie's value (the secret the CSRF token derives from); ok is
// false without a valid session.
func (wh *webHandler) personOf(r *http.Request) (id queue.Identity, cookie string, ok bool) {
	p := wh.h.d.People
	if p == nil || wh.h.d.Authenticate == nil {
		return queue.Identity{}, "", false
	}
	s, cookie, err := p.session(r)
	if err != nil {
		return queue.Identity{}, "", false
	}
	return p.Grants.Identity(s.User, s.Groups), cookie, true
}

// personName is the signed-in person's name ("" when the page was signed
// in with an API token or not at all).
func (wh *webHandler) personName(r *http.Request) string {
	id, _, ok := wh.personOf(r)
	if !ok {
		return ""
	}
	return id.User
}
