package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Repo is a real git repository in a temporary directory.
type Repo struct {
	t   testing.TB
	Dir string
}

// NewRepo makes a repository on branch main with one commit of files.
func NewRepo(t testing.TB, files map[string]string) *Repo {
	t.Helper()
	r := &Repo{t: t, Dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.Commit(files, "initial commit")
	return r
}

// Commit writes files (path → content; "" deletes) and commits them,
// returning the new commit's sha.
func (r *Repo) Commit(files map[string]string, msg string) string {
	r.t.Helper()
	for path, content := range files {
		full := filepath.Join(r.Dir, filepath.FromSlash(path))
		if content == "" {
			require.NoError(r.t, os.RemoveAll(full))
			continue
		}
		require.NoError(r.t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(r.t, os.WriteFile(full, []byte(content), 0o644))
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.Head()
}

// Head is the sha of HEAD.
func (r *Repo) Head() string {
	r.t.Helper()
	return strings.TrimSpace(r.git("rev-parse", "HEAD"))
}

func (r *Repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.CommandContext(r.t.Context(), "git", args...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=sluice-test", "GIT_AUTHOR_EMAIL=test@sluice.invalid",
		"GIT_COMMITTER_NAME=sluice-test", "GIT_COMMITTER_EMAIL=test@sluice.invalid", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// Git runs a git command in the repository and returns its output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return r.git(args...)
}
