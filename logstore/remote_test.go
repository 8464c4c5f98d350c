package logstore_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/runner"
)

// flaky sits in front of the real handler and misbehaves on the first
// requests, in one of three ways.
type flaky struct {
	next http.Handler

	mu        sync.Mutex
	refuse    int // answered 503 without being applied
	lose      int // applied, but answered 502 as if the answer was lost
	hangup    int // connection closed without any answer, not applied
	requests  int
	misbehave int
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	mode := ""
	switch {
	case f.refuse > 0:
		f.refuse--
		mode = "refuse"
	case f.lose > 0 && r.Method == http.MethodPost:
		f.lose--
		mode = "lose"
	case f.hangup > 0:
		f.hangup--
		mode = "hangup"
	}
	if mode != "" {
		f.misbehave++
	}
	f.mu.Unlock()

	switch mode {
	case "refuse":
		http.Error(w, "try later", http.StatusServiceUnavailable)
	case "lose":
		f.next.ServeHTTP(httptest.NewRecorder(), r)
		http.Error(w, "bad gateway", http.StatusBadGateway)
	case "hangup":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	default:
		f.next.ServeHTTP(w, r)
	}
}

func fastOptions() logstore.RemoteOptions {
	return logstore.RemoteOptions{
		FlushInterval: 10 * time.Millisecond,
		FlushBytes:    64,
		MaxChunk:      100,
		RetryMin:      2 * time.Millisecond,
		RetryMax:      20 * time.Millisecond,
		CloseTimeout:  10 * time.Second,
	}
}

func TestRemoteSinkRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		refuse, lose, hangup int
	}{
		{name: "healthy server"},
		{name: "server refuses the first requests", refuse: 5},
		{name: "answers of the first appends are lost", lose: 6},
		{name: "connections dropped", hangup: 4},
		{name: "everything at once", refuse: 3, lose: 3, hangup: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			f := &flaky{next: logstore.NewHTTPHandler(s), refuse: tt.refuse, lose: tt.lose, hangup: tt.hangup}
			srv := httptest.NewServer(f)
			defer srv.Close()
			const build = "myapp/test/42"
			sink := logstore.NewRemoteSink(srv.URL, build, srv.Client(), fastOptions())

			w, err := sink.Open("unit tests")
			require.NoError(t, err)
			var want bytes.Buffer
			for i := range 300 {
				line := fmt.Sprintf("line %04d %s\n", i, strings.Repeat("=", i%40))
				want.WriteString(line)
				n, err := w.Write([]byte(line))
				require.NoError(t, err)
				require.Equal(t, len(line), n)
				if i%50 == 0 {
					time.Sleep(15 * time.Millisecond) // let some flushes happen mid-stream
				}
			}
			require.NoError(t, w.Close())
			_, err = w.Write([]byte("late"))
			require.ErrorIs(t, err, logstore.ErrClosed)

			got, complete := readAll(t, s, build, "unit tests")
			require.Equal(t, want.String(), got, "no byte lost or duplicated")
			require.True(t, complete)
			f.mu.Lock()
			defer f.mu.Unlock()
			require.Zero(t, f.refuse+f.lose+f.hangup, "every failure was exercised")
		})
	}
}

func TestRemoteSinkWithRunner(t *testing.T) {
	t.Parallel()
	s, srv := setupServer(t)
	const build = "myapp/pr-3/9"
	res := runner.Run(t.Context(), runner.Spec{
		Dir: t.TempDir(),
		Env: []string{"PATH=" + os.Getenv("PATH")},
		Steps: []runner.Step{
			{Name: "count", Command: "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done"},
			{Name: "teardown-bye", Command: "echo bye"},
		},
		Logs: logstore.NewRemoteSink(srv.URL, build, srv.Client(), fastOptions()),
	})
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)

	var want strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	got, complete := readAll(t, s, build, "count")
	require.Equal(t, want.String(), got)
	require.True(t, complete)
	steps, err := s.Steps(build)
	require.NoError(t, err)
	require.Equal(t, []string{"count", "teardown-bye"}, []string{steps[0].Name, steps[1].Name})
}

func TestRemoteSinkCreatesLogAtOpen(t *testing.T) {
	t.Parallel()
	s, srv := setupServer(t)
	w, err := logstore.NewRemoteSink(srv.URL, "b/1", srv.Client(), fastOptions()).Open("slow")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := s.Stat("b/1", "slow")
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "a step that has not printed yet is listed")
	require.NoError(t, w.Close())
	info, err := s.Stat("b/1", "slow")
	require.NoError(t, err)
	require.Equal(t, logstore.StepInfo{Name: "slow", Size: 0, Complete: true}, info)
}

// blocking holds every request until released.
type blocking struct {
	next    http.Handler
	release chan struct{}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	<-b.release
	b.next.ServeHTTP(w, r)
}

var dropMarker = regexp.MustCompile(`\[sluice: (\d+) bytes of log dropped\]\n`)

func TestRemoteSinkDropsBeyondBuffer(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b := &blocking{next: logstore.NewHTTPHandler(s), release: make(chan struct{})}
	srv := httptest.NewServer(b)
	defer srv.Close()
	opts := fastOptions()
	opts.MaxBuffer = 1000
	w, err := logstore.NewRemoteSink(srv.URL, "b", srv.Client(), opts).Open("chatty")
	require.NoError(t, err)

	line := []byte(strings.Repeat("x", 99) + "\n")
	const lines = 100
	start := time.Now()
	for range lines {
		_, err := w.Write(line)
		require.NoError(t, err)
	}
	require.Less(t, time.Since(start), 5*time.Second, "writes never wait for the server")
	close(b.release)
	require.NoError(t, w.Close())

	got, complete := readAll(t, s, "b", "chatty")
	require.True(t, complete)
	m := dropMarker.FindAllStringSubmatchIndex(got, -1)
	require.Len(t, m, 1, "one gap, one marker: %q", got)
	dropped, err := strconv.Atoi(got[m[0][2]:m[0][3]])
	require.NoError(t, err)
	kept := got[:m[0][0]] + got[m[0][1]:]
	require.Equal(t, lines*len(line), len(kept)+dropped, "kept + dropped = written")
	require.LessOrEqual(t, len(kept), opts.MaxBuffer)
	require.True(t, strings.HasSuffix(got, "dropped]\n"))
}

func TestRemoteSinkMarkerResumesOutput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b := &blocking{next: logstore.NewHTTPHandler(s), release: make(chan struct{})}
	srv := httptest.NewServer(b)
	defer srv.Close()
	opts := fastOptions()
	opts.MaxBuffer = 500
	w, err := logstore.NewRemoteSink(srv.URL, "b", srv.Client(), opts).Open("s")
	require.NoError(t, err)

	for range 10 {
		_, _ = w.Write([]byte(strings.Repeat("a", 99) + "\n"))
	}
	close(b.release)
	info := func() logstore.StepInfo {
		i, _ := s.Stat("b", "s")
		return i
	}
	require.Eventually(t, func() bool { return info().Size >= 500 }, 5*time.Second, 5*time.Millisecond)
	_, _ = w.Write([]byte("after the gap\n"))
	require.NoError(t, w.Close())

	got, _ := readAll(t, s, "b", "s")
	require.Equal(t, strings.Repeat(strings.Repeat("a", 99)+"\n", 5)+
		"[sluice: 500 bytes of log dropped]\nafter the gap\n", got)
}

func TestRemoteSinkPermanentFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		build   string
		prepare func(s *logstore.Store)
		wantErr string
	}{
		{
			name:    "invalid build id",
			build:   "../escape",
			wantErr: "server answered 400",
		},
		{
			name:    "log left by an earlier attempt",
			build:   "b/1",
			prepare: func(s *logstore.Store) { _ = s.Append("b/1", "s", []byte("old output\n")) },
			wantErr: "the server already has 11 bytes",
		},
		{
			name:    "log already complete",
			build:   "b/2",
			prepare: func(s *logstore.Store) { _ = s.Finish("b/2", "s") },
			wantErr: "server answered 409",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, srv := setupServer(t)
			if tt.prepare != nil {
				tt.prepare(s)
			}
			w, err := logstore.NewRemoteSink(srv.URL, tt.build, srv.Client(), fastOptions()).Open("s")
			require.NoError(t, err)
			_, err = w.Write([]byte("new output\n"))
			require.NoError(t, err, "writes do not fail before Close")
			err = w.Close()
			require.ErrorContains(t, err, tt.wantErr)
			require.ErrorContains(t, err, "bytes of log not delivered")
		})
	}
}

func TestRemoteSinkGivesUpAfterCloseTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	opts := fastOptions()
	opts.CloseTimeout = 200 * time.Millisecond
	w, err := logstore.NewRemoteSink(srv.URL, "b", srv.Client(), opts).Open("s")
	require.NoError(t, err)
	_, err = io.WriteString(w, "lost\n")
	require.NoError(t, err)

	start := time.Now()
	err = w.Close()
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorContains(t, err, "gave up")
	require.ErrorContains(t, err, "down for maintenance")
	require.ErrorContains(t, err, "5 bytes of log not delivered")
}

func TestRemoteSinkRejectsBadStepNames(t *testing.T) {
	t.Parallel()
	sink := logstore.NewRemoteSink("http://127.0.0.1:1", "b", nil, logstore.RemoteOptions{})
	for _, step := range []string{"", "..", "a/b"} {
		_, err := sink.Open(step)
		require.ErrorIs(t, err, logstore.ErrInvalidID, "step %q", step)
	}
}

// TestRemoteSinkPresentsTheAttemptCredential: every request (the appends
// and the finish) carries the attempt's credential; a server that refuses
// it (403) stops shipping for good.
func TestRemoteSinkPresentsTheAttemptCredential(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Header.Get(logstore.AttemptCredentialHeader)
		mu.Lock()
		seen[c] = true
		mu.Unlock()
		if c != "the-credential" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"log writes need the attempt's credential"}`)
			return
		}
		logstore.NewHTTPHandler(s).ServeHTTP(w, r)
	}))
	defer srv.Close()

	opts := fastOptions()
	opts.Credential = "the-credential"
	w, err := logstore.NewRemoteSink(srv.URL, "myapp/test/42/1", srv.Client(), opts).Open("unit")
	require.NoError(t, err)
	_, err = io.WriteString(w, "shipped\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	got, complete := readAll(t, s, "myapp/test/42/1", "unit")
	require.Equal(t, "shipped\n", got)
	require.True(t, complete)
	mu.Lock()
	require.Equal(t, map[string]bool{"the-credential": true}, seen)
	mu.Unlock()

	w, err = logstore.NewRemoteSink(srv.URL, "myapp/test/42/1", srv.Client(), fastOptions()).Open("other")
	require.NoError(t, err)
	_, err = io.WriteString(w, "refused\n")
	require.NoError(t, err)
	require.ErrorContains(t, w.Close(), "server answered 403: log writes need the attempt's credential")
}
