package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{})
	got := decodeBody[map[string]string](t, call(t, h, http.MethodGet, "/healthz", "", nil), http.StatusOK)
	require.Equal(t, map[string]string{"status": "ok"}, got)
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ready  func(ctx context.Context) error
		status int
		want   map[string]string
	}{
		{name: "no readiness check", status: http.StatusOK, want: map[string]string{"status": "ready"}},
		{
			name: "temporal answers", ready: func(context.Context) error { return nil }, status: http.StatusOK,
			want: map[string]string{"status": "ready"},
		},
		{
			name: "temporal unavailable", ready: func(context.Context) error { return errors.New("dial tcp 127.0.0.1:7233: connection refused") },
			status: http.StatusServiceUnavailable,
			want:   map[string]string{"status": "unavailable", "error": "dial tcp 127.0.0.1:7233: connection refused"},
		},
		{name: "check has a deadline", ready: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return nil
		}, status: http.StatusOK, want: map[string]string{"status": "ready"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{Ready: tt.ready})
			got := decodeBody[map[string]string](t, call(t, h, http.MethodGet, "/readyz", "", nil), tt.status)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestUnknownRoutesAnswer404JSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path string
		shown              string // the path as the message shows it, unescaped
	}{
		{name: "unknown path", method: http.MethodGet, path: "/nope"},
		{name: "unknown api path", method: http.MethodGet, path: "/api/v1/widgets"},
		{name: "api version 2", method: http.MethodGet, path: "/api/v2/pipelines"},
		{name: "wrong method on health", method: http.MethodDelete, path: "/healthz"},
		{name: "wrong method on webhooks", method: http.MethodGet, path: "/webhooks/github"},
		{name: "logs without a log store", method: http.MethodGet, path: "/api/v1/builds/app%2Ftest%2F1/logs", shown: "/api/v1/builds/app/test/1/logs"},
		{name: "too deep", method: http.MethodGet, path: "/api/v1/events/app/1/extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			shown := tt.path
			if tt.shown != "" {
				shown = tt.shown
			}
			msg := errorOf(t, call(t, h, tt.method, tt.path, "", nil), http.StatusNotFound)
			require.Equal(t, fmt.Sprintf("no route for %s %s", tt.method, shown), msg)
		})
	}
}

func TestBadJSONBodies(t *testing.T) {
	t.Parallel()
	routes := []struct{ method, path string }{
		{http.MethodPost, "/api/v1/pipelines"},
		{http.MethodPatch, "/api/v1/pipelines/app"},
		{http.MethodPost, "/api/v1/pipelines/app/events"},
		{http.MethodPost, "/api/v1/events/app/3/restart"},
		{http.MethodPost, "/api/v1/queues"},
		{http.MethodPut, "/api/v1/queues/gpu"},
	}
	bodies := []struct {
		name string
		body string
		want string
	}{
		{name: "empty body", body: "", want: "request body: empty, want a JSON object"},
		{name: "only whitespace", body: " \n", want: "request body: empty, want a JSON object"},
		{name: "malformed", body: `{"repo" "x"}`, want: "request body: malformed JSON at byte"},
		{name: "truncated", body: `{"repo": "x"`, want: "request body: malformed JSON: unexpected end of input"},
		{name: "an array", body: `[1, 2]`, want: "request body: want a JSON object, got array"},
		{name: "a string", body: `"run"`, want: "request body: want a JSON object, got string"},
		{name: "a number", body: `42`, want: "request body: want a JSON object, got number"},
		{name: "unknown field", body: `{"colour": "red"}`, want: `request body: unknown field "colour"`},
		{name: "two values", body: `{} {}`, want: "request body: more than one JSON value"},
		{name: "trailing garbage", body: `{}x`, want: "request body: more than one JSON value"},
	}
	for _, r := range routes {
		for _, b := range bodies {
			t.Run(r.method+" "+r.path+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				h := newHandler(t, api.Deps{})
				msg := errorOf(t, call(t, h, r.method, r.path, b.body, nil), http.StatusBadRequest)
				require.Contains(t, msg, b.want)
				require.True(t, strings.HasPrefix(msg, "invalid request: "), msg)
			})
		}
	}
}

func TestBadJSONNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, body, want string
	}{
		{
			name: "pipeline repo a number", method: http.MethodPost, path: "/api/v1/pipelines",
			body: `{"name": "app", "repo": 5}`, want: `request body: field "repo": want string, got number`,
		},
		{
			name: "event pr a string", method: http.MethodPost, path: "/api/v1/pipelines/app/events",
			body: `{"pr": "12"}`, want: `request body: field "pr": want int, got string`,
		},
		{
			name: "event force a string", method: http.MethodPost, path: "/api/v1/pipelines/app/events",
			body: `{"force": "yes"}`, want: `request body: field "force": want bool, got string`,
		},
		{
			name: "queue rules a string", method: http.MethodPost, path: "/api/v1/queues",
			body: `{"name": "gpu", "rules": "run-on=any"}`, want: `request body: field "rules": want []string, got string`,
		},
		{
			name: "restart from a number", method: http.MethodPost, path: "/api/v1/events/app/3/restart",
			body: `{"from": 1}`, want: `request body: field "from": want string, got number`,
		},
		{
			name: "patch branch an object", method: http.MethodPatch, path: "/api/v1/pipelines/app",
			body: `{"branch": {}}`, want: `request body: field "branch": want string, got object`,
		},
		{
			name: "unknown field among known ones", method: http.MethodPost, path: "/api/v1/pipelines",
			body: `{"name": "app", "repo": "/src", "brnach": "main"}`, want: `request body: unknown field "brnach"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, tt.method, tt.path, tt.body, nil), http.StatusBadRequest)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{})
	body := `{"name": "` + strings.Repeat("a", 6<<20) + `"}`
	msg := errorOf(t, call(t, h, http.MethodPost, "/api/v1/pipelines", body, nil), http.StatusBadRequest)
	require.Contains(t, msg, "request body: larger than 5242880 bytes")
}

func TestBadPathIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, body, want string
	}{
		{name: "event number not a number", method: http.MethodGet, path: "/api/v1/events/x/notanumber", want: `event "x/notanumber": want <pipeline>/<number>`},
		{name: "event number zero", method: http.MethodGet, path: "/api/v1/events/x/0", want: `event "x/0"`},
		{name: "event number negative", method: http.MethodGet, path: "/api/v1/events/x/-3", want: `event "x/-3"`},
		{name: "event pipeline bad", method: http.MethodGet, path: "/api/v1/events/-x/1", want: `event "-x/1"`},
		{name: "cancel event bad number", method: http.MethodPost, path: "/api/v1/events/x/notanumber/cancel", want: `event "x/notanumber"`},
		{name: "restart event bad number", method: http.MethodPost, path: "/api/v1/events/x/1.5/restart", body: `{"from": "test"}`, want: `event "x/1.5"`},
		{name: "build id one segment", method: http.MethodGet, path: "/api/v1/builds/notabuild", want: `build "notabuild": want <pipeline>/<job>/<event>`},
		{name: "build id without event", method: http.MethodGet, path: "/api/v1/builds/app%2Ftest", want: `build "app/test"`},
		{name: "build event not a number", method: http.MethodGet, path: "/api/v1/builds/app%2Ftest%2Fx", want: `build "app/test/x"`},
		{name: "build permutation zero", method: http.MethodGet, path: "/api/v1/builds/app%2Ftest%2F3.0", want: `build "app/test/3.0"`},
		{name: "build bad pipeline", method: http.MethodGet, path: "/api/v1/builds/a%20b%2Ftest%2F3", want: `build "a b/test/3"`},
		{name: "cancel bad build", method: http.MethodPost, path: "/api/v1/builds/nope/cancel", want: `build "nope"`},
		{name: "pipeline name with a space", method: http.MethodGet, path: "/api/v1/pipelines/a%20b", want: `pipeline name "a b"`},
		{name: "delete pipeline bad name", method: http.MethodDelete, path: "/api/v1/pipelines/-app", want: `pipeline name "-app"`},
		{name: "events of a bad pipeline limit", method: http.MethodGet, path: "/api/v1/pipelines/app/events?limit=lots", want: `query parameter limit="lots"`},
		{name: "schedule action unknown", method: http.MethodPost, path: "/api/v1/pipelines/app/jobs/nightly/schedule/explode", want: `schedule action "explode": want pause, unpause or trigger`},
		{name: "executor action unknown", method: http.MethodPost, path: "/api/v1/executors/exec-a/reboot", want: `executor action "reboot": want activate, deactivate or drain`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, tt.method, tt.path, tt.body, nil), http.StatusBadRequest)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestListBuildsQueryParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query, want string
	}{
		{name: "unknown key", query: "pipline=app", want: `unknown query parameter "pipline" (want pipeline, job, status, cause, event, queue, pr, branch, executor, since, until, page, limit)`},
		{name: "bad status", query: "status=broken", want: `status "BROKEN": want one of CREATED, QUEUED`},
		{name: "limit not a number", query: "limit=ten", want: `query parameter limit="ten": want a non-negative number`},
		{name: "limit negative", query: "limit=-1", want: `query parameter limit="-1"`},
		{name: "bad since", query: "since=yesterday", want: `since "yesterday": want a time`},
		{name: "empty time range", query: "since=2030-01-02&until=2030-01-01", want: `since 2030-01-02T00:00:00Z is not before until 2030-01-01T00:00:00Z`},
		{name: "bad page", query: "page=%25%25", want: `page "%%": not a page token`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, http.MethodGet, "/api/v1/builds?"+tt.query, "", nil), http.StatusBadRequest)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestListBuildsFilterReachesVisibility(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	var got *workflowservice.ListWorkflowExecutionsRequest
	tc.On("ListWorkflow", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		got = args.Get(1).(*workflowservice.ListWorkflowExecutionsRequest)
	}).Return(&workflowservice.ListWorkflowExecutionsResponse{}, nil).Once()
	h := newHandler(t, api.Deps{Service: newService(t, tc)})

	bs := decodeBody[[]api.Build](t, call(t, h, http.MethodGet, "/api/v1/builds?pipeline=app&job=test&status=failure&limit=7&queue=it's", "", nil), http.StatusOK)
	require.Empty(t, bs)
	require.Equal(t, "default", got.GetNamespace())
	require.EqualValues(t, 7, got.GetPageSize())
	q := got.GetQuery()
	require.Contains(t, q, "WorkflowType = 'BuildWorkflow'")
	require.Contains(t, q, workflows.SAPipeline.GetName()+" = 'app'")
	require.Contains(t, q, workflows.SAJob.GetName()+" = 'test'")
	require.Contains(t, q, workflows.SAStatus.GetName()+" = 'FAILURE'")
	require.Contains(t, q, workflows.SAQueue.GetName()+" = 'its'", "quotes cannot break out of the query")
}

// The build list's branch, executor, time and page parameters reach
// visibility, and the next page's token comes back in a header.
func TestListBuildsPagesAndNarrows(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	var got *workflowservice.ListWorkflowExecutionsRequest
	tc.On("ListWorkflow", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		got = args.Get(1).(*workflowservice.ListWorkflowExecutionsRequest)
	}).Return(&workflowservice.ListWorkflowExecutionsResponse{NextPageToken: []byte("next-one")}, nil).Once()
	h := newHandler(t, api.Deps{Service: newService(t, tc)})
	rec := call(t, h, http.MethodGet, "/api/v1/builds?branch=main&executor=exec-a&since=2030-01-01&until=2030-01-02T00:00:00Z&page=cGFnZS10d28&limit=3", "", nil)
	require.Empty(t, decodeBody[[]api.Build](t, rec, http.StatusOK))
	require.Equal(t, "bmV4dC1vbmU", rec.Header().Get(api.NextPageHeader))
	require.Equal(t, []byte("page-two"), got.GetNextPageToken())
	q := got.GetQuery()
	require.Contains(t, q, workflows.SABranch.GetName()+" = 'main'")
	require.Contains(t, q, workflows.SAExecutor.GetName()+" = 'exec-a'")
	require.Contains(t, q, "StartTime >= '2030-01-01T00:00:00Z'")
	require.Contains(t, q, "StartTime < '2030-01-02T00:00:00Z'")
}

// A pipeline's event list filters by branch and pull request in the
// visibility query; unknown parameters are refused.
func TestListEventsFilters(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	var got *workflowservice.ListWorkflowExecutionsRequest
	tc.On("ListWorkflow", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		got = args.Get(1).(*workflowservice.ListWorkflowExecutionsRequest)
	}).Return(&workflowservice.ListWorkflowExecutionsResponse{}, nil).Once()
	h := newHandler(t, api.Deps{Service: newService(t, tc)})
	require.Empty(t, decodeBody[[]api.Event](t, call(t, h, http.MethodGet, "/api/v1/pipelines/app/events?branch=main&pr=7&trigger=pr", "", nil), http.StatusOK))
	q := got.GetQuery()
	require.Contains(t, q, workflows.SAPipeline.GetName()+" = 'app'")
	require.Contains(t, q, workflows.SABranch.GetName()+" = 'main'")
	require.Contains(t, q, workflows.SAPR.GetName()+" = 7")
	for query, want := range map[string]string{
		"trigger=push": `trigger "push": want one of commit, pr`,
		"pr=x":         `query parameter pr="x"`,
		"brnch=main":   `unknown query parameter "brnch"`,
	} {
		msg := errorOf(t, call(t, h, http.MethodGet, "/api/v1/pipelines/app/events?"+query, "", nil), http.StatusBadRequest)
		require.Contains(t, msg, want, query)
	}
}

func TestStartEventValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pipeline, body, want string
	}{
		{name: "bad pipeline name", pipeline: "a.b%21", body: `{}`, want: `pipeline name "a.b!"`},
		{name: "unknown type", pipeline: "app", body: `{"type": "push"}`, want: `type "push": want commit, pr, pr-closed, release, tag or manual`},
		{name: "sha not hex", pipeline: "app", body: `{"sha": "xyz123"}`, want: `sha "xyz123": want 4 to 64 hex digits`},
		{name: "sha too short", pipeline: "app", body: `{"sha": "abc"}`, want: `sha "abc"`},
		{name: "sha too long", pipeline: "app", body: `{"sha": "` + strings.Repeat("a", 65) + `"}`, want: `sha "aaaa`},
		{name: "branch with a space", pipeline: "app", body: `{"branch": "my branch"}`, want: `branch "my branch": not a valid branch name`},
		{name: "branch with a colon", pipeline: "app", body: `{"branch": "a:b"}`, want: `branch "a:b"`},
		{name: "start_from not a job", pipeline: "app", body: `{"start_from": "build it"}`, want: `start_from "build it": not a job name`},
		{name: "negative pr", pipeline: "app", body: `{"pr": -4}`, want: `pr -4: must be positive`},
		{name: "pr event without number", pipeline: "app", body: `{"type": "pr", "sha": "abcd"}`, want: `pr: a pr event needs the pull request number`},
		{name: "pr-closed event without number", pipeline: "app", body: `{"type": "pr-closed"}`, want: `pr: a pr-closed event needs the pull request number`},
		{name: "tag without ref", pipeline: "app", body: `{"type": "tag", "sha": "abcd"}`, want: `ref: a tag event needs the tag or release name`},
		{name: "release without ref", pipeline: "app", body: `{"type": "release"}`, want: `ref: a release event needs the tag or release name`},
		{name: "bad ref", pipeline: "app", body: `{"type": "tag", "ref": "v1 final"}`, want: `ref "v1 final": not a valid tag or branch name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, http.MethodPost, "/api/v1/pipelines/"+tt.pipeline+"/events", tt.body, nil), http.StatusBadRequest)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestStartEventReachesThePipeline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want workflows.Trigger
		from string
	}{
		{name: "no fields is manual", body: `{}`, want: workflows.Trigger{Kind: workflows.TriggerManual, Sender: "alice"}},
		{name: "sha alone is a commit", body: `{"sha": "abcdef12"}`, want: workflows.Trigger{Kind: workflows.TriggerCommit, SHA: "abcdef12", Sender: "alice"}},
		{name: "branch alone is a commit", body: `{"branch": "release/1.x"}`, want: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "release/1.x", Sender: "alice"}},
		{name: "start_from stays manual", body: `{"branch": "main", "start_from": "deploy"}`, want: workflows.Trigger{Kind: workflows.TriggerManual, Branch: "main", Sender: "alice"}, from: "deploy"},
		{name: "pr with number", body: `{"type": "pr", "pr": 12, "sha": "abcd"}`, want: workflows.Trigger{Kind: workflows.TriggerPR, PR: 12, SHA: "abcd", Sender: "alice"}},
		{name: "tag with ref", body: `{"type": "tag", "ref": "v1.2.0"}`, want: workflows.Trigger{Kind: workflows.TriggerTag, Ref: "v1.2.0", Sender: "alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newMockClient(t)
			alice := queue.Identity{User: "alice", Roles: []string{"dev"}}
			var got workflows.StartEventRequest
			onAdmit(t, tc, "app", func(r workflows.StartEventRequest) (workflows.StartEventResult, error) {
				got = r
				return workflows.StartEventResult{Event: workflows.EventRef{Pipeline: "app", Number: 4}}, nil
			})
			// The start's warnings read the pipeline's queue: an error there
			// gives none, and the event started anyway.
			tc.On("QueryWorkflow", mock.Anything, workflows.PipelineWorkflowID("app"), "", workflows.QueryPipeline).
				Return(nil, errors.New("no pipeline query in this test")).Maybe()
			h := newHandler(t, api.Deps{
				Service:      newService(t, tc),
				Authenticate: func(*http.Request) (queue.Identity, error) { return alice, nil },
				PipelineOf:   ownedBy("alice"),
			})
			ev := decodeBody[api.EventStarted](t, call(t, h, http.MethodPost, "/api/v1/pipelines/app/events", tt.body, nil), http.StatusCreated)
			require.Equal(t, api.EventStarted{ID: "app/4", Pipeline: "app", Number: 4}, ev)
			require.Equal(t, tt.want, got.Trigger)
			require.Equal(t, tt.from, got.StartFrom)
			require.Equal(t, "alice", got.Creator)
			require.Equal(t, &alice, got.Identity)
		})
	}
}

func TestCreatePipelineValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{name: "no name", body: `{"repo": "/src/app"}`, want: `name: workflows: bad id: pipeline name ""`},
		{name: "name with a slash", body: `{"name": "a/b", "repo": "/src/app"}`, want: `pipeline name "a/b"`},
		{name: "name too long", body: `{"name": "` + strings.Repeat("a", 101) + `", "repo": "/src/app"}`, want: `at most 100`},
		{name: "empty repo", body: `{"name": "app"}`, want: "repo: required"},
		{name: "blank repo", body: `{"name": "app", "repo": "  "}`, want: "repo: required"},
		{name: "bad branch", body: `{"name": "app", "repo": "/src/app", "branch": "a b"}`, want: `branch "a b": not a valid branch name`},
		{name: "branch with a tilde", body: `{"name": "app", "repo": "/src/app", "branch": "main~1"}`, want: `branch "main~1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, http.MethodPost, "/api/v1/pipelines", tt.body, nil), http.StatusBadRequest)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestRestartEventNeedsAJob(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{}`, `{"from": ""}`, `{"from": "two words"}`, `{"from": []}`, `{"from": ["ok", "two words"]}`} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, http.MethodPost, "/api/v1/events/app/3/restart", body, nil), http.StatusBadRequest)
			require.Contains(t, msg, "restart from")
		})
	}
}

func TestQueueDefinitionsReportEveryProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, body string
		want                     []string
	}{
		{
			name: "no rules", method: http.MethodPost, path: "/api/v1/queues", body: `{"name": "gpu"}`,
			want: []string{`queue "gpu": rules: at least one rule is required`},
		},
		{
			name: "empty rule list", method: http.MethodPut, path: "/api/v1/queues/gpu", body: `{"rules": []}`,
			want: []string{`queue "gpu": rules: at least one rule is required`},
		},
		{
			name: "every bad rule", method: http.MethodPost, path: "/api/v1/queues",
			body: `{"name": "gpu", "rules": ["run-on=executors", "run-on=moon", "max-parallel=2", "run-on=any,max-parallel=lots,min-gap=soon"]}`,
			want: []string{`rule 2 ("run-on=moon")`, `rule 3 ("max-parallel=2")`, `rule 4 ("run-on=any,max-parallel=lots,min-gap=soon")`, "max-parallel", "min-gap"},
		},
		{
			name: "bad rule on update", method: http.MethodPut, path: "/api/v1/queues/gpu", body: `{"rules": ["run-on=nowhere"]}`,
			want: []string{`queue "gpu"`, `rule 1 ("run-on=nowhere")`},
		},
		{
			name: "bad queue name", method: http.MethodPost, path: "/api/v1/queues", body: `{"name": "GPU queue!", "rules": ["run-on=any"]}`,
			want: []string{`GPU queue!`},
		},
		{
			name: "empty and repeated roles", method: http.MethodPost, path: "/api/v1/queues",
			body: `{"name": "gpu", "rules": ["run-on=any"], "use_roles": ["dev", "", "dev"]}`,
			want: []string{"use role 2 is empty", `use role "dev" is listed twice`},
		},
		{
			name: "rename through update", method: http.MethodPut, path: "/api/v1/queues/gpu", body: `{"name": "cpu", "rules": ["run-on=any"]}`,
			want: []string{`name "cpu" in the body differs from "gpu" in the path; queues cannot be renamed`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{})
			msg := errorOf(t, call(t, h, tt.method, tt.path, tt.body, nil), http.StatusBadRequest)
			for _, w := range tt.want {
				require.Contains(t, msg, w)
			}
		})
	}
}

func TestQueuePermissions(t *testing.T) {
	t.Parallel()
	bob := queue.Identity{User: "bob", Roles: []string{"dev"}, Privileges: []string{"manage-executors"}}
	anonymous := queue.Identity{}
	tests := []struct {
		name, method, path, body string
		who                      queue.Identity
		want                     string
	}{
		{
			name: "create", method: http.MethodPost, path: "/api/v1/queues", body: `{"name": "gpu", "rules": ["run-on=any"]}`,
			who: bob, want: `user "bob" may not define queues: missing privilege "define-queues"`,
		},
		{
			name: "create with bad rules still forbidden", method: http.MethodPost, path: "/api/v1/queues", body: `{"name": "gpu", "rules": ["nonsense"]}`,
			who: bob, want: `missing privilege "define-queues"`,
		},
		{
			name: "update", method: http.MethodPut, path: "/api/v1/queues/default", body: `{"rules": ["run-on=any"]}`,
			who: bob, want: `user "bob" may not define queues`,
		},
		{name: "delete", method: http.MethodDelete, path: "/api/v1/queues/gpu", who: bob, want: `user "bob" may not define queues`},
		{
			name: "anonymous create", method: http.MethodPost, path: "/api/v1/queues", body: `{"name": "gpu", "rules": ["run-on=any"]}`,
			who: anonymous, want: "anonymous user may not define queues",
		},
		{name: "anonymous delete", method: http.MethodDelete, path: "/api/v1/queues/gpu", who: anonymous, want: "anonymous user may not define queues"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// No Temporal client: the refusal happens before Temporal.
			h := newHandler(t, api.Deps{Authenticate: func(*http.Request) (queue.Identity, error) { return tt.who, nil }})
			msg := errorOf(t, call(t, h, tt.method, tt.path, tt.body, nil), http.StatusForbidden)
			require.Contains(t, msg, tt.want)
		})
	}
}

// registryMemberState answers set-member-state like the registry's
// validator: the privilege first, then the member's existence.
func registryMemberState(o client.UpdateWorkflowOptions) (any, error) {
	req := o.Args[0].(workflows.SetMemberStateRequest)
	if !req.Identity.Has(workflows.PrivilegeManageExecutors) {
		return nil, temporal.NewApplicationError(fmt.Sprintf("%v: user %q lacks the %s privilege", queue.ErrForbidden, req.Identity.User, workflows.PrivilegeManageExecutors), "")
	}
	if req.Name != "exec-a" {
		return nil, temporal.NewApplicationError(fmt.Sprintf("workflows: no such member: %s", req.Name), "")
	}
	return queue.Member{Name: "exec-a", Role: queue.RoleExecutor, State: req.State, LastSeen: testNow.Add(-time.Second)}, nil
}

func TestExecutorActions(t *testing.T) {
	t.Parallel()
	admin := queue.Identity{User: "carol", Privileges: []string{workflows.PrivilegeManageExecutors}}
	bob := queue.Identity{User: "bob", Privileges: []string{queue.PrivilegeDefineQueues}}
	tests := []struct {
		name   string
		who    queue.Identity
		path   string
		status int
		want   string
		state  string
	}{
		{
			name: "without manage-executors", who: bob, path: "/api/v1/executors/exec-a/drain", status: http.StatusForbidden,
			want: `user "bob" lacks the manage-executors privilege`,
		},
		{
			name: "anonymous", who: queue.Identity{}, path: "/api/v1/executors/exec-a/deactivate", status: http.StatusForbidden,
			want: "lacks the manage-executors privilege",
		},
		{
			name: "unknown executor", who: admin, path: "/api/v1/executors/exec-z/activate", status: http.StatusNotFound,
			want: "no such member: exec-z",
		},
		{name: "drain", who: admin, path: "/api/v1/executors/exec-a/drain", status: http.StatusOK, state: "draining"},
		{name: "deactivate", who: admin, path: "/api/v1/executors/exec-a/deactivate", status: http.StatusOK, state: "inactive"},
		{name: "activate", who: admin, path: "/api/v1/executors/exec-a/activate", status: http.StatusOK, state: "active"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newMockClient(t)
			if tt.status != http.StatusForbidden {
				// A refused caller never reaches the registry: the
				// route's policy answers first.
				onUpdate(t, tc, workflows.RegistryID, workflows.UpdateSetMemberState, registryMemberState)
			}
			h := newHandler(t, api.Deps{
				Service:      newService(t, tc),
				Authenticate: func(*http.Request) (queue.Identity, error) { return tt.who, nil },
			})
			rec := call(t, h, http.MethodPost, tt.path, "", nil)
			if tt.status != http.StatusOK {
				require.Contains(t, errorOf(t, rec, tt.status), tt.want)
				return
			}
			e := decodeBody[api.Executor](t, rec, http.StatusOK)
			require.Equal(t, "exec-a", e.Name)
			require.Equal(t, tt.state, e.State)
			require.True(t, e.Live)
		})
	}
}

func TestAuthenticationFailureIs401(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, body string
	}{
		{name: "create pipeline", method: http.MethodPost, path: "/api/v1/pipelines", body: `{"name": "app", "repo": "/src/app"}`},
		{name: "start event", method: http.MethodPost, path: "/api/v1/pipelines/app/events", body: `{}`},
		{name: "restart event", method: http.MethodPost, path: "/api/v1/events/app/3/restart", body: `{"from": "test"}`},
		{name: "create queue", method: http.MethodPost, path: "/api/v1/queues", body: `{"name": "gpu", "rules": ["run-on=any"]}`},
		{name: "update queue", method: http.MethodPut, path: "/api/v1/queues/gpu", body: `{"rules": ["run-on=any"]}`},
		{name: "delete queue", method: http.MethodDelete, path: "/api/v1/queues/gpu"},
		{name: "executor action", method: http.MethodPost, path: "/api/v1/executors/exec-a/drain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, api.Deps{Authenticate: func(*http.Request) (queue.Identity, error) {
				return queue.Identity{}, errors.New("bearer token expired")
			}})
			rec := call(t, h, tt.method, tt.path, tt.body, http.Header{"Authorization": {"Bearer old"}})
			msg := errorOf(t, rec, http.StatusUnauthorized)
			require.Equal(t, "unauthorized: bearer token expired", msg)
			require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
		})
	}
}

func TestAuthenticateSeesTheRequest(t *testing.T) {
	t.Parallel()
	auth := func(r *http.Request) (queue.Identity, error) {
		if r.Header.Get("Authorization") != "Bearer admin-token" {
			return queue.Identity{}, errors.New("unknown token")
		}
		return queue.Identity{User: "root", Privileges: []string{queue.PrivilegeDefineQueues}}, nil
	}
	h := newHandler(t, api.Deps{Authenticate: auth})
	// Authenticated and privileged: the request gets as far as validation.
	msg := errorOf(t, call(t, h, http.MethodPost, "/api/v1/queues", `{"name": "gpu", "rules": ["run-on=moon"]}`,
		http.Header{"Authorization": {"Bearer admin-token"}}), http.StatusBadRequest)
	require.Contains(t, msg, `rule 1 ("run-on=moon")`)
	msg = errorOf(t, call(t, h, http.MethodPost, "/api/v1/queues", `{"name": "gpu", "rules": ["run-on=moon"]}`,
		http.Header{"Authorization": {"Bearer guess"}}), http.StatusUnauthorized)
	require.Equal(t, "unauthorized: unknown token", msg)
}

func TestTemporalErrorsMapToStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{name: "not found", err: serviceerror.NewNotFound("workflow not found"), status: http.StatusNotFound, want: "not found: build app/test/3"},
		{name: "deadline", err: context.DeadlineExceeded, status: http.StatusGatewayTimeout, want: "deadline exceeded"},
		{name: "unavailable", err: serviceerror.NewUnavailable("frontend down"), status: http.StatusInternalServerError, want: "frontend down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newMockClient(t)
			tc.On("CancelWorkflow", mock.Anything, "build/app/test/3", "").Return(tt.err).Once()
			// No build workflow: the API asks whether its event runs it.
			tc.On("QueryWorkflowWithOptions", mock.Anything, mock.Anything).Return(nil, serviceerror.NewNotFound("workflow not found")).Maybe()
			h := newHandler(t, api.Deps{Service: newService(t, tc)})
			msg := errorOf(t, call(t, h, http.MethodPost, "/api/v1/builds/app%2Ftest%2F3/cancel", "", nil), tt.status)
			require.Contains(t, msg, tt.want)
		})
	}
}

func TestCancelBuildAccepted(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	tc.On("CancelWorkflow", mock.Anything, "build/app/test/3.2", "").Return(nil).Once()
	h := newHandler(t, api.Deps{Service: newService(t, tc)})
	got := decodeBody[map[string]string](t, call(t, h, http.MethodPost, "/api/v1/builds/build%2Fapp%2Ftest%2F3.2/cancel", "", nil), http.StatusAccepted)
	require.Equal(t, map[string]string{"cancelled": "app/test/3.2"}, got)
}

func TestPanicsAnswer500JSON(t *testing.T) {
	t.Parallel()
	// A nil Temporal client makes the service panic; the handler recovers.
	h := api.NewHandler(api.Deps{Service: newService(t, nil)})
	msg := errorOf(t, call(t, h, http.MethodGet, "/api/v1/pipelines", "", nil), http.StatusInternalServerError)
	require.Equal(t, "internal error", msg)
}
