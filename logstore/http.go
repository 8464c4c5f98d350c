package logstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// APIPrefix is the path under which NewHTTPHandler serves logs.
const APIPrefix = "/api/v1/builds/"

// LogMarksHeader carries, on an append, when the writer saw the chunk's
// bytes written: "<offset>@<unix ms>" pairs, comma-separated, absolute
// offsets (FormatMarks). Without it the server stamps the chunk with the
// time it arrives.
const LogMarksHeader = "X-Sluice-Log-Marks"

// maxMarks bounds the marks one append carries.
const maxMarks = 2000

// FormatMarks is the LogMarksHeader value of marks (at most maxMarks).
func FormatMarks(marks []Mark) string {
	var b strings.Builder
	for i, m := range marks[:min(len(marks), maxMarks)] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(m.Offset, 10))
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(m.Time.UnixMilli(), 10))
	}
	return b.String()
}

// ParseMarks reads a LogMarksHeader value; malformed pairs are skipped
// (the bytes matter, their times are a courtesy).
func ParseMarks(v string) []Mark {
	out := []Mark{}
	for pair := range strings.SplitSeq(v, ",") {
		off, ms, ok := strings.Cut(strings.TrimSpace(pair), "@")
		o, err1 := strconv.ParseInt(off, 10, 64)
		t, err2 := strconv.ParseInt(ms, 10, 64)
		if !ok || err1 != nil || err2 != nil || o < 0 || t < 0 || len(out) == maxMarks {
			continue
		}
		out = append(out, Mark{Offset: o, Time: time.UnixMilli(t).UTC()})
	}
	return out
}

// MaxAppendBytes is the largest body one append request may carry.
const MaxAppendBytes = 4 << 20

// AttemptCredentialHeader carries a build attempt's credential: the sluice
// API takes writes to an attempt's logs, and gives out its build's secrets,
// only to the executor that holds it (api: attempt credentials).
const AttemptCredentialHeader = "X-Sluice-Attempt-Credential" //nolint:gosec // G101: a header's name, not a credential

// AppendResult is the JSON answer to an append or finish request.
type AppendResult struct {
	// Size is the log's size after the request.
	Size int64 `json:"size"`
	// Complete is true once the log is finished.
	Complete bool `json:"complete"`
}

// StepList is the JSON answer to a list request.
type StepList struct {
	// Build is the build ID, unescaped.
	Build string `json:"build"`
	// Steps are the build's step logs in creation order.
	Steps []StepInfo `json:"steps"`
}

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	// Error says what went wrong, naming the value at fault.
	Error string `json:"error"`
	// Size is the log's current size on an offset mismatch: the offset to
	// resume from.
	Size *int64 `json:"size,omitempty"`
	// Complete is true when the log is already finished.
	Complete bool `json:"complete,omitempty"`
}

// LogsURL returns the URL of a build's logs below baseURL, or of one step's
// log when step is not empty. The build ID and step name are each escaped
// as a single path segment, so "myapp/test/42" becomes "myapp%2Ftest%2F42".
func LogsURL(baseURL, build, step string) string {
	u := strings.TrimRight(baseURL, "/") + APIPrefix + url.PathEscape(build) + "/logs"
	if step != "" {
		u += "/" + url.PathEscape(step)
	}
	return u
}

// NewHTTPHandler serves the store over HTTP:
//
//	GET  /api/v1/builds/{build}/logs                          → StepList
//	GET  /api/v1/builds/{build}/logs/{step}?offset=&length=   → Chunk
//	POST /api/v1/builds/{build}/logs/{step}?offset=N          body: bytes → AppendResult
//	POST /api/v1/builds/{build}/logs/{step}/finish            → AppendResult
//	GET  /api/v1/builds/{build}/logs/{step}/raw               → the log's bytes (ServeRaw)
//
// {build} and {step} are single path segments, escaped with
// url.PathEscape: slashes in build IDs travel as %2F. The handler splits the
// escaped path (URL.EscapedPath) before unescaping each segment, so it may be
// mounted as is on a mux for APIPrefix, without StripPrefix.
//
// An append is applied only if offset equals the log's size; otherwise the
// answer is 409 with the current size, which makes retried appends
// idempotent. An append may carry the times its bytes were written
// (LogMarksHeader); without it they take the time they arrive. Reads take offset (default 0) and length (default 0: to the
// end, at most MaxReadLength). Every error is JSON ErrorBody: 400 for a bad
// ID or offset, 404 for an unknown log or route, 405 for a wrong method, 409
// for offset mismatches and appends to a complete log, 413 for a body over
// MaxAppendBytes.
func NewHTTPHandler(s *Store) http.Handler {
	return &handler{store: s}
}

type handler struct {
	store *Store
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), APIPrefix)
	if !ok {
		writeError(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no route for %s", r.URL.Path)})
		return
	}
	raw := strings.Split(rest, "/")
	segs := make([]string, len(raw))
	for i, seg := range raw {
		v, err := url.PathUnescape(seg)
		if err != nil {
			writeError(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("bad escaping in path segment %q", seg)})
			return
		}
		segs[i] = v
	}
	switch {
	case len(segs) == 2 && segs[1] == "logs":
		if allow(w, r, http.MethodGet) {
			h.list(w, segs[0]) //nolint:contextcheck // the store's calls bound their own blob store lookups (archiveTimeout)
		}
	case len(segs) == 3 && segs[1] == "logs":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.read(w, r, segs[0], segs[2]) //nolint:contextcheck // as above
		case http.MethodPost:
			h.append(w, r, segs[0], segs[2])
		default:
			methodNotAllowed(w, r, "GET, POST")
		}
	case len(segs) == 4 && segs[1] == "logs" && segs[3] == "raw":
		if allow(w, r, http.MethodGet) {
			if err := ServeRaw(w, r, h.store, segs[0], segs[2], RawName(segs[0], segs[2])); err != nil { //nolint:contextcheck // as above
				writeStoreError(w, err)
			}
		}
	case len(segs) == 4 && segs[1] == "logs" && segs[3] == "finish":
		if allow(w, r, http.MethodPost) {
			h.finish(w, segs[0], segs[2]) //nolint:contextcheck // the archive upload must outlive the request
		}
	default:
		writeError(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no route for %s", r.URL.Path)})
	}
}

func (h *handler) list(w http.ResponseWriter, build string) {
	steps, err := h.store.Steps(build)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StepList{Build: build, Steps: steps})
}

func (h *handler) read(w http.ResponseWriter, r *http.Request, build, step string) {
	q := r.URL.Query()
	offset, err := queryInt(q, "offset", false)
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorBody{Error: err.Error()})
		return
	}
	length, err := queryInt(q, "length", false)
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorBody{Error: err.Error()})
		return
	}
	chunk, err := h.store.Read(build, step, offset, length)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, chunk)
}

func (h *handler) append(w http.ResponseWriter, r *http.Request, build, step string) {
	offset, err := queryInt(r.URL.Query(), "offset", true)
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorBody{Error: err.Error()})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAppendBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, ErrorBody{
				Error: fmt.Sprintf("append body larger than %d bytes", MaxAppendBytes),
			})
			return
		}
		writeError(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("read append body: %v", err)})
		return
	}
	var size int64
	if v, ok := r.Header[LogMarksHeader]; ok {
		size, err = h.store.AppendAtMarked(build, step, offset, body, ParseMarks(strings.Join(v, ",")))
	} else {
		size, err = h.store.AppendAt(build, step, offset, body)
	}
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, AppendResult{Size: size})
}

func (h *handler) finish(w http.ResponseWriter, build, step string) {
	if err := h.store.Finish(build, step); err != nil {
		writeStoreError(w, err)
		return
	}
	info, err := h.store.Stat(build, step)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, AppendResult{Size: info.Size, Complete: info.Complete})
}

// queryInt parses a non-negative integer query parameter.
func queryInt(q url.Values, name string, required bool) (int64, error) {
	v := q.Get(name)
	if v == "" {
		if required {
			return 0, fmt.Errorf("missing %s query parameter", name)
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid %s %q: want a non-negative integer", name, v)
	}
	return n, nil
}

func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	methodNotAllowed(w, r, method)
	return false
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allowed string) {
	w.Header().Set("Allow", allowed)
	writeError(w, http.StatusMethodNotAllowed, ErrorBody{
		Error: fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allowed),
	})
}

// writeStoreError maps a Store error to its HTTP status.
func writeStoreError(w http.ResponseWriter, err error) {
	body := ErrorBody{Error: err.Error()}
	var mismatch *OffsetMismatchError
	switch {
	case errors.As(err, &mismatch):
		body.Size = &mismatch.Size
		writeError(w, http.StatusConflict, body)
	case errors.Is(err, ErrComplete):
		body.Complete = true
		writeError(w, http.StatusConflict, body)
	case errors.Is(err, ErrInvalidID), errors.Is(err, ErrBadOffset):
		writeError(w, http.StatusBadRequest, body)
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, body)
	default:
		writeError(w, http.StatusInternalServerError, body)
	}
}

func writeError(w http.ResponseWriter, status int, body ErrorBody) {
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
