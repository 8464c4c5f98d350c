package scm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// A build's checkout starts with `git init`, which copies git's template
// directory into the new .git: with Debian's git, thirteen sample hooks
// (all disabled, named *.sample), a description and a commented
// info/exclude. On a VM's disk each new file costs a third of a
// millisecond of system time: the copy is two thirds of the checkout's
// `git init` (15.5 ms against 5 ms). Unless the executor's git names a
// template directory of its own (GIT_TEMPLATE_DIR, init.templateDir: an
// administrator's hooks, git-secrets for example, then come with every
// checkout as with git clone), checkouts get sluice's: an empty hooks/
// and an info/exclude, where the tools a build runs write (hook
// installers, local ignores), and a description. Nothing else in git's
// own templates does anything.

// checkoutTemplateDir is the template directory of checkouts under a
// mirror cache (base: the cache's git directory).
func checkoutTemplateDir(base string) string { return filepath.Join(base, "checkout-template") }

// checkoutTemplates are the template directories this process has made.
var checkoutTemplates sync.Map

// userTemplate reports whether git is configured with a template
// directory of the user's (read once per process: `git config`).
var userTemplate = sync.OnceValue(func() bool {
	// What a checkout's git init reads: the user's and the system's
	// configuration, no repository's (run from /).
	out, err := runGit(context.Background(), "/", nil, "config", "--get", "init.templateDir")
	var ge *gitError
	var exit *exec.ExitError
	if errors.As(err, &ge) && errors.As(ge.err, &exit) && exit.ExitCode() == 1 {
		return false // not set
	}
	// Set, or git could not say: leave git its own choice.
	return err != nil || len(out) > 0
})

// initTemplateArgs are the arguments of a checkout's `git init` that name
// its template directory: none when the user configured one, or when
// sluice's cannot be made (git then copies its own, as before).
func initTemplateArgs(base string) []string {
	if os.Getenv("GIT_TEMPLATE_DIR") != "" || userTemplate() {
		return nil
	}
	dir := checkoutTemplateDir(base)
	if _, ok := checkoutTemplates.Load(dir); ok {
		return []string{"--template=" + dir}
	}
	if err := makeCheckoutTemplate(dir); err != nil {
		return nil
	}
	checkoutTemplates.Store(dir, true)
	return []string{"--template=" + dir}
}

// makeCheckoutTemplate makes dir, sluice's template directory, unless it
// is there: laid out beside it and renamed into place, so that a
// concurrent git init (another executor on the same cache) never sees
// half of it.
func makeCheckoutTemplate(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "info", "exclude")); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".checkout-template-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	files := map[string]string{
		"description":  "A build's checkout, made by sluice.\n",
		"info/exclude": "# Patterns git ignores in this checkout only, beside .gitignore files (see gitignore(5)).\n",
	}
	for _, d := range []string{"hooks", "info"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil { //nolint:gosec // as git's own templates
			return err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil { //nolint:gosec // as above
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // read by git for every checkout
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "info", "exclude")); statErr == nil {
			return nil // another process made it first
		}
		return fmt.Errorf("checkout template %s: %w", dir, err)
	}
	return nil
}
