// Package fakegithub plays GitHub for tests of sluice as a GitHub App.
package fakegithub

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi" //nolint:gosec // G504: a test-only git server; Go since 1.6.3 is not open to Httpoxy
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Server plays GitHub for a GitHub App: its REST API under /api/v3/
// (GitHub Enterprise Server's layout) answers an App's JWT with the
// installation on a repository and mints installation tokens, and every
// other path serves the bare repositories under Root over git's smart
// HTTP protocol. A private Server's git wants basic auth with user
// x-access-token and a token it minted (or one Accept added); a public one
// serves anyone. Every git request is recorded with the token it carried.
type Server struct {
	*httptest.Server
	// AppID and KeyFile are the App's ID and private key (PEM), as
	// SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_APP_KEY_FILE take them.
	AppID   int64
	KeyFile string
	// Root holds the bare repositories git serves (Root/acme/app.git is
	// URL/acme/app.git).
	Root string

	key     *rsa.PrivateKey
	private bool
	mu      sync.Mutex
	// installs: owner/repo → installation ID.
	installs map[string]int64
	// noContents: installations without the Contents permission.
	noContents map[int64]bool
	accepted   map[string]bool
	mints      []MintedToken
	git        []GitRequest
}

// MintedToken is one installation token the fake minted, with what the
// App asked it to be scoped to.
type MintedToken struct {
	Token        string            `json:"token"`
	Installation int64             `json:"installation"`
	Repositories []string          `json:"repositories"`
	Permissions  map[string]string `json:"permissions"`
}

// GitRequest is one request git made; Token is the basic auth password it
// carried ("" for none), UserAgent git's (GIT_HTTP_USER_AGENT tells one
// process's git from another's). Refused says the fake answered 401.
type GitRequest struct {
	Path      string
	Token     string
	UserAgent string
	Refused   bool
}

// New starts a fake GitHub; it stops when the test ends.
func New(t testing.TB, private bool) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	g := &Server{
		AppID: 4242, KeyFile: keyFile, Root: filepath.Join(dir, "repos"), key: key, private: private,
		installs: map[string]int64{}, accepted: map[string]bool{}, noContents: map[int64]bool{},
	}
	require.NoError(t, os.MkdirAll(g.Root, 0o755))
	git, err := exec.LookPath("git")
	require.NoError(t, err)
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + g.Root, "GIT_HTTP_EXPORT_ALL=1"}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v3/") {
			g.api(w, r)
			return
		}
		_, token, _ := r.BasicAuth()
		g.mu.Lock()
		ok := !g.private || g.accepted[token]
		if u, _, has := r.BasicAuth(); has && u != "x-access-token" {
			ok = false
		}
		g.git = append(g.git, GitRequest{Path: r.URL.Path, Token: token, UserAgent: r.UserAgent(), Refused: !ok})
		g.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="github"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

// Env is the configuration that makes sluice sign in as the App here.
func (g *Server) Env() map[string]string {
	return map[string]string{
		"SLUICE_GITHUB_APP_ID":       strconv.FormatInt(g.AppID, 10),
		"SLUICE_GITHUB_APP_KEY_FILE": g.KeyFile,
		"SLUICE_GITHUB_API_URL":      g.URL + "/api/v3/",
		"SLUICE_GITHUB_APP_REPOS":    "acme/*",
	}
}

// AddRepo clones src (a local repository) bare as owner/name and returns
// its URL.
func (g *Server) AddRepo(t testing.TB, src, ownerName string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "clone", "--quiet", "--bare", src, filepath.Join(g.Root, ownerName+".git")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return g.URL + "/" + ownerName + ".git"
}

// Install installs the App on owner/name with installation id.
func (g *Server) Install(ownerName string, id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.installs[strings.ToLower(ownerName)] = id
}

// InstallWithoutContents installs the App on owner/name with installation
// id but without the Contents permission (an App for commit statuses
// only): a token asking for contents is refused with 422, as GitHub does.
func (g *Server) InstallWithoutContents(ownerName string, id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.installs[strings.ToLower(ownerName)] = id
	g.noContents[id] = true
}

// Accept makes git accept token too (a pipeline's own).
func (g *Server) Accept(token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accepted[token] = true
}

// Mints returns the tokens minted so far, oldest first.
func (g *Server) Mints() []MintedToken {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]MintedToken(nil), g.mints...)
}

// GitRequests returns git's requests so far, oldest first.
func (g *Server) GitRequests() []GitRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]GitRequest(nil), g.git...)
}

func (g *Server) api(w http.ResponseWriter, r *http.Request) {
	if err := g.checkJWT(r.Header.Get("Authorization")); err != nil {
		writeGitHubJSON(w, http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded: " + err.Error()})
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/repos/") && strings.HasSuffix(path, "/installation"):
		repo := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(path, "/repos/"), "/installation"))
		g.mu.Lock()
		id, ok := g.installs[repo]
		g.mu.Unlock()
		if !ok {
			writeGitHubJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		writeGitHubJSON(w, http.StatusOK, map[string]any{"id": id, "app_id": g.AppID})
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/app/installations/") && strings.HasSuffix(path, "/access_tokens"):
		id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(path, "/app/installations/"), "/access_tokens"), 10, 64)
		if err != nil {
			writeGitHubJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		var body struct {
			Repositories []string          `json:"repositories"`
			Permissions  map[string]string `json:"permissions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeGitHubJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
			return
		}
		g.mu.Lock()
		denied := g.noContents[id] && body.Permissions["contents"] != ""
		g.mu.Unlock()
		if denied {
			writeGitHubJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "The permissions requested are not granted to this installation."})
			return
		}
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		m := MintedToken{Token: "ghs_" + hex.EncodeToString(b), Installation: id, Repositories: body.Repositories, Permissions: body.Permissions}
		g.mu.Lock()
		g.mints = append(g.mints, m)
		g.accepted[m.Token] = true
		g.mu.Unlock()
		writeGitHubJSON(w, http.StatusCreated, map[string]any{
			"token": m.Token, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"permissions": body.Permissions,
		})
	case r.Method == http.MethodPost && strings.Contains(path, "/statuses/"):
		writeGitHubJSON(w, http.StatusCreated, map[string]string{})
	default:
		writeGitHubJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
}

// checkJWT verifies an App's JWT: RS256, signed by the App's key, issued
// by the App, valid for at most ten minutes (GitHub's limit).
func (g *Server) checkJWT(auth string) error {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return errors.New("no bearer token")
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss any   `json:"iss"`
		Iat int64 `json:"iat"`
		Exp int64 `json:"exp"`
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %q", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("not signed by the App's key: %w", err)
	}
	if fmt.Sprint(claims.Iss) != strconv.FormatInt(g.AppID, 10) {
		return fmt.Errorf("issuer %v is not the App", claims.Iss)
	}
	if claims.Exp <= claims.Iat || claims.Exp-claims.Iat > 11*60 {
		return errors.New("lifetime is not within ten minutes")
	}
	return nil
}

func writeGitHubJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
