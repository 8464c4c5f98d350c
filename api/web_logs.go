package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/workflows"
)

// The log viewer on a build page: one section per step that folds, lines
// numbered with the time each was written and an anchor (#L<step>-<line>),
// ANSI colours as CSS classes (web_logs_ansi.go), the last page of each
// step with earlier pages on demand, search across the whole log, the raw
// log to download, and a live follow (log.js) that resumes from the
// offsets it has after a lost connection. Without JavaScript the page
// shows each step's last page and reloads while the build runs.

// logPageBytes is how much of a step one page of lines covers.
const logPageBytes = 256 << 10

// maxLogMatches bounds the lines one search answers.
const maxLogMatches = 200

// webLogPages are the log viewer's routes: reads for any signed-in user
// (cookie), answered 401 otherwise. Routes lists them with that policy.
func (wh *webHandler) webLogPages() []struct {
	pattern string
	handler http.HandlerFunc
} {
	return []struct {
		pattern string
		handler http.HandlerFunc
	}{
		{"GET /ui/builds/{pipeline}/{job}/{n}/log/{step}", wh.logPage},
		{"GET /ui/builds/{pipeline}/{job}/{n}/log/{step}/raw", wh.logRaw},
		{"GET /ui/builds/{pipeline}/{job}/{n}/log-search", wh.logSearch},
		{"GET /ui/builds/{pipeline}/{job}/{n}/log-follow", wh.logFollow},
	}
}

// webLogRoutes lists the log viewer's routes with their policy.
func (h *handler) webLogRoutes() []Route {
	if h.d.Logs == nil {
		return nil
	}
	var out []Route
	for _, p := range (&webHandler{h: h}).webLogPages() {
		out = append(out, Route{Pattern: p.pattern, Policy: authenticated})
	}
	return out
}

// logRoutes registers the log viewer's routes on mux.
func (wh *webHandler) logRoutes(mux *http.ServeMux) {
	for _, p := range wh.webLogPages() {
		mux.Handle(p.pattern, wh.logAuth(p.handler))
	}
}

// logAuth answers 401 to a request without a valid sign-in cookie.
func (wh *webHandler) logAuth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := wh.authorized(r); err != nil {
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		if wh.h.d.Logs == nil {
			writeError(w, http.StatusNotFound, "this server keeps no logs")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		next(w, r)
	})
}

// logLine is one line as the viewer shows it.
type logLine struct {
	N   int64 `json:"n"`
	Off int64 `json:"off"`
	// Time is the time of day it was written (UTC), ISO the full time;
	// both empty for logs written before sluice marked times.
	Time    string     `json:"time,omitempty"`
	ISO     string     `json:"iso,omitempty"`
	Spans   []ansiSpan `json:"spans"`
	Partial bool       `json:"partial,omitempty"`
}

// logPage is a run of lines of one step.
type logPage struct {
	Step string `json:"step"`
	// Index numbers the build's steps from 1, in the order they started.
	Index    int       `json:"index"`
	Start    int64     `json:"start"`
	Next     int64     `json:"next"`
	Size     int64     `json:"size"`
	Complete bool      `json:"complete"`
	Lines    []logLine `json:"lines"`
}

// logStep is one step's section on the build page.
type logStep struct {
	Index    int
	Name     string
	Open     bool
	Outcome  *workflows.StepOutcome
	Duration string
	Page     logPage
}

// logView is the log viewer's part of a build page.
type logView struct {
	// Base is the build's page path; the viewer's routes are below it.
	Base  string
	Final bool
	Steps []logStep
	Error string
}

func toLogPage(index int, step string, pg logstore.LinePage) logPage {
	out := logPage{Step: step, Index: index, Start: pg.Start, Next: pg.Next, Size: pg.Size, Complete: pg.Complete, Lines: make([]logLine, 0, len(pg.Lines))}
	var st ansiState
	for _, l := range pg.Lines {
		ll := logLine{N: l.Number, Off: l.Offset, Spans: ansiLine(l.Text, &st), Partial: l.Partial}
		if ll.Spans == nil {
			ll.Spans = []ansiSpan{}
		}
		if !l.Time.IsZero() {
			ll.Time = l.Time.UTC().Format("15:04:05")
			ll.ISO = l.Time.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		out.Lines = append(out.Lines, ll)
	}
	return out
}

// buildLogView reads the last page of each of the build's step logs.
func (wh *webHandler) buildLogView(b Build) *logView {
	v := &logView{Base: "/ui/builds/" + b.ID, Final: b.Status.Final()}
	if wh.h.d.Logs == nil || b.LogKey == "" {
		return v
	}
	infos, err := wh.h.d.Logs.Steps(b.LogKey)
	if err != nil {
		if !errors.Is(err, logstore.ErrNotFound) {
			v.Error = err.Error()
		}
		return v
	}
	outcomes := map[string]*workflows.StepOutcome{}
	for i := range b.Steps {
		outcomes[b.Steps[i].Name] = &b.Steps[i]
	}
	for i, in := range infos {
		st := logStep{Index: i + 1, Name: in.Name, Outcome: outcomes[in.Name]}
		// Open what a reader looks for: a running or failed step, the
		// last one, a build's only one; finished good steps fold (while
		// the build runs, its outcomes are not known yet: the finished
		// steps before the last went on, so they succeeded).
		last := i == len(infos)-1
		switch o := st.Outcome; {
		case !in.Complete || len(infos) == 1:
			st.Open = true
		case o != nil:
			st.Open = o.ExitCode != 0 && !o.Skipped
		default:
			st.Open = last
		}
		if o := st.Outcome; o != nil && !o.Start.IsZero() && !o.End.IsZero() {
			st.Duration = o.End.Sub(o.Start).Round(time.Millisecond).String()
		}
		pg, err := wh.h.d.Logs.LinesBefore(b.LogKey, in.Name, -1, logPageBytes)
		if err != nil {
			v.Error = err.Error()
			break
		}
		st.Page = toLogPage(i+1, in.Name, pg)
		v.Steps = append(v.Steps, st)
	}
	return v
}

// logBuild resolves the build of a log route.
func (wh *webHandler) logBuild(w http.ResponseWriter, r *http.Request) (Build, bool) {
	ref, err := pageBuildRef(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return Build{}, false
	}
	b, err := wh.h.svc.GetBuild(r.Context(), ref)
	if err != nil {
		wh.h.fail(w, r, err)
		return Build{}, false
	}
	if b.LogKey == "" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("build %s has no log yet", b.ID))
		return Build{}, false
	}
	return b, true
}

// logError answers a log store error with its status.
func logError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, logstore.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, logstore.ErrInvalidID), errors.Is(err, logstore.ErrBadOffset):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// queryOffset parses a non-negative integer query parameter (def when
// absent).
func queryOffset(q url.Values, name string, def int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid("%s %q: want a non-negative integer", name, v)
	}
	return n, nil
}

// logPage answers a page of one step's lines (JSON logPage):
//
//	?before=B   the lines ending before offset B (absent: the end)
//	?from=F     the lines from offset F on
//	?line=N     with before: the lines from line N up to B
//	?bytes=K    the page's size (default 256 KiB, at most 4 MiB)
func (wh *webHandler) logPage(w http.ResponseWriter, r *http.Request) {
	b, ok := wh.logBuild(w, r)
	if !ok {
		return
	}
	step, q := r.PathValue("step"), r.URL.Query()
	size, err := queryOffset(q, "bytes", logPageBytes)
	if err == nil && (size < 1 || size > logstore.MaxPageBytes) {
		err = invalid("bytes %d: want 1 to %d", size, logstore.MaxPageBytes)
	}
	var before, from, line int64
	if err == nil {
		before, err = queryOffset(q, "before", -1)
	}
	if err == nil {
		from, err = queryOffset(q, "from", -1)
	}
	if err == nil {
		line, err = queryOffset(q, "line", 0)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	logs := wh.h.d.Logs
	var pg logstore.LinePage
	switch {
	case from >= 0:
		pg, err = logs.ReadLines(b.LogKey, step, from, size)
	case line > 0:
		var off int64
		if off, err = logs.LineOffset(b.LogKey, step, line); err == nil {
			if before < 0 || off < before {
				size = min(max(size, before-off), logstore.MaxPageBytes)
			}
			pg, err = logs.LinesBefore(b.LogKey, step, before, size)
		}
	default:
		pg, err = logs.LinesBefore(b.LogKey, step, before, size)
	}
	if err != nil {
		logError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toLogPage(0, step, pg))
}

// logRaw downloads one step's log as stored: the bytes the step wrote.
func (wh *webHandler) logRaw(w http.ResponseWriter, r *http.Request) {
	b, ok := wh.logBuild(w, r)
	if !ok {
		return
	}
	step := r.PathValue("step")
	if err := logstore.ServeRaw(w, r, wh.h.d.Logs, b.LogKey, step, logstore.RawName(b.ID, step)); err != nil {
		logError(w, err)
	}
}

// logMatch is one line a search found.
type logMatch struct {
	Index int    `json:"index"`
	Step  string `json:"step"`
	N     int64  `json:"n"`
	Text  string `json:"text"`
}

// logSearchAnswer is GET …/log-search?q=.
type logSearchAnswer struct {
	Query   string     `json:"query"`
	Matches []logMatch `json:"matches"`
	// More is true when the search stopped at maxLogMatches.
	More bool `json:"more"`
}

// logSearch finds the lines of every step log that contain q (as shown:
// escape sequences removed, case ignored).
func (wh *webHandler) logSearch(w http.ResponseWriter, r *http.Request) {
	b, ok := wh.logBuild(w, r)
	if !ok {
		return
	}
	q := r.URL.Query().Get("q")
	if strings.TrimSpace(q) == "" || len(q) > 200 {
		writeError(w, http.StatusBadRequest, "q: want 1 to 200 characters to search for")
		return
	}
	needle := strings.ToLower(q)
	ans := logSearchAnswer{Query: q, Matches: []logMatch{}}
	infos, err := wh.h.d.Logs.Steps(b.LogKey)
	if err != nil && !errors.Is(err, logstore.ErrNotFound) {
		logError(w, err)
		return
	}
	for i, in := range infos {
		for from := int64(0); ; {
			pg, err := wh.h.d.Logs.ReadLines(b.LogKey, in.Name, from, logstore.MaxPageBytes)
			if err != nil {
				logError(w, err)
				return
			}
			for _, l := range pg.Lines {
				text := ansiPlain(l.Text)
				if !strings.Contains(strings.ToLower(text), needle) {
					continue
				}
				if len(ans.Matches) == maxLogMatches {
					ans.More = true
					writeJSON(w, http.StatusOK, ans)
					return
				}
				if len(text) > 300 {
					text = text[:300] + "…"
				}
				ans.Matches = append(ans.Matches, logMatch{Index: i + 1, Step: in.Name, N: l.Number, Text: text})
			}
			if pg.Next <= from {
				break
			}
			from = pg.Next
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

// logFollowAnswer is GET …/log-follow?cursor=: the lines past the cursor
// and the build's status.
type logFollowAnswer struct {
	Status string    `json:"status"`
	Reason string    `json:"reason"`
	Final  bool      `json:"final"`
	Steps  []logPage `json:"steps"`
}

// logFollow answers what each step log gained past the cursor, a JSON
// object of step name → the offset the page has read to (its page's
// Next). A step the cursor lacks comes with its last page. A page that
// lost its connection asks again with the cursor it has, and gets each
// line once.
func (wh *webHandler) logFollow(w http.ResponseWriter, r *http.Request) {
	ref, err := pageBuildRef(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	cursor := map[string]int64{}
	if raw := r.URL.Query().Get("cursor"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &cursor); err != nil {
			writeError(w, http.StatusBadRequest, "cursor: want a JSON object of step → byte offset: "+err.Error())
			return
		}
	}
	b, err := wh.h.svc.GetBuild(r.Context(), ref)
	if err != nil {
		wh.h.fail(w, r, err)
		return
	}
	ans := logFollowAnswer{Status: string(b.Status), Reason: b.Reason, Final: b.Status.Final(), Steps: []logPage{}}
	if b.LogKey != "" {
		infos, err := wh.h.d.Logs.Steps(b.LogKey)
		if err != nil && !errors.Is(err, logstore.ErrNotFound) {
			logError(w, err)
			return
		}
		for i, in := range infos {
			var pg logstore.LinePage
			from, seen := cursor[in.Name]
			switch {
			case !seen:
				pg, err = wh.h.d.Logs.LinesBefore(b.LogKey, in.Name, -1, logPageBytes)
			case from < 0:
				err = invalid("cursor of step %s: offset %d is negative", in.Name, from)
			default:
				pg, err = wh.h.d.Logs.ReadLines(b.LogKey, in.Name, from, logstore.MaxPageBytes)
			}
			if err != nil {
				if errors.Is(err, ErrInvalid) {
					writeError(w, http.StatusBadRequest, err.Error())
					return
				}
				logError(w, err)
				return
			}
			ans.Steps = append(ans.Steps, toLogPage(i+1, in.Name, pg))
		}
	}
	writeJSON(w, http.StatusOK, ans)
}
