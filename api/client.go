package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/logstore"
)

// Client calls the sluice API over HTTP.
type Client struct {
	// BaseURL is e.g. http://localhost:8080.
	BaseURL string
	// Token, when set, is sent as a bearer token.
	Token string
	// Build and BuildCredential, when set and Token is not, make the
	// client act for a running build (commands inside a build: meta,
	// sluice artifact), with its attempt's credential.
	Build, BuildCredential string
	HTTP                   *http.Client
}

// NewClient returns a client for baseURL. It keeps connections of its own
// (a clone of http.DefaultTransport, proxies and all): code elsewhere in
// the process that closes the default transport's idle connections — an
// httptest server's Close does — would break a request of its on a
// connection being reused ("http: CloseIdleConnections called").
func NewClient(baseURL string) *Client {
	rt := http.DefaultTransport
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		rt = t.Clone()
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 60 * time.Second, Transport: rt}}
}

// UnreachableError is an API that did not answer at all (connection
// refused, DNS, timeout); the CLI exits with its own code for it.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("sluice API at %s: %v (is `sluice dev` or `sluice api` running? set SLUICE_API_URL)", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Error is an error the API answered with: the HTTP status and the
// message of its ErrorBody (or the method, path and status when it had none).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// StatusCode is the answer's HTTP status (callers retry 5xx and 429).
func (e *Error) StatusCode() int { return e.Status }

// IsNotFound reports whether err is a 404 from the API.
func IsNotFound(err error) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	return c.doWith(ctx, method, path, nil, body, out)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, path string, hdr http.Header, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if body != nil || !safeMethod(method) {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	} else if c.Build != "" {
		req.Header.Set(BuildHeader, c.Build)
		req.Header.Set(attemptCredentialHeader, c.BuildCredential)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return &UnreachableError{URL: c.BaseURL, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			return &Error{Status: resp.StatusCode, Message: eb.Error}
		}
		return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response of %s %s: %w", method, path, err)
	}
	return nil
}

func seg(s string) string { return url.PathEscape(s) }

// CreatePipeline creates a pipeline.
func (c *Client) CreatePipeline(ctx context.Context, req CreatePipelineRequest) (Pipeline, error) {
	var p Pipeline
	return p, c.do(ctx, http.MethodPost, "/api/v1/pipelines", req, &p)
}

// ListPipelines lists pipelines.
func (c *Client) ListPipelines(ctx context.Context) ([]Pipeline, error) {
	var ps []Pipeline
	return ps, c.do(ctx, http.MethodGet, "/api/v1/pipelines", nil, &ps)
}

// GetPipeline shows a pipeline.
func (c *Client) GetPipeline(ctx context.Context, name string) (Pipeline, error) {
	var p Pipeline
	return p, c.do(ctx, http.MethodGet, "/api/v1/pipelines/"+seg(name), nil, &p)
}

// UpdatePipeline changes a pipeline.
func (c *Client) UpdatePipeline(ctx context.Context, name string, req UpdatePipelineRequest) (Pipeline, error) {
	var p Pipeline
	return p, c.do(ctx, http.MethodPatch, "/api/v1/pipelines/"+seg(name), req, &p)
}

// DeletePipeline deletes a pipeline.
func (c *Client) DeletePipeline(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/pipelines/"+seg(name), nil, nil)
}

// StartEvent starts an event.
func (c *Client) StartEvent(ctx context.Context, pipeline string, req StartEventRequest) (EventStarted, error) {
	var ev EventStarted
	return ev, c.do(ctx, http.MethodPost, "/api/v1/pipelines/"+seg(pipeline)+"/events", req, &ev)
}

// Admission asks what pipeline made of an event start answered pending
// (EventStarted.Admission): the event once numbered, Pending while not.
func (c *Client) Admission(ctx context.Context, pipeline, admission string) (EventStarted, error) {
	var ev EventStarted
	return ev, c.do(ctx, http.MethodGet, "/api/v1/pipelines/"+seg(pipeline)+"/admissions/"+seg(admission), nil, &ev)
}

// Numbered is ev once its pipeline numbered it: a start answered pending
// (EventStarted.Pending) is asked after every interval until it is numbered,
// refused (the error) or ctx ends; a numbered answer comes back as it is.
func (c *Client) Numbered(ctx context.Context, ev EventStarted, every time.Duration) (EventStarted, error) {
	for ev.Pending {
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return ev, ctx.Err()
		case <-t.C:
		}
		next, err := c.Admission(ctx, ev.Pipeline, ev.Admission)
		if err != nil {
			return ev, err
		}
		ev = next
	}
	return ev, nil
}

// ListEvents lists a pipeline's recent events.
func (c *Client) ListEvents(ctx context.Context, pipeline string, limit int) ([]Event, error) {
	return c.ListEventsFiltered(ctx, pipeline, EventFilter{Limit: limit})
}

// ListEventsFiltered lists a pipeline's events of a branch, a pull
// request or a trigger kind.
func (c *Client) ListEventsFiltered(ctx context.Context, pipeline string, f EventFilter) ([]Event, error) {
	q := url.Values{"limit": {strconv.Itoa(f.Limit)}}
	if f.Branch != "" {
		q.Set("branch", f.Branch)
	}
	if f.PR > 0 {
		q.Set("pr", strconv.Itoa(f.PR))
	}
	if f.Trigger != "" {
		q.Set("trigger", string(f.Trigger))
	}
	if f.Page != "" {
		q.Set("page", f.Page)
	}
	var evs []Event
	return evs, c.do(ctx, http.MethodGet, "/api/v1/pipelines/"+seg(pipeline)+"/events?"+q.Encode(), nil, &evs)
}

func eventPath(id string) (string, error) {
	p, n, ok := strings.Cut(strings.TrimPrefix(id, "event/"), "/")
	if !ok || p == "" || n == "" {
		return "", fmt.Errorf("event %q: want <pipeline>/<number>, e.g. myapp/12", id)
	}
	return "/api/v1/events/" + seg(p) + "/" + seg(n), nil
}

// GetEvent shows an event with its builds.
func (c *Client) GetEvent(ctx context.Context, id string) (Event, error) {
	var ev Event
	p, err := eventPath(id)
	if err != nil {
		return ev, err
	}
	return ev, c.do(ctx, http.MethodGet, p, nil, &ev)
}

// CancelEvent cancels an event.
func (c *Client) CancelEvent(ctx context.Context, id string) error {
	p, err := eventPath(id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, p+"/cancel", nil, nil)
}

// ApproveEvent approves an event that waits for approval
// (screwdriver.cd/restrictPR): its builds start.
func (c *Client) ApproveEvent(ctx context.Context, id string) (Approval, error) {
	var out struct {
		Approval Approval `json:"approval"`
	}
	p, err := eventPath(id)
	if err != nil {
		return out.Approval, err
	}
	err = c.do(ctx, http.MethodPost, p+"/approve", nil, &out)
	return out.Approval, err
}

// RestartEvent starts a new event from a job of an earlier one.
func (c *Client) RestartEvent(ctx context.Context, id string, req RestartEventRequest) (EventStarted, error) {
	var ev EventStarted
	p, err := eventPath(id)
	if err != nil {
		return ev, err
	}
	return ev, c.do(ctx, http.MethodPost, p+"/restart", req, &ev)
}

// RerunEvent re-runs an event's failed, aborted and collapsed jobs.
func (c *Client) RerunEvent(ctx context.Context, id string, req RerunEventRequest) (EventStarted, error) {
	var ev EventStarted
	p, err := eventPath(id)
	if err != nil {
		return ev, err
	}
	return ev, c.do(ctx, http.MethodPost, p+"/rerun", req, &ev)
}

// ListBuilds lists builds matching the filter.
func (c *Client) ListBuilds(ctx context.Context, f BuildFilter) ([]Build, error) {
	q := url.Values{}
	for k, v := range map[string]string{
		"pipeline": f.Pipeline, "job": f.Job, "event": f.Event, "queue": f.Queue, "status": string(f.Status), "cause": string(f.Cause),
		"branch": f.Branch, "executor": f.Executor, "page": f.Page, "since": listTime(f.Since), "until": listTime(f.Until),
	} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.PR > 0 {
		q.Set("pr", strconv.Itoa(f.PR))
	}
	var bs []Build
	return bs, c.do(ctx, http.MethodGet, "/api/v1/builds?"+q.Encode(), nil, &bs)
}

// GetBuild shows a build.
func (c *Client) GetBuild(ctx context.Context, id string) (Build, error) {
	var b Build
	return b, c.do(ctx, http.MethodGet, "/api/v1/builds/"+seg(strings.TrimPrefix(id, "build/")), nil, &b)
}

// CancelBuild cancels a build.
func (c *Client) CancelBuild(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/builds/"+seg(strings.TrimPrefix(id, "build/"))+"/cancel", nil, nil)
}

// LogSteps lists the steps with logs under a log key.
func (c *Client) LogSteps(ctx context.Context, key string) ([]logstore.StepInfo, error) {
	var list logstore.StepList
	err := c.do(ctx, http.MethodGet, "/api/v1/builds/"+seg(key)+"/logs", nil, &list)
	return list.Steps, err
}

// ReadLog reads a step's log from offset (length ≤ 0: as much as allowed).
func (c *Client) ReadLog(ctx context.Context, key, step string, offset, length int64) (logstore.Chunk, error) {
	var ch logstore.Chunk
	path := fmt.Sprintf("/api/v1/builds/%s/logs/%s?offset=%d&length=%d", seg(key), seg(step), offset, length)
	return ch, c.do(ctx, http.MethodGet, path, nil, &ch)
}

// ListQueues lists queues.
func (c *Client) ListQueues(ctx context.Context) ([]Queue, error) {
	var qs []Queue
	return qs, c.do(ctx, http.MethodGet, "/api/v1/queues", nil, &qs)
}

// CreateQueue defines a new queue.
func (c *Client) CreateQueue(ctx context.Context, req QueueRequest) (Queue, error) {
	var q Queue
	return q, c.do(ctx, http.MethodPost, "/api/v1/queues", req, &q)
}

// UpdateQueue replaces a queue's description, rules and roles.
func (c *Client) UpdateQueue(ctx context.Context, req QueueRequest) (Queue, error) {
	var q Queue
	return q, c.do(ctx, http.MethodPut, "/api/v1/queues/"+seg(req.Name), req, &q)
}

// SetSecret sets a pipeline's secret.
func (c *Client) SetSecret(ctx context.Context, pipeline, name string, req SetSecretRequest) (Secret, error) {
	var out Secret
	return out, c.do(ctx, http.MethodPut, "/api/v1/pipelines/"+seg(pipeline)+"/secrets/"+seg(name), req, &out)
}

// ListSecrets lists a pipeline's secrets (names, never values).
func (c *Client) ListSecrets(ctx context.Context, pipeline string) ([]Secret, error) {
	var out []Secret
	return out, c.do(ctx, http.MethodGet, "/api/v1/pipelines/"+seg(pipeline)+"/secrets", nil, &out)
}

// DeleteSecret deletes a pipeline's secret.
func (c *Client) DeleteSecret(ctx context.Context, pipeline, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/pipelines/"+seg(pipeline)+"/secrets/"+seg(name), nil, nil)
}

// ResolveSecrets fetches the values of a running build's secrets (for
// executors), presenting req.Credential, the attempt's credential.
func (c *Client) ResolveSecrets(ctx context.Context, req ResolveSecretsRequest) (ResolveSecretsResponse, error) {
	var out ResolveSecretsResponse
	var hdr http.Header
	if req.Credential != "" {
		hdr = http.Header{logstore.AttemptCredentialHeader: {req.Credential}}
	}
	return out, c.doWith(ctx, http.MethodPost, "/api/v1/secrets/resolve", hdr, req, &out)
}

// PipelineTokens is the client as a controller's source of the pipelines'
// own SCM tokens.
func (c *Client) PipelineTokens() activities.PipelineTokens {
	return activities.PipelineTokenFunc(func(ctx context.Context, pipeline, name string) (string, bool, error) {
		var out SCMTokenResponse
		err := c.do(ctx, http.MethodPost, "/api/v1/secrets/scm-token", SCMTokenRequest{Pipeline: pipeline, Name: name}, &out)
		return out.Value, out.Found, err
	})
}

// SecretSource is the client as an executor's source of build secrets.
func (c *Client) SecretSource() activities.SecretSource {
	return activities.SecretSourceFunc(func(ctx context.Context, req activities.SecretRequest) (map[string]string, []string, error) {
		res, err := c.ResolveSecrets(ctx, ResolveSecretsRequest{Build: req.Build, Attempt: req.Attempt, Names: req.Names, Fork: req.Fork, Credential: req.Credential, Checkout: req.Checkout})
		if err != nil {
			return nil, nil, err
		}
		return res.Values, res.Withheld, nil
	})
}

// DeleteQueue deletes a queue.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/queues/"+seg(name), nil, nil)
}

// QueueStatus explains a queue.
func (c *Client) QueueStatus(ctx context.Context, name string) (QueueStatus, error) {
	var st QueueStatus
	return st, c.do(ctx, http.MethodGet, "/api/v1/queues/"+seg(name)+"/status", nil, &st)
}

// ListExecutors lists registered executors and controllers.
func (c *Client) ListExecutors(ctx context.Context) ([]Executor, error) {
	var es []Executor
	return es, c.do(ctx, http.MethodGet, "/api/v1/executors", nil, &es)
}

// ExecutorAction activates, deactivates or drains an executor.
func (c *Client) ExecutorAction(ctx context.Context, name, action string) (Executor, error) {
	var e Executor
	return e, c.do(ctx, http.MethodPost, "/api/v1/executors/"+seg(name)+"/"+seg(action), nil, &e)
}

// ScheduleAction pauses, unpauses or triggers a periodic job's schedule.
func (c *Client) ScheduleAction(ctx context.Context, pipeline, job, action string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/pipelines/"+seg(pipeline)+"/jobs/"+seg(job)+"/schedule/"+seg(action), nil, nil)
}

// Schedule accounts for a periodic job's latest due times.
func (c *Client) Schedule(ctx context.Context, pipeline, job string) (ScheduleView, error) {
	var v ScheduleView
	return v, c.do(ctx, http.MethodGet, "/api/v1/pipelines/"+seg(pipeline)+"/jobs/"+seg(job)+"/schedule", nil, &v)
}

// Ready asks GET /readyz.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil)
}

func listTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
