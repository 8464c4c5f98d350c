package scm

import (
	"bytes"
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://ci-bot:ghp_SECRET@github.com/acme/app.git", "https://ci-bot:xxxxx@github.com/acme/app.git"},
		{"https://ghp_SECRET@github.com/acme/app.git", "https://xxxxx@github.com/acme/app.git"},
		{"http://oauth2:glpat-SECRET@gitlab.local:8080/g/p", "http://oauth2:xxxxx@gitlab.local:8080/g/p"},
		{"ssh://git@github.com/acme/app.git", "ssh://git@github.com/acme/app.git"},
		{"ssh://git:SECRET@github.com/acme/app.git", "ssh://git:xxxxx@github.com/acme/app.git"},
		{"git@github.com:acme/app.git", "git@github.com:acme/app.git"},
		{"https://github.com/acme/app.git", "https://github.com/acme/app.git"},
		{"/srv/repos/app", "/srv/repos/app"},
		{"file:///srv/repos/app", "file:///srv/repos/app"},
		// Not a URL url.Parse accepts: the text form still hides it.
		{"https://u:SECRET@host/%zz", "https://u:xxxxx@host/%zz"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, RedactURL(tc.in), tc.in)
	}
	msg := `fatal: unable to access 'https://ci-bot:ghp_SECRET@github.com/acme/app.git/': 403; see https://TOKEN123@x.y/z and ssh://git@h/p`
	require.Equal(t, `fatal: unable to access 'https://ci-bot:xxxxx@github.com/acme/app.git/': 403; see https://xxxxx@x.y/z and ssh://git@h/p`, RedactText(msg))
}

// gitServer serves the bare repositories under root over smart HTTP (git
// http-backend), requiring HTTP basic authentication as user/pass. While a
// request runs it looks for pass in every process's command line (what any
// local user can read).
type gitServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	leaked   []string // command lines that showed the password
}

func newGitServer(t *testing.T, root, user, pass string) *gitServer {
	t.Helper()
	git, err := exec.LookPath("git")
	require.NoError(t, err)
	backend := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	s := &gitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		s.leaked = append(s.leaked, cmdlinesContaining(pass)...)
		s.mu.Unlock()
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// cmdlinesContaining lists the command lines of running processes that
// contain s.
func cmdlinesContaining(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestURLCredentialsStayOffTheCommandLine: a repository URL with a user
// and password works (git gets them through its environment), no process's
// command line shows the password, and neither does the error of a fetch
// that fails.
func TestURLCredentialsStayOffTheCommandLine(t *testing.T) {
	t.Parallel()
	const pass = "ghp_SUPERSECRETTOKEN42"
	h := newHistory(t)
	root := t.TempDir()
	gitIn(t, root, "clone", "--quiet", "--bare", h.dir, "acme.git")
	srv := newGitServer(t, root, "ci-bot", pass)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	good := "http://ci-bot:" + pass + "@" + host + "/acme.git"
	r := openRepo(t, good)
	sha, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, h.c4, sha)
	_, err = r.Resolve(ctx, "HEAD") // ls-remote
	require.NoError(t, err)
	b, err := r.ReadFile(ctx, h.c1, "README.md")
	require.NoError(t, err)
	require.Equal(t, "# demo\n", string(b))

	srv.mu.Lock()
	require.Positive(t, srv.requests)
	require.Empty(t, srv.leaked, "the password showed in a command line")
	srv.mu.Unlock()

	// A wrong password: the fetch fails, its error names the repository
	// but shows neither password.
	bad := "http://ci-bot:wrong-" + pass + "@" + host + "/acme.git"
	_, err = Open(ctx, bad, t.TempDir())
	require.Error(t, err)
	require.NotContains(t, err.Error(), pass)
	require.Contains(t, err.Error(), "http://ci-bot:xxxxx@"+host+"/acme.git")

	// A token as the user name is a credential too.
	_, err = Open(ctx, "http://"+pass+"@"+host+"/acme.git", t.TempDir())
	require.Error(t, err)
	require.NotContains(t, err.Error(), pass)
}
