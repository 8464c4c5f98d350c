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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workflows"
)

// The audit trail: who did what and when. Every state-changing API route
// that a person (or a webhook) uses leaves one record when it succeeds;
// the record is made in one place, the route's wrapper (audited), which a
// page action runs too (it serves the same route), so a click and an API
// call leave the same record. Refused and failed requests leave none (the
// route changed nothing). Records name secrets, never their values.

// AuditRecord is one entry of the audit trail.
type AuditRecord = store.AuditRecord

// Audit actions.
const (
	AuditPipelineCreate = "pipeline.create"
	// AuditPipelineUpdate is an update that keeps the repository;
	// AuditPipelineRepo one that repoints the pipeline.
	AuditPipelineUpdate = "pipeline.update"
	AuditPipelineRepo   = "pipeline.repo"
	AuditPipelineDelete = "pipeline.delete"
	AuditSecretSet      = "secret.set"
	AuditSecretDelete   = "secret.delete"
	AuditEventStart     = "event.start"
	AuditEventCancel    = "event.cancel"
	AuditEventRestart   = "event.restart"
	AuditEventRerun     = "event.rerun"
	AuditEventApprove   = "event.approve"
	AuditBuildCancel    = "build.cancel"
	AuditQueueCreate    = "queue.create"
	AuditQueueUpdate    = "queue.update"
	AuditQueueDelete    = "queue.delete"
	// AuditExecutor and AuditSchedule prefix the action taken
	// (executor.drain, schedule.pause...).
	AuditExecutor = "executor."
	AuditSchedule = "schedule."
	// AuditSignIn is a person signing in to the pages (detail: how,
	// "api-token" or "oidc").
	AuditSignIn = "signin"
	// AuditTokenMint and AuditTokenRevoke are a person's own API tokens
	// (target: the token's ID, never the token).
	AuditTokenMint   = "token.mint"
	AuditTokenRevoke = "token.revoke"
)

// DefaultAuditLimit and MaxAuditLimit bound the records one read answers.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// audit records one action in the audit trail (nothing without a store).
// The action has happened: a failure to record it is logged, and does not
// turn the action into an error. Sign-ins call it too (actor the user,
// pipeline "", target the user, detail how: "api-token", "oidc").
func (s *Service) audit(ctx context.Context, actor, action, pipeline, target, detail string) {
	if s == nil || s.Audit == nil {
		return
	}
	rec := store.AuditRecord{At: s.now(), Actor: actor, Action: action, Pipeline: pipeline, Target: target, Detail: detail}
	if err := s.Audit.AppendAudit(context.WithoutCancel(ctx), rec); err != nil && s.Logger != nil {
		s.Logger.ErrorContext(ctx, "audit_record_failed", "actor", actor, "action", action, "pipeline", pipeline, "target", target, "error", err)
	}
}

// auditEntry is what an audited route's answer records.
type auditEntry struct{ action, pipeline, target, detail string }

// auditRule describes the record of one route from its request (path
// values; reqBody when body is set) and its successful answer.
type auditRule struct {
	// body: the route's request body is read for the record (never for a
	// secret's route: its body holds the value).
	body     bool
	describe func(r *http.Request, reqBody, answer []byte) auditEntry
}

func pathEvent(r *http.Request) string { return r.PathValue("pipeline") + "/" + r.PathValue("n") }

// startedDetail names the event an answer (EventStarted) started.
func startedDetail(answer []byte) string {
	var ev EventStarted
	if json.Unmarshal(answer, &ev) != nil {
		return ""
	}
	if ev.Pending {
		return "admitted " + ev.Admission
	}
	return "started " + ev.ID
}

// startedTarget is the event an answer (EventStarted) started, or its
// admission while it is pending, or else def.
func startedTarget(answer []byte, def string) string {
	var ev EventStarted
	switch {
	case json.Unmarshal(answer, &ev) != nil:
	case ev.ID != "":
		return ev.ID
	case ev.Admission != "":
		return "admission " + ev.Admission
	}
	return def
}

// auditRules are the audited routes, by pattern.
var auditRules = map[string]auditRule{
	"POST /api/v1/pipelines": {describe: func(_ *http.Request, _, answer []byte) auditEntry {
		var p Pipeline
		_ = json.Unmarshal(answer, &p)
		return auditEntry{AuditPipelineCreate, p.Name, p.Name, fmt.Sprintf("repo=%s branch=%s", scm.RedactURL(p.Repo), p.Branch)}
	}},
	"PATCH /api/v1/pipelines/{name}": {body: true, describe: func(r *http.Request, req, _ []byte) auditEntry {
		var u UpdatePipelineRequest
		_ = json.Unmarshal(req, &u)
		var set []string
		action := AuditPipelineUpdate
		if u.Repo != nil {
			action = AuditPipelineRepo
			set = append(set, "repo="+scm.RedactURL(*u.Repo)) // never a URL's credentials
		}
		if u.Branch != nil {
			set = append(set, "branch="+*u.Branch)
		}
		if u.Queue != nil {
			set = append(set, "queue="+*u.Queue)
		}
		if u.Admins != nil {
			set = append(set, "admins="+strings.Join(*u.Admins, ","))
		}
		if u.Statuses != nil {
			set = append(set, "statuses="+*u.Statuses)
		}
		if u.Public != nil {
			set = append(set, "public="+strconv.FormatBool(*u.Public))
		}
		name := r.PathValue("name")
		return auditEntry{action, name, name, strings.Join(set, " ")}
	}},
	"DELETE /api/v1/pipelines/{name}": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditPipelineDelete, r.PathValue("name"), r.PathValue("name"), ""}
	}},
	"POST /api/v1/pipelines/{name}/events": {body: true, describe: func(r *http.Request, req, answer []byte) auditEntry {
		var s StartEventRequest
		_ = json.Unmarshal(req, &s)
		var d []string
		for k, v := range map[string]string{"type": s.Type, "branch": s.Branch, "sha": s.SHA, "ref": s.Ref, "start_from": s.StartFrom} {
			if v != "" {
				d = append(d, k+"="+v)
			}
		}
		if s.PR > 0 {
			d = append(d, "pr="+strconv.Itoa(s.PR))
		}
		if len(s.Parameters) > 0 {
			names := make([]string, 0, len(s.Parameters))
			for k := range s.Parameters {
				names = append(names, k)
			}
			sort.Strings(names)
			d = append(d, "parameters="+strings.Join(names, ","))
		}
		sort.Strings(d)
		return auditEntry{AuditEventStart, r.PathValue("name"), startedTarget(answer, r.PathValue("name")), strings.Join(d, " ")}
	}},
	"POST /api/v1/pipelines/{name}/jobs/{job}/schedule/{action}": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditSchedule + r.PathValue("action"), r.PathValue("name"), r.PathValue("name") + ":" + r.PathValue("job"), ""}
	}},
	"POST /api/v1/events/{pipeline}/{n}/cancel": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditEventCancel, r.PathValue("pipeline"), pathEvent(r), ""}
	}},
	"POST /api/v1/events/{pipeline}/{n}/restart": {body: true, describe: func(r *http.Request, req, answer []byte) auditEntry {
		var s RestartEventRequest
		_ = json.Unmarshal(req, &s)
		return auditEntry{AuditEventRestart, r.PathValue("pipeline"), pathEvent(r), startedDetail(answer) + " from=" + strings.Join(s.From, ",")}
	}},
	"POST /api/v1/events/{pipeline}/{n}/rerun": {describe: func(r *http.Request, _, answer []byte) auditEntry {
		return auditEntry{AuditEventRerun, r.PathValue("pipeline"), pathEvent(r), startedDetail(answer)}
	}},
	"POST /api/v1/events/{pipeline}/{n}/approve": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditEventApprove, r.PathValue("pipeline"), pathEvent(r), ""}
	}},
	"POST /api/v1/builds/{id}/cancel": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		id := r.PathValue("id")
		ref, _ := workflows.ParseBuildRef(id)
		return auditEntry{AuditBuildCancel, ref.Pipeline, id, ""}
	}},
	"POST /api/v1/queues":       {describe: queueEntry(AuditQueueCreate)},
	"PUT /api/v1/queues/{name}": {describe: queueEntry(AuditQueueUpdate)},
	"DELETE /api/v1/queues/{name}": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditQueueDelete, "", r.PathValue("name"), ""}
	}},
	"POST /api/v1/executors/{name}/{action}": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditExecutor + r.PathValue("action"), "", r.PathValue("name"), ""}
	}},
	"PUT /api/v1/pipelines/{name}/secrets/{secret}": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditSecretSet, r.PathValue("name"), r.PathValue("secret"), ""}
	}},
	"DELETE /api/v1/pipelines/{name}/secrets/{secret}": {describe: func(r *http.Request, _, _ []byte) auditEntry {
		return auditEntry{AuditSecretDelete, r.PathValue("name"), r.PathValue("secret"), ""}
	}},
}

func queueEntry(action string) func(*http.Request, []byte, []byte) auditEntry {
	return func(_ *http.Request, _, answer []byte) auditEntry {
		var q Queue
		_ = json.Unmarshal(answer, &q)
		return auditEntry{action, "", q.Name, "rules=" + strings.Join(q.Rules, " | ")}
	}
}

// auditWriter keeps an audited route's status and answer.
type auditWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *auditWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len() < 64<<10 {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b) //nolint:wrapcheck // the client's connection
}

// audited wraps the handler of the route pattern (after its policy check)
// so that a success leaves its record in the audit trail; routes without
// an audit rule are returned as they are.
func (h *handler) audited(pattern string, next http.HandlerFunc) http.HandlerFunc {
	rule, ok := auditRules[pattern]
	if !ok {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if h.svc == nil || h.svc.Audit == nil {
			next(w, r)
			return
		}
		var reqBody []byte
		if rule.body && r.Body != nil {
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				h.fail(w, r, invalid("request body: %v", err))
				return
			}
			reqBody = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		aw := &auditWriter{ResponseWriter: w}
		next(aw, r)
		if aw.status < 200 || aw.status >= 300 {
			return
		}
		id, err := h.identity(r)
		if err != nil {
			return // the route admitted it: it has an identity
		}
		e := rule.describe(r, reqBody, aw.body.Bytes())
		h.svc.audit(r.Context(), id.User, e.action, e.pipeline, e.target, e.detail)
	}
}

// auditWebhook records the events a webhook delivery started (not its
// duplicates); the actor is the webhook and its sender.
func (s *Service) auditWebhook(ctx context.Context, hook *scm.Hook, res WebhookResult) {
	actor := "webhook:" + hook.Provider
	if hook.Sender != "" {
		actor += ":" + hook.Sender
	}
	for _, ev := range res.Events {
		if ev.Duplicate {
			continue
		}
		detail := "kind=" + string(hook.Kind)
		if hook.Branch != "" {
			detail += " branch=" + hook.Branch
		}
		if hook.PRNumber > 0 {
			detail += " pr=" + strconv.Itoa(hook.PRNumber)
		}
		s.audit(ctx, actor, AuditEventStart, ev.Pipeline, startedTarget(mustJSON(ev), ev.Pipeline), detail)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// ---- reading the trail ----------------------------------------------------

// pipelineOfAudit is the pipeline a read of the audit trail is limited to
// (?pipeline=): its admins may read its records. The whole trail needs
// manage-pipelines, which passes the policy before this is asked.
func pipelineOfAudit(r *http.Request) (string, error) {
	p := r.URL.Query().Get("pipeline")
	if p == "" {
		return "", fmt.Errorf("%w: the whole audit trail needs the %s privilege; a pipeline's admins read its records with ?pipeline=NAME (sluice audit --pipeline NAME)",
			queue.ErrForbidden, PrivilegeManagePipelines)
	}
	return p, nil
}

// auditRoutes are the audit trail's API routes.
func (h *handler) auditRoutes() []Route {
	return []Route{{Pattern: "GET /api/v1/audit", Policy: pipelineAdmin(pipelineOfAudit), handler: http.HandlerFunc(h.listAudit)}}
}

// reDays is a duration in days ("30d").
var reDays = regexp.MustCompile(`^(\d{1,5})d$`)

// ParseSince reads --since / ?since=: a duration back from now ("90m",
// "24h", "30d") or a time (RFC 3339, or a date 2006-01-02 in UTC).
func ParseSince(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if m := reDays.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		return now.Add(-time.Duration(n) * 24 * time.Hour), nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("since %q: want a positive duration back from now", v)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("since %q: want a duration back from now (90m, 24h, 30d) or a time (2026-11-26T14:00:00Z, 2026-11-26)", v)
}

// AuditQuery selects audit records (GET /api/v1/audit's parameters).
type AuditQuery struct {
	Pipeline string
	User     string
	Action   string
	// Since is a duration back from now or a time (ParseSince).
	Since string
	// Before pages back: records strictly older than this time (RFC
	// 3339; the oldest record's time of the previous page).
	Before string
	Limit  int
}

// auditFilter checks a request's parameters; every bad one is named.
func (s *Service) auditFilter(q url.Values) (store.AuditFilter, error) {
	var f store.AuditFilter
	for key, vs := range q {
		switch key {
		case "pipeline", "user", "action", "since", "before", "limit":
			if len(vs) > 1 {
				return f, invalid("query parameter %s given %d times, want once", key, len(vs))
			}
		default:
			return f, invalid("unknown query parameter %q (want pipeline, user, action, since, before, limit)", key)
		}
	}
	f.Pipeline, f.Actor, f.Action = q.Get("pipeline"), q.Get("user"), q.Get("action")
	if v := q.Get("since"); v != "" {
		t, err := ParseSince(v, s.now())
		if err != nil {
			return f, invalid("%v", err)
		}
		f.Since = t
	}
	if v := q.Get("before"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, invalid("query parameter before=%q: want a time (RFC 3339, e.g. 2026-11-26T14:00:00.123456789Z)", v)
		}
		f.Before = t
	}
	f.Limit = DefaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxAuditLimit {
			return f, invalid("query parameter limit=%q: want a number from 1 to %d", v, MaxAuditLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// ListAudit answers the audit records the parameters select, newest first.
func (s *Service) ListAudit(ctx context.Context, q url.Values) ([]AuditRecord, error) {
	if s.Audit == nil {
		return nil, fmt.Errorf("%w: this API keeps no audit trail (it has no store)", ErrNotFound)
	}
	f, err := s.auditFilter(q)
	if err != nil {
		return nil, err
	}
	rs, err := s.Audit.ListAudit(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("audit trail: %w", err)
	}
	return rs, nil
}

func (h *handler) listAudit(w http.ResponseWriter, r *http.Request) {
	rs, err := h.svc.ListAudit(r.Context(), r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rs)
}

// Audit reads the audit trail.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	v := url.Values{}
	for k, s := range map[string]string{"pipeline": q.Pipeline, "user": q.User, "action": q.Action, "since": q.Since, "before": q.Before} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var rs []AuditRecord
	return rs, c.do(ctx, http.MethodGet, "/api/v1/audit?"+v.Encode(), nil, &rs)
}

// AuditTrail is the store's audit trail, if it keeps one.
func (s *SecretStore) AuditTrail() store.AuditTrail {
	a, _ := s.db.(store.AuditTrail)
	return a
}

// ---- the page --------------------------------------------------------------

type auditPage struct {
	Records []AuditRecord
	// Filter is the form's values.
	Filter map[string]string
	// Older is the link to the next page back ("" on the last one).
	Older string
}

// auditPage serves /ui/audit: who may read the records the filter selects
// is the API route's policy, checked by the same code.
func (wh *webHandler) auditPage(w http.ResponseWriter, r *http.Request) {
	if err := wh.authorized(r); err != nil {
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	id, err := wh.pageIdentity(r)
	if err == nil {
		err = wh.h.allowed(r, id, pipelineAdmin(pipelineOfAudit))
	}
	if err != nil {
		status := http.StatusForbidden
		if errors.Is(err, ErrNotFound) {
			status = http.StatusNotFound
		}
		wh.render(w, status, "error.html", pageData{
			Title: http.StatusText(status), Auth: wh.h.d.Authenticate != nil,
			Data: map[string]any{"Status": status, "Message": err.Error()},
		})
		return
	}
	wh.page(func(r *http.Request) (string, any, error) {
		q := r.URL.Query()
		// The form sends every field: an empty one selects all.
		for k := range q {
			if q.Get(k) == "" {
				q.Del(k)
			}
		}
		rs, err := wh.h.svc.ListAudit(r.Context(), q)
		if err != nil {
			return "", nil, err
		}
		f := map[string]string{}
		for _, k := range []string{"pipeline", "user", "action", "since"} {
			f[k] = q.Get(k)
		}
		pg := &auditPage{Records: rs, Filter: f}
		limit := DefaultAuditLimit
		if n, err := strconv.Atoi(q.Get("limit")); err == nil {
			limit = n
		}
		if len(rs) == limit {
			q.Set("before", rs[len(rs)-1].At.UTC().Format(time.RFC3339Nano))
			pg.Older = "/ui/audit?" + q.Encode()
		}
		return "audit.html", pg, nil
	})(w, r)
}
