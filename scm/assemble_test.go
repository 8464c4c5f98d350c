package scm

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckoutIsTheCloneGitWouldMake: a build's checkout, laid out around
// one git init instead of git clone (assemble), is the repository git
// clone of the mirror makes: the same refs (the mirror's branches as
// origin's, its tags, origin's HEAD), remote configuration, index and
// history, for refs the mirror keeps loose and packed alike; hooks and
// info/exclude are where tools expect them; and the build's git commands
// (describe, fetch from origin) work.
func TestCheckoutIsTheCloneGitWouldMake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	g := r.(*gitRepo)
	compare := func(t *testing.T, sha string) {
		t.Helper()
		got := filepath.Join(t.TempDir(), "assembled")
		require.NoError(t, r.Checkout(ctx, sha, got))
		want := filepath.Join(t.TempDir(), "cloned")
		require.NoError(t, g.gitClone(ctx, want, false))
		require.NoError(t, g.setOrigin(ctx, want))
		gitIn(t, want, "checkout", "--quiet", "--detach", sha)
		for _, args := range [][]string{
			{"for-each-ref", "--format=%(refname) %(objectname) %(symref)"},
			{"config", "--get-regexp", `^(remote|branch)\.`},
			{"rev-parse", "HEAD"},
			{"ls-files", "--stage"},
			{"describe", "--tags"},
			{"log", "--format=%H %s", "origin/main"},
			{"branch", "--remotes"},
			{"status", "--porcelain", "--branch"},
		} {
			require.Equal(t, gitIn(t, want, args...), gitIn(t, got, args...), "git %v", args)
		}
		for _, p := range []string{"hooks", "info/exclude", "description"} {
			_, err := os.Stat(filepath.Join(got, ".git", p))
			require.NoError(t, err, ".git/%s", p)
		}
		gitIn(t, got, "fetch", "--quiet", "origin")
		require.Equal(t, "clean", map[bool]string{true: "clean", false: "changed"}[gitIn(t, got, "status", "--porcelain") == ""])
	}
	t.Run("loose refs", func(t *testing.T) { compare(t, h.c4) })
	// A new branch and tag, fetched into the mirror (loose there); then
	// the mirror's refs packed, as maintenance does.
	h.git("checkout", "--quiet", "-b", "topic")
	c5 := h.commit("topic", map[string]string{"topic.txt": "t\n"})
	h.git("tag", "-a", "v3", "-m", "release 3")
	h.git("checkout", "--quiet", "main")
	t.Run("new refs", func(t *testing.T) { compare(t, c5) })
	gitIn(t, g.mirror, "pack-refs", "--all")
	t.Run("packed refs", func(t *testing.T) { compare(t, c5) })
}

// TestCheckoutTemplate: a checkout's .git has sluice's lean template (an
// empty hooks/, info/exclude, a description: no sample hooks) unless git
// is given a template directory of the user's, which it then has, as git
// clone would.
func TestCheckoutTemplate(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	if userTemplate() {
		t.Log("this machine's git configures init.templateDir: only the user's template is checked")
	} else {
		dir := filepath.Join(t.TempDir(), "lean")
		require.NoError(t, r.Checkout(ctx, h.c4, dir))
		hooks, err := os.ReadDir(filepath.Join(dir, ".git", "hooks"))
		require.NoError(t, err)
		require.Empty(t, hooks, "no sample hooks")
		for _, p := range []string{"info/exclude", "description"} {
			_, err := os.Stat(filepath.Join(dir, ".git", p))
			require.NoError(t, err, ".git/%s", p)
		}
		require.Equal(t, h.c4, gitIn(t, dir, "rev-parse", "HEAD"))
	}

	tpl := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(tpl, "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tpl, "hooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)) //nolint:gosec // a hook is executable
	t.Setenv("GIT_TEMPLATE_DIR", tpl)
	dir := filepath.Join(t.TempDir(), "user")
	require.NoError(t, r.Checkout(ctx, h.c4, dir))
	_, err := os.Stat(filepath.Join(dir, ".git", "hooks", "pre-commit"))
	require.NoError(t, err, "the user's template is applied")
	_, err = os.Stat(filepath.Join(dir, ".git", "description"))
	require.ErrorIs(t, err, os.ErrNotExist, "and only the user's")
}

// TestMakeCheckoutTemplateConcurrently: executors sharing a cache make the
// template once; none sees half of it.
func TestMakeCheckoutTemplateConcurrently(t *testing.T) {
	t.Parallel()
	dir := checkoutTemplateDir(t.TempDir())
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = makeCheckoutTemplate(dir) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary directory left")
	for _, p := range []string{"hooks", "info/exclude", "description"} {
		_, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err, p)
	}
}
