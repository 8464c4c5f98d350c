package api

import (
	"net/url"
	"strconv"
	"strings"
)

// repoWeb is a repository's web address on GitHub or GitLab, derived from
// its clone URL, for links to its commits and pull requests.
type repoWeb struct {
	// Base is https://host/owner/name ("": not a known forge).
	Base string
	// GitLab uses /-/commit/ and /-/merge_requests/.
	GitLab bool
}

// repoWebOf reads a repository URL (https://, ssh://, scp-like
// git@host:owner/name.git): github.com and hosts named gitlab.* or
// gitlab.com are known; any other host, a local path, or a URL with
// credentials gives no links.
func repoWebOf(repo string) repoWeb {
	repo = strings.TrimSpace(repo)
	var host, path string
	switch {
	case strings.Contains(repo, "://"):
		u, err := url.Parse(repo)
		if err != nil || u.Host == "" {
			return repoWeb{}
		}
		if u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git" {
			return repoWeb{}
		}
		host, path = u.Hostname(), u.Path
	case strings.Contains(repo, "@") && strings.Contains(repo, ":") && !strings.HasPrefix(repo, "/"):
		// git@github.com:owner/name.git
		_, rest, _ := strings.Cut(repo, "@")
		host, path, _ = strings.Cut(rest, ":")
	default:
		return repoWeb{}
	}
	host = strings.ToLower(host)
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if path == "" || strings.Count(path, "/") < 1 || strings.ContainsAny(path, "?#\"'<> ") || strings.Contains(path, "..") {
		return repoWeb{}
	}
	switch {
	case host == "github.com":
		if strings.Count(path, "/") != 1 {
			return repoWeb{}
		}
		return repoWeb{Base: "https://github.com/" + path}
	case host == "gitlab.com" || strings.HasPrefix(host, "gitlab."):
		return repoWeb{Base: "https://" + host + "/" + path, GitLab: true}
	}
	return repoWeb{}
}

// Commit is the commit's page ("": none).
func (w repoWeb) Commit(sha string) string {
	if w.Base == "" || sha == "" || strings.ContainsAny(sha, "/?#") {
		return ""
	}
	if w.GitLab {
		return w.Base + "/-/commit/" + sha
	}
	return w.Base + "/commit/" + sha
}

// PR is the pull (merge) request's page ("": none).
func (w repoWeb) PR(n int) string {
	if w.Base == "" || n <= 0 {
		return ""
	}
	if w.GitLab {
		return w.Base + "/-/merge_requests/" + strconv.Itoa(n)
	}
	return w.Base + "/pull/" + strconv.Itoa(n)
}
