package scm

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// redactedUser replaces a password, or a user name that may be a token, in
// displayed URLs (as url.URL.Redacted does).
const redactedUser = "xxxxx"

// RedactURL returns location fit for display: a URL's password is replaced
// with xxxxx, and so is the user name of an http(s) URL (GitHub and GitLab
// take a token there: https://TOKEN@github.com/o/r.git). ssh user names
// (git@host) and local paths are kept. Every place that shows, logs or
// records a repository location uses it.
func RedactURL(location string) string {
	u, err := url.Parse(location)
	if err != nil || u.Scheme == "" || u.User == nil {
		return RedactText(location)
	}
	u.User = redactUserinfo(u.Scheme, u.User)
	return u.String()
}

func redactUserinfo(scheme string, ui *url.Userinfo) *url.Userinfo {
	if _, ok := ui.Password(); ok {
		return url.UserPassword(ui.Username(), redactedUser)
	}
	if isHTTP(scheme) && ui.Username() != "" {
		return url.User(redactedUser)
	}
	return ui
}

func isHTTP(scheme string) bool {
	s := strings.ToLower(scheme)
	return s == "http" || s == "https"
}

// urlUserinfo finds the user info of URLs in free text (git's messages echo
// the URL they fetched): scheme://userinfo@.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*)://([^/@\s'"<>]+)@`)

// RedactText redacts the credentials of every URL in s (see RedactURL), for
// error messages and logs that may quote a repository URL.
func RedactText(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return urlUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := urlUserinfo.FindStringSubmatch(m)
		scheme, info := sub[1], sub[2]
		user, _, hasPass := strings.Cut(info, ":")
		switch {
		case hasPass:
			info = user + ":" + redactedUser
		case isHTTP(scheme):
			info = redactedUser
		}
		return scheme + "://" + info + "@"
	})
}

// remoteCredentials splits a git URL into what git's command line may show
// and the credentials it gets through its environment. An http(s) URL's user
// info is removed from the URL and handed to git by a credential helper that
// reads it from the command's environment (readable only by sluice's own
// user, where the command line is readable by every local user). Other
// URLs keep their user name (ssh's login) but lose any password, which git
// does not use for them.
func remoteCredentials(location string) (remote string, env []string, err error) {
	u, perr := url.Parse(location)
	if perr != nil || u.Scheme == "" || u.User == nil {
		return location, nil, nil
	}
	user := u.User.Username()
	pass, hasPass := u.User.Password()
	if !isHTTP(u.Scheme) {
		if hasPass {
			u.User = url.User(user)
		}
		return u.String(), nil, nil
	}
	if strings.ContainsAny(user+pass, "\x00\n\r") {
		return "", nil, fmt.Errorf("%w: %s: the user name or password has a control character", ErrInvalidArgument, RedactURL(location))
	}
	u.User = nil
	return u.String(), credentialHelperEnv(user, pass), nil
}

// credentialHelperEnv is the environment of a git command that gets user
// and pass from a credential helper reading them from that environment.
func credentialHelperEnv(user, pass string) []string {
	return []string{
		// The helper list is reset first, so no configured helper (store,
		// cache) gets the credentials to keep.
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0=",
		"GIT_CONFIG_KEY_1=credential.helper",
		`GIT_CONFIG_VALUE_1=!f() { test "$1" = get || exit 0; printf 'username=%s\npassword=%s\n' "$SLUICE_GIT_USERNAME" "$SLUICE_GIT_PASSWORD"; }; f`,
		"SLUICE_GIT_USERNAME=" + user,
		"SLUICE_GIT_PASSWORD=" + pass,
	}
}
