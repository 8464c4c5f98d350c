package api

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// The web pages: server-rendered HTML under /ui/, assets compiled into the
// binary, readable without JavaScript (a build page reloads itself while
// the build runs); with JavaScript the build log grows live.

//go:embed webassets
var webAssets embed.FS

// tokenCookie holds an API token for the pages when authentication is on.
const tokenCookie = "sluice_token" //nolint:gosec // G101: a cookie's name, not a credential

var webTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":      ago,
	"duration": duration,
	"short":    shortSHA,
	"lower":    func(s any) string { return strings.ToLower(fmt.Sprint(s)) },
	"final":    func(s workflows.Status) bool { return s.Final() },
	"pathesc":  url.PathEscape,
	"join":     strings.Join,
	"list":     func(s ...string) []string { return s },
	"eventNumberOf": func(event string) string {
		_, n, _ := strings.Cut(event, "/")
		return n
	},
}).Funcs(listFuncs()).ParseFS(webAssets, "webassets/*.html"))

type webHandler struct {
	h *handler
	// apiMux serves the /api/v1 routes behind their policies for the page
	// actions.
	apiMux *http.ServeMux
}

// webRoutes adds the pages to mux.
func (h *handler) webRoutes(mux *http.ServeMux) {
	wh := &webHandler{h: h}
	static, _ := fs.Sub(webAssets, "webassets/static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", cacheFor(time.Hour, http.FileServerFS(static))))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	mux.HandleFunc("GET /ui/login", wh.loginPage)
	mux.HandleFunc("POST /ui/login", wh.login)
	mux.HandleFunc("POST /ui/logout", wh.logout)
	mux.HandleFunc("GET /ui/oidc/login", wh.oidcLogin)
	mux.HandleFunc("GET /ui/oidc/callback", wh.oidcCallback)
	mux.HandleFunc("GET /ui/tokens", wh.page(wh.tokens))
	mux.HandleFunc("POST /ui/tokens", wh.mintToken)
	mux.HandleFunc("GET /ui/{$}", wh.page(wh.index))
	mux.HandleFunc("GET /ui/pipelines/{name}", wh.page(wh.pipeline))
	mux.HandleFunc("GET /ui/pipelines/{name}/events/{n}", wh.page(wh.event))
	mux.HandleFunc("GET /ui/builds/{pipeline}/{job}/{n}", wh.page(wh.build))
	mux.HandleFunc("GET /ui/builds/{pipeline}/{job}/{n}/artifacts/{path...}", wh.artifact)
	mux.HandleFunc("GET /ui/queues/{name}", wh.page(wh.queue))
	mux.HandleFunc("GET /ui/audit", wh.auditPage)
	wh.listRoutes(mux)
	wh.actionRoutes(mux)
	wh.logRoutes(mux)
	mux.HandleFunc("/ui/", wh.page(func(r *http.Request) (string, any, error) {
		return "", nil, fmt.Errorf("%w: no page at %s", ErrNotFound, r.URL.Path)
	}))
}

func cacheFor(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("max-age=%d", int(d.Seconds())))
		next.ServeHTTP(w, r)
	})
}

// authorized checks the page's token cookie when authentication is on.
func (wh *webHandler) authorized(r *http.Request) error {
	if wh.h.d.Authenticate == nil {
		return nil
	}
	if _, _, ok := wh.personOf(r); ok {
		return nil
	}
	c, err := r.Cookie(tokenCookie)
	if err != nil || c.Value == "" {
		return fmt.Errorf("%w: sign in with an API token", ErrUnauthorized)
	}
	_, err = wh.checkToken(r, c.Value)
	return err
}

// checkToken authenticates token as if it came in an Authorization header.
func (wh *webHandler) checkToken(r *http.Request, token string) (string, error) {
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+token)
	id, err := wh.h.d.Authenticate(r2)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return id.User, nil
}

// pageData is what every page template gets.
type pageData struct {
	Title string
	// Auth is true when the pages need a token (a sign-out button shows).
	Auth bool
	Data any
	// Refresh reloads the page after this many seconds (0: never).
	Refresh int
	// UI is the Temporal Web UI's workflows URL ("" when unknown).
	UI string
	// CSRF is the token every action form sends.
	CSRF string
	// Can names the actions the user may take on this page (the policy of
	// each action's API route admits them).
	Can map[string]bool
	// Done is the message of the action that led here.
	Done string
	// Person is the person signed in with OIDC ("" otherwise).
	Person string
}

// page wraps a page function: authentication, errors as HTML pages.
func (wh *webHandler) page(fn func(r *http.Request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := wh.authorized(r); err != nil {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		name, data, err := fn(r)
		if err != nil {
			wh.errorPage(w, r, err)
			return
		}
		pd := pageData{Auth: wh.h.d.Authenticate != nil, Data: data, UI: wh.uiURL(), Done: actionDone[r.URL.Query().Get("done")]}
		pd.CSRF = wh.ensureSession(w, r)
		pd.Can = wh.actionsAllowed(r, data)
		pd.Person = wh.personName(r)
		switch d := data.(type) {
		case *buildPage:
			pd.Title = "build " + d.Build.ID
			if !d.Build.Status.Final() {
				pd.Refresh = 10
			}
		case *eventPage:
			pd.Title = "event " + d.Event.ID
			if !d.Event.Status.Final() {
				pd.Refresh = 5
			}
		case *pipelinePage:
			pd.Title = "pipeline " + d.Pipeline.Name
		case *queuePage:
			pd.Title = "queue " + d.Queue.Name
			pd.Refresh = 10
		case *auditPage:
			pd.Title = "audit trail"
		case interface{ title() string }:
			pd.Title = d.title()
		case *tokensPage:
			pd.Title = "personal tokens"
		default:
			pd.Title = "sluice"
		}
		wh.render(w, http.StatusOK, name, pd)
	}
}

func (wh *webHandler) uiURL() string {
	if wh.h.d.TemporalUI == "" {
		return ""
	}
	return strings.TrimRight(wh.h.d.TemporalUI, "/") + "/namespaces/" + url.PathEscape(wh.h.svc.Namespace) + "/workflows/"
}

func (wh *webHandler) render(w http.ResponseWriter, status int, name string, pd pageData) {
	var buf strings.Builder
	if err := webTemplates.ExecuteTemplate(&buf, name, pd); err != nil {
		wh.h.log.Error("web_template_failed", "template", name, "error", err)
		http.Error(w, "internal error rendering "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// errorPage shows err with the status the JSON API would answer.
func (wh *webHandler) errorPage(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, workflows.ErrBadID):
		status = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	}
	if status == http.StatusInternalServerError {
		wh.h.log.ErrorContext(r.Context(), "web_error", "path", r.URL.Path, "error", err)
	}
	wh.render(w, status, "error.html", pageData{
		Title: http.StatusText(status), Auth: wh.h.d.Authenticate != nil,
		Data: map[string]any{"Status": status, "Message": err.Error()},
	})
}

// ---- sign-in ------------------------------------------------------------

func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/ui/"
	}
	return next
}

// loginErrors are the only messages the sign-in page shows from its URL
// (?error=<code>): it never reflects text a link could choose.
var loginErrors = map[string]string{
	"expired": "your session ended: sign in again",
	"invalid": "that token is not valid",
}

func (wh *webHandler) loginPage(w http.ResponseWriter, r *http.Request) {
	wh.render(w, http.StatusOK, "login.html", pageData{Title: "sign in", Data: wh.loginData(safeNext(r.URL.Query().Get("next")), loginErrors[r.URL.Query().Get("error")])})
}

func (wh *webHandler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	token := strings.TrimSpace(r.PostForm.Get("token"))
	fail := func(msg string) {
		wh.render(w, http.StatusUnauthorized, "login.html", pageData{Title: "sign in", Data: wh.loginData(next, msg)})
	}
	if wh.h.d.Authenticate == nil {
		http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // G710: safeNext keeps only paths under /ui/
		return
	}
	if token == "" {
		fail("enter an API token")
		return
	}
	user, err := wh.checkToken(r, token)
	if err != nil {
		fail("that token is not valid")
		return
	}
	wh.signedIn(r, queue.Identity{User: user}, "api-token")
	// Secure whenever the page was reached over HTTPS (directly or through a
	// proxy that says so); plain HTTP stays possible for localhost.
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: HttpOnly and SameSite=Strict always; Secure over HTTPS (above)
		Name: tokenCookie, Value: token, Path: "/ui/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds()),
	})
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // G710: safeNext keeps only paths under /ui/
}

func (wh *webHandler) logout(w http.ResponseWriter, r *http.Request) {
	endSession(w, r)
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: clears the cookie
		Name: tokenCookie, Value: "", Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1,
	})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// ---- pages --------------------------------------------------------------

type indexPage struct {
	Pipelines []Pipeline
	Queues    []Queue
	// Dashboard is each pipeline's last event per branch (web_lists.go).
	Dashboard []dashRow
}

func (wh *webHandler) index(r *http.Request) (string, any, error) {
	ps, err := wh.h.svc.ListPipelines(r.Context())
	if err != nil {
		return "", nil, err
	}
	qs, err := wh.h.svc.ListQueues(r.Context())
	if err != nil {
		return "", nil, err
	}
	return "index.html", &indexPage{Pipelines: ps, Queues: qs, Dashboard: wh.dashboard(r.Context(), ps)}, nil
}

type pipelinePage struct {
	Pipeline Pipeline
	Events   []Event
	// Schedules account for each periodic job's latest due times.
	Schedules []ScheduleView
	// ScheduleErrors say why a periodic job's due times could not be read.
	ScheduleErrors []string
}

func (wh *webHandler) pipeline(r *http.Request) (string, any, error) {
	name := r.PathValue("name")
	p, err := wh.h.svc.ShowPipeline(r.Context(), name)
	if err != nil {
		return "", nil, err
	}
	evs, err := wh.h.svc.ListEvents(r.Context(), name, 50)
	if err != nil {
		return "", nil, err
	}
	pg := &pipelinePage{Pipeline: p, Events: evs}
	jobs := make([]string, 0, len(p.Periodic))
	for j := range p.Periodic {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		v, err := wh.h.svc.Schedule(r.Context(), name, j)
		if err != nil {
			pg.ScheduleErrors = append(pg.ScheduleErrors, fmt.Sprintf("job %s: %v", j, err))
			continue
		}
		pg.Schedules = append(pg.Schedules, v)
	}
	return "pipeline.html", pg, nil
}

type eventPage struct {
	Event Event
	// Repo is the pipeline's repository (links to commits and PRs).
	Repo  string
	Graph template.HTML
	// GraphError says why the graph could not be drawn.
	GraphError string
	Jobs       []eventJob
}

type eventJob struct {
	Name   string
	Status workflows.Status
	Reason string
	Builds []Build
}

func eventNumber(r *http.Request) (workflows.EventRef, error) {
	return workflows.ParseEventRef(r.PathValue("name") + "/" + r.PathValue("n"))
}

func (wh *webHandler) event(r *http.Request) (string, any, error) {
	ref, err := eventNumber(r)
	if err != nil {
		return "", nil, err
	}
	ev, err := wh.h.svc.GetEvent(r.Context(), ref)
	if err != nil {
		return "", nil, err
	}
	pg := &eventPage{Event: ev, Repo: wh.repoOf(r.Context(), ref.Pipeline)}
	byJob := map[string][]Build{}
	for _, b := range ev.Builds {
		byJob[b.Job] = append(byJob[b.Job], b)
	}
	for _, j := range ev.Jobs {
		st, why := jobShown(j.Status, j.Reason, byJob[j.Job])
		pg.Jobs = append(pg.Jobs, eventJob{Name: j.Job, Status: st, Reason: why, Builds: byJob[j.Job]})
	}
	spec, err := wh.specOf(r.Context(), ref.Pipeline, ev.SHA)
	if err != nil {
		pg.GraphError = err.Error()
	} else {
		pg.Graph = eventGraph(spec, ev)
	}
	return "event.html", pg, nil
}

// specOf reads and parses the pipeline's spec at sha.
func (wh *webHandler) specOf(ctx context.Context, name, sha string) (*pipeline.Spec, error) {
	if sha == "" {
		return nil, errors.New("the event has no commit yet")
	}
	p, location, err := wh.h.svc.getPipeline(ctx, name)
	if err != nil {
		return nil, err
	}
	repo, err := wh.h.svc.openPipelineRepo(ctx, name, location)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.Repo, err)
	}
	data, err := repo.ReadFile(ctx, sha, activities.SpecFile)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", activities.SpecFile, shortSHA(sha), err)
	}
	return pipeline.ParseWithOptions(data, pipeline.Options{Pipeline: name})
}

type buildPage struct {
	Build Build
	// Repo is the pipeline's repository (links to commits and PRs).
	Repo string
	// Meta is the build's metadata, indented JSON ("": none to show).
	Meta string
	// Artifacts are the files the build uploaded (nil: none, or no blob
	// store); ArtifactsError says why they could not be listed.
	Artifacts      []Artifact
	ArtifactsError string
	// Log is the log viewer (web_logs.go).
	Log *logView
}

func pageBuildRef(r *http.Request) (workflows.BuildRef, error) {
	return workflows.ParseBuildRef(r.PathValue("pipeline") + "/" + r.PathValue("job") + "/" + r.PathValue("n"))
}

func (wh *webHandler) build(r *http.Request) (string, any, error) {
	ref, err := pageBuildRef(r)
	if err != nil {
		return "", nil, err
	}
	b, err := wh.h.svc.GetBuild(r.Context(), ref)
	if err != nil {
		return "", nil, err
	}
	pg := &buildPage{Build: b, Repo: wh.repoOf(r.Context(), ref.Pipeline)}
	if wh.h.svc.Meta != nil {
		if m, err := wh.h.svc.metaOf(r.Context(), b); err == nil {
			var buf bytes.Buffer
			if json.Indent(&buf, m.Meta, "", "  ") == nil {
				pg.Meta = buf.String()
			}
		}
	}
	if wh.h.d.Blobs != nil {
		list, err := ListArtifacts(r.Context(), wh.h.d.Blobs, b.ID)
		if err != nil {
			pg.ArtifactsError = err.Error()
		}
		pg.Artifacts = list.Artifacts
	}
	pg.Log = wh.buildLogView(b)
	return "build.html", pg, nil
}

// artifact downloads a build's artifact for a signed-in reader.
func (wh *webHandler) artifact(w http.ResponseWriter, r *http.Request) {
	if err := wh.authorized(r); err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	ref, err := pageBuildRef(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	wh.h.serveArtifact(w, r, ref.String(), r.PathValue("path"))
}

type queuePage struct {
	Queue   QueueStatus
	Waiting []Build
	Running []Build
}

func (wh *webHandler) queue(r *http.Request) (string, any, error) {
	name := r.PathValue("name")
	qs, err := wh.h.svc.QueueStatus(r.Context(), name)
	if err != nil {
		return "", nil, err
	}
	pg := &queuePage{Queue: qs}
	for _, st := range []workflows.Status{workflows.StatusQueued, workflows.StatusBlocked, workflows.StatusFrozen, workflows.StatusRunning} {
		bs, err := wh.h.svc.ListBuilds(r.Context(), BuildFilter{Queue: name, Status: st, Limit: 200})
		if err != nil {
			return "", nil, err
		}
		if st == workflows.StatusRunning {
			pg.Running = bs
		} else {
			pg.Waiting = append(pg.Waiting, bs...)
		}
	}
	sort.SliceStable(pg.Waiting, func(i, j int) bool { return pg.Waiting[i].CreateTime.Before(pg.Waiting[j].CreateTime) })
	ptrs := make([]*Build, len(pg.Waiting))
	for i := range pg.Waiting {
		ptrs[i] = &pg.Waiting[i]
	}
	if err := wh.h.svc.liveReasons(r.Context(), ptrs); err != nil {
		wh.h.log.DebugContext(r.Context(), "live_reason_failed", "queue", name, "error", err)
	}
	return "queue.html", pg, nil
}

// ---- helpers ------------------------------------------------------------

func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func duration(from, to time.Time) string {
	if from.IsZero() {
		return "—"
	}
	if to.IsZero() {
		to = time.Now()
	}
	return to.Sub(from).Round(time.Second).String()
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
