package activities

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"sort"
	"strings"

	"github.com/sluice-ci/sluice/runner"
)

// SecretSource gives an executor the values of a running build's secrets.
// The API implements it over HTTP with the executor's token, so values
// never travel through Temporal (no payload, search attribute, memo or
// history holds them).
type SecretSource interface {
	// ResolveSecrets returns the values of names for build (fork: a pull
	// request from a fork); withheld names the secrets a pull request's
	// build does not get.
	ResolveSecrets(ctx context.Context, req SecretRequest) (values map[string]string, withheld []string, err error)
}

// SecretRequest is what an executor asks for: the names of build's attempt
// (fork: a pull request from a fork), with the attempt's credential, which
// proves to the API that the executor runs that attempt.
type SecretRequest struct {
	Build      string
	Attempt    int
	Names      []string
	Fork       bool
	Credential string
	// Checkout asks for the pipeline's repository credentials
	// (RepoAuthSecrets) for the checkout: the job need not list them, and
	// a name the pipeline does not have is left out, not an error.
	Checkout bool
}

// SecretSourceFunc adapts a function to SecretSource.
type SecretSourceFunc func(ctx context.Context, req SecretRequest) (map[string]string, []string, error)

// ResolveSecrets calls f.
func (f SecretSourceFunc) ResolveSecrets(ctx context.Context, req SecretRequest) (map[string]string, []string, error) {
	return f(ctx, req)
}

// Mask is what a secret's value becomes in build logs.
const Mask = "***"

// maskingSink wraps a log sink so that no secret value reaches it.
type maskingSink struct {
	sink    runner.LogSink
	secrets [][]byte // longest first, so a value containing another is masked whole
	longest int
}

// maskSecrets returns sink, masking values (empty values are ignored).
func maskSecrets(sink runner.LogSink, values map[string]string) runner.LogSink {
	m := &maskingSink{sink: sink}
	seen := map[string]bool{}
	for _, v := range values {
		for _, f := range maskForms(v) {
			if f == "" || seen[f] {
				continue
			}
			seen[f] = true
			m.secrets = append(m.secrets, []byte(f))
			m.longest = max(m.longest, len(f))
		}
	}
	if len(m.secrets) == 0 {
		return sink
	}
	sort.Slice(m.secrets, func(i, j int) bool { return len(m.secrets[i]) > len(m.secrets[j]) })
	return m
}

// minMaskedLine is the shortest line of a multi-line value that is masked on
// its own: shorter ones ("-----", "}") would mask ordinary output.
const minMaskedLine = 4

// maskForms are the forms of a secret value that a log must not show: the
// value, each line of a multi-line value (a step printing a key file line
// by line), and the value's base64 encodings (a step piping it through
// base64).
func maskForms(v string) []string {
	if v == "" {
		return nil
	}
	forms := []string{
		v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
	}
	if strings.ContainsAny(v, "\r\n") {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if line = strings.TrimSpace(line); len(line) >= minMaskedLine {
				forms = append(forms, line)
			}
		}
	}
	return forms
}

func (m *maskingSink) Open(step string) (io.WriteCloser, error) {
	w, err := m.sink.Open(step)
	if err != nil {
		return nil, err
	}
	return &maskingWriter{w: w, m: m}, nil
}

// maskingWriter masks what it is given and holds back a tail that may
// still become a value (a value split across two writes is masked whole).
type maskingWriter struct {
	w       io.WriteCloser
	m       *maskingSink
	pending []byte
}

func (w *maskingWriter) Write(p []byte) (int, error) {
	w.pending = append(w.pending, p...)
	out, rest := w.m.mask(w.pending, false)
	if len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			return 0, err
		}
	}
	w.pending = append([]byte(nil), rest...)
	return len(p), nil
}

func (w *maskingWriter) Close() error {
	if len(w.pending) > 0 {
		out, _ := w.m.mask(w.pending, true)
		w.pending = nil
		if _, err := w.w.Write(out); err != nil {
			_ = w.w.Close()
			return err
		}
	}
	return w.w.Close()
}

// mask returns b with every value replaced by Mask, up to the first place
// where a value may start but b ends before it could be told (rest, kept for
// the next write); final masks everything. At each place the longest value
// wins, so a value containing another is masked as one.
func (m *maskingSink) mask(b []byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(b))
	i := 0
scan:
	for i < len(b) {
		for _, s := range m.secrets {
			tail := b[i:]
			switch {
			case bytes.HasPrefix(tail, s):
				out = append(out, Mask...)
				i += len(s)
				continue scan
			case !final && len(tail) < len(s) && bytes.HasPrefix(s, tail):
				break scan // may become s: wait for more
			}
		}
		out = append(out, b[i])
		i++
	}
	return out, b[i:]
}
