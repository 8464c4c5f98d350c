package scm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testGitEnv makes the helper's git commands independent of the developer's
// configuration and gives them an identity.
var testGitEnv = []string{
	"GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=Sluice Test",
	"GIT_AUTHOR_EMAIL=test@sluice.invalid",
	"GIT_COMMITTER_NAME=Sluice Test",
	"GIT_COMMITTER_EMAIL=test@sluice.invalid",
	"GIT_TERMINAL_PROMPT=0",
}

// source is a git repository a test builds commit by commit.
type source struct {
	t   testing.TB
	dir string
}

// newSource creates an empty repository (default branch main) in a temporary
// directory.
func newSource(t testing.TB) *source {
	t.Helper()
	s := &source{t: t, dir: filepath.Join(t.TempDir(), "src")}
	require.NoError(t, os.MkdirAll(s.dir, 0o755))
	s.git("init", "--quiet", "-b", "main")
	return s
}

// git runs git in the repository and returns its trimmed stdout.
func (s *source) git(args ...string) string {
	s.t.Helper()
	return gitIn(s.t, s.dir, args...)
}

// gitIn runs git in dir with the test environment.
func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testGitEnv...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// write creates or replaces files (path → content) in the work tree; an
// empty content removes the file.
func (s *source) write(files map[string]string) {
	s.t.Helper()
	for p, content := range files {
		full := filepath.Join(s.dir, filepath.FromSlash(p))
		if content == "" {
			require.NoError(s.t, os.Remove(full))
			continue
		}
		require.NoError(s.t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(s.t, os.WriteFile(full, []byte(content), 0o644))
	}
}

// commit writes files, commits everything and returns the new sha.
func (s *source) commit(msg string, files map[string]string) string {
	s.t.Helper()
	s.write(files)
	s.git("add", "-A")
	s.git("commit", "--quiet", "--allow-empty", "-m", msg)
	return s.git("rev-parse", "HEAD")
}

// history is a source with a known shape:
//
//	main:    c1 (screwdriver.yaml, README.md) -- c2 (screwdriver.yaml, src/app.go) -- c4 (merge of feature)
//	feature: c1 -- c3 (docs/guide.md)
//	tags:    v1 (annotated, at c1), v2-light (lightweight, at c2)
type history struct {
	*source
	c1, c2, c3, c4 string
}

// newHistory builds the history fixture.
func newHistory(t testing.TB) *history {
	t.Helper()
	h := &history{source: newSource(t)}
	h.c1 = h.commit("first", map[string]string{
		"screwdriver.yaml": "jobs:\n  main:\n    image: node:20\n    steps:\n      - test: npm test\n    requires: [~commit]\n",
		"README.md":        "# demo\n",
	})
	h.git("tag", "-a", "v1", "-m", "release 1")
	h.git("checkout", "--quiet", "-b", "feature")
	h.c3 = h.commit("docs", map[string]string{"docs/guide.md": "guide\n"})
	h.git("checkout", "--quiet", "main")
	h.c2 = h.commit("second", map[string]string{
		"screwdriver.yaml": "jobs:\n  main:\n    image: node:22\n    steps:\n      - test: npm test\n    requires: [~commit, ~pr]\n",
		"src/app.go":       "package app\n",
	})
	h.git("tag", "v2-light")
	h.git("merge", "--quiet", "--no-ff", "-m", "merge feature", "feature")
	h.c4 = h.git("rev-parse", "HEAD")
	return h
}

// openRepo opens location with a fresh cache directory.
func openRepo(t *testing.T, location string) Repo {
	t.Helper()
	r, err := Open(context.Background(), location, t.TempDir())
	require.NoError(t, err)
	return r
}

// unsetenv removes key from the environment for the rest of the test.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // registers the restore
	require.NoError(t, os.Unsetenv(key))
}

// wrapGit puts a git first on PATH for the rest of the test: a shell
// script that runs before (shell lines, which may exit), then the real git
// with the same arguments.
func wrapGit(t *testing.T, before string) {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	bin := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%s\nexec %q \"$@\"\n", before, real)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}
