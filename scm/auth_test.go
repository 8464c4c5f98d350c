package scm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenAuthToken: a repository that wants credentials is read with a
// pipeline's token (through git's environment, never a command line), into
// a mirror of that pipeline's own: a reader without the token does not
// share it, and fails with an error IsAuthError recognises.
func TestOpenAuthToken(t *testing.T) {
	t.Parallel()
	const token = "ghp_PipelineOwnToken99"
	h := newHistory(t)
	root := t.TempDir()
	gitIn(t, root, "clone", "--quiet", "--bare", h.dir, "acme.git")
	srv := newGitServer(t, root, "x-access-token", token)
	location := srv.URL + "/acme.git"
	ctx := context.Background()
	cache := t.TempDir()

	r, err := OpenAuth(ctx, location, cache, &Auth{Scope: "app", Username: "x-access-token", Password: token})
	require.NoError(t, err)
	sha, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, h.c4, sha)
	_, err = r.Resolve(ctx, "HEAD") // ls-remote
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "co")
	require.NoError(t, r.Checkout(ctx, sha, dir))
	cfg, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	require.NoError(t, err)
	require.NotContains(t, string(cfg), token)
	require.NotContains(t, string(cfg), "credential")
	srv.mu.Lock()
	require.Empty(t, srv.leaked, "the token showed in a command line")
	srv.mu.Unlock()

	// The same cache without the token: another mirror, which cannot be
	// fetched.
	_, err = Open(ctx, location, cache)
	require.Error(t, err)
	require.True(t, IsAuthError(err), "%v", err)
	// A wrong token is refused the same way.
	_, err = OpenAuth(ctx, location, t.TempDir(), &Auth{Scope: "app", Username: "x-access-token", Password: "wrong"})
	require.Error(t, err)
	require.True(t, IsAuthError(err), "%v", err)
	require.NotContains(t, err.Error(), "wrong")
}

// TestOpenAuthIgnoresUnfitCredentials: a deploy key is not used for an
// http(s) URL, nor a token for an ssh one; a URL's own user info wins.
func TestOpenAuthIgnoresUnfitCredentials(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	cache := t.TempDir()
	// A local repository: credentials do not apply, the plain mirror is used.
	r, err := OpenAuth(context.Background(), h.dir, cache, &Auth{Scope: "app", Password: "tok"})
	require.NoError(t, err)
	g, ok := r.(*gitRepo)
	require.True(t, ok)
	require.Equal(t, filepath.Join(cache, "git", mirrorName(h.dir)+".git"), g.mirror)
	require.True(t, IsSSHURL("git@github.com:acme/app.git"))
	require.True(t, IsSSHURL("ssh://git@github.com/acme/app.git"))
	require.False(t, IsSSHURL("https://github.com/acme/app.git"))
	require.True(t, IsHTTPURL("https://github.com/acme/app.git"))
}

// TestSSHKeyEnv: a deploy key goes to a file only its owner may read, named
// (not quoted) in GIT_SSH_COMMAND, and removed afterwards.
func TestSSHKeyEnv(t *testing.T) {
	t.Parallel()
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAkeymaterial\n-----END OPENSSH PRIVATE KEY-----"
	env, cleanup, err := sshKeyEnv(key)
	require.NoError(t, err)
	joined := strings.Join(env, "\n")
	require.NotContains(t, joined, "AAAAkeymaterial")
	var path string
	for _, kv := range env {
		if cmd, ok := strings.CutPrefix(kv, "GIT_SSH_COMMAND="); ok {
			_, rest, _ := strings.Cut(cmd, "-i '")
			path, _, _ = strings.Cut(rest, "'")
			require.Contains(t, cmd, "IdentitiesOnly=yes")
		}
	}
	require.NotEmpty(t, path)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, key+"\n", string(b))
	cleanup()
	_, err = os.Stat(path)
	require.True(t, os.IsNotExist(err))
}

// TestOpenAuthDeployKey: an ssh URL is fetched with the pipeline's deploy
// key alone: ssh (a stand-in on PATH that serves the repository locally)
// is given a key file (0600) holding the key, which is gone afterwards;
// an ssh login in the URL (git@) does not stop the key from being used.
func TestOpenAuthDeployKey(t *testing.T) {
	// Not parallel: PATH is changed for git's ssh.
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nDeployKeyMaterial42\n-----END OPENSSH PRIVATE KEY-----\n"
	h := newHistory(t)
	bin := t.TempDir()
	seen := filepath.Join(t.TempDir(), "seen")
	// ssh [-i FILE] [-o OPT]... HOST COMMAND: check the key, then run the
	// command (git-upload-pack '<path>') here.
	script := `#!/bin/sh
keyfile=
while [ $# -gt 2 ]; do
  case "$1" in
    -i) keyfile=$2; shift 2;;
    *) shift;;
  esac
done
printf '%s\n' "$keyfile" >> ` + seen + `
[ -n "$keyfile" ] && [ "$(stat -c %a "$keyfile")" = 600 ] && grep -q DeployKeyMaterial42 "$keyfile" || { echo "ssh: Permission denied (publickey)." >&2; exit 255; }
exec sh -c "$2"
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	location := "ssh://git@example.invalid" + h.dir
	ctx := context.Background()
	r, err := OpenAuth(ctx, location, t.TempDir(), &Auth{Scope: "app", SSHKey: key})
	require.NoError(t, err)
	sha, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, h.c4, sha)
	b, err := os.ReadFile(seen)
	require.NoError(t, err)
	files := strings.Fields(string(b))
	require.NotEmpty(t, files)
	for _, f := range files {
		_, err := os.Stat(f)
		require.True(t, os.IsNotExist(err), "key file %s left behind", f)
	}
	// Without the key, the stand-in refuses: an authentication error.
	_, err = OpenAuth(ctx, location, t.TempDir(), nil)
	require.Error(t, err)
	require.True(t, IsAuthError(err), "%v", err)
}
