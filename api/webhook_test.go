package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

const (
	pushSHA  = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
	pushBody = `{"ref": "refs/heads/main", "before": "1111111111111111111111111111111111111111", "after": "` + pushSHA + `",
		"repository": {"full_name": "acme/app", "clone_url": "https://github.com/acme/app.git", "default_branch": "main"},
		"sender": {"login": "alice"}, "commits": [{"id": "` + pushSHA + `", "added": ["a.go"], "modified": [], "removed": []}]}`
	gitlabPushBody = `{"object_kind": "push", "ref": "refs/heads/main", "before": "1111111111111111111111111111111111111111",
		"after": "` + pushSHA + `", "checkout_sha": "` + pushSHA + `", "user_username": "alice",
		"project": {"path_with_namespace": "acme/app", "git_http_url": "https://gitlab.com/acme/app.git"}, "commits": []}`
)

// sign returns GitHub's X-Hub-Signature-256 of body under secret.
func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func githubHeaders(event, signature string) http.Header {
	h := http.Header{"X-Github-Event": {event}, "X-Github-Delivery": {"d-1"}, "Content-Type": {"application/json"}}
	if signature != "" {
		h.Set("X-Hub-Signature-256", signature)
	}
	return h
}

func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider string
		secret   string
		hdr      http.Header
		body     string
		status   int
		want     string
	}{
		{
			name: "github missing signature", provider: "github", secret: "s3cret", hdr: githubHeaders("push", ""), body: pushBody,
			status: http.StatusUnauthorized, want: "X-Hub-Signature-256",
		},
		{
			name: "github wrong signature", provider: "github", secret: "s3cret", hdr: githubHeaders("push", sign("other", pushBody)), body: pushBody,
			status: http.StatusUnauthorized, want: "signature",
		},
		{
			name: "github signature of another body", provider: "github", secret: "s3cret", hdr: githubHeaders("push", sign("s3cret", "{}")), body: pushBody,
			status: http.StatusUnauthorized, want: "signature",
		},
		{
			name: "github signature not hex", provider: "github", secret: "s3cret", hdr: githubHeaders("push", "sha256=zz"), body: pushBody,
			status: http.StatusUnauthorized, want: "not hex",
		},
		{
			name: "github malformed body", provider: "github", hdr: githubHeaders("push", ""), body: `{"ref": `,
			status: http.StatusBadRequest, want: "github push",
		},
		{
			name: "github signed malformed body", provider: "github", secret: "s3cret", hdr: githubHeaders("push", sign("s3cret", "not json")), body: "not json",
			status: http.StatusBadRequest, want: "github push",
		},
		{
			name: "github push without ref", provider: "github", hdr: githubHeaders("push", ""), body: `{"after": "` + pushSHA + `"}`,
			status: http.StatusBadRequest, want: "ref",
		},
		{
			name: "github missing event header", provider: "github", hdr: http.Header{}, body: pushBody,
			status: http.StatusBadRequest, want: "X-GitHub-Event",
		},
		{
			name: "gitlab wrong token", provider: "gitlab", secret: "tok", hdr: http.Header{"X-Gitlab-Event": {"Push Hook"}, "X-Gitlab-Token": {"nope"}},
			body: gitlabPushBody, status: http.StatusUnauthorized, want: "X-Gitlab-Token",
		},
		{
			name: "gitlab missing token", provider: "gitlab", secret: "tok", hdr: http.Header{"X-Gitlab-Event": {"Push Hook"}},
			body: gitlabPushBody, status: http.StatusUnauthorized, want: "X-Gitlab-Token",
		},
		{
			name: "gitlab malformed body", provider: "gitlab", hdr: http.Header{"X-Gitlab-Event": {"Push Hook"}}, body: `[`,
			status: http.StatusBadRequest, want: "gitlab",
		},
		{
			name: "gitlab missing event header", provider: "gitlab", hdr: http.Header{}, body: gitlabPushBody,
			status: http.StatusBadRequest, want: "X-Gitlab-Event",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			deps := api.Deps{}
			if tt.provider == "github" {
				deps.GitHubSecret = tt.secret
			} else {
				deps.GitLabSecret = tt.secret
			}
			// No Temporal client: refused deliveries never reach it.
			h := newHandler(t, deps)
			msg := errorOf(t, call(t, h, http.MethodPost, "/webhooks/"+tt.provider, tt.body, tt.hdr), tt.status)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestWebhookIgnoredEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider string
		secret   string
		hdr      http.Header
		body     string
		want     string
	}{
		{name: "github ping", provider: "github", hdr: githubHeaders("ping", ""), body: `{"zen": "Keep it logically awesome."}`, want: "github ping event"},
		{name: "signed github ping", provider: "github", secret: "s3cret", hdr: githubHeaders("ping", sign("s3cret", `{"zen": "x"}`)), body: `{"zen": "x"}`, want: "ping"},
		{name: "github issues", provider: "github", hdr: githubHeaders("issues", ""), body: `{}`, want: `github event "issues" is not handled`},
		{
			name: "github branch deleted", provider: "github", hdr: githubHeaders("push", ""),
			body: `{"ref": "refs/heads/old", "after": "0000000000000000000000000000000000000000", "deleted": true, "repository": {"full_name": "acme/app"}}`,
			want: "deletes refs/heads/old",
		},
		{name: "gitlab unknown event", provider: "gitlab", hdr: http.Header{"X-Gitlab-Event": {"Wiki Page Hook"}}, body: `{}`, want: "Wiki Page Hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{GitHubSecret: tt.secret})
			res := decodeBody[api.WebhookResult](t, call(t, h, http.MethodPost, "/webhooks/"+tt.provider, tt.body, tt.hdr), http.StatusAccepted)
			require.Contains(t, res.Ignored, tt.want)
			require.Empty(t, res.Events)
			require.Empty(t, res.Errors)
		})
	}
}

func TestWebhookBodyTooLarge(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{})
	body := strings.Repeat(" ", 5<<20+1)
	msg := errorOf(t, call(t, h, http.MethodPost, "/webhooks/github", body, githubHeaders("push", "")), http.StatusRequestEntityTooLarge)
	require.Contains(t, msg, "webhook body")
}

// pipelinesOf makes c list the given pipelines (name → repo) to the webhook.
func pipelinesOf(t *testing.T, c interface {
	On(method string, args ...any) *mock.Call
}, repos map[string]string,
) {
	t.Helper()
	var execs []*workflowpb.WorkflowExecutionInfo
	for name, repo := range repos {
		execs = append(execs, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: workflows.PipelineWorkflowID(name)}})
		c.On("QueryWorkflow", mock.Anything, workflows.PipelineWorkflowID(name), "", workflows.QueryPipeline).
			Return(encode(t, workflows.PipelineInfo{Config: workflows.PipelineConfig{Name: name, Repo: repo, Branch: "main"}}), nil)
	}
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return strings.Contains(r.GetQuery(), "PipelineWorkflow")
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: execs}, nil)
}

func TestWebhookStartsEventsInMatchingPipelines(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	pipelinesOf(t, tc, map[string]string{
		"app":   "https://github.com/acme/app",
		"app-2": "git@github.com:acme/app.git",
		"other": "https://github.com/acme/other.git",
	})
	started := map[string]workflows.StartEventRequest{}
	for _, name := range []string{"app", "app-2"} {
		onAdmit(t, tc, name, func(r workflows.StartEventRequest) (workflows.StartEventResult, error) {
			started[name] = r
			return workflows.StartEventResult{Event: workflows.EventRef{Pipeline: name, Number: 9}}, nil
		})
	}
	h := newHandler(t, api.Deps{Service: newService(t, tc), GitHubSecret: "s3cret"})
	res := decodeBody[api.WebhookResult](t, call(t, h, http.MethodPost, "/webhooks/github", pushBody, githubHeaders("push", sign("s3cret", pushBody))), http.StatusAccepted)
	require.ElementsMatch(t, []api.EventStarted{
		{ID: "app/9", Pipeline: "app", Number: 9},
		{ID: "app-2/9", Pipeline: "app-2", Number: 9},
	}, res.Events)
	require.Empty(t, res.Errors)
	require.Empty(t, res.Ignored)
	require.Len(t, started, 2)
	tr := started["app"].Trigger
	require.Equal(t, workflows.TriggerCommit, tr.Kind)
	require.Equal(t, "main", tr.Branch)
	require.Equal(t, pushSHA, tr.SHA)
	sum := sha256.Sum256([]byte(pushBody))
	require.Equal(t, "github:"+hex.EncodeToString(sum[:16]), tr.DeliveryID, "the signed body, not the delivery header, deduplicates redeliveries and replays")
	require.Equal(t, "alice", tr.Sender)
	require.Equal(t, []string{"a.go"}, tr.ChangedFiles)
	require.Equal(t, "github:alice", started["app"].Creator)
}

func TestWebhookWithoutMatchingPipeline(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	pipelinesOf(t, tc, map[string]string{"other": "https://github.com/acme/other.git"})
	h := newHandler(t, api.Deps{Service: newService(t, tc)})
	res := decodeBody[api.WebhookResult](t, call(t, h, http.MethodPost, "/webhooks/github", pushBody, githubHeaders("push", "")), http.StatusAccepted)
	require.Equal(t, "no pipeline uses repository acme/app", res.Ignored)
	require.Empty(t, res.Events)
}

func TestWebhookFailuresAre502(t *testing.T) {
	t.Parallel()
	t.Run("listing pipelines fails", func(t *testing.T) {
		t.Parallel()
		tc := newMockClient(t)
		tc.On("ListWorkflow", mock.Anything, mock.Anything).Return(nil, errors.New("visibility unavailable")).Once()
		h := newHandler(t, api.Deps{Service: newService(t, tc)})
		res := decodeBody[api.WebhookResult](t, call(t, h, http.MethodPost, "/webhooks/github", pushBody, githubHeaders("push", "")), http.StatusBadGateway)
		require.Len(t, res.Errors, 1)
		require.Contains(t, res.Errors[0], "visibility unavailable")
	})
	t.Run("every start fails", func(t *testing.T) {
		t.Parallel()
		tc := newMockClient(t)
		pipelinesOf(t, tc, map[string]string{"app": "https://github.com/acme/app.git"})
		// Neither the update nor the admission signal gets through.
		tc.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(nil, errors.New("frontend unavailable")).Once()
		tc.On("SignalWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.SignalAdmitEvents, mock.Anything).Return(errors.New("pipeline busy")).Once()
		h := newHandler(t, api.Deps{Service: newService(t, tc)})
		res := decodeBody[api.WebhookResult](t, call(t, h, http.MethodPost, "/webhooks/github", pushBody, githubHeaders("push", "")), http.StatusBadGateway)
		require.Equal(t, []string{"pipeline app: pipeline busy"}, res.Errors)
		require.Empty(t, res.Events)
	})
}
