package activities

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/scm"
)

const (
	// ErrTypeStatusRefused is the error type of a commit status the
	// provider refused for good (credentials, access, unknown repository or
	// commit).
	ErrTypeStatusRefused = "StatusRefused"
	// ErrTypeRateLimited is the error type of a rate-limited post: the
	// retry waits as long as the provider asked.
	ErrTypeRateLimited = "RateLimited"
)

// StatusSettings is how a controller answers the SCM.
type StatusSettings struct {
	// Posters has the providers sluice has credentials for.
	Posters scm.Statuses
	// GitHubHost and GitLabHost are the web hosts whose repositories go to
	// those providers (besides github.com and gitlab.com).
	GitHubHost, GitLabHost string
	// PublicURL is the base of the web pages statuses link to.
	PublicURL string
}

// StatusesOff is the pipeline setting that turns commit statuses off.
const StatusesOff = "off"

// statusTarget decides where an event's statuses go: the pipeline's
// setting ("github:owner/repo", "gitlab:group/project", "off") or, when it
// has none, the provider its repository URL names. off says why nothing
// is posted.
func (a *Activities) statusTarget(setting, repo string) (target *scm.StatusTarget, off string) {
	var t scm.StatusTarget
	switch setting {
	case StatusesOff:
		return nil, "turned off for this pipeline"
	case "":
		var ok bool
		if t, ok = scm.TargetFromRepoURL(repo, a.Statuses.GitHubHost, a.Statuses.GitLabHost); !ok {
			return nil, "the repository " + repo + " is not on GitHub or GitLab (set the pipeline's statuses to github:<owner>/<repo> or gitlab:<group>/<project>)"
		}
	default:
		var err error
		if t, err = scm.ParseStatusTarget(setting); err != nil {
			return nil, err.Error()
		}
	}
	if p, why := a.Statuses.Posters.Poster(t.Provider); p == nil {
		return nil, why
	}
	return &t, ""
}

// PostStatusInput is one commit status to post.
type PostStatusInput struct {
	Target scm.StatusTarget `json:"target"`
	SHA    string           `json:"sha"`
	Status scm.CommitStatus `json:"status"`
	// Page is the web page to link to, relative to the public URL.
	Page string `json:"page,omitempty"`
}

// PostCommitStatus posts one commit status. A refusal is not retried; a
// rate limit is retried after the time the provider asked for; anything
// else is retried with backoff.
func (a *Activities) PostCommitStatus(ctx context.Context, in PostStatusInput) error {
	st := in.Status
	if in.Page != "" && a.Statuses.PublicURL != "" {
		st.TargetURL = pageURL(a.Statuses.PublicURL, in.Page)
	}
	err := a.Statuses.Posters.PostStatus(ctx, in.Target, in.SHA, st)
	var rl *scm.RateLimitedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rl):
		return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeRateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: rl.Wait})
	case errors.Is(err, scm.ErrStatusRefused):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeStatusRefused, nil)
	}
	return err
}

// pageURL joins the public URL and a page path, escaping each segment.
func pageURL(base, page string) string {
	segs := strings.Split(strings.TrimPrefix(page, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimRight(base, "/") + "/" + strings.Join(segs, "/")
}
