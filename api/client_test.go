package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// seen is one request a fake API server received.
type seen struct {
	Method, Path, Query, Auth, ContentType, Body string
}

// fakeAPI is an httptest server that records requests and answers every
// one with a fixed status and body.
type fakeAPI struct {
	srv    *httptest.Server
	status int
	body   string

	mu   sync.Mutex
	reqs []seen
}

func newFakeAPI(t *testing.T, status int, body string) *fakeAPI {
	t.Helper()
	f := &fakeAPI{status: status, body: body}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{
			Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(data),
		})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.reqs, "no request reached the server")
	return f.reqs[len(f.reqs)-1]
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func TestClientPathsAreEscaped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		call   func(c *api.Client) error
		method string
		path   string
		query  string
	}{
		{
			name: "get build", call: func(c *api.Client) error { _, err := c.GetBuild(ctx, "app/test/3"); return err },
			method: http.MethodGet, path: "/api/v1/builds/app%2Ftest%2F3",
		},
		{
			name: "get build with prefix", call: func(c *api.Client) error { _, err := c.GetBuild(ctx, "build/app/deploy@prod/3.2"); return err },
			method: http.MethodGet, path: "/api/v1/builds/app%2Fdeploy@prod%2F3.2",
		},
		{
			name: "cancel build", call: func(c *api.Client) error { return c.CancelBuild(ctx, "build/app/test/3") },
			method: http.MethodPost, path: "/api/v1/builds/app%2Ftest%2F3/cancel",
		},
		{
			name: "get pipeline", call: func(c *api.Client) error { _, err := c.GetPipeline(ctx, "a b/c"); return err },
			method: http.MethodGet, path: "/api/v1/pipelines/a%20b%2Fc",
		},
		{
			name: "delete pipeline", call: func(c *api.Client) error { return c.DeletePipeline(ctx, "app") },
			method: http.MethodDelete, path: "/api/v1/pipelines/app",
		},
		{
			name: "list events", call: func(c *api.Client) error { _, err := c.ListEvents(ctx, "app", 5); return err },
			method: http.MethodGet, path: "/api/v1/pipelines/app/events", query: "limit=5",
		},
		{
			name: "get event", call: func(c *api.Client) error { _, err := c.GetEvent(ctx, "event/app/12"); return err },
			method: http.MethodGet, path: "/api/v1/events/app/12",
		},
		{
			name: "cancel event", call: func(c *api.Client) error { return c.CancelEvent(ctx, "app/12") },
			method: http.MethodPost, path: "/api/v1/events/app/12/cancel",
		},
		{name: "restart event", call: func(c *api.Client) error {
			_, err := c.RestartEvent(ctx, "app/12", api.RestartEventRequest{From: api.JobList{"test"}})
			return err
		}, method: http.MethodPost, path: "/api/v1/events/app/12/restart"},
		{
			name: "log steps", call: func(c *api.Client) error { _, err := c.LogSteps(ctx, "app/test/3/1"); return err },
			method: http.MethodGet, path: "/api/v1/builds/app%2Ftest%2F3%2F1/logs",
		},
		{
			name: "read log", call: func(c *api.Client) error { _, err := c.ReadLog(ctx, "app/test/3/1", "make test", 10, 0); return err },
			method: http.MethodGet, path: "/api/v1/builds/app%2Ftest%2F3%2F1/logs/make%20test", query: "offset=10&length=0",
		},
		{
			name: "queue status", call: func(c *api.Client) error { _, err := c.QueueStatus(ctx, "gpu"); return err },
			method: http.MethodGet, path: "/api/v1/queues/gpu/status",
		},
		{name: "update queue", call: func(c *api.Client) error {
			_, err := c.UpdateQueue(ctx, api.QueueRequest{Name: "g/pu", Rules: []string{"run-on=any"}})
			return err
		}, method: http.MethodPut, path: "/api/v1/queues/g%2Fpu"},
		{
			name: "delete queue", call: func(c *api.Client) error { return c.DeleteQueue(ctx, "gpu") },
			method: http.MethodDelete, path: "/api/v1/queues/gpu",
		},
		{
			name: "executor action", call: func(c *api.Client) error { _, err := c.ExecutorAction(ctx, "exec/a", "drain"); return err },
			method: http.MethodPost, path: "/api/v1/executors/exec%2Fa/drain",
		},
		{
			name: "schedule action", call: func(c *api.Client) error { return c.ScheduleAction(ctx, "app", "nightly build", "pause") },
			method: http.MethodPost, path: "/api/v1/pipelines/app/jobs/nightly%20build/schedule/pause",
		},
		{name: "list builds", call: func(c *api.Client) error {
			_, err := c.ListBuilds(ctx, api.BuildFilter{Pipeline: "app", Job: "a&b", Status: workflows.StatusFailure, Limit: 3})
			return err
		}, method: http.MethodGet, path: "/api/v1/builds", query: "job=a%26b&limit=3&pipeline=app&status=FAILURE"},
		{name: "ready", call: func(c *api.Client) error { return c.Ready(ctx) }, method: http.MethodGet, path: "/readyz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// null decodes into every answer type, lists and objects alike.
			f := newFakeAPI(t, http.StatusOK, `null`)
			require.NoError(t, tt.call(api.NewClient(f.srv.URL+"/")))
			got := f.last(t)
			require.Equal(t, tt.method, got.Method)
			require.Equal(t, tt.path, got.Path)
			require.Equal(t, tt.query, got.Query)
		})
	}
}

func TestClientBadEventIDNeverCallsTheServer(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, http.StatusOK, `{}`)
	c := api.NewClient(f.srv.URL)
	for _, id := range []string{"app", "event/app", "/12", "app/"} {
		_, err := c.GetEvent(context.Background(), id)
		require.ErrorContains(t, err, "want <pipeline>/<number>", id)
	}
	require.Zero(t, f.count())
}

func TestClientSendsBodyAndToken(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, http.StatusCreated, `{"id": "app/4", "pipeline": "app", "number": 4, "duplicate": true}`)
	c := api.NewClient(f.srv.URL)
	c.Token = "t0ken"
	ev, err := c.StartEvent(context.Background(), "app", api.StartEventRequest{SHA: "abcd", Type: "commit"})
	require.NoError(t, err)
	require.Equal(t, api.EventStarted{ID: "app/4", Pipeline: "app", Number: 4, Duplicate: true}, ev)
	got := f.last(t)
	require.Equal(t, "Bearer t0ken", got.Auth)
	require.Equal(t, "application/json", got.ContentType)
	require.JSONEq(t, `{"sha": "abcd", "type": "commit"}`, got.Body)

	// State-changing requests say JSON even without a body (the API
	// refuses the CORS-simple types); without a token, no Authorization.
	c.Token = ""
	require.NoError(t, c.CancelEvent(context.Background(), "app/4"))
	got = f.last(t)
	require.Empty(t, got.Auth)
	require.Equal(t, "application/json", got.ContentType)
	require.Empty(t, got.Body)
}

func TestClientDecodesResponses(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	want := api.Build{
		ID: "app/test/3", Pipeline: "app", Job: "test", Event: "app/3", Status: workflows.StatusRunning,
		Queue: "default", Executor: "exec-a", Attempts: 1, StartTime: start, LogKey: "app/test/3/1",
	}
	data, err := json.Marshal(want)
	require.NoError(t, err)
	f := newFakeAPI(t, http.StatusOK, string(data))
	got, err := api.NewClient(f.srv.URL).GetBuild(context.Background(), "app/test/3")
	require.NoError(t, err)
	require.Equal(t, want, got)

	bad := newFakeAPI(t, http.StatusOK, `{"id": 12}`)
	_, err = api.NewClient(bad.srv.URL).GetBuild(context.Background(), "app/test/3")
	require.ErrorContains(t, err, "decode response of GET /api/v1/builds/app%2Ftest%2F3")
	var ae *api.Error
	require.NotErrorAs(t, err, &ae, "a decoding failure is not an API answer")
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		want     string
		notFound bool
	}{
		{
			name: "json error body", status: http.StatusBadRequest, body: `{"error": "invalid request: sha \"x\": want 4 to 64 hex digits"}`,
			want: `invalid request: sha "x": want 4 to 64 hex digits`,
		},
		{name: "not found", status: http.StatusNotFound, body: `{"error": "not found: pipeline app"}`, want: "not found: pipeline app", notFound: true},
		{name: "forbidden", status: http.StatusForbidden, body: `{"error": "user \"bob\" may not define queues"}`, want: `user "bob" may not define queues`},
		{name: "not json", status: http.StatusBadGateway, body: `<html>bad gateway</html>`, want: "GET /api/v1/pipelines/app: 502 Bad Gateway"},
		{name: "json without error", status: http.StatusInternalServerError, body: `{}`, want: "GET /api/v1/pipelines/app: 500 Internal Server Error"},
		{name: "plain 404", status: http.StatusNotFound, body: ``, want: "GET /api/v1/pipelines/app: 404 Not Found", notFound: true},
		{name: "not modified", status: http.StatusNotModified, body: ``, want: "GET /api/v1/pipelines/app: 304 Not Modified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.status, tt.body)
			_, err := api.NewClient(f.srv.URL).GetPipeline(context.Background(), "app")
			var ae *api.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tt.status, ae.Status)
			require.Equal(t, tt.want, ae.Message)
			require.EqualError(t, err, tt.want)
			require.Equal(t, tt.notFound, api.IsNotFound(err))
			require.Equal(t, tt.notFound, api.IsNotFound(fmt.Errorf("wrapped: %w", err)))
		})
	}
}

func TestClientUnreachableServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := api.NewClient(url).ListPipelines(context.Background())
	require.ErrorContains(t, err, "sluice API at "+url)
	require.ErrorContains(t, err, "set SLUICE_API_URL")
	require.False(t, api.IsNotFound(err))
	require.False(t, api.IsNotFound(nil))
	require.False(t, api.IsNotFound(errors.New("not found")))
}

// TestClientAgainstTheHandler runs the client against the real handler: the
// client's escaping and the handler's routing agree, and the handler's
// errors come back as *api.Error.
func TestClientAgainstTheHandler(t *testing.T) {
	t.Parallel()
	h := newHandler(t, api.Deps{
		Ready: func(context.Context) error { return errors.New("temporal unreachable") },
		Authenticate: func(r *http.Request) (queue.Identity, error) {
			if r.Header.Get("Authorization") == "" {
				return queue.Identity{}, errors.New("no token")
			}
			return queue.Identity{User: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}, nil
		},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c := api.NewClient(srv.URL)

	var ae *api.Error
	err := c.Ready(ctx)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)

	// With authentication on, reads need a token too.
	_, err = c.GetBuild(ctx, "build/app/3")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.Status)
	require.Equal(t, "unauthorized: no token", ae.Message)

	c.Token = "bob"
	_, err = c.GetBuild(ctx, "build/app/3")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, ae.Message, `build "app/3"`, "the build ID reaches the handler unescaped, in one piece")

	_, err = c.GetEvent(ctx, "app/zero")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, ae.Message, `event "app/zero"`)

	// Starting an event is for the pipeline's admins: bob is not one.
	_, err = c.StartEvent(ctx, "app", api.StartEventRequest{SHA: "not-hex"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, `user "bob" is not an admin of pipeline app`)
	owner := api.NewClient(srv.URL)
	owner.Token = "owner"
	_, err = owner.StartEvent(ctx, "app", api.StartEventRequest{SHA: "not-hex"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, ae.Message, `sha "not-hex"`)

	err = c.DeleteQueue(ctx, "gpu")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, `user "bob" may not define queues`)

	// Executor actions are for manage-executors: bob hears 403 first.
	_, err = c.ExecutorAction(ctx, "exec-a", "explode")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, `user "bob" lacks the manage-executors privilege`)
}

// TestClientNumbered: a start answered pending is asked about at its
// admission until numbered; a numbered answer makes no request; a refusal
// and the context's end come back as errors.
func TestClientNumbered(t *testing.T) {
	ctx := context.Background()
	var asked []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		n := len(asked)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "adm-refused"):
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":"pipeline p refused the start: no such branch"}`)
		case strings.Contains(r.URL.Path, "adm-slow") || n < 3:
			_, _ = fmt.Fprintf(w, `{"pipeline":"p","admission":%q,"pending":true}`, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		default:
			_, _ = io.WriteString(w, `{"id":"p/7","pipeline":"p","number":7}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := api.NewClient(srv.URL)

	ev, err := c.Numbered(ctx, api.EventStarted{ID: "p/6", Pipeline: "p", Number: 6}, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 6, ev.Number)
	require.Empty(t, asked, "a numbered answer is not asked about")

	ev, err = c.Numbered(ctx, api.EventStarted{Pipeline: "p", Admission: "adm-1", Pending: true}, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, "p/7", ev.ID)
	require.Equal(t, []string{"/api/v1/pipelines/p/admissions/adm-1", "/api/v1/pipelines/p/admissions/adm-1", "/api/v1/pipelines/p/admissions/adm-1"}, asked)

	_, err = c.Numbered(ctx, api.EventStarted{Pipeline: "p", Admission: "adm-refused", Pending: true}, time.Millisecond)
	require.ErrorContains(t, err, "no such branch")

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	ev, err = c.Numbered(short, api.EventStarted{Pipeline: "p", Admission: "adm-slow", Pending: true}, 5*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, ev.Pending, "the last answer comes back with the error")
}
