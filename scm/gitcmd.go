package scm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// gitOptions are passed with -c to every git command so that sluice does not
// depend on the user's global configuration for anything it relies on. The
// global configuration is still read (credential helpers, url.insteadOf,
// core.sshCommand keep working).
var gitOptions = []string{
	"-c", "core.autocrlf=false", // checkouts are byte-exact
	"-c", "core.quotePath=false", // paths are printed as they are (we use -z anyway)
	"-c", "advice.detachedHead=false",
	"-c", "gc.autoDetach=false", // auto gc runs in the foreground, under the mirror lock
	"-c", "maintenance.autoDetach=false",
	"-c", "init.defaultBranch=main", // silences the init hint; the mirror's HEAD is unused
	"-c", "fetch.writeCommitGraph=false",
}

// repoLocatingEnv are variables that would make git operate on another
// repository than the one sluice names (set, for example, when sluice is
// started from a git hook).
var repoLocatingEnv = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX",
	"GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
}

// gitEnv is the environment of every git command: the process's own (read at
// each call), without repoLocatingEnv, never prompting for credentials, with
// C-locale messages.
func gitEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := name == "GIT_TERMINAL_PROMPT" || name == "LC_ALL"
		if len(extra) > 0 {
			// The credentials' configuration replaces any given in the
			// environment.
			drop = drop || strings.HasPrefix(name, "GIT_CONFIG_COUNT") || strings.HasPrefix(name, "GIT_CONFIG_KEY_") ||
				strings.HasPrefix(name, "GIT_CONFIG_VALUE_") || strings.HasPrefix(name, "SLUICE_GIT_")
		}
		for _, v := range repoLocatingEnv {
			drop = drop || name == v
		}
		if !drop {
			env = append(env, kv)
		}
	}
	env = append(env, extra...)
	return append(env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

// maxStderr bounds how much of git's stderr goes into an error message.
const maxStderr = 2048

// gitError is a failed git command: its subcommand, how it failed and what it
// printed on stderr (trimmed, lines joined with "; ").
type gitError struct {
	cmd    string // the subcommand: fetch, cat-file...
	err    error
	stderr string
}

// Error implements error.
func (e *gitError) Error() string {
	msg := "git " + e.cmd + ": " + e.err.Error()
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

// Unwrap returns the underlying exec or context error.
func (e *gitError) Unwrap() error { return e.err }

// runGit runs git with args in dir (the process's directory when dir is "")
// and returns its stdout. stdin may be nil.
func runGit(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	return runGitEnv(ctx, dir, stdin, nil, args...)
}

// runGitEnv is runGit with extra environment variables (a remote's
// credentials, see remoteCredentials).
func runGitEnv(ctx context.Context, dir string, stdin io.Reader, extra []string, args ...string) ([]byte, error) {
	full := append(append([]string{}, gitOptions...), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = dir
	cmd.Env = gitEnv(extra...)
	cmd.Stdin = stdin
	// git may leave children (ssh, upload-pack, remote-https) holding the
	// pipes after it is killed; do not wait for them for ever.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		return stdout.Bytes(), &gitError{cmd: args[0], err: err, stderr: trimStderr(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// trimStderr joins the non-empty lines of git's stderr with "; " and keeps
// the last maxStderr bytes.
func trimStderr(s string) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	// git quotes the URL it fetched: never a password in a message.
	s = RedactText(strings.Join(lines, "; "))
	if len(s) > maxStderr {
		s = "..." + s[len(s)-maxStderr:]
	}
	return s
}

// exitCode returns git's exit status, or -1 when it did not run to an exit.
func exitCode(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	return -1
}

// gitAvailable reports, once per process, whether the git command can be
// found, so that a missing binary gets one clear error.
var gitAvailable = sync.OnceValue(func() error {
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("scm: the git command is required for git repositories: %w", err)
	}
	return nil
})
