package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Page actions. Each is a POST form under /ui/ that runs one /api/v1 route:
// the page action builds that route's request from the form and serves it
// through the same route handler behind the same policy check (authorize),
// so a page action calls the same service method as the API and is allowed
// to exactly those the route allows. A page shows an action's button only
// when that policy admits the signed-in user (canDo asks the same check).
//
// Every action form carries a CSRF token tied to the session: an HMAC of
// the sign-in cookie keyed by itself (with authentication off, of a random
// sluice_csrf cookie set with the page). An action without it, or with
// another session's, is refused, as is one whose Origin or Referer names
// another site (defence in depth: the cookies are SameSite=Strict).

// csrfCookie is the session for the CSRF token when authentication is off.
const csrfCookie = "sluice_csrf"

// csrfField is the form field carrying the token.
const csrfField = "csrf"

// webAction is one page action.
type webAction struct {
	// Pattern is the page route (POST /ui/...).
	Pattern string
	// API is the /api/v1 route pattern the action runs.
	API string
	// request builds the API request path and JSON body from the page
	// request and its form.
	request func(r *http.Request) (path string, body any, err error)
	// landing is the page the browser goes to afterwards (the API's answer
	// in hand) and the message it shows there.
	landing func(r *http.Request, answer []byte) string
	done    string
}

func pesc(s string) string { return url.PathEscape(s) }

func eventPagePath(r *http.Request) string {
	return "/ui/pipelines/" + pesc(r.PathValue("pipeline")) + "/events/" + pesc(r.PathValue("n"))
}

// newEventPage lands on the event an API answer describes, or on its
// pipeline's page when the start was answered pending (admitted, not yet
// numbered: the event shows there once it is).
func newEventPage(_ *http.Request, answer []byte) string {
	var ev struct {
		Pipeline string `json:"pipeline"`
		Number   int    `json:"number"`
	}
	switch {
	case json.Unmarshal(answer, &ev) != nil || ev.Pipeline == "":
		return "/ui/"
	case ev.Number == 0:
		return "/ui/pipelines/" + pesc(ev.Pipeline)
	}
	return fmt.Sprintf("/ui/pipelines/%s/events/%d", pesc(ev.Pipeline), ev.Number)
}

func apiEventPath(r *http.Request, action string) string {
	return "/api/v1/events/" + pesc(r.PathValue("pipeline")) + "/" + pesc(r.PathValue("n")) + "/" + action
}

// webActions is the table of page actions; Routes lists each with its API
// route's policy.
func webActions() []webAction {
	return []webAction{
		personalTokenAction(),
		{
			Pattern: "POST /ui/pipelines/{name}/events", API: "POST /api/v1/pipelines/{name}/events", done: "started",
			request: func(r *http.Request) (string, any, error) {
				req := StartEventRequest{
					Type: "commit", Branch: strings.TrimSpace(r.PostForm.Get("branch")),
					SHA: strings.TrimSpace(r.PostForm.Get("sha")),
				}
				for k, vs := range r.PostForm {
					if name, ok := strings.CutPrefix(k, "param."); ok && len(vs) > 0 {
						if req.Parameters == nil {
							req.Parameters = map[string]string{}
						}
						req.Parameters[name] = vs[0]
					}
				}
				return "/api/v1/pipelines/" + pesc(r.PathValue("name")) + "/events", req, nil
			},
			landing: newEventPage,
		},
		{
			Pattern: "POST /ui/pipelines/{name}/jobs/{job}/schedule/{action}", API: "POST /api/v1/pipelines/{name}/jobs/{job}/schedule/{action}", done: "schedule",
			request: func(r *http.Request) (string, any, error) {
				return "/api/v1/pipelines/" + pesc(r.PathValue("name")) + "/jobs/" + pesc(r.PathValue("job")) + "/schedule/" + pesc(r.PathValue("action")), nil, nil
			},
			landing: func(r *http.Request, _ []byte) string { return "/ui/pipelines/" + pesc(r.PathValue("name")) },
		},
		{
			Pattern: "POST /ui/events/{pipeline}/{n}/cancel", API: "POST /api/v1/events/{pipeline}/{n}/cancel", done: "cancelled",
			request: func(r *http.Request) (string, any, error) { return apiEventPath(r, "cancel"), nil, nil },
			landing: func(r *http.Request, _ []byte) string { return eventPagePath(r) },
		},
		{
			Pattern: "POST /ui/events/{pipeline}/{n}/restart", API: "POST /api/v1/events/{pipeline}/{n}/restart", done: "restarted",
			request: func(r *http.Request) (string, any, error) {
				// No job: the route says so (after its policy check).
				var from JobList
				if job := strings.TrimSpace(r.PostForm.Get("job")); job != "" {
					from = JobList{job}
				}
				return apiEventPath(r, "restart"), RestartEventRequest{From: from}, nil
			},
			landing: newEventPage,
		},
		{
			Pattern: "POST /ui/events/{pipeline}/{n}/rerun", API: "POST /api/v1/events/{pipeline}/{n}/rerun", done: "rerun",
			request: func(r *http.Request) (string, any, error) { return apiEventPath(r, "rerun"), RerunEventRequest{}, nil },
			landing: newEventPage,
		},
		{
			Pattern: "POST /ui/events/{pipeline}/{n}/approve", API: "POST /api/v1/events/{pipeline}/{n}/approve", done: "approved",
			request: func(r *http.Request) (string, any, error) { return apiEventPath(r, "approve"), nil, nil },
			landing: func(r *http.Request, _ []byte) string { return eventPagePath(r) },
		},
		{
			Pattern: "POST /ui/builds/{pipeline}/{job}/{n}/cancel", API: "POST /api/v1/builds/{id}/cancel", done: "cancelled",
			request: func(r *http.Request) (string, any, error) {
				// A bad build ID: the route says so (after its policy check).
				id := r.PathValue("pipeline") + "/" + r.PathValue("job") + "/" + r.PathValue("n")
				return "/api/v1/builds/" + pesc(id) + "/cancel", nil, nil
			},
			landing: func(r *http.Request, _ []byte) string {
				return "/ui/builds/" + pesc(r.PathValue("pipeline")) + "/" + pesc(r.PathValue("job")) + "/" + pesc(r.PathValue("n"))
			},
		},
		{
			Pattern: "POST /ui/executors/{name}/{action}", API: "POST /api/v1/executors/{name}/{action}", done: "executor",
			request: func(r *http.Request) (string, any, error) {
				return "/api/v1/executors/" + pesc(r.PathValue("name")) + "/" + pesc(r.PathValue("action")), nil, nil
			},
			landing: func(r *http.Request, _ []byte) string {
				if q := r.PostForm.Get("queue"); q != "" {
					return "/ui/queues/" + pesc(q)
				}
				return "/ui/"
			},
		},
	}
}

// actionDone are the messages a page shows after an action (?done=<code>):
// it never reflects text a link could choose.
var actionDone = map[string]string{
	"started":   "Event started.",
	"schedule":  "Schedule updated.",
	"cancelled": "Cancel requested: it ends shortly.",
	"restarted": "Restarted: this is the new event.",
	"rerun":     "Failed jobs re-run: this is the new event.",
	"approved":  "Approved: the event runs.",
	"executor":  "Executor state changed.",
	"revoked":   "Token revoked.",
}

// webActionRoutes lists the page actions as routes with the policy of the
// API route each runs.
func (h *handler) webActionRoutes(api []Route) []Route {
	policy := map[string]Policy{}
	for _, rt := range api {
		policy[rt.Pattern] = rt.Policy
	}
	var out []Route
	for _, a := range webActions() {
		p, ok := policy[a.API]
		if !ok {
			panic("page action " + a.Pattern + " runs " + a.API + ", which is not a route")
		}
		out = append(out, Route{Pattern: a.Pattern, Policy: p, Runs: a.API})
	}
	return out
}

// actionRoutes registers the page actions on mux. apiMux serves the API
// routes behind their policies (the same handlers NewHandler serves).
func (wh *webHandler) actionRoutes(mux *http.ServeMux) {
	apiMux := http.NewServeMux()
	for _, rt := range wh.h.routes() {
		apiMux.Handle(rt.Pattern, wh.h.authorize(rt.Policy, rt.Builds, rt.handler))
	}
	wh.apiMux = apiMux
	for _, a := range webActions() {
		mux.Handle(a.Pattern, wh.action(a))
	}
}

// session is the secret the CSRF token derives from: the sign-in cookie,
// or with authentication off the sluice_csrf cookie ("" when absent).
func (wh *webHandler) session(r *http.Request) string {
	if _, cookie, ok := wh.personOf(r); ok {
		return cookie
	}
	name := tokenCookie
	if wh.h.d.Authenticate == nil {
		name = csrfCookie
	}
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}

func csrfToken(session string) string {
	if session == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("sluice page action v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ensureSession gives a visitor without authentication a sluice_csrf
// cookie, and answers the CSRF token of the page's forms.
func (wh *webHandler) ensureSession(w http.ResponseWriter, r *http.Request) string {
	s := wh.session(r)
	if s == "" && wh.h.d.Authenticate == nil {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		s = base64.RawURLEncoding.EncodeToString(b)
		secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
		http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: HttpOnly and SameSite=Strict always; Secure over HTTPS
			Name: csrfCookie, Value: s, Path: "/ui/", HttpOnly: true, Secure: secure,
			SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds()),
		})
	}
	return csrfToken(s)
}

// pageIdentity is who the page's cookie signs in (queue.System() with
// authentication off).
func (wh *webHandler) pageIdentity(r *http.Request) (queue.Identity, error) {
	if wh.h.d.Authenticate == nil {
		return queue.System(), nil
	}
	if id, _, ok := wh.personOf(r); ok {
		return id, nil
	}
	c, err := r.Cookie(tokenCookie)
	if err != nil || c.Value == "" {
		return queue.Identity{}, fmt.Errorf("%w: sign in with an API token", ErrUnauthorized)
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+c.Value)
	id, err := wh.h.d.Authenticate(r2)
	if err != nil {
		return queue.Identity{}, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return id, nil
}

// canDo reports whether the page's user passes the policy of the API route
// apiPattern for the given path values: the same check the route makes.
// memo keeps the answers of one page (several routes share a policy and a
// pipeline: one lookup).
func (wh *webHandler) canDo(r *http.Request, id queue.Identity, memo map[string]bool, apiPattern string, values ...string) bool {
	for _, rt := range wh.h.routes() {
		if rt.Pattern != apiPattern {
			continue
		}
		r2 := r.Clone(r.Context())
		for i := 0; i+1 < len(values); i += 2 {
			r2.SetPathValue(values[i], values[i+1])
		}
		key := rt.Policy.Kind + "\x00" + rt.Policy.Privilege
		if rt.Policy.pipeline != nil {
			name, err := rt.Policy.pipeline(r2)
			if err != nil {
				return false
			}
			key += "\x00" + name
		}
		if ok, seen := memo[key]; seen {
			return ok
		}
		ok := wh.h.allowed(r2, id, rt.Policy) == nil
		memo[key] = ok
		return ok
	}
	return false
}

// sameSite checks Origin (also checked for every request by guarded) and,
// without it, Referer against the request's host.
func sameSite(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		if !sameOrigin(o, r.Host) {
			return fmt.Errorf("%w: Origin %q is not this server", queue.ErrForbidden, o)
		}
		return nil
	}
	if ref := r.Header.Get("Referer"); ref != "" && !sameOrigin(ref, r.Host) {
		return fmt.Errorf("%w: Referer %q is not this server", queue.ErrForbidden, ref)
	}
	return nil
}

// recorder keeps an API route's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rc *recorder) Header() http.Header { return rc.header }
func (rc *recorder) Write(b []byte) (int, error) {
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	return rc.body.Write(b) //nolint:wrapcheck // a buffer
}

func (rc *recorder) WriteHeader(s int) {
	if rc.status == 0 {
		rc.status = s
	}
}

// checkForm reads a page action's form after checking that it comes from
// this site and carries this session's CSRF token; on refusal it has
// answered (false).
func (wh *webHandler) checkForm(w http.ResponseWriter, r *http.Request) bool {
	if err := sameSite(r); err != nil {
		wh.actionError(w, r, http.StatusForbidden, err.Error())
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		wh.actionError(w, r, http.StatusBadRequest, "bad form: "+err.Error())
		return false
	}
	want := csrfToken(wh.session(r))
	if got := r.PostForm.Get(csrfField); want == "" || !hmac.Equal([]byte(got), []byte(want)) {
		wh.actionError(w, r, http.StatusForbidden, "the form's CSRF token is missing or not this session's: reload the page and try again")
		return false
	}
	return true
}

// action serves one page action.
func (wh *webHandler) action(a webAction) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wh.pageIdentity(r)
		if err != nil {
			wh.actionError(w, r, http.StatusUnauthorized, "sign in first: "+err.Error())
			return
		}
		if !wh.checkForm(w, r) {
			return
		}
		path, body, err := a.request(r)
		if err != nil {
			wh.actionError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		raw := []byte("{}")
		if body != nil {
			if raw, err = json.Marshal(body); err != nil {
				wh.actionError(w, r, http.StatusInternalServerError, err.Error())
				return
			}
		}
		ctx := context.WithValue(r.Context(), identityKey{}, id)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(raw))
		if err != nil {
			wh.actionError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		req.Header.Set("Content-Type", "application/json")
		rec := &recorder{header: http.Header{}}
		wh.apiMux.ServeHTTP(rec, req)
		if rec.status >= 300 {
			var eb ErrorBody
			msg := rec.body.String()
			if json.Unmarshal(rec.body.Bytes(), &eb) == nil && eb.Error != "" {
				msg = eb.Error
			}
			wh.actionError(w, r, rec.status, msg)
			return
		}
		to := a.landing(r, rec.body.Bytes())
		sep := "?"
		if strings.Contains(to, "?") {
			sep = "&"
		}
		http.Redirect(w, r, to+sep+"done="+a.done, http.StatusSeeOther)
	})
}

// actionError shows why an action was refused or failed, with the status
// the API route answered.
func (wh *webHandler) actionError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status >= 500 {
		wh.h.log.ErrorContext(r.Context(), "web_action_failed", "path", r.URL.Path, "error", msg)
	}
	wh.render(w, status, "error.html", pageData{
		Title: http.StatusText(status), Auth: wh.h.d.Authenticate != nil,
		Data: map[string]any{"Status": status, "Message": msg},
	})
}

// actionsAllowed names the actions a page shows: those whose API route's
// policy admits the user and that make sense in the thing's state.
func (wh *webHandler) actionsAllowed(r *http.Request, data any) map[string]bool {
	id, err := wh.pageIdentity(r)
	if err != nil {
		return nil
	}
	can := map[string]bool{}
	memo := map[string]bool{}
	switch d := data.(type) {
	case *pipelinePage:
		name := d.Pipeline.Name
		can["start"] = wh.canDo(r, id, memo, "POST /api/v1/pipelines/{name}/events", "name", name)
		can["schedule"] = len(d.Pipeline.Periodic) > 0 &&
			wh.canDo(r, id, memo, "POST /api/v1/pipelines/{name}/jobs/{job}/schedule/{action}", "name", name)
	case *eventPage:
		ev := d.Event
		n := strconv.Itoa(ev.Number)
		final := ev.Status.Final()
		may := func(action string) bool {
			return wh.canDo(r, id, memo, "POST /api/v1/events/{pipeline}/{n}/"+action, "pipeline", ev.Pipeline, "n", n)
		}
		can["cancel"] = !final && may("cancel")
		can["restart"] = final && may("restart")
		failed := false
		for _, j := range ev.Jobs {
			if j.Status == workflows.StatusFailure || j.Status == workflows.StatusAborted || j.Status == workflows.StatusCollapsed {
				failed = true
			}
		}
		can["rerun"] = final && failed && may("rerun")
		can["approve"] = !final && ev.Approval != nil && ev.Approval.ApprovedBy == "" && may("approve")
	case *buildPage:
		can["cancel"] = !d.Build.Status.Final() &&
			wh.canDo(r, id, memo, "POST /api/v1/builds/{id}/cancel", "id", d.Build.ID)
	case *queuePage:
		can["executors"] = wh.canDo(r, id, memo, "POST /api/v1/executors/{name}/{action}", "name", "-", "action", "drain")
	}
	return can
}
