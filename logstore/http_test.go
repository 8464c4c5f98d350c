package logstore_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/logstore"
)

// setupServer serves a fresh store over real HTTP.
func setupServer(t *testing.T) (*logstore.Store, *httptest.Server) {
	t.Helper()
	s := setup(t)
	srv := httptest.NewServer(logstore.NewHTTPHandler(s))
	t.Cleanup(srv.Close)
	return s, srv
}

func do(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body %s", raw)
	return resp.StatusCode, out
}

func TestLogsURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "http://h/api/v1/builds/myapp%2Ftest%2F42/logs",
		logstore.LogsURL("http://h/", "myapp/test/42", ""))
	require.Equal(t, "http://h/api/v1/builds/myapp%2Ftest%2F42/logs/unit%20tests",
		logstore.LogsURL("http://h", "myapp/test/42", "unit tests"))
}

func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	s, srv := setupServer(t)
	require.NoError(t, s.Append("myapp/test/42", "build", []byte("hello world\n")))
	require.NoError(t, s.Append("myapp/test/42", "done step", []byte("ok\n")))
	require.NoError(t, s.Finish("myapp/test/42", "done step"))
	build := srv.URL + "/api/v1/builds/myapp%2Ftest%2F42/logs"

	tests := []struct {
		name       string
		method     string
		url        string
		body       string
		wantStatus int
		want       map[string]any // expected fields of the JSON answer
		wantError  string         // substring of "error"
	}{
		{
			name: "list steps", method: http.MethodGet, url: build, wantStatus: http.StatusOK,
			want: map[string]any{"build": "myapp/test/42", "steps": []any{
				map[string]any{"name": "build", "size": 12.0, "complete": false},
				map[string]any{"name": "done step", "size": 3.0, "complete": true},
			}},
		},
		{
			name: "read chunk", method: http.MethodGet, url: build + "/build?offset=6&length=5", wantStatus: http.StatusOK,
			// "world" in base64
			want: map[string]any{"offset": 6.0, "data": "d29ybGQ=", "next_offset": 11.0, "size": 12.0, "complete": false},
		},
		{
			name: "read defaults to whole log", method: http.MethodGet, url: build + "/done%20step", wantStatus: http.StatusOK,
			want: map[string]any{"offset": 0.0, "data": "b2sK", "next_offset": 3.0, "complete": true},
		},
		{
			name: "read at end", method: http.MethodGet, url: build + "/build?offset=12", wantStatus: http.StatusOK,
			want: map[string]any{"data": "", "next_offset": 12.0},
		},
		{
			name: "read beyond end", method: http.MethodGet, url: build + "/build?offset=99", wantStatus: http.StatusBadRequest,
			wantError: "offset 99 is beyond the end of the log (size 12)",
		},
		{
			name: "bad read offset", method: http.MethodGet, url: build + "/build?offset=abc", wantStatus: http.StatusBadRequest,
			wantError: `invalid offset "abc": want a non-negative integer`,
		},
		{
			name: "bad length", method: http.MethodGet, url: build + "/build?length=-3", wantStatus: http.StatusBadRequest,
			wantError: `invalid length "-3"`,
		},
		{
			name: "unknown step", method: http.MethodGet, url: build + "/nope", wantStatus: http.StatusNotFound,
			wantError: "myapp/test/42/nope",
		},
		{
			name: "unknown build", method: http.MethodGet, url: srv.URL + "/api/v1/builds/other%2F1/logs", wantStatus: http.StatusNotFound,
			wantError: "other/1",
		},
		{
			name: "traversal rejected", method: http.MethodGet, url: srv.URL + "/api/v1/builds/..%2F..%2Fetc/logs", wantStatus: http.StatusBadRequest,
			wantError: `build id "../../etc"`,
		},
		{
			name: "append at size", method: http.MethodPost, url: build + "/build?offset=12", body: "more\n", wantStatus: http.StatusOK,
			want: map[string]any{"size": 17.0},
		},
		{
			name: "append creates a step", method: http.MethodPost, url: build + "/new?offset=0", body: "", wantStatus: http.StatusOK,
			want: map[string]any{"size": 0.0},
		},
		{
			name: "append to a complete log", method: http.MethodPost, url: build + "/done%20step?offset=0", body: "x",
			wantStatus: http.StatusConflict, wantError: "complete",
		},
		{
			name: "append without offset", method: http.MethodPost, url: build + "/build", body: "x", wantStatus: http.StatusBadRequest,
			wantError: "missing offset query parameter",
		},
		{
			name: "append bad offset", method: http.MethodPost, url: build + "/build?offset=-1", body: "x", wantStatus: http.StatusBadRequest,
			wantError: `invalid offset "-1"`,
		},
		{
			name: "finish", method: http.MethodPost, url: build + "/fin/finish", wantStatus: http.StatusOK,
			want: map[string]any{"size": 0.0, "complete": true},
		},
		{
			name: "wrong method", method: http.MethodDelete, url: build + "/build", wantStatus: http.StatusMethodNotAllowed,
			wantError: "method DELETE not allowed",
		},
		{
			name: "finish with GET", method: http.MethodGet, url: build + "/build/finish", wantStatus: http.StatusMethodNotAllowed,
			wantError: "allowed: POST",
		},
		{
			name: "unknown route", method: http.MethodGet, url: srv.URL + "/api/v1/builds/x/other", wantStatus: http.StatusNotFound,
			wantError: "no route",
		},
	}
	// The cases share one store and run in order (no t.Parallel): the
	// appends come after the reads that expect the original sizes.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := do(t, tt.method, tt.url, tt.body)
			require.Equal(t, tt.wantStatus, status, "answer %v", got)
			for k, v := range tt.want {
				require.Equal(t, v, got[k], "field %s", k)
			}
			if tt.wantError != "" {
				require.Contains(t, got["error"], tt.wantError)
			}
		})
	}
}

func TestHTTPAppendMismatchResync(t *testing.T) {
	t.Parallel()
	s, srv := setupServer(t)
	url := logstore.LogsURL(srv.URL, "a/b/1", "step")

	status, got := do(t, http.MethodPost, url+"?offset=0", "abc")
	require.Equal(t, http.StatusOK, status)
	require.InDelta(t, 3.0, got["size"], 0)

	// A retry of the same chunk (its answer was lost) is refused with the
	// current size instead of being stored twice.
	status, got = do(t, http.MethodPost, url+"?offset=0", "abc")
	require.Equal(t, http.StatusConflict, status)
	require.InDelta(t, 3.0, got["size"], 0)
	require.Contains(t, got["error"], "offset 0 does not match the size 3")

	status, _ = do(t, http.MethodPost, url+"?offset=3", "def")
	require.Equal(t, http.StatusOK, status)
	text, _ := readAll(t, s, "a/b/1", "step")
	require.Equal(t, "abcdef", text)
}

func TestHTTPAppendTooLarge(t *testing.T) {
	t.Parallel()
	_, srv := setupServer(t)
	status, got := do(t, http.MethodPost, logstore.LogsURL(srv.URL, "b", "s")+"?offset=0",
		strings.Repeat("x", logstore.MaxAppendBytes+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Contains(t, got["error"], "larger than")
}
