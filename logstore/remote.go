package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-ci/sluice/runner"
)

// ErrClosed is returned by writes to a step log writer after Close.
var ErrClosed = errors.New("logstore: log writer closed")

// Defaults of RemoteOptions.
const (
	DefaultFlushInterval  = 500 * time.Millisecond
	DefaultFlushBytes     = 64 << 10
	DefaultMaxBuffer      = 8 << 20
	DefaultMaxChunk       = 1 << 20
	DefaultRetryMin       = 100 * time.Millisecond
	DefaultRetryMax       = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultCloseTimeout   = 30 * time.Second
)

// RemoteOptions tune NewRemoteSink; zero fields take the defaults above.
type RemoteOptions struct {
	// FlushInterval is the longest buffered output waits before it is sent.
	FlushInterval time.Duration
	// FlushBytes sends at once when this much output is buffered.
	FlushBytes int
	// MaxBuffer bounds the output buffered per step while the server is
	// slow or unreachable; output beyond it is dropped (see NewRemoteSink).
	MaxBuffer int
	// MaxChunk is the most bytes sent in one request (at most
	// MaxAppendBytes).
	MaxChunk int
	// RetryMin and RetryMax bound the exponential backoff between retries.
	RetryMin, RetryMax time.Duration
	// RequestTimeout bounds each HTTP request.
	RequestTimeout time.Duration
	// CloseTimeout bounds how long Close keeps trying to deliver what is
	// left; after it the rest is lost and Close returns an error.
	CloseTimeout time.Duration
	// Logger receives retry and failure reports; nil discards them.
	Logger *slog.Logger
	// Credential is the build attempt's credential, sent with every
	// request in the AttemptCredentialHeader: the API takes writes to an
	// attempt's logs only from the executor that holds it.
	Credential string
	// Now is the clock each write's time is read from (marks, sent in
	// LogMarksHeader); nil is time.Now.
	Now func() time.Time
}

func (o RemoteOptions) withDefaults() RemoteOptions {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.FlushInterval, DefaultFlushInterval)
	defInt(&o.FlushBytes, DefaultFlushBytes)
	defInt(&o.MaxBuffer, DefaultMaxBuffer)
	defInt(&o.MaxChunk, DefaultMaxChunk)
	o.MaxChunk = min(o.MaxChunk, MaxAppendBytes)
	def(&o.RetryMin, DefaultRetryMin)
	def(&o.RetryMax, DefaultRetryMax)
	o.RetryMax = max(o.RetryMax, o.RetryMin)
	def(&o.RequestTimeout, DefaultRequestTimeout)
	def(&o.CloseTimeout, DefaultCloseTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// NewRemoteSink returns a runner.LogSink for an executor on another machine:
// each step's output is buffered and shipped to the NewHTTPHandler served at
// baseURL, as `POST {baseURL}/api/v1/builds/{build}/logs/{step}?offset=N`
// chunks followed by a final `POST .../finish` when the step's writer is
// closed. A nil client means http.DefaultClient.
//
// Output is sent every FlushInterval (500 ms) or as soon as FlushBytes
// (64 KiB) are buffered. Each chunk names the offset it starts at and the
// server appends it only at that offset, so a chunk retried after a lost
// answer is never stored twice: the 409 answer gives the server's size and
// the writer skips what the server already has. Network errors and 5xx or
// 429 answers are retried with exponential backoff (RetryMin to RetryMax,
// jittered) for as long as the step runs and CloseTimeout after it.
//
// Writes never block on the network. While the server is slow or down at
// most MaxBuffer (8 MiB) of output waits per step; output that does not fit
// is dropped, and once the buffer has drained below half of MaxBuffer (or at
// Close) a line "[sluice: N bytes of log dropped]" marks the gap, N counting
// the bytes lost there.
//
// A permanent failure (another 4xx answer, a log already complete, a server
// log that does not continue this writer's) stops shipping for that step;
// later output is discarded and Close returns the error.
func NewRemoteSink(baseURL, build string, client *http.Client, opts RemoteOptions) runner.LogSink {
	if client == nil {
		client = http.DefaultClient
	}
	return &remoteSink{base: baseURL, build: build, client: client, opts: opts.withDefaults()}
}

type remoteSink struct {
	base, build string
	client      *http.Client
	opts        RemoteOptions
}

// Open implements runner.LogSink: it starts the step's shipper, which
// creates the (empty) log on the server at once.
func (s *remoteSink) Open(step string) (io.WriteCloser, error) {
	if err := checkStep(step); err != nil {
		return nil, fmt.Errorf("open remote step log: %w", err)
	}
	// The shipper's lifetime is the writer's, not a caller's request: logs
	// of teardown steps must still ship after the build was cancelled. Close
	// bounds it (CloseTimeout).
	ctx, cancel := context.WithCancel(context.Background())
	w := &remoteWriter{
		sink:   s,
		step:   step,
		url:    LogsURL(s.base, s.build, step),
		log:    s.opts.Logger.With("build", s.build, "step", step),
		ctx:    ctx,
		cancel: cancel,
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	go w.loop()
	return w, nil
}

// remoteWriter buffers one step's output and ships it.
type remoteWriter struct {
	sink   *remoteSink
	step   string
	url    string
	log    *slog.Logger
	ctx    context.Context //nolint:containedctx // the shipper goroutine's lifetime, see Open
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	buf      bytes.Buffer // output not yet acknowledged, starting at offset acked
	acked    int64        // the server's size, as far as this writer knows
	created  bool         // the server acknowledged the log once
	dropped  int64        // bytes dropped since the last marker
	lastByte byte         // last byte buffered, to start the marker on a new line
	closed   bool
	failed   error
	// marks are the times of the writes not yet acknowledged (absolute
	// offsets), one per millisecond at most.
	marks  []Mark
	lastMs int64

	closeOnce sync.Once
	closeErr  error
}

// Write buffers p for shipping; it never blocks on the network and never
// fails before Close.
func (w *remoteWriter) Write(p []byte) (int, error) {
	opts := &w.sink.opts
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, fmt.Errorf("write step log %s: %w", w.step, ErrClosed)
	}
	if w.failed != nil || len(p) == 0 {
		return len(p), nil
	}
	if w.dropped > 0 {
		if w.buf.Len() > opts.MaxBuffer/2 {
			w.dropped += int64(len(p))
			return len(p), nil
		}
		w.writeMarker()
	}
	keep := min(len(p), max(opts.MaxBuffer-w.buf.Len(), 0))
	if keep > 0 {
		if now := opts.Now(); now.UnixMilli() != w.lastMs {
			w.marks = append(w.marks, Mark{Offset: w.acked + int64(w.buf.Len()), Time: now})
			w.lastMs = now.UnixMilli()
		}
	}
	w.buf.Write(p[:keep])
	if keep > 0 {
		w.lastByte = p[keep-1]
	}
	w.dropped += int64(len(p) - keep)
	if w.buf.Len() >= opts.FlushBytes {
		w.wake()
	}
	return len(p), nil
}

// writeMarker records the bytes dropped so far; w.mu is held.
func (w *remoteWriter) writeMarker() {
	if w.lastByte != '\n' && (w.buf.Len() > 0 || w.acked > 0) {
		w.buf.WriteByte('\n')
	}
	fmt.Fprintf(&w.buf, "[sluice: %d bytes of log dropped]\n", w.dropped)
	w.lastByte = '\n'
	w.dropped = 0
}

func (w *remoteWriter) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Close ships what is buffered, marks the step log complete on the server
// and stops the shipper. It waits at most CloseTimeout for a server that
// does not answer, and reports output that could not be delivered.
func (w *remoteWriter) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		if w.dropped > 0 && w.failed == nil {
			w.writeMarker()
		}
		w.closed = true
		w.mu.Unlock()
		w.wake()

		timer := time.AfterFunc(w.sink.opts.CloseTimeout, w.cancel)
		<-w.done
		timer.Stop()
		w.cancel()

		w.mu.Lock()
		w.closeErr = w.failed
		w.mu.Unlock()
	})
	return w.closeErr
}

// loop ships buffered output until the writer is closed and drained, then
// finishes the log; it stops early on a permanent failure.
func (w *remoteWriter) loop() {
	defer close(w.done)
	ticker := time.NewTicker(w.sink.opts.FlushInterval)
	defer ticker.Stop()
	for {
		if err := w.ship(); err != nil {
			w.fail(err)
			return
		}
		w.mu.Lock()
		finished := w.closed && w.buf.Len() == 0
		w.mu.Unlock()
		if finished {
			if err := w.finish(); err != nil {
				w.fail(err)
			}
			return
		}
		select {
		case <-w.kick:
		case <-ticker.C:
		}
	}
}

// fail records a permanent failure and discards the rest of the output.
func (w *remoteWriter) fail(err error) {
	w.mu.Lock()
	lost := int64(w.buf.Len()) + w.dropped
	w.failed = fmt.Errorf("%w (%d bytes of log not delivered)", err, lost)
	w.buf.Reset()
	w.mu.Unlock()
	w.log.Error("log shipping failed", "error", w.failed)
}

// ship sends everything buffered, chunk by chunk; the first call also
// creates the log on the server with an empty chunk.
func (w *remoteWriter) ship() error {
	for {
		w.mu.Lock()
		n := min(w.buf.Len(), w.sink.opts.MaxChunk)
		if !w.created {
			// An empty append at offset 0 cannot change the server's log,
			// so its answer tells apart a fresh log from one left by an
			// earlier attempt, retries or not.
			n = 0
		} else if n == 0 {
			w.mu.Unlock()
			return nil
		}
		chunk := bytes.Clone(w.buf.Bytes()[:n])
		offset := w.acked
		var marks []Mark
		for _, m := range w.marks {
			if m.Offset >= offset && m.Offset < offset+int64(n) {
				marks = append(marks, m)
			}
		}
		w.mu.Unlock()

		if err := w.send(offset, chunk, marks); err != nil {
			return err
		}
	}
}

// serverAnswer is any JSON answer of the handler.
type serverAnswer struct {
	Size     *int64 `json:"size"`
	Complete bool   `json:"complete"`
	Error    string `json:"error"`
}

// send delivers one chunk starting at offset, retrying transient failures;
// on return the chunk (or the part the server already had) is acknowledged.
func (w *remoteWriter) send(offset int64, chunk []byte, marks []Mark) error {
	u := w.url + "?offset=" + strconv.FormatInt(offset, 10)
	hdr := http.Header{}
	if len(chunk) > 0 {
		hdr.Set(LogMarksHeader, FormatMarks(marks))
	}
	return w.retry("append", func() (bool, error) {
		status, ans, err := w.post(u, chunk, hdr)
		if err != nil {
			return false, err
		}
		switch {
		case status == http.StatusOK && ans.Size != nil:
			return true, w.resync(*ans.Size)
		case status == http.StatusConflict && ans.Size != nil:
			return true, w.resync(*ans.Size)
		case retryable(status):
			return false, fmt.Errorf("server answered %d: %s", status, ans.Error)
		default:
			return true, fmt.Errorf("ship log of step %s: server answered %d: %s", w.step, status, ans.Error)
		}
	})
}

// resync aligns the buffer with the server's size, from an answer to an
// append: the bytes the server has are dropped from the buffer. A size
// outside what this writer sent means someone else writes this log, or the
// server lost data: that is permanent.
func (w *remoteWriter) resync(size int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.created && size != 0 {
		return fmt.Errorf("ship log of step %s: the server already has %d bytes of it (an earlier attempt?)", w.step, size)
	}
	lo, hi := w.acked, w.acked+int64(w.buf.Len())
	if size < lo || size > hi {
		return fmt.Errorf("ship log of step %s: server log size %d is outside the %d..%d this writer sent", w.step, size, lo, hi)
	}
	w.buf.Next(int(size - lo))
	w.acked = size
	w.created = true
	keep := w.marks[:0]
	for _, m := range w.marks {
		if m.Offset >= size {
			keep = append(keep, m)
		}
	}
	w.marks = keep
	return nil
}

// finish marks the log complete on the server.
func (w *remoteWriter) finish() error {
	return w.retry("finish", func() (bool, error) {
		status, ans, err := w.post(w.url+"/finish", nil, nil)
		switch {
		case err != nil:
			return false, err
		case status == http.StatusOK:
			return true, nil
		case retryable(status):
			return false, fmt.Errorf("server answered %d: %s", status, ans.Error)
		default:
			return true, fmt.Errorf("finish log of step %s: server answered %d: %s", w.step, status, ans.Error)
		}
	})
}

// retry calls attempt until it reports done, backing off between transient
// failures, until the writer's context ends.
func (w *remoteWriter) retry(what string, attempt func() (done bool, err error)) error {
	opts := &w.sink.opts
	backoff := opts.RetryMin
	var last error // the last failure not caused by giving up
	for n := 1; ; n++ {
		done, err := attempt()
		if done {
			return err
		}
		if last == nil || w.ctx.Err() == nil {
			last = err
		}
		w.log.Warn("log shipping attempt failed", "op", what, "attempt", n, "retry_in", backoff, "error", err)
		// Jitter in [backoff/2, backoff].
		sleep := backoff/2 + rand.N(backoff/2+1) //nolint:gosec // G404: retry jitter, not security
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return fmt.Errorf("%s log of step %s: gave up after %d attempts: %w", what, w.step, n, last)
		}
		backoff = min(backoff*2, opts.RetryMax)
	}
}

// post sends one request; a non-nil error is a transport failure.
func (w *remoteWriter) post(u string, body []byte, hdr http.Header) (int, serverAnswer, error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.sink.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, serverAnswer{}, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if c := w.sink.opts.Credential; c != "" {
		req.Header.Set(AttemptCredentialHeader, c)
	}
	resp, err := w.sink.client.Do(req)
	if err != nil {
		return 0, serverAnswer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var ans serverAnswer
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, serverAnswer{}, err
	}
	if json.Unmarshal(data, &ans) != nil && ans.Error == "" {
		ans.Error = strings.TrimSpace(string(data))
	}
	return resp.StatusCode, ans, nil
}

func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}
