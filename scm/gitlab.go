package scm

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// GitLab webhook headers.
const (
	gitlabEventHeader    = "X-Gitlab-Event"
	gitlabDeliveryHeader = "X-Gitlab-Event-UUID"
	gitlabTokenHeader    = "X-Gitlab-Token" //nolint:gosec // G101: the header's name, not a credential
)

// GitLab event names (X-Gitlab-Event).
const (
	gitlabPush         = "Push Hook"
	gitlabTagPush      = "Tag Push Hook"
	gitlabMergeRequest = "Merge Request Hook"
	gitlabRelease      = "Release Hook"
	gitlabSystem       = "System Hook"
)

// gitlabSystemKinds maps a system hook's object_kind to the project hook it
// carries.
var gitlabSystemKinds = map[string]string{
	"push":          gitlabPush,
	"tag_push":      gitlabTagPush,
	"merge_request": gitlabMergeRequest,
}

// gitlabProject is the project object of GitLab payloads.
type gitlabProject struct {
	PathWithNamespace string `json:"path_with_namespace"`
	WebURL            string `json:"web_url"`
	GitHTTPURL        string `json:"git_http_url"`
	GitSSHURL         string `json:"git_ssh_url"`
	DefaultBranch     string `json:"default_branch"`
}

// urls lists the project's URLs, HTTP clone URL first.
func (p gitlabProject) urls() []string {
	return urls(p.GitHTTPURL, p.GitSSHURL, p.WebURL)
}

// gitlabPushEvent is a Push Hook or Tag Push Hook.
type gitlabPushEvent struct {
	Ref               string        `json:"ref"`
	Before            string        `json:"before"`
	After             string        `json:"after"`
	CheckoutSHA       string        `json:"checkout_sha"`
	UserUsername      string        `json:"user_username"`
	Project           gitlabProject `json:"project"`
	Commits           []pushCommit  `json:"commits"`
	TotalCommitsCount int           `json:"total_commits_count"`
}

// gitlabMergeRequestEvent is a Merge Request Hook.
type gitlabMergeRequestEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	Project          gitlabProject `json:"project"`
	ObjectAttributes struct {
		IID             int    `json:"iid"`
		Title           string `json:"title"`
		Action          string `json:"action"`
		SourceBranch    string `json:"source_branch"`
		TargetBranch    string `json:"target_branch"`
		SourceProjectID int64  `json:"source_project_id"`
		TargetProjectID int64  `json:"target_project_id"`
		OldRev          string `json:"oldrev"`
		LastCommit      struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// gitlabReleaseEvent is a Release Hook.
type gitlabReleaseEvent struct {
	Action  string        `json:"action"`
	Tag     string        `json:"tag"`
	Project gitlabProject `json:"project"`
	Commit  struct {
		ID string `json:"id"`
	} `json:"commit"`
}

// gitlabKind is the object_kind every GitLab payload carries.
type gitlabKind struct {
	ObjectKind string `json:"object_kind"`
}

// ParseGitLab verifies and parses a GitLab webhook delivery. When secret is
// not empty the X-Gitlab-Token header must equal it (compared in constant
// time; ErrSignature otherwise). The event comes from X-Gitlab-Event: Push
// Hook (HookCommit), Tag Push Hook (HookTag), Merge Request Hook (open,
// reopen, and update with new commits: HookPR; close, merge: HookPRClosed)
// and Release Hook (create: HookRelease); a System Hook carrying a push, tag
// push or merge request is read as that event. Deletions, other actions and
// other events return ErrIgnored with the reason; malformed bodies and
// missing fields return ErrBadPayload naming the field.
func ParseGitLab(h http.Header, body []byte, secret string) (*Hook, error) {
	if secret != "" {
		if err := verifyGitLabToken(h.Get(gitlabTokenHeader), secret); err != nil {
			return nil, err
		}
	}
	event := strings.TrimSpace(h.Get(gitlabEventHeader))
	if event == "" {
		return nil, fmt.Errorf("%w: missing header %s", ErrBadPayload, gitlabEventHeader)
	}
	if event == gitlabSystem {
		var k gitlabKind
		if err := decodeJSON("gitlab system hook", body, &k); err != nil {
			return nil, err
		}
		carried, ok := gitlabSystemKinds[k.ObjectKind]
		if !ok {
			return nil, ignoredf("gitlab system hook with object_kind %q is not handled", k.ObjectKind)
		}
		event = carried
	}
	hook, err := newHook(ProviderGitLab, h, gitlabDeliveryHeader, body)
	if err != nil {
		return nil, err
	}
	switch event {
	case gitlabPush, gitlabTagPush:
		err = parseGitLabPush(hook, event, body)
	case gitlabMergeRequest:
		err = parseGitLabMergeRequest(hook, body)
	case gitlabRelease:
		err = parseGitLabRelease(hook, body)
	default:
		return nil, ignoredf("gitlab event %q is not handled (want %s, %s, %s or %s)",
			event, gitlabPush, gitlabTagPush, gitlabMergeRequest, gitlabRelease)
	}
	if err != nil {
		return nil, err
	}
	return hook, nil
}

// verifyGitLabToken compares X-Gitlab-Token with the secret in constant time
// (hashing both first, so that not even the length leaks).
func verifyGitLabToken(token, secret string) error {
	if token == "" {
		return fmt.Errorf("%w: missing header %s (the webhook has no secret token set?)", ErrSignature, gitlabTokenHeader)
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return fmt.Errorf("%w: header %s does not match the secret", ErrSignature, gitlabTokenHeader)
	}
	return nil
}

// requireGitLabProject checks the project fields every event needs.
func requireGitLabProject(what string, p gitlabProject) error {
	if p.PathWithNamespace == "" {
		return missingField(what, "project.path_with_namespace")
	}
	if p.GitHTTPURL == "" && p.GitSSHURL == "" && p.WebURL == "" {
		return missingField(what, "project.git_http_url")
	}
	return nil
}

// parseGitLabPush fills hook from a Push Hook or Tag Push Hook.
func parseGitLabPush(hook *Hook, event string, body []byte) error {
	what := "gitlab " + event
	var p gitlabPushEvent
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
	if isZeroSHA(p.After) {
		return ignoredf("%s deletes %s", what, p.Ref)
	}
	// checkout_sha is the commit (after names the tag object of an
	// annotated tag); it is null when the ref was deleted.
	sha, field := p.CheckoutSHA, "checkout_sha"
	if sha == "" && isBranch {
		sha, field = p.After, "after"
	}
	if err := requireSHA(what, field, sha); err != nil {
		return err
	}
	if err := requireGitLabProject(what, p.Project); err != nil {
		return err
	}
	hook.RepoURLs = p.Project.urls()
	hook.RepoFullName = p.Project.PathWithNamespace
	hook.DefaultBranch = p.Project.DefaultBranch
	hook.SHA = sha
	hook.Before = optionalSHA(p.Before)
	hook.Sender = p.UserUsername
	if isTag {
		hook.Kind = HookTag
		hook.Ref = name
		hook.Branch = p.Project.DefaultBranch
		return nil
	}
	hook.Kind = HookCommit
	hook.Branch = name
	for _, c := range p.Commits {
		if c.ID == sha {
			hook.SkipCI = SkipCIMarker(c.Message)
			hook.Message, hook.Author = c.Message, c.authorOf()
		}
	}
	if p.TotalCommitsCount <= len(p.Commits) {
		hook.ChangedFiles = unionFiles(p.Commits)
	}
	return nil
}

// parseGitLabMergeRequest fills hook from a Merge Request Hook.
func parseGitLabMergeRequest(hook *Hook, body []byte) error {
	const what = "gitlab Merge Request Hook"
	var p gitlabMergeRequestEvent
	if err := decodeJSON(what, body, &p); err != nil {
		return err
	}
	mr := p.ObjectAttributes
	switch mr.Action {
	case "open", "reopen":
		hook.Kind = HookPR
	case "update":
		if mr.OldRev == "" {
			return ignoredf("%s action \"update\" without new commits (no object_attributes.oldrev)", what)
		}
		hook.Kind = HookPR
		hook.Before = optionalSHA(mr.OldRev)
	case "close", "merge":
		hook.Kind = HookPRClosed
		hook.Merged = mr.Action == "merge"
	case "":
		return missingField(what, "object_attributes.action")
	default:
		return ignoredf("%s action %q (sluice acts on open, reopen, update with new commits, close and merge)", what, mr.Action)
	}
	if mr.IID <= 0 {
		return missingField(what, "object_attributes.iid")
	}
	if err := requireSHA(what, "object_attributes.last_commit.id", mr.LastCommit.ID); err != nil {
		return err
	}
	if mr.TargetBranch == "" {
		return missingField(what, "object_attributes.target_branch")
	}
	if mr.SourceBranch == "" {
		return missingField(what, "object_attributes.source_branch")
	}
	if err := requireGitLabProject(what, p.Project); err != nil {
		return err
	}
	hook.RepoURLs = p.Project.urls()
	hook.RepoFullName = p.Project.PathWithNamespace
	hook.DefaultBranch = p.Project.DefaultBranch
	hook.Branch = mr.TargetBranch
	hook.Ref = mr.SourceBranch
	hook.PRRef = "refs/merge-requests/" + strconv.Itoa(mr.IID) + "/head"
	hook.SHA = mr.LastCommit.ID
	hook.PRNumber = mr.IID
	hook.Fork = mr.SourceProjectID != 0 && mr.TargetProjectID != 0 && mr.SourceProjectID != mr.TargetProjectID
	hook.Sender = p.User.Username
	hook.Title, hook.Author = mr.Title, p.User.Username
	return nil
}

// parseGitLabRelease fills hook from a Release Hook.
func parseGitLabRelease(hook *Hook, body []byte) error {
	const what = "gitlab Release Hook"
	var p gitlabReleaseEvent
	if err := decodeJSON(what, body, &p); err != nil {
		return err
	}
	switch p.Action {
	case "create":
	case "":
		return missingField(what, "action")
	default:
		return ignoredf("%s action %q (sluice acts on create)", what, p.Action)
	}
	if p.Tag == "" {
		return missingField(what, "tag")
	}
	if err := requireSHA(what, "commit.id", p.Commit.ID); err != nil {
		return err
	}
	if err := requireGitLabProject(what, p.Project); err != nil {
		return err
	}
	hook.Kind = HookRelease
	hook.RepoURLs = p.Project.urls()
	hook.RepoFullName = p.Project.PathWithNamespace
	hook.DefaultBranch = p.Project.DefaultBranch
	hook.Branch = p.Project.DefaultBranch
	hook.Ref = p.Tag
	hook.SHA = p.Commit.ID
	return nil
}
