package testenv

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeSCM is a fake GitHub or GitLab commit status API: an httptest server
// that checks each request's auth header, path and body against the
// provider's documented shape, records the statuses it accepts, and can
// answer errors for a while (an outage or a rate limit).
type FakeSCM struct {
	Server   *httptest.Server
	Provider string // "github" or "gitlab"
	Token    string

	mu       sync.Mutex
	statuses []PostedStatus
	problems []string
	failing  *fakeFailure
	refused  int
	// gitlab keeps each status's state: GitLab refuses a transition to the
	// state a status already has.
	gitlab map[string]string
	// appID and appKey: GitHub App sign-in (EnableApp).
	appID  int64
	appKey *rsa.PublicKey
}

// FakeInstallationID and FakeInstallationToken are what the fake GitHub
// answers a GitHub App.
const (
	FakeInstallationID    = 77
	FakeInstallationToken = "ghs_fakeinstallationtoken" //nolint:gosec // G101: the fake's own test token
)

// EnableApp lets a GitHub App sign in: GET /repos/{o}/{r}/installation and
// POST /app/installations/{id}/access_tokens take a JWT signed by key (RS256,
// issuer appID); statuses then take the installation token.
func (f *FakeSCM) EnableApp(appID int64, key *rsa.PublicKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appID, f.appKey = appID, key
}

// checkAppJWT verifies a GitHub App's JWT: RS256 over header.payload, the
// issuer the App's ID, not expired.
func (f *FakeSCM) checkAppJWT(auth string) error {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return fmt.Errorf("header Authorization %q: want Bearer <JWT>", auth)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("JWT signature: %w", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(f.appKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("JWT signature does not verify with the App's key: %w", err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("JWT payload: %w", err)
	}
	var claims struct {
		Iss any   `json:"iss"`
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return fmt.Errorf("JWT claims: %w", err)
	}
	if fmt.Sprint(claims.Iss) != strconv.FormatInt(f.appID, 10) {
		return fmt.Errorf("JWT issuer %v: want the App ID %d", claims.Iss, f.appID)
	}
	if time.Unix(claims.Exp, 0).Before(time.Now()) {
		return errors.New("JWT expired")
	}
	return nil
}

var (
	reInstallation = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/installation$`)
	reAccessTokens = regexp.MustCompile(`^/app/installations/(\d+)/access_tokens$`)
)

// serveApp answers a GitHub App's sign-in requests; ok is false for other paths.
func (f *FakeSCM) serveApp(w http.ResponseWriter, r *http.Request) bool {
	inst, tokens := reInstallation.MatchString(r.URL.Path), reAccessTokens.FindStringSubmatch(r.URL.Path)
	if f.appKey == nil || (!inst && tokens == nil) {
		return false
	}
	if err := f.checkAppJWT(r.Header.Get("Authorization")); err != nil {
		f.problem(w, http.StatusUnauthorized, "%s: %v", r.URL.Path, err)
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case inst && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(map[string]any{"id": FakeInstallationID, "app_id": f.appID})
	case tokens != nil && r.Method == http.MethodPost && tokens[1] == strconv.Itoa(FakeInstallationID):
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": FakeInstallationToken, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	default:
		f.problem(w, http.StatusNotFound, "%s %s: not an App endpoint", r.Method, r.URL.Path)
	}
	return true
}

// PostedStatus is one status the fake accepted.
type PostedStatus struct {
	Repo        string
	SHA         string
	State       string
	Context     string
	Description string
	TargetURL   string
	At          time.Time
}

type fakeFailure struct {
	until     time.Time
	code      int
	rateLimit bool
}

// GitHub's and GitLab's documented states and limits.
var (
	githubStates  = []string{"pending", "success", "failure", "error"}
	gitlabStates  = []string{"pending", "running", "success", "failed", "canceled", "skipped"}
	reGitHubPath  = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]{40})$`)
	reGitLabPath  = regexp.MustCompile(`^/api/v4/projects/([^/]+)/statuses/([0-9a-f]{40})$`)
	githubDescMax = 140
	gitlabDescMax = 255
)

// NewFakeGitHub starts a fake GitHub REST API that accepts token.
func NewFakeGitHub(t testing.TB, token string) *FakeSCM {
	return newFakeSCM(t, "github", token)
}

// NewFakeGitLab starts a fake GitLab API that accepts token.
func NewFakeGitLab(t testing.TB, token string) *FakeSCM {
	return newFakeSCM(t, "gitlab", token)
}

func newFakeSCM(t testing.TB, provider, token string) *FakeSCM {
	f := &FakeSCM{Provider: provider, Token: token, gitlab: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Server.Close)
	return f
}

// URL is the base URL to configure (SLUICE_GITHUB_API_URL / SLUICE_GITLAB_URL).
func (f *FakeSCM) URL() string { return f.Server.URL + "/" }

// FailFor answers every request with code for d; rateLimit adds the
// provider's rate-limit headers (GitHub: X-RateLimit-Remaining 0 and
// X-RateLimit-Reset; GitLab: Retry-After) pointing at the end of d.
func (f *FakeSCM) FailFor(d time.Duration, code int, rateLimit bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = &fakeFailure{until: time.Now().Add(d), code: code, rateLimit: rateLimit}
}

// Statuses returns the accepted statuses in order.
func (f *FakeSCM) Statuses() []PostedStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.statuses)
}

// Problems lists the requests that did not match the provider's API.
func (f *FakeSCM) Problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.problems)
}

// Refused counts the requests answered with a simulated failure.
func (f *FakeSCM) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

func (f *FakeSCM) problem(w http.ResponseWriter, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	f.problems = append(f.problems, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (f *FakeSCM) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.serveApp(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		f.problem(w, http.StatusNotFound, "%s %s: only POST of statuses is served", r.Method, r.URL.Path)
		return
	}
	if fl := f.failing; fl != nil && time.Now().Before(fl.until) {
		f.refused++
		if fl.rateLimit {
			switch f.Provider {
			case "github":
				w.Header().Set("X-RateLimit-Limit", "5000")
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(fl.until.Add(time.Second).Unix(), 10))
			default:
				w.Header().Set("Retry-After", strconv.Itoa(int(time.Until(fl.until).Seconds())+1))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fl.code)
		_, _ = io.WriteString(w, `{"message":"simulated failure"}`)
		return
	}
	switch f.Provider {
	case "github":
		f.serveGitHub(w, r)
	default:
		f.serveGitLab(w, r)
	}
}

// serveGitHub checks POST /repos/{owner}/{repo}/statuses/{sha}
// (docs.github.com/rest/commits/statuses#create-a-commit-status).
func (f *FakeSCM) serveGitHub(w http.ResponseWriter, r *http.Request) {
	want := f.Token
	if f.appKey != nil {
		want = FakeInstallationToken
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+want && got != "token "+want {
		f.problem(w, http.StatusUnauthorized, "Authorization %q: want Bearer <token>", got)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.github") {
		f.problem(w, http.StatusBadRequest, "Accept %q: want application/vnd.github+json", r.Header.Get("Accept"))
		return
	}
	m := reGitHubPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		f.problem(w, http.StatusNotFound, "path %s: want /repos/{owner}/{repo}/statuses/{40-hex sha}", r.URL.Path)
		return
	}
	var body struct {
		State       string `json:"state"`
		TargetURL   string `json:"target_url"`
		Description string `json:"description"`
		Context     string `json:"context"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.problem(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	switch {
	case !slices.Contains(githubStates, body.State):
		f.problem(w, http.StatusUnprocessableEntity, "state %q: want one of %v", body.State, githubStates)
		return
	case body.Context == "":
		f.problem(w, http.StatusUnprocessableEntity, "context: empty")
		return
	case len([]rune(body.Description)) > githubDescMax:
		f.problem(w, http.StatusUnprocessableEntity, "description: %d characters, GitHub takes %d", len([]rune(body.Description)), githubDescMax)
		return
	case body.TargetURL != "" && !validURL(body.TargetURL):
		f.problem(w, http.StatusUnprocessableEntity, "target_url %q: not a URL", body.TargetURL)
		return
	}
	f.statuses = append(f.statuses, PostedStatus{
		Repo: m[1] + "/" + m[2], SHA: m[3], State: body.State, Context: body.Context,
		Description: body.Description, TargetURL: body.TargetURL, At: time.Now(),
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": len(f.statuses), "state": body.State, "context": body.Context})
}

// serveGitLab checks POST /api/v4/projects/{url-encoded path}/statuses/{sha}
// (docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit).
func (f *FakeSCM) serveGitLab(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("PRIVATE-TOKEN"); got != f.Token && r.Header.Get("Authorization") != "Bearer "+f.Token {
		f.problem(w, http.StatusUnauthorized, "PRIVATE-TOKEN %q: want the token", got)
		return
	}
	m := reGitLabPath.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		f.problem(w, http.StatusNotFound, "path %s: want /api/v4/projects/{id or URL-encoded path}/statuses/{40-hex sha}", r.URL.EscapedPath())
		return
	}
	project, err := url.PathUnescape(m[1])
	if err != nil {
		f.problem(w, http.StatusNotFound, "project %q: %v", m[1], err)
		return
	}
	var body struct {
		State       string `json:"state"`
		Name        string `json:"name"`
		TargetURL   string `json:"target_url"`
		Description string `json:"description"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.problem(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	switch {
	case !slices.Contains(gitlabStates, body.State):
		f.problem(w, http.StatusBadRequest, "state %q: want one of %v", body.State, gitlabStates)
		return
	case body.Name == "":
		f.problem(w, http.StatusBadRequest, "name: empty")
		return
	case len([]rune(body.Description)) > gitlabDescMax:
		f.problem(w, http.StatusBadRequest, "description: %d characters, GitLab takes %d", len([]rune(body.Description)), gitlabDescMax)
		return
	case body.TargetURL != "" && !validURL(body.TargetURL):
		f.problem(w, http.StatusBadRequest, "target_url %q: not a URL", body.TargetURL)
		return
	}
	key := project + " " + m[2] + " " + body.Name
	if cur := f.gitlab[key]; cur == body.State {
		// GitLab's answer to a transition into the current state.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"message":"Cannot transition status via :%s from :%s"}`, body.State, cur)
		return
	}
	f.gitlab[key] = body.State
	f.statuses = append(f.statuses, PostedStatus{
		Repo: project, SHA: m[2], State: body.State, Context: body.Name,
		Description: body.Description, TargetURL: body.TargetURL, At: time.Now(),
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": len(f.statuses), "status": body.State, "name": body.Name})
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
