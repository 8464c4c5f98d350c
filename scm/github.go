package scm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GitHub webhook headers.
const (
	githubEventHeader     = "X-GitHub-Event"
	githubDeliveryHeader  = "X-GitHub-Delivery"
	githubSignatureHeader = "X-Hub-Signature-256"
)

// githubMaxCommits is the most commits GitHub lists in a push payload; a
// payload with that many may be truncated.
const githubMaxCommits = 2048

// githubRepo is the repository object of GitHub payloads.
type githubRepo struct {
	FullName      string `json:"full_name"`
	CloneURL      string `json:"clone_url"`
	SSHURL        string `json:"ssh_url"`
	HTMLURL       string `json:"html_url"`
	GitURL        string `json:"git_url"`
	DefaultBranch string `json:"default_branch"`
}

// urls lists the repository's URLs, clone URL first.
func (r githubRepo) urls() []string {
	return urls(r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL)
}

// githubUser is a GitHub account.
type githubUser struct {
	Login string `json:"login"`
}

// githubPush is a push event.
type githubPush struct {
	Ref        string       `json:"ref"`
	Before     string       `json:"before"`
	After      string       `json:"after"`
	BaseRef    string       `json:"base_ref"`
	Created    bool         `json:"created"`
	Deleted    bool         `json:"deleted"`
	Forced     bool         `json:"forced"`
	Commits    []pushCommit `json:"commits"`
	HeadCommit *pushCommit  `json:"head_commit"`
	Repository githubRepo   `json:"repository"`
	Pusher     struct {
		Name string `json:"name"`
	} `json:"pusher"`
	Sender githubUser `json:"sender"`
}

// githubPullRequest is a pull_request event.
type githubPullRequest struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
	Before      string `json:"before"`
	PullRequest struct {
		Number int        `json:"number"`
		Merged bool       `json:"merged"`
		Title  string     `json:"title"`
		User   githubUser `json:"user"`
		Head   struct {
			Ref  string      `json:"ref"`
			SHA  string      `json:"sha"`
			Repo *githubRepo `json:"repo"`
		} `json:"head"`
		Base struct {
			Ref  string      `json:"ref"`
			Repo *githubRepo `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
	Repository githubRepo `json:"repository"`
	Sender     githubUser `json:"sender"`
}

// githubRelease is a release event.
type githubRelease struct {
	Action  string `json:"action"`
	Release struct {
		TagName string `json:"tag_name"`
	} `json:"release"`
	Repository githubRepo `json:"repository"`
	Sender     githubUser `json:"sender"`
}

// ParseGitHub verifies and parses a GitHub webhook delivery. When secret is
// not empty the X-Hub-Signature-256 header must hold the HMAC-SHA256 of body
// (ErrSignature otherwise). The event comes from X-GitHub-Event: push (to a
// branch: HookCommit; a tag: HookTag), pull_request (opened, synchronize,
// reopened: HookPR; closed: HookPRClosed) and release (published:
// HookRelease). Branch and tag deletions, ping, other actions and other
// events return ErrIgnored with the reason; malformed bodies and missing
// fields return ErrBadPayload naming the field. Bodies may be JSON or
// application/x-www-form-urlencoded with a payload parameter.
func ParseGitHub(h http.Header, body []byte, secret string) (*Hook, error) {
	if secret != "" {
		if err := verifyGitHubSignature(h.Get(githubSignatureHeader), body, secret); err != nil {
			return nil, err
		}
	}
	event := strings.TrimSpace(h.Get(githubEventHeader))
	if event == "" {
		return nil, fmt.Errorf("%w: missing header %s", ErrBadPayload, githubEventHeader)
	}
	payload, err := githubPayload(h, body)
	if err != nil {
		return nil, err
	}
	hook, err := newHook(ProviderGitHub, h, githubDeliveryHeader, body)
	if err != nil {
		return nil, err
	}
	switch event {
	case "push":
		err = parseGitHubPush(hook, payload)
	case "pull_request":
		err = parseGitHubPullRequest(hook, payload)
	case "release":
		err = parseGitHubRelease(hook, payload)
	case "ping":
		return nil, ignoredf("github ping event")
	default:
		return nil, ignoredf("github event %q is not handled (want push, pull_request or release)", event)
	}
	if err != nil {
		return nil, err
	}
	return hook, nil
}

// verifyGitHubSignature checks X-Hub-Signature-256 ("sha256=<hex hmac>") in
// constant time.
func verifyGitHubSignature(header string, body []byte, secret string) error {
	if header == "" {
		return fmt.Errorf("%w: missing header %s (the webhook has no secret set?)", ErrSignature, githubSignatureHeader)
	}
	hexSum, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return fmt.Errorf("%w: header %s does not start with sha256=", ErrSignature, githubSignatureHeader)
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return fmt.Errorf("%w: header %s is not hex", ErrSignature, githubSignatureHeader)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: header %s does not match the body (wrong secret?)", ErrSignature, githubSignatureHeader)
	}
	return nil
}

// githubPayload returns the JSON document of a delivery: the body itself, or
// its payload parameter for form-encoded deliveries.
func githubPayload(h http.Header, body []byte) ([]byte, error) {
	mediaType, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mediaType != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form-encoded body: %w", ErrBadPayload, err)
	}
	payload := form.Get("payload")
	if payload == "" {
		return nil, fmt.Errorf("%w: form-encoded body: missing parameter \"payload\"", ErrBadPayload)
	}
	return []byte(payload), nil
}

// requireGitHubRepo checks the repository fields every event needs.
func requireGitHubRepo(what string, r githubRepo) error {
	if r.FullName == "" {
		return missingField(what, "repository.full_name")
	}
	if r.CloneURL == "" && r.SSHURL == "" && r.HTMLURL == "" {
		return missingField(what, "repository.clone_url")
	}
	return nil
}

// parseGitHubPush fills hook from a push event.
func parseGitHubPush(hook *Hook, body []byte) error {
	const what = "github push"
	var p githubPush
	if err := decodeJSON(what, body, &p); err != nil {
		return err
	}
	if p.Ref == "" {
		return missingField(what, "ref")
	}
	name, isBranch, isTag := splitRef(p.Ref)
	if !isBranch && !isTag {
		return ignoredf("%s to %s: neither a branch nor a tag", what, p.Ref)
	}
	if p.Deleted || isZeroSHA(p.After) {
		return ignoredf("%s deletes %s", what, p.Ref)
	}
	sha := p.After
	field := "after"
	if p.HeadCommit != nil && p.HeadCommit.ID != "" {
		// For an annotated tag "after" names the tag object; head_commit is
		// the commit.
		sha, field = p.HeadCommit.ID, "head_commit.id"
	}
	if err := requireSHA(what, field, sha); err != nil {
		return err
	}
	if err := requireGitHubRepo(what, p.Repository); err != nil {
		return err
	}
	hook.RepoURLs = p.Repository.urls()
	hook.RepoFullName = p.Repository.FullName
	hook.DefaultBranch = p.Repository.DefaultBranch
	hook.SHA = sha
	hook.Before = optionalSHA(p.Before)
	hook.Sender = p.Sender.Login
	if hook.Sender == "" {
		hook.Sender = p.Pusher.Name
	}
	if isTag {
		hook.Kind = HookTag
		hook.Ref = name
		hook.Branch = p.Repository.DefaultBranch
		if base, ok, _ := splitRef(p.BaseRef); ok {
			hook.Branch = base
		}
		return nil
	}
	hook.Kind = HookCommit
	hook.Branch = name
	if p.HeadCommit != nil {
		hook.SkipCI = SkipCIMarker(p.HeadCommit.Message)
		hook.Message, hook.Author = p.HeadCommit.Message, p.HeadCommit.authorOf()
	}
	if !p.Forced && len(p.Commits) < githubMaxCommits {
		hook.ChangedFiles = unionFiles(p.Commits)
	}
	return nil
}

// parseGitHubPullRequest fills hook from a pull_request event.
func parseGitHubPullRequest(hook *Hook, body []byte) error {
	const what = "github pull_request"
	var p githubPullRequest
	if err := decodeJSON(what, body, &p); err != nil {
		return err
	}
	switch p.Action {
	case "opened", "synchronize", "reopened":
		hook.Kind = HookPR
	case "closed":
		hook.Kind = HookPRClosed
	case "":
		return missingField(what, "action")
	default:
		return ignoredf("%s action %q (sluice acts on opened, synchronize, reopened and closed)", what, p.Action)
	}
	number := p.Number
	if number == 0 {
		number = p.PullRequest.Number
	}
	if number <= 0 {
		return missingField(what, "number")
	}
	pr := p.PullRequest
	if err := requireSHA(what, "pull_request.head.sha", pr.Head.SHA); err != nil {
		return err
	}
	if pr.Base.Ref == "" {
		return missingField(what, "pull_request.base.ref")
	}
	if pr.Head.Ref == "" {
		return missingField(what, "pull_request.head.ref")
	}
	if err := requireGitHubRepo(what, p.Repository); err != nil {
		return err
	}
	hook.RepoURLs = p.Repository.urls()
	hook.RepoFullName = p.Repository.FullName
	hook.DefaultBranch = p.Repository.DefaultBranch
	hook.Branch = pr.Base.Ref
	hook.Ref = pr.Head.Ref
	hook.PRRef = "refs/pull/" + strconv.Itoa(number) + "/head"
	hook.SHA = pr.Head.SHA
	if p.Action == "synchronize" {
		hook.Before = optionalSHA(p.Before)
	}
	hook.PRNumber = number
	hook.Title, hook.Author = pr.Title, pr.User.Login
	// A head repository that was deleted (null) was a fork.
	hook.Fork = pr.Head.Repo == nil || !strings.EqualFold(pr.Head.Repo.FullName, p.Repository.FullName)
	hook.Merged = pr.Merged
	hook.Sender = p.Sender.Login
	return nil
}

// parseGitHubRelease fills hook from a release event.
func parseGitHubRelease(hook *Hook, body []byte) error {
	const what = "github release"
	var p githubRelease
	if err := decodeJSON(what, body, &p); err != nil {
		return err
	}
	switch p.Action {
	case "published":
	case "":
		return missingField(what, "action")
	default:
		return ignoredf("%s action %q (sluice acts on published)", what, p.Action)
	}
	if p.Release.TagName == "" {
		return missingField(what, "release.tag_name")
	}
	if err := requireGitHubRepo(what, p.Repository); err != nil {
		return err
	}
	hook.Kind = HookRelease
	hook.RepoURLs = p.Repository.urls()
	hook.RepoFullName = p.Repository.FullName
	hook.DefaultBranch = p.Repository.DefaultBranch
	hook.Branch = p.Repository.DefaultBranch
	hook.Ref = p.Release.TagName
	hook.Sender = p.Sender.Login
	return nil
}
