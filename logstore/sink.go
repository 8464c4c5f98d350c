package logstore

import (
	"fmt"
	"io"
	"sync"

	"github.com/sluice-ci/sluice/runner"
)

// Sink returns a runner.LogSink writing the build's step logs into the
// store: Open creates the step log (empty) so it is listed at once, Write
// appends, Close finishes the log. Opening a step whose log is already
// complete fails with ErrComplete: a build attempt that runs again should
// write under its own build ID.
func (s *Store) Sink(build string) runner.LogSink {
	return &localSink{store: s, build: build}
}

type localSink struct {
	store *Store
	build string
}

// Open implements runner.LogSink.
func (l *localSink) Open(step string) (io.WriteCloser, error) {
	if err := l.store.Append(l.build, step, nil); err != nil {
		return nil, fmt.Errorf("open step log: %w", err)
	}
	return &localWriter{store: l.store, build: l.build, step: step}, nil
}

type localWriter struct {
	store       *Store
	build, step string

	once sync.Once
	err  error
}

// Write appends p to the step log.
func (w *localWriter) Write(p []byte) (int, error) {
	if err := w.store.Append(w.build, w.step, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close marks the step log complete.
func (w *localWriter) Close() error {
	w.once.Do(func() { w.err = w.store.Finish(w.build, w.step) })
	return w.err
}
