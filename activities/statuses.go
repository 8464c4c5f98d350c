package activities

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
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
	// PipelineTokens reads a pipeline's own SCM token (the pipeline secret
	// SLUICE_GITHUB_TOKEN or SLUICE_GITLAB_TOKEN), which takes precedence
	// over the global credentials; nil: global credentials only.
	PipelineTokens PipelineTokens
	// NewPoster makes a poster for a pipeline's own token (set with
	// PipelineTokens).
	NewPoster func(provider, token string) (scm.StatusPoster, error)
	// AppTokens mints the GitHub App's installation tokens that read a
	// repository, for pipelines without credentials of their own (nil: no
	// App configured).
	AppTokens AppTokens

	mu      sync.Mutex
	posters map[string]scm.StatusPoster
}

// PipelineTokens reads pipeline secrets that hold SCM tokens.
type PipelineTokens interface {
	// PipelineToken returns the pipeline's secret name; found is false when
	// the pipeline has none.
	PipelineToken(ctx context.Context, pipeline, name string) (value string, found bool, err error)
}

// PipelineTokenFunc adapts a function to PipelineTokens.
type PipelineTokenFunc func(ctx context.Context, pipeline, name string) (string, bool, error)

// PipelineToken calls f.
func (f PipelineTokenFunc) PipelineToken(ctx context.Context, pipeline, name string) (string, bool, error) {
	return f(ctx, pipeline, name)
}

// TokenSecret is the pipeline secret that holds a provider's token.
func TokenSecret(provider string) string {
	if provider == scm.ProviderGitLab {
		return "SLUICE_GITLAB_TOKEN"
	}
	return "SLUICE_GITHUB_TOKEN"
}

// posterFor returns the poster of pipeline's own token for provider, or
// nil when it has none.
func (s *StatusSettings) posterFor(ctx context.Context, pipeline, provider string) (scm.StatusPoster, error) {
	if s.PipelineTokens == nil || s.NewPoster == nil || pipeline == "" {
		return nil, nil
	}
	token, found, err := s.PipelineTokens.PipelineToken(ctx, pipeline, TokenSecret(provider))
	if err != nil || !found {
		return nil, err
	}
	key := provider + "\x00" + token
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.posters[key]; p != nil {
		return p, nil
	}
	p, err := s.NewPoster(provider, token)
	if err != nil {
		return nil, err
	}
	if s.posters == nil {
		s.posters = map[string]scm.StatusPoster{}
	}
	s.posters[key] = p
	return p, nil
}

// StatusesOff is the pipeline setting that turns commit statuses off.
const StatusesOff = "off"

// statusTarget decides where an event's statuses go: the pipeline's
// setting ("github:owner/repo", "gitlab:group/project", "off") or, when it
// has none, the provider its repository URL names. off says why nothing
// is posted. err is a pipeline token that could not be read (the API did
// not answer): the caller retries rather than turn statuses off (N15).
func (a *Activities) statusTarget(ctx context.Context, pipeline, setting, repo string) (target *scm.StatusTarget, off string, err error) {
	settings := a.statusSettings()
	var t scm.StatusTarget
	switch setting {
	case StatusesOff:
		return nil, "turned off for this pipeline", nil
	case "":
		var ok bool
		if t, ok = scm.TargetFromRepoURL(repo, settings.GitHubHost, settings.GitLabHost); !ok {
			return nil, "the repository " + scm.RedactURL(repo) + " is not on GitHub or GitLab (set the pipeline's statuses to github:<owner>/<repo> or gitlab:<group>/<project>)", nil
		}
	default:
		if t, err = scm.ParseStatusTarget(setting); err != nil {
			return nil, err.Error(), nil
		}
	}
	if p, why := settings.Posters.Poster(t.Provider); p == nil {
		own, err := settings.posterFor(ctx, pipeline, t.Provider)
		switch {
		case err != nil:
			return nil, "", fmt.Errorf("cannot read the pipeline's %s secret: %w", TokenSecret(t.Provider), err)
		case own == nil:
			return nil, why + ", nor the pipeline secret " + TokenSecret(t.Provider), nil
		}
	}
	return &t, "", nil
}

// lastResolveAttempt reports whether this ResolveEvent attempt is the last
// its retry policy allows: the policy's own bound when the server gave it,
// else ResolveMaxAttempts, which the event workflow sets.
func lastResolveAttempt(ctx context.Context) bool {
	if !activity.IsActivity(ctx) {
		return true
	}
	info := activity.GetInfo(ctx)
	bound := int32(ResolveMaxAttempts)
	if p := info.RetryPolicy; p != nil && p.MaximumAttempts > 0 {
		bound = p.MaximumAttempts
	}
	return info.Attempt >= bound
}

// PostStatusInput is one commit status to post.
type PostStatusInput struct {
	// Pipeline's own token, when it has one, posts instead of the global one.
	Pipeline string           `json:"pipeline,omitempty"`
	Target   scm.StatusTarget `json:"target"`
	SHA      string           `json:"sha"`
	Status   scm.CommitStatus `json:"status"`
	// Page is the web page to link to, relative to the public URL.
	Page string `json:"page,omitempty"`
}

// PostCommitStatus posts one commit status. A refusal is not retried; a
// rate limit is retried after the time the provider asked for; anything
// else is retried with backoff.
func (a *Activities) PostCommitStatus(ctx context.Context, in PostStatusInput) error {
	settings := a.statusSettings()
	st := in.Status
	if in.Page != "" && settings.PublicURL != "" {
		st.TargetURL = pageURL(settings.PublicURL, in.Page)
	}
	var poster scm.StatusPoster = settings.Posters
	own, err := settings.posterFor(ctx, in.Pipeline, in.Target.Provider)
	if err != nil {
		return fmt.Errorf("read the pipeline's %s secret: %w", TokenSecret(in.Target.Provider), err)
	}
	if own != nil {
		poster = own
	}
	err = poster.PostStatus(ctx, in.Target, in.SHA, st)
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

// statusSettings are the controller's settings (none: nothing configured).
func (a *Activities) statusSettings() *StatusSettings {
	if a.Statuses == nil {
		return &StatusSettings{}
	}
	return a.Statuses
}

// pageURL joins the public URL and a page path, escaping each segment.
func pageURL(base, page string) string {
	segs := strings.Split(strings.TrimPrefix(page, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimRight(base, "/") + "/" + strings.Join(segs, "/")
}
