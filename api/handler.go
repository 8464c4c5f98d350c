package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/cache"
	"github.com/sluice-ci/sluice/internal/shared"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

// maxBody bounds request bodies (webhooks included).
const maxBody = 5 << 20

// ErrUnauthorized is wrapped by the errors of Deps.Authenticate (HTTP 401).
var ErrUnauthorized = errors.New("unauthorized")

// Deps are what the handler needs.
type Deps struct {
	Service *Service
	// Logs is the build log store; nil disables the log routes.
	Logs *logstore.Store
	// Caches are the build caches; deleting a pipeline deletes its caches
	// (nil: nothing to delete).
	Caches *cache.Store
	// Ready reports whether Temporal answers (GET /readyz).
	Ready func(ctx context.Context) error
	// GitHubSecret and GitLabSecret verify webhook deliveries.
	GitHubSecret, GitLabSecret string
	// Authenticate maps a request to an identity; nil means auth is off and
	// every request acts as queue.System(). When set, every /api/v1 request
	// must authenticate (reads and log shipping included); health checks
	// and webhooks (verified by their own secrets) stay open.
	Authenticate func(r *http.Request) (queue.Identity, error)
	// Secrets stores pipeline secrets; nil disables the secret routes.
	Secrets *SecretStore
	// Metrics, when set, is served on GET /metrics (open, like the health
	// checks) and measures every request.
	Metrics *Metrics
	// TemporalUI is the Temporal Web UI's base URL; the pages link each
	// event and build to its workflow there ("" leaves the links out).
	TemporalUI string
	// PipelineOf looks a pipeline up for its access checks (nil: the
	// service's GetPipeline; unit tests without Temporal set it).
	PipelineOf func(ctx context.Context, name string) (Pipeline, error)
	// Blobs is the blob store of build artifacts; nil disables the
	// artifact routes.
	Blobs *blobstore.Store
	// Meta lists the metadata routes in Routes without a Service (for the
	// route table's tests); a handler serves them when its Service has a
	// Meta store.
	Meta bool
	// Artifacts lists the artifact routes in Routes without a blob store.
	Artifacts bool
	// LoopbackOnly, set when the API listens on loopback only, makes it
	// answer only requests whose Host names loopback (DNS rebinding).
	LoopbackOnly bool
	// People signs people in to the pages with OIDC and lets them mint
	// personal tokens (people.go); nil: neither.
	People *People
	Logger *slog.Logger
}

type handler struct {
	d   Deps
	svc *Service
	log *slog.Logger
	// attempts caches the log write checks that passed; attemptReads
	// shares the build record reads of checks under way.
	attempts     attemptCache
	attemptReads shared.Reads[attemptCacheKey, Build]
}

// NewHandler returns the HTTP API: health, webhooks, and the JSON API the
// CLI uses under /api/v1.
func NewHandler(d Deps) http.Handler {
	if d.People != nil && d.Authenticate != nil {
		if t := d.Secrets.PersonalTokens(); t != nil {
			d.Authenticate = d.People.withPersonalTokens(d.Authenticate, t)
		}
	}
	h := &handler{d: d, svc: d.Service, log: d.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("POST /webhooks/github", h.webhook("github"))
	mux.HandleFunc("POST /webhooks/gitlab", h.webhook("gitlab"))

	for _, rt := range h.routes() {
		mux.Handle(rt.Pattern, h.authorize(rt.Policy, rt.Builds, rt.handler))
	}
	h.webRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	if d.Metrics != nil {
		mux.Handle("GET /metrics", d.Metrics.Handler())
	}
	return h.recover(h.measured(mux, h.guarded(h.authenticated(jsonOnly(mux)))))
}

// measured records each request's latency under its route pattern (not its
// path: IDs would explode the label set).
func (h *handler) measured(mux *http.ServeMux, next http.Handler) http.Handler {
	if h.d.Metrics == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		_, route := mux.Handler(r)
		if route == "" || route == "/" {
			route = "unmatched"
		}
		next.ServeHTTP(sw, r)
		h.d.Metrics.requests.WithLabelValues(methodLabel(r.Method), route, strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
	})
}

// methodLabel maps a request method to a fixed set, so that a client
// sending made-up methods cannot grow the metrics without bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// authenticated refuses /api/v1 requests that do not authenticate, before
// any route runs, when authentication is on.
func (h *handler) authenticated(next http.Handler) http.Handler {
	if h.d.Authenticate == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") && fromBuild(r) {
			// A build's credential instead of a token (authorize admits
			// it on the routes that take builds).
			c, err := h.resolveBuildCaller(r)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			ctx := context.WithValue(r.Context(), callerKey{}, c)
			r = r.WithContext(context.WithValue(ctx, identityKey{}, buildIdentity(c)))
		} else if strings.HasPrefix(r.URL.Path, "/api/") && !isBadgePath(r) {
			id, err := h.identity(r)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
		}
		next.ServeHTTP(w, r)
	})
}

func (h *handler) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer h.recovered(w, r)
		next.ServeHTTP(w, r)
	})
}

// recovered, deferred, turns a panic of the request's handler into a 500.
func (h *handler) recovered(w http.ResponseWriter, r *http.Request) {
	if v := recover(); v != nil {
		h.log.ErrorContext(r.Context(), "api_panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}

// fail maps an error to its HTTP status.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrUnauthorized):
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", "Bearer")
	case errors.Is(err, ErrInvalid), errors.Is(err, workflows.ErrBadID):
		status = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, queue.ErrForbidden):
		status = http.StatusForbidden
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	}
	if status == http.StatusInternalServerError {
		h.log.ErrorContext(r.Context(), "api_error", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeError(w, status, err.Error())
}

// decode reads a JSON body strictly: unknown fields and trailing data are
// errors that name what is wrong.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			return invalid("request body: empty, want a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return invalid("request body: malformed JSON: unexpected end of input")
		case errors.As(err, &syn):
			return invalid("request body: malformed JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ) && typ.Field == "":
			return invalid("request body: want a JSON object, got %s", typ.Value)
		case errors.As(err, &typ):
			return invalid("request body: field %q: want %s, got %s", typ.Field, typ.Type, typ.Value)
		case errors.As(err, &tooBig):
			return invalid("request body: larger than %d bytes", tooBig.Limit)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return invalid("request body: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return invalid("request body: %v", err)
	}
	if dec.More() {
		return invalid("request body: more than one JSON value")
	}
	return nil
}

// identityKey carries the identity the authentication middleware resolved.
type identityKey struct{}

func (h *handler) identity(r *http.Request) (queue.Identity, error) {
	if h.d.Authenticate == nil {
		return queue.System(), nil
	}
	if id, ok := r.Context().Value(identityKey{}).(queue.Identity); ok {
		return id, nil
	}
	id, err := h.d.Authenticate(r)
	if err != nil {
		return queue.Identity{}, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return id, nil
}

func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if h.d.Ready != nil {
		if err := h.d.Ready(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ---- pipelines ----

func (h *handler) listPipelines(w http.ResponseWriter, r *http.Request) {
	ps, err := h.svc.ListPipelines(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ps)
}

func (h *handler) createPipeline(w http.ResponseWriter, r *http.Request) {
	var req CreatePipelineRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := h.svc.CreatePipeline(r.Context(), id, req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

func (h *handler) getPipeline(w http.ResponseWriter, r *http.Request) {
	p, err := h.svc.ShowPipeline(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (h *handler) updatePipeline(w http.ResponseWriter, r *http.Request) {
	var req UpdatePipelineRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := h.svc.UpdatePipeline(r.Context(), id, r.PathValue("name"), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (h *handler) deletePipeline(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeletePipeline(r.Context(), r.PathValue("name")); err != nil {
		h.fail(w, r, err)
		return
	}
	if h.d.Logs != nil {
		if err := h.d.Logs.DeletePipeline(r.PathValue("name")); err != nil {
			h.log.WarnContext(r.Context(), "pipeline_logs_delete_failed", "pipeline", r.PathValue("name"), "error", err)
		}
	}
	if h.d.Caches != nil {
		if err := h.d.Caches.DeletePipeline(r.Context(), r.PathValue("name")); err != nil {
			h.log.WarnContext(r.Context(), "pipeline_caches_delete_failed", "pipeline", r.PathValue("name"), "error", err)
		}
	}
	if h.d.Secrets != nil {
		if err := h.d.Secrets.DeletePipeline(r.PathValue("name")); err != nil {
			h.log.WarnContext(r.Context(), "pipeline_secrets_delete_failed", "pipeline", r.PathValue("name"), "error", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
}

func (h *handler) listEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 20)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f, err := eventQuery(r.URL.Query(), limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	evs, next, err := h.svc.ListEventsPage(r.Context(), r.PathValue("name"), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if next != "" {
		w.Header().Set(NextPageHeader, next)
	}
	writeJSON(w, http.StatusOK, evs)
}

func (h *handler) startEvent(w http.ResponseWriter, r *http.Request) {
	var req StartEventRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ev, err := h.svc.StartEvent(r.Context(), id, r.PathValue("name"), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, startedStatus(ev), ev)
}

func (h *handler) schedule(w http.ResponseWriter, r *http.Request) {
	p, job, action := r.PathValue("name"), r.PathValue("job"), r.PathValue("action")
	if err := h.svc.ScheduleAction(r.Context(), p, job, action); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"schedule": workflows.PeriodicScheduleID(p, job), "action": action})
}

// ---- events ----

func eventRef(r *http.Request) (workflows.EventRef, error) {
	return workflows.ParseEventRef(r.PathValue("pipeline") + "/" + r.PathValue("n"))
}

func (h *handler) getEvent(w http.ResponseWriter, r *http.Request) {
	ref, err := eventRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ev, err := h.svc.GetEvent(r.Context(), ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ev)
}

// getAdmission answers what the pipeline made of an event start answered
// 202 (pending): the event once numbered, still pending, or why it was
// refused.
func (h *handler) getAdmission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validAdmissionID(id) {
		h.fail(w, r, invalid("admission %q: want the admission ID a 202 answer gave (adm-<24 hex digits>)", id))
		return
	}
	ev, err := h.svc.Admission(r.Context(), r.PathValue("name"), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ev)
}

func (h *handler) cancelEvent(w http.ResponseWriter, r *http.Request) {
	ref, err := eventRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.svc.CancelEvent(r.Context(), ref); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"cancelled": ref.String()})
}

func (h *handler) approveEvent(w http.ResponseWriter, r *http.Request) {
	ref, err := eventRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	a, err := h.svc.ApproveEvent(r.Context(), id, ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approved": ref.String(), "approval": a})
}

func (h *handler) rerunEvent(w http.ResponseWriter, r *http.Request) {
	ref, err := eventRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req RerunEventRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ev, err := h.svc.RerunEvent(r.Context(), id, ref, req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, startedStatus(ev), ev)
}

func (h *handler) restartEvent(w http.ResponseWriter, r *http.Request) {
	ref, err := eventRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req RestartEventRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ev, err := h.svc.RestartEvent(r.Context(), id, ref, req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, startedStatus(ev), ev)
}

// ---- builds ----

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalid("query parameter %s=%q: want a non-negative number", name, v)
	}
	return n, nil
}

func (h *handler) listBuilds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(r, "limit", 50)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for key := range q {
		switch key {
		case "pipeline", "job", "status", "cause", "event", "queue", "pr", "limit", "branch", "executor", "since", "until", "page":
		default:
			h.fail(w, r, invalid("unknown query parameter %q (want pipeline, job, status, cause, event, queue, pr, branch, executor, since, until, page, limit)", key))
			return
		}
	}
	pr, err := intParam(r, "pr", 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := BuildFilter{
		Pipeline: q.Get("pipeline"), Job: q.Get("job"), Event: q.Get("event"), Queue: q.Get("queue"),
		Status: workflows.Status(strings.ToUpper(q.Get("status"))), Cause: workflows.Cause(strings.ToLower(q.Get("cause"))), PR: pr, Limit: limit,
	}
	if err := listQuery(q, &f); err != nil {
		h.fail(w, r, err)
		return
	}
	bs, next, err := h.svc.ListBuildsPage(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if next != "" {
		w.Header().Set(NextPageHeader, next)
	}
	ptrs := make([]*Build, len(bs))
	for i := range bs {
		ptrs[i] = &bs[i]
	}
	if err := h.svc.liveReasons(r.Context(), ptrs); err != nil {
		h.log.DebugContext(r.Context(), "live_reason_failed", "error", err)
	}
	writeJSON(w, http.StatusOK, bs)
}

func buildRef(r *http.Request) (workflows.BuildRef, error) {
	return workflows.ParseBuildRef(r.PathValue("id"))
}

func (h *handler) getBuild(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.svc.GetBuild(r.Context(), ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.svc.Meta != nil {
		if m, err := h.svc.metaOf(r.Context(), b); err != nil {
			h.log.WarnContext(r.Context(), "build_meta_failed", "build", b.ID, "error", err)
		} else {
			b.Meta = m.Meta
		}
	}
	writeJSON(w, http.StatusOK, b)
}

func (h *handler) cancelBuild(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.svc.CancelBuild(r.Context(), id, ref); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"cancelled": ref.String()})
}

// ---- queues and executors ----

func (h *handler) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := h.svc.ListQueues(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, qs)
}

func (h *handler) defineQueue(create bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req QueueRequest
		if err := decode(r, &req); err != nil {
			h.fail(w, r, err)
			return
		}
		if !create {
			if req.Name != "" && req.Name != r.PathValue("name") {
				h.fail(w, r, invalid("name %q in the body differs from %q in the path; queues cannot be renamed", req.Name, r.PathValue("name")))
				return
			}
			req.Name = r.PathValue("name")
		}
		id, err := h.identity(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		q, err := h.svc.DefineQueue(r.Context(), id, req, create)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		status := http.StatusOK
		if create {
			status = http.StatusCreated
		}
		writeJSON(w, status, q)
	}
}

func (h *handler) deleteQueue(w http.ResponseWriter, r *http.Request) {
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.svc.DeleteQueue(r.Context(), id, r.PathValue("name")); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
}

func (h *handler) queueStatus(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.QueueStatus(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *handler) listExecutors(w http.ResponseWriter, r *http.Request) {
	es, err := h.svc.ListExecutors(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, es)
}

func (h *handler) executorAction(w http.ResponseWriter, r *http.Request) {
	states := map[string]queue.MemberState{"activate": queue.StateActive, "deactivate": queue.StateInactive, "drain": queue.StateDraining}
	state, ok := states[r.PathValue("action")]
	if !ok {
		h.fail(w, r, invalid("executor action %q: want activate, deactivate or drain", r.PathValue("action")))
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	e, err := h.svc.SetExecutorState(r.Context(), id, r.PathValue("name"), state)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// ---- webhooks ----

func (h *handler) webhook(provider string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("webhook body: %v", err))
			return
		}
		secret, secretVar := h.d.GitHubSecret, "SLUICE_GITHUB_SECRET" //nolint:gosec // G101: a variable's name, not a credential
		if provider == "gitlab" {
			secret, secretVar = h.d.GitLabSecret, "SLUICE_GITLAB_SECRET" //nolint:gosec // G101: a variable's name, not a credential
		}
		if secret == "" && (h.d.Authenticate != nil || !remoteLoopback(r)) {
			// Unsigned deliveries would let anyone start events: they are
			// taken only by an install without authentication (sluice dev)
			// and only from this machine.
			h.d.Metrics.webhook(provider, "unauthorized")
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s webhooks are refused: %s is not set, so deliveries cannot be verified (unsigned deliveries are accepted only from this machine when authentication is off)", provider, secretVar))
			return
		}
		var hook *scm.Hook
		switch provider {
		case "github":
			hook, err = scm.ParseGitHub(r.Header, body, h.d.GitHubSecret)
		default:
			hook, err = scm.ParseGitLab(r.Header, body, h.d.GitLabSecret)
		}
		switch {
		case errors.Is(err, scm.ErrIgnored):
			h.d.Metrics.webhook(provider, "ignored")
			writeJSON(w, http.StatusAccepted, WebhookResult{Ignored: err.Error()})
			return
		case errors.Is(err, scm.ErrSignature):
			h.d.Metrics.webhook(provider, "unauthorized")
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		case err != nil:
			h.d.Metrics.webhook(provider, "invalid")
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		res := h.svc.Webhook(r.Context(), hook)
		h.svc.auditWebhook(r.Context(), hook, res)
		status := http.StatusAccepted
		outcome := "started"
		switch {
		case len(res.Events) == 0 && len(res.Errors) > 0:
			status, outcome = http.StatusBadGateway, "error"
		case len(res.Events) == 0:
			outcome = "ignored"
		case allDuplicates(res.Events):
			outcome = "duplicate"
		}
		h.d.Metrics.webhook(provider, outcome)
		writeJSON(w, status, res)
	}
}

func allDuplicates(evs []EventStarted) bool {
	for _, e := range evs {
		if !e.Duplicate {
			return false
		}
	}
	return true
}

// startedStatus is 201 for a numbered event, 202 for one admitted but not
// numbered within the admit wait (it starts; the answer has its admission).
func startedStatus(ev EventStarted) int {
	if ev.Pending {
		return http.StatusAccepted
	}
	return http.StatusCreated
}
