package scm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Auth is a pipeline's own credentials for its repository (the pipeline
// secrets SLUICE_GITHUB_TOKEN, SLUICE_GITLAB_TOKEN or SLUICE_DEPLOY_KEY).
// They reach git only through its environment: a credential helper for
// http(s) URLs, GIT_SSH_COMMAND with a key file for ssh ones; never a URL
// or a command line. A location's own credentials (a password, an http(s)
// user name), when it has some, win.
type Auth struct {
	// Scope names whose credentials these are (the pipeline): a repository
	// read with them gets a mirror of its own, which no reader without them
	// shares.
	Scope string
	// Username and Password are an http(s) remote's credentials (a token:
	// x-access-token for GitHub, oauth2 for GitLab).
	Username, Password string
	// SSHKey is an ssh remote's private key (a deploy key), in OpenSSH or
	// PEM form.
	SSHKey string
	// App says Password is a GitHub App's installation token, not the
	// pipeline's own secret (for messages).
	App bool
}

// HTTP reports whether a has credentials for an http(s) remote.
func (a *Auth) HTTP() bool { return a != nil && a.Password != "" }

// SSH reports whether a has a key for an ssh remote.
func (a *Auth) SSH() bool { return a != nil && a.SSHKey != "" }

// IsHTTPURL reports whether location is an http(s) URL.
func IsHTTPURL(location string) bool {
	u, err := url.Parse(location)
	return err == nil && isHTTP(u.Scheme)
}

// IsSSHURL reports whether location is reached over ssh: an ssh:// URL or
// git's scp-like user@host:path.
func IsSSHURL(location string) bool {
	lower := strings.ToLower(location)
	for _, s := range []string{"ssh://", "git+ssh://", "ssh+git://"} {
		if strings.HasPrefix(lower, s) {
			return true
		}
	}
	return isSCPLike(location)
}

// OpenAuth is Open with a pipeline's own credentials (nil: the host's git
// configuration only, as Open). Credentials that do not fit location's
// kind (a key for an https URL) are not used.
func OpenAuth(ctx context.Context, location, cacheDir string, auth *Auth) (Repo, error) {
	fits := IsHTTPURL(location) && auth.HTTP() || IsSSHURL(location) && auth.SSH()
	if auth == nil || Kind(location) != KindGitRemote || hasCredentials(location) || !fits {
		return Open(ctx, location, cacheDir)
	}
	if err := checkArg("location", location); err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	if cacheDir == "" {
		return nil, fmt.Errorf("open %s: %w: empty cache directory", redact(location), ErrInvalidArgument)
	}
	cache, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("open %s: cache directory: %w", redact(location), err)
	}
	return openGitAuth(ctx, location, cache, auth)
}

// hasCredentials reports whether location carries its own credentials: a
// password, or an http(s) user name (a token). An ssh login (git@) is not.
func hasCredentials(location string) bool {
	u, err := url.Parse(location)
	if err != nil || u.Scheme == "" || u.User == nil {
		return false
	}
	_, hasPass := u.User.Password()
	return hasPass || isHTTP(u.Scheme)
}

// authEnv is the environment that hands auth's http(s) credentials to git
// (see remoteCredentials).
func authEnv(auth *Auth) ([]string, error) {
	if strings.ContainsAny(auth.Username+auth.Password, "\x00\n\r") {
		return nil, fmt.Errorf("%w: the pipeline's repository credentials have a control character", ErrInvalidArgument)
	}
	return credentialHelperEnv(auth.Username, auth.Password), nil
}

// sshKeyEnv writes key to a file only sluice's user may read and returns
// the environment that makes git's ssh use it alone, and a function that
// removes the file.
func sshKeyEnv(key string) (env []string, cleanup func(), err error) {
	f, err := os.CreateTemp("", "sluice-deploy-key-*")
	if err != nil {
		return nil, nil, fmt.Errorf("write the deploy key: %w", err)
	}
	cleanup = func() { _ = os.Remove(f.Name()) }
	if !strings.HasSuffix(key, "\n") {
		key += "\n" // ssh refuses a key without its final newline
	}
	_, werr := f.WriteString(key)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		cleanup()
		return nil, nil, fmt.Errorf("write the deploy key: %w", firstErr(werr, cerr))
	}
	// os.CreateTemp makes the file 0600; the path (not the key) is in the
	// environment. IdentitiesOnly: only this key, not the agent's or the
	// user's. accept-new: a host seen for the first time is remembered.
	cmd := fmt.Sprintf("ssh -i %s -o IdentitiesOnly=yes -o IdentityAgent=none -o StrictHostKeyChecking=accept-new -o BatchMode=yes", shellQuote(f.Name()))
	return []string{"GIT_SSH_COMMAND=" + cmd, "GIT_SSH_VARIANT=ssh"}, cleanup, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// authFailures are what git prints when the remote refused (or could not
// be given) credentials.
var authFailures = []string{
	"Authentication failed", "could not read Username", "could not read Password",
	"terminal prompts disabled", "Permission denied (publickey", "The requested URL returned error: 401",
	"The requested URL returned error: 403", "Host key verification failed",
}

// IsAuthError reports whether err is a git command that failed because the
// remote wants credentials it was not given, or refused the ones it got.
func IsAuthError(err error) bool {
	var ge *gitError
	if !errors.As(err, &ge) {
		return false
	}
	for _, s := range authFailures {
		if strings.Contains(ge.stderr, s) {
			return true
		}
	}
	return false
}
