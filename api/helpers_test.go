package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// testNow is the fixed clock of every Service built here.
var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// newHandler builds the API handler over deps, filling in a Service whose
// Temporal client is nil (requests that reach Temporal would panic and
// answer 500) and a discarding logger.
func newHandler(t *testing.T, deps api.Deps) http.Handler {
	t.Helper()
	if deps.Service == nil {
		deps.Service = newService(t, nil)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.PipelineOf == nil {
		// Every pipeline of these tests is owned by "owner".
		deps.PipelineOf = func(_ context.Context, name string) (api.Pipeline, error) {
			return api.Pipeline{Name: name, Owner: "owner"}, nil
		}
	}
	return api.NewHandler(deps)
}

// newService returns a Service over c (nil: no Temporal at all).
func newService(t *testing.T, c client.Client) *api.Service {
	t.Helper()
	return &api.Service{
		Client: c, Namespace: "default", Liveness: 15 * time.Second,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return testNow },
		LocalRepos: []string{"/src"}, // the tests' repositories are /src/...
	}
}

// newMockClient returns a Temporal client mock that fails the test on
// unexpected calls and checks its expectations at the end.
func newMockClient(t *testing.T) *mocks.Client {
	t.Helper()
	return mocks.NewClient(t)
}

// call serves one request and returns the recorder.
func call(t *testing.T, h http.Handler, method, target, body string, hdr http.Header) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequestWithContext(context.Background(), method, target, rd)
	// As the CLI does: JSON on every state-changing request, from this
	// machine (tests of the browser and webhook guards set their own).
	req.RemoteAddr = "127.0.0.1:40000"
	if method != http.MethodGet && method != http.MethodHead && hdr.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorOf checks that rec is a JSON error with the given status and returns
// its message.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder, status int) string {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var eb api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "body: %s", rec.Body.String())
	require.NotEmpty(t, eb.Error)
	return eb.Error
}

// decodeBody checks the status and decodes a JSON answer into T.
func decodeBody[T any](t *testing.T, rec *httptest.ResponseRecorder, status int) T {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var v T
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), "body: %s", rec.Body.String())
	return v
}

// encoded is a query result as the SDK hands it back: a payload decoded on
// Get with the default data converter.
type encoded struct{ payloads *commonpb.Payloads }

func encode(t *testing.T, v any) encoded {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(t, err)
	return encoded{payloads: p}
}

func (e encoded) HasValue() bool { return e.payloads != nil }

func (e encoded) Get(ptr any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.payloads, ptr)
}

// answerQuery makes c answer query on the running workflow id with v,
// times times, 0 for any number (the API asks with QueryWorkflowWithOptions,
// refused when the workflow has closed).
func answerQuery(t *testing.T, c *mocks.Client, id, query string, v any, times int) {
	t.Helper()
	c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
		return r.WorkflowID == id && r.QueryType == query && r.QueryRejectCondition == enumspb.QUERY_REJECT_CONDITION_NOT_OPEN
	})).Return(&client.QueryWorkflowWithOptionsResponse{QueryResult: encode(t, v)}, nil).Times(times)
}

// refuseQuery makes c refuse query on the closed workflow id, times times
// (0: any number).
func refuseQuery(c *mocks.Client, id, query string, times int) {
	c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
		return r.WorkflowID == id && r.QueryType == query
	})).Return(&client.QueryWorkflowWithOptionsResponse{
		QueryRejected: &querypb.QueryRejected{Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	}, nil).Times(times)
}

// updateHandle returns an update handle whose Get runs result: it fills the
// value pointer (through the default data converter, like the SDK) or
// returns the update's failure.
func updateHandle(t *testing.T, result func(opts client.UpdateWorkflowOptions) (any, error), opts client.UpdateWorkflowOptions) *mocks.WorkflowUpdateHandle {
	t.Helper()
	h := mocks.NewWorkflowUpdateHandle(t)
	h.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
		v, err := result(opts)
		if err != nil {
			return err
		}
		if ptr == nil {
			return nil
		}
		p, err := converter.GetDefaultDataConverter().ToPayloads(v)
		if err != nil {
			return err
		}
		return converter.GetDefaultDataConverter().FromPayloads(p, ptr)
	}).Once()
	return h
}

// onUpdate makes c answer the named update with result.
func onUpdate(t *testing.T, c *mocks.Client, workflowID, name string, result func(opts client.UpdateWorkflowOptions) (any, error)) {
	t.Helper()
	c.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.WorkflowID == workflowID && o.UpdateName == name
	})).Return(func(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return updateHandle(t, result, o), nil
	})
}

// onAdmit makes c number event starts to pipeline (UpdateStartEvents)
// with result's outcome for each.
func onAdmit(t *testing.T, c *mocks.Client, pipeline string, result func(req workflows.StartEventRequest) (workflows.StartEventResult, error)) {
	t.Helper()
	onUpdate(t, c, workflows.PipelineWorkflowID(pipeline), workflows.UpdateStartEvents, func(o client.UpdateWorkflowOptions) (any, error) {
		var out workflows.StartEventsResult
		for _, r := range o.Args[0].(workflows.StartEventsRequest).Requests {
			if r.Admission == "" {
				return nil, errors.New("a start without an admission ID")
			}
			res, err := result(r)
			o := workflows.StartEventOutcome{Result: res}
			if err != nil {
				o = workflows.StartEventOutcome{Error: err.Error()}
			}
			out.Outcomes = append(out.Outcomes, o)
		}
		return out, nil
	})
}

// ownedBy is a pipeline lookup for handlers without Temporal: every
// pipeline is owned by user.
func ownedBy(user string) func(context.Context, string) (api.Pipeline, error) {
	return func(_ context.Context, name string) (api.Pipeline, error) {
		return api.Pipeline{Name: name, Owner: user}, nil
	}
}
