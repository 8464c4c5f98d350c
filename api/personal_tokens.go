package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/store"
)

// Personal tokens: a person signed in with OIDC mints a token for the CLI
// on the tokens page (POST /ui/tokens, with the session's CSRF token). The
// token is shown once; sluice's store keeps its SHA-256, the person's name,
// the groups some grant names, and when it expires. Used as a bearer
// token, it acts as that person with the roles and privileges the tokens
// file's grants give them now (a grant removed from the file is removed
// from the token). Its owner lists and revokes it (GET /api/v1/tokens, POST
// /api/v1/tokens/{id}/revoke, or the tokens page). Only a session mints
// one: an API token, personal or not, cannot.

// PersonalTokenPrefix starts every personal token.
const PersonalTokenPrefix = "sluice_pt_" //nolint:gosec // G101: a prefix, not a credential

// PolicyPerson admits a person signed in to the pages with OIDC (not an
// API token, not a personal token).
const PolicyPerson = "person"

// personKey marks a request whose identity is an OIDC session's.
type personKey struct{}

// PersonalToken is a personal token as its owner sees it (never the
// token itself).
type PersonalToken struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// Active is false once the token is revoked or expired.
	Active bool `json:"active"`
}

// PersonalTokens is the store of personal tokens, when the secrets'
// database keeps one (nil otherwise).
func (s *SecretStore) PersonalTokens() store.PersonalTokens {
	if s == nil {
		return nil
	}
	t, _ := s.db.(store.PersonalTokens)
	return t
}

func (h *handler) personalTokens() (store.PersonalTokens, error) {
	if t := h.d.Secrets.PersonalTokens(); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%w: personal tokens need sluice's store (SLUICE_DB), which this API has not opened", ErrNotFound)
}

// withPersonalTokens wraps an authenticator: a bearer token with
// PersonalTokenPrefix is looked up in the store, any other goes to next.
func (p *People) withPersonalTokens(next func(*http.Request) (queue.Identity, error), tokens store.PersonalTokens) func(*http.Request) (queue.Identity, error) {
	return func(r *http.Request) (queue.Identity, error) {
		_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !strings.HasPrefix(token, PersonalTokenPrefix) {
			return next(r)
		}
		sum := sha256.Sum256([]byte(token))
		t, found, err := tokens.PersonalTokenBySHA256(r.Context(), hex.EncodeToString(sum[:]))
		switch {
		case err != nil:
			return queue.Identity{}, err //nolint:wrapcheck // the store names itself
		case !found:
			return queue.Identity{}, errors.New("unknown token")
		case !t.RevokedAt.IsZero():
			return queue.Identity{}, fmt.Errorf("personal token %s was revoked", t.ID)
		case !p.now().Before(t.ExpiresAt):
			return queue.Identity{}, fmt.Errorf("personal token %s expired at %s: mint another on the tokens page", t.ID, t.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if err := p.Grants.Check(t.User); err != nil {
			return queue.Identity{}, err
		}
		return p.Grants.Identity(t.User, t.Groups), nil
	}
}

func publicPersonalToken(t store.PersonalToken, now time.Time) PersonalToken {
	return PersonalToken{
		ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt,
		Active: t.RevokedAt.IsZero() && now.Before(t.ExpiresAt),
	}
}

func (h *handler) now() time.Time {
	if h.d.People != nil {
		return h.d.People.now()
	}
	return time.Now()
}

// callerTokens is the caller and the store of personal tokens; on failure
// it has answered (false).
func (h *handler) callerTokens(w http.ResponseWriter, r *http.Request) (queue.Identity, store.PersonalTokens, bool) {
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return id, nil, false
	}
	tokens, err := h.personalTokens()
	if err != nil {
		h.fail(w, r, err)
		return id, nil, false
	}
	return id, tokens, true
}

// listPersonalTokens answers the caller's personal tokens.
func (h *handler) listPersonalTokens(w http.ResponseWriter, r *http.Request) {
	id, tokens, ok := h.callerTokens(w, r)
	if !ok {
		return
	}
	list, err := tokens.ListPersonalTokens(r.Context(), id.User)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]PersonalToken, 0, len(list))
	now := h.now()
	for _, t := range list {
		out = append(out, publicPersonalToken(t, now))
	}
	writeJSON(w, http.StatusOK, out)
}

// revokePersonalToken revokes one of the caller's personal tokens.
func (h *handler) revokePersonalToken(w http.ResponseWriter, r *http.Request) {
	id, tokens, ok := h.callerTokens(w, r)
	if !ok {
		return
	}
	tid := r.PathValue("id")
	ok, err := tokens.RevokePersonalToken(r.Context(), id.User, tid, h.now())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !ok {
		h.fail(w, r, fmt.Errorf("%w: user %q has no personal token %q", ErrNotFound, id.User, tid))
		return
	}
	h.svc.audit(r.Context(), id.User, AuditTokenRevoke, "", tid, "")
	writeJSON(w, http.StatusOK, map[string]string{"revoked": tid})
}

// personalTokenRoutes are the API routes of personal tokens.
func (h *handler) personalTokenRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/v1/tokens", Policy: authenticated, handler: http.HandlerFunc(h.listPersonalTokens)},
		{Pattern: "POST /api/v1/tokens/{id}/revoke", Policy: authenticated, handler: http.HandlerFunc(h.revokePersonalToken)},
	}
}

// personPageRoutes are page routes that are not page actions of an API
// route, with their policies.
func personPageRoutes() []Route {
	return []Route{{Pattern: "POST /ui/tokens", Policy: Policy{Kind: PolicyPerson}}}
}

// personalTokenAction is the page action revoking a personal token.
func personalTokenAction() webAction {
	return webAction{
		Pattern: "POST /ui/tokens/{id}/revoke", API: "POST /api/v1/tokens/{id}/revoke", done: "revoked",
		request: func(r *http.Request) (string, any, error) {
			return "/api/v1/tokens/" + pesc(r.PathValue("id")) + "/revoke", nil, nil
		},
		landing: func(*http.Request, []byte) string { return "/ui/tokens" },
	}
}

// allowedPerson is PolicyPerson's check.
func allowedPerson(r *http.Request, id queue.Identity) error {
	if person, _ := r.Context().Value(personKey{}).(bool); person {
		return nil
	}
	if id.User == "" {
		return fmt.Errorf("%w: sign in first", ErrUnauthorized)
	}
	return fmt.Errorf("%w: only a person signed in with the identity provider mints personal tokens (user %q signed in with an API token, or sign-in with an identity provider is off)", queue.ErrForbidden, id.User)
}

// ---- the tokens page ------------------------------------------------------

// tokensPage is the personal tokens page.
type tokensPage struct {
	// Person is the signed-in person ("" when signed in with an API token).
	Person string
	// Provider names the identity provider ("" when none is configured).
	Provider string
	Tokens   []PersonalToken
	// Minted is a token just minted, shown this once.
	Minted string
	// MintedID is its ID.
	MintedID string
	// Can says which actions the page shows.
	CanMint, CanRevoke bool
}

// tokens shows the signed-in user's personal tokens.
func (wh *webHandler) tokens(r *http.Request) (string, any, error) {
	return wh.tokensPage(r, "", "")
}

func (wh *webHandler) tokensPage(r *http.Request, minted, mintedID string) (string, any, error) {
	id, err := wh.pageIdentity(r)
	if err != nil {
		return "", nil, err
	}
	page := &tokensPage{Minted: minted, MintedID: mintedID}
	if p := wh.h.d.People; p != nil && p.OIDC != nil {
		page.Provider = p.OIDC.Name()
	}
	if pid, _, ok := wh.personOf(r); ok {
		page.Person = pid.User
		page.CanMint = true
	}
	tokens, err := wh.h.personalTokens()
	if err != nil {
		return "tokens.html", page, nil //nolint:nilerr // the page says personal tokens are off
	}
	list, err := tokens.ListPersonalTokens(r.Context(), id.User)
	if err != nil {
		return "", nil, err //nolint:wrapcheck // the store names itself
	}
	now := wh.h.now()
	for _, t := range list {
		page.Tokens = append(page.Tokens, publicPersonalToken(t, now))
	}
	page.CanRevoke = wh.canDo(r, id, map[string]bool{}, "POST /api/v1/tokens/{id}/revoke", "id", "-")
	return "tokens.html", page, nil
}

// mintDays are the lifetimes a personal token may have, in days.
const maxTokenDays = 365

// mintToken mints a personal token for the signed-in person and shows it
// once.
func (wh *webHandler) mintToken(w http.ResponseWriter, r *http.Request) {
	pid, _, person := wh.personOf(r)
	id := pid
	if !person {
		var err error
		if id, err = wh.pageIdentity(r); err != nil {
			wh.actionError(w, r, http.StatusUnauthorized, "sign in first: "+err.Error())
			return
		}
	} else {
		r = r.WithContext(context.WithValue(r.Context(), personKey{}, true))
	}
	if err := wh.h.allowed(r, id, Policy{Kind: PolicyPerson}); err != nil {
		wh.actionError(w, r, http.StatusForbidden, err.Error())
		return
	}
	if !wh.checkForm(w, r) {
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if len(name) > 64 || strings.IndexFunc(name, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0 {
		wh.actionError(w, r, http.StatusBadRequest, "token name: at most 64 printable characters")
		return
	}
	days := 30
	if s := strings.TrimSpace(r.PostForm.Get("days")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxTokenDays {
			wh.actionError(w, r, http.StatusBadRequest, fmt.Sprintf("token lifetime: want 1-%d days, got %q", maxTokenDays, s))
			return
		}
		days = n
	}
	tokens, err := wh.h.personalTokens()
	if err != nil {
		wh.actionError(w, r, http.StatusNotFound, err.Error())
		return
	}
	s, _, err := wh.h.d.People.session(r)
	if err != nil {
		wh.actionError(w, r, http.StatusUnauthorized, "sign in first: "+err.Error())
		return
	}
	token := PersonalTokenPrefix + randomString(32)
	sum := sha256.Sum256([]byte(token))
	now := wh.h.now()
	rec := store.PersonalToken{
		ID: randomHex(8), User: s.User, Name: name, SHA256: hex.EncodeToString(sum[:]),
		Groups: s.Groups, CreatedAt: now, ExpiresAt: now.Add(time.Duration(days) * 24 * time.Hour),
	}
	if err := tokens.CreatePersonalToken(r.Context(), rec); err != nil {
		wh.actionError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	wh.h.log.InfoContext(r.Context(), "personal_token_minted", "user", s.User, "id", rec.ID, "expires", rec.ExpiresAt)
	wh.h.svc.audit(r.Context(), s.User, AuditTokenMint, "", rec.ID, fmt.Sprintf("name=%q expires=%s", name, rec.ExpiresAt.UTC().Format(time.RFC3339)))
	tmpl, data, err := wh.tokensPage(r, token, rec.ID)
	if err != nil {
		wh.errorPage(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	wh.render(w, http.StatusOK, tmpl, pageData{
		Title: "personal tokens", Auth: true, Data: data, CSRF: csrfToken(wh.session(r)), Person: s.User,
		Done: "Token minted: copy it now, it is not shown again.",
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
