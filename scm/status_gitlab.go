package scm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GitLabStatusConfig is how sluice signs in to GitLab's API.
type GitLabStatusConfig struct {
	// URL is the GitLab instance, https://gitlab.com (default) or a
	// self-managed one; the API is under <URL>/api/v4/.
	URL string
	// Token is a project, group or personal access token with the api scope
	// (Developer role or above on the project).
	Token string
}

// Configured reports whether a GitLab token is set.
func (c GitLabStatusConfig) Configured() bool { return c.Token != "" }

// GitLabStatuses posts commit statuses through GitLab's commit status API
// (POST /projects/:id/statuses/:sha).
type GitLabStatuses struct {
	api   *url.URL
	token string
	hc    *http.Client
	now   func() time.Time
}

// gitlabDescriptionMax is GitLab's limit on a status description.
const gitlabDescriptionMax = 255

// NewGitLabStatuses checks cfg and returns a poster.
func NewGitLabStatuses(cfg GitLabStatusConfig, hc *http.Client) (*GitLabStatuses, error) {
	if cfg.Token == "" {
		return nil, errors.New("no GitLab credentials: set SLUICE_GITLAB_TOKEN")
	}
	if cfg.URL == "" {
		cfg.URL = "https://gitlab.com"
	}
	base, err := apiBase("SLUICE_GITLAB_URL", cfg.URL)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &GitLabStatuses{api: base.JoinPath("api", "v4"), token: cfg.Token, hc: hc, now: time.Now}, nil
}

// gitlabState maps sluice's states onto GitLab's.
func gitlabState(s string) string {
	switch s {
	case StateFailure:
		return "failed"
	case StateError:
		return "canceled"
	default: // pending, running, success, skipped are GitLab's names too
		return s
	}
}

// PostStatus implements StatusPoster.
func (g *GitLabStatuses) PostStatus(ctx context.Context, t StatusTarget, sha string, st CommitStatus) error {
	what := fmt.Sprintf("post status %s of %s to gitlab:%s", st.Context, short(sha), t.Repo)
	body := map[string]string{"state": gitlabState(st.State), "name": st.Context}
	if st.Description != "" {
		body["description"] = truncate(st.Description, gitlabDescriptionMax)
	}
	if st.TargetURL != "" {
		body["target_url"] = st.TargetURL
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// The project's full path is its ID when URL-encoded as one segment.
	u := g.api.JoinPath("projects") // /api/v4/projects
	u.RawPath = u.Path + "/" + url.PathEscape(t.Repo) + "/statuses/" + url.PathEscape(sha)
	u.Path = u.Path + "/" + t.Repo + "/statuses/" + sha
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(buf))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("PRIVATE-TOKEN", g.token)
	resp, err := g.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusBadRequest && bytes.Contains(msg, []byte("Cannot transition status")):
		// GitLab refuses to set a state a status already has
		// ("Cannot transition status via :run from :running"): it holds it.
		return nil
	case code == http.StatusTooManyRequests:
		wait, ok := rateLimitWait(resp.Header, g.now())
		if !ok {
			wait = time.Minute
		}
		return &RateLimitedError{Provider: "GitLab", Wait: wait, Message: what + ": " + gitlabMessage(msg)}
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusConflict:
		return fmt.Errorf("%w: %s: GitLab answered %d %s", ErrStatusRefused, what, code, gitlabMessage(msg))
	default:
		return fmt.Errorf("%s: GitLab answered %d %s", what, code, gitlabMessage(msg))
	}
}

// gitlabMessage is the message of a GitLab error body ({"message": ...}).
func gitlabMessage(body []byte) string {
	var v struct {
		Message any `json:"message"`
		Error   string
	}
	if json.Unmarshal(body, &v) == nil {
		if v.Message != nil {
			return fmt.Sprint(v.Message)
		}
		if v.Error != "" {
			return v.Error
		}
	}
	return strings.TrimSpace(truncate(string(body), 200))
}
