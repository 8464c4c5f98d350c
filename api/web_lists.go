package api

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/workflows"
)

// The list pages: the dashboard (the index: each pipeline's last event per
// branch), the build list (/ui/builds) and a pipeline's event list
// (/ui/pipelines/{name}/events), each filtered by its query string (a
// bookmark keeps the filter) and paged by the API's page tokens. They read
// what the API's list routes read (GET /api/v1/builds, GET
// /api/v1/pipelines/{name}/events): any signed-in user; every pipeline is
// readable by every valid token, so none is left out.

// listRoutes adds the list pages to mux.
func (wh *webHandler) listRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/builds", wh.page(wh.buildList))
	mux.HandleFunc("GET /ui/pipelines/{name}/events", wh.page(wh.eventList))
}

// listFuncs are the template functions of the list and detail pages.
func listFuncs() template.FuncMap {
	return template.FuncMap{
		"at":        at,
		"absTime":   absTime,
		"commitURL": func(repo, sha string) string { return repoWebOf(repo).Commit(sha) },
		"prURL":     func(repo string, n int) string { return repoWebOf(repo).PR(n) },
		"firstLine": workflows.FirstLine,
		"stepTime":  stepDuration,
		"pageURL":   pageURL,
		"args":      func(v ...any) []any { return v },
	}
}

// absTime is a time as the pages print it (UTC, to the second).
func absTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// relative is how long ago t was, always relative (ago switches to an
// absolute date after two days).
func relative(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + (-d).Round(time.Second).String()
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d ago"
}

// at shows a time absolutely, with how long ago beside it.
func at(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	return template.HTML(fmt.Sprintf(`<time datetime="%s">%s</time> <span class="ago">(%s)</span>`, //nolint:gosec // G203: fixed formats, no text from outside
		t.UTC().Format(time.RFC3339), absTime(t), relative(t, time.Now())))
}

// stepDuration is how long a step ran ("" when it did not run or runs).
func stepDuration(o workflows.StepOutcome) string {
	if o.Start.IsZero() || o.End.IsZero() {
		return ""
	}
	return o.End.Sub(o.Start).Round(time.Millisecond).String()
}

// pageURL is path with query q, page set to page ("": removed).
func pageURL(path string, q url.Values, page string) string {
	c := url.Values{}
	for k, vs := range q {
		if k == "page" || k == "done" {
			continue
		}
		for _, v := range vs {
			if v != "" {
				c.Add(k, v)
			}
		}
	}
	if page != "" {
		c.Set("page", page)
	}
	if len(c) == 0 {
		return path
	}
	return path + "?" + c.Encode()
}

// ---- the dashboard -------------------------------------------------------

// dashRow is one pipeline on the dashboard: its branches' last events.
type dashRow struct {
	Pipeline Pipeline
	// Branches are the last event of each branch (pull requests left
	// out), the pipeline's own branch first.
	Branches []Event
	// Error says why its events could not be read.
	Error string
}

// dashEvents is how many recent events of each pipeline the dashboard reads.
const dashEvents = 50

// dashboard reads each pipeline's recent events and keeps each branch's
// latest.
func (wh *webHandler) dashboard(ctx context.Context, ps []Pipeline) []dashRow {
	rows := make([]dashRow, len(ps))
	var g errgroup.Group
	g.SetLimit(8)
	for i, p := range ps {
		rows[i].Pipeline = p
		g.Go(func() error {
			evs, _, err := wh.h.svc.ListEventsPage(ctx, p.Name, EventFilter{Limit: dashEvents})
			if err != nil {
				rows[i].Error = err.Error()
				return nil
			}
			rows[i].Branches = lastPerBranch(evs, p.Branch)
			return nil
		})
	}
	_ = g.Wait()
	return rows
}

// lastPerBranch keeps the newest event of each branch (evs newest first),
// pull requests' events left out, the pipeline's branch first.
func lastPerBranch(evs []Event, main string) []Event {
	seen := map[string]bool{}
	var out []Event
	for _, ev := range evs {
		if ev.Trigger.PR > 0 || ev.Trigger.Kind == workflows.TriggerPR || ev.Trigger.Kind == workflows.TriggerPRClosed {
			continue
		}
		b := ev.Trigger.Branch
		if seen[b] {
			continue
		}
		seen[b] = true
		if b == main {
			out = append([]Event{ev}, out...)
			continue
		}
		out = append(out, ev)
	}
	return out
}

// ---- the build list ------------------------------------------------------

type buildListPage struct {
	Q      url.Values
	Builds []Build
	// Next and First are the next page's and the first page's URLs ("":
	// none, or already on the first).
	Next, First string
	Error       string
	Pipelines   []string
	Repos       map[string]string
	Statuses    []workflows.Status
	Causes      []workflows.Cause
	Triggers    []workflows.TriggerKind
}

func (*buildListPage) title() string { return "builds" }

// buildListParams are the build list page's query parameters.
var buildListParams = []string{"pipeline", "job", "status", "branch", "pr", "cause", "executor", "event", "queue", "since", "until", "page", "limit", "done"}

func (wh *webHandler) buildList(r *http.Request) (string, any, error) {
	q := r.URL.Query()
	pg := &buildListPage{Q: q, Statuses: buildStatuses, Causes: workflows.Causes(), Repos: map[string]string{}}
	if ps, err := wh.h.svc.ListPipelines(r.Context()); err == nil {
		for _, p := range ps {
			pg.Pipelines = append(pg.Pipelines, p.Name)
			pg.Repos[p.Name] = p.Repo
		}
	}
	f, err := buildListFilter(q, time.Now())
	if err != nil {
		pg.Error = err.Error()
		return "builds.html", pg, nil
	}
	bs, next, err := wh.h.svc.ListBuildsPage(r.Context(), f)
	if err != nil {
		pg.Error = err.Error()
		return "builds.html", pg, nil
	}
	ptrs := make([]*Build, len(bs))
	for i := range bs {
		ptrs[i] = &bs[i]
	}
	if err := wh.h.svc.liveReasons(r.Context(), ptrs); err != nil {
		wh.h.log.DebugContext(r.Context(), "live_reason_failed", "error", err)
	}
	pg.Builds = bs
	if next != "" {
		pg.Next = pageURL("/ui/builds", q, next)
	}
	if q.Get("page") != "" {
		pg.First = pageURL("/ui/builds", q, "")
	}
	return "builds.html", pg, nil
}

// buildListFilter reads the build list page's query: the API's filters,
// empty fields ignored (a GET form sends every field); a job with a pull
// request is that pull request's job (PR-<n>:<job>).
func buildListFilter(q url.Values, now time.Time) (BuildFilter, error) {
	for key := range q {
		if !slices.Contains(buildListParams, key) {
			return BuildFilter{}, invalid("unknown query parameter %q (want %s)", key, strings.Join(buildListParams[:len(buildListParams)-1], ", "))
		}
	}
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	f := BuildFilter{
		Pipeline: get("pipeline"), Job: get("job"), Event: get("event"), Queue: get("queue"),
		Branch: get("branch"), Executor: get("executor"), Page: get("page"), Limit: 50,
		Status: workflows.Status(strings.ToUpper(get("status"))), Cause: workflows.Cause(strings.ToLower(get("cause"))),
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			return f, invalid("limit %q: want 1 to 1000", v)
		}
		f.Limit = n
	}
	if v := get("pr"); v != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "#"))
		if err != nil || n <= 0 {
			return f, invalid("pr %q: want a pull request number", v)
		}
		f.PR = n
		if f.Job != "" && !strings.HasPrefix(f.Job, "PR-") {
			f.Job = "PR-" + strconv.Itoa(n) + ":" + f.Job
		}
	}
	if f.Event != "" {
		ref, err := workflows.ParseEventRef(f.Event)
		if err != nil {
			return f, invalid("event %q: want <pipeline>/<number>", f.Event)
		}
		f.Event = ref.String()
	}
	var err error
	if f.Since, err = ParseListTime("since", get("since"), now); err != nil {
		return f, err
	}
	if f.Until, err = ParseListTime("until", get("until"), now); err != nil {
		return f, err
	}
	if f.Status != "" && !f.Status.Valid() {
		return f, invalid("status %q: want one of %s", f.Status, statusNames())
	}
	if f.Cause != "" && !f.Cause.Valid() {
		return f, invalid("cause %q: want one of %s", f.Cause, causeNames())
	}
	return f, nil
}

func statusNames() string {
	var names []string
	for _, s := range buildStatuses {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// ---- a pipeline's event list ---------------------------------------------

type eventListPage struct {
	Pipeline Pipeline
	Q        url.Values
	Events   []Event
	Next     string
	First    string
	Error    string
	Triggers []workflows.TriggerKind
}

func (p *eventListPage) title() string { return "events of " + p.Pipeline.Name }

func (wh *webHandler) eventList(r *http.Request) (string, any, error) {
	name := r.PathValue("name")
	p, err := wh.h.svc.ShowPipeline(r.Context(), name)
	if err != nil {
		return "", nil, err
	}
	q := r.URL.Query()
	pg := &eventListPage{Pipeline: p, Q: q, Triggers: triggerKinds}
	path := "/ui/pipelines/" + url.PathEscape(name) + "/events"
	clean := url.Values{}
	for k, vs := range q {
		if k != "done" && len(vs) > 0 && strings.TrimSpace(vs[0]) != "" {
			clean.Set(k, vs[0])
		}
	}
	limit := 50
	if v := clean.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 || limit > 1000 {
			pg.Error = fmt.Sprintf("limit %q: want 1 to 1000", v)
			return "events.html", pg, nil
		}
	}
	f, err := eventQuery(clean, limit)
	if err == nil && f.Trigger != "" && !f.Trigger.Valid() {
		err = invalid("trigger %q: want one of commit, pr, pr-closed, release, tag, manual, periodic, remote", f.Trigger)
	}
	if err != nil {
		pg.Error = err.Error()
		return "events.html", pg, nil
	}
	evs, next, err := wh.h.svc.ListEventsPage(r.Context(), name, f)
	if err != nil {
		pg.Error = err.Error()
		return "events.html", pg, nil
	}
	pg.Events = evs
	if next != "" {
		pg.Next = pageURL(path, q, next)
	}
	if q.Get("page") != "" {
		pg.First = pageURL(path, q, "")
	}
	return "events.html", pg, nil
}

// buildStatuses are the statuses a build can have.
var buildStatuses = []workflows.Status{
	workflows.StatusCreated, workflows.StatusQueued, workflows.StatusBlocked, workflows.StatusFrozen, workflows.StatusRunning,
	workflows.StatusSuccess, workflows.StatusFailure, workflows.StatusAborted, workflows.StatusCollapsed,
}

var triggerKinds = []workflows.TriggerKind{
	workflows.TriggerCommit, workflows.TriggerPR, workflows.TriggerPRClosed, workflows.TriggerTag,
	workflows.TriggerRelease, workflows.TriggerManual, workflows.TriggerPeriodic, workflows.TriggerRemote,
}

// repoOf is the pipeline's repository URL ("" when unknown).
func (wh *webHandler) repoOf(ctx context.Context, name string) string {
	p, _, err := wh.h.svc.getPipeline(ctx, name)
	if err != nil {
		return ""
	}
	return p.Repo
}
