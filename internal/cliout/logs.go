package cliout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// LogStep is one step log of a build attempt.
type LogStep struct {
	Name     string
	Size     int64
	Complete bool
}

// LogChunk is a piece of a step log read from some offset.
type LogChunk struct {
	Data       []byte
	NextOffset int64
	Size       int64
	Complete   bool
}

// LogState is what the follower needs to know about the build.
type LogState struct {
	// Key is the log store key of the attempt to read; empty while the
	// build has no attempt.
	Key string
	// Final is true once the build ended.
	Final bool
	// Status and Reason explain a build without logs.
	Status string
	Reason string
}

// ErrNoLogs is returned by LogSource.Steps when a key has no logs (yet).
var ErrNoLogs = errors.New("no logs")

// LogSource reads a build and its logs (the API client in the CLI).
type LogSource interface {
	// State returns the build's state now.
	State(ctx context.Context) (LogState, error)
	// Steps lists the step logs under key in creation order, or ErrNoLogs.
	Steps(ctx context.Context, key string) ([]LogStep, error)
	// Read reads a step log from offset, as much as the source allows.
	Read(ctx context.Context, key, step string, offset int64) (LogChunk, error)
}

// LogSink receives what the follower reads.
type LogSink interface {
	// Header announces that the following data belongs to step.
	Header(step string) error
	// Data is a piece of step's log starting at offset.
	Data(step string, offset int64, data []byte) error
}

// LogFollower prints a build's step logs, and with Follow keeps polling the
// running step and new ones until the build ended and every log is
// complete.
type LogFollower struct {
	// Build is the build's ID, for messages.
	Build  string
	Source LogSource
	Sink   LogSink
	// Step, when set, prints only this step.
	Step string
	// Follow keeps reading until the build ended and its logs are complete.
	Follow bool
	// Wait pauses between polls; it returns ctx.Err() when cancelled.
	Wait func(ctx context.Context) error
	// FinalGrace is how many polls without new output the follower waits,
	// once the build ended, for logs that never complete (an executor died
	// while writing them) before it stops anyway.
	FinalGrace int
}

// Run prints the logs. Without Follow, a build without logs is an error
// that says its status and why; with Follow the follower waits for them.
func (f *LogFollower) Run(ctx context.Context) error {
	var (
		key      string
		offsets  = map[string]int64{}
		complete = map[string]bool{}
		seen     = map[string]bool{}
		current  string
		idle     int
	)
	for {
		st, err := f.Source.State(ctx)
		if err != nil {
			return err
		}
		if st.Key != key {
			// A new attempt: its logs start over.
			key, current = st.Key, ""
			clear(offsets)
			clear(complete)
			clear(seen)
		}
		var all []LogStep
		if key != "" {
			if all, err = f.Source.Steps(ctx, key); err != nil && !errors.Is(err, ErrNoLogs) {
				return err
			}
		}
		steps := all
		if f.Step != "" {
			steps = nil
			for _, s := range all {
				if s.Name == f.Step {
					steps = append(steps, s)
				}
			}
		}
		if len(steps) == 0 && (!f.Follow || st.Final) {
			if f.Step != "" && len(all) > 0 {
				return fmt.Errorf("build %s has no step %q (steps: %s)", f.Build, f.Step, strings.Join(names(all), ", "))
			}
			if f.Follow && seen[f.Step] {
				return nil
			}
			return noLogs(f.Build, st)
		}
		headers := len(steps) > 1 || (f.Follow && f.Step == "")
		progressed := false
		for _, s := range steps {
			if !seen[s.Name] {
				seen[s.Name] = true
				if headers {
					if err := f.Sink.Header(s.Name); err != nil {
						return err
					}
					current = s.Name
				}
			}
			if complete[s.Name] {
				continue
			}
			n, done, err := f.drain(ctx, key, s.Name, offsets, func() error {
				if headers && current != s.Name {
					current = s.Name
					return f.Sink.Header(s.Name)
				}
				return nil
			})
			if err != nil {
				return err
			}
			complete[s.Name] = done
			progressed = progressed || n > 0
		}
		if !f.Follow {
			return nil
		}
		if st.Final {
			if allComplete(steps, complete) {
				return nil
			}
			if progressed {
				idle = 0
			} else if idle++; idle > f.FinalGrace {
				return nil
			}
		}
		if err := f.Wait(ctx); err != nil {
			return err
		}
	}
}

// drain reads one step from its offset up to the size the source reports,
// calling before ahead of the first data; it returns the bytes read and
// whether the log is complete.
func (f *LogFollower) drain(ctx context.Context, key, step string, offsets map[string]int64, before func() error) (int64, bool, error) {
	var read int64
	for {
		off := offsets[step]
		ch, err := f.Source.Read(ctx, key, step, off)
		if err != nil {
			return read, false, err
		}
		if len(ch.Data) > 0 {
			if err := before(); err != nil {
				return read, false, err
			}
			if err := f.Sink.Data(step, off, ch.Data); err != nil {
				return read, false, err
			}
			read += int64(len(ch.Data))
		}
		if ch.NextOffset > off {
			offsets[step] = ch.NextOffset
		}
		switch {
		case ch.NextOffset >= ch.Size && ch.Complete:
			return read, true, nil
		case ch.NextOffset >= ch.Size, len(ch.Data) == 0:
			return read, false, nil
		}
	}
}

func allComplete(steps []LogStep, complete map[string]bool) bool {
	for _, s := range steps {
		if !complete[s.Name] {
			return false
		}
	}
	return true
}

func names(steps []LogStep) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Name
	}
	return out
}

// noLogs explains why a build has no logs: "build app/test/3 has no logs yet
// (status QUEUED: waiting for a slot on queue default: ...)".
func noLogs(build string, st LogState) error {
	yet := " yet"
	if st.Final {
		yet = ""
	}
	why := Status(st.Status)
	if st.Reason != "" {
		why += ": " + OneLine(st.Reason)
	}
	return fmt.Errorf("build %s has no logs%s (status %s)", build, yet, why)
}

// TextSink writes logs as they are, with a "==> step NAME <==" line before
// each step's output when the follower asks for headers.
type TextSink struct {
	W       io.Writer
	started bool
}

// Header writes the step header, after a blank line unless it is the first.
func (s *TextSink) Header(step string) error {
	sep := "\n"
	if !s.started {
		sep = ""
	}
	s.started = true
	_, err := fmt.Fprintf(s.W, "%s==> step %s <==\n", sep, step)
	return err
}

// Data writes the bytes.
func (s *TextSink) Data(_ string, _ int64, data []byte) error {
	s.started = true
	_, err := s.W.Write(data)
	return err
}

// JSONSink writes one JSON object per piece of log:
// {"step":"test","offset":0,"text":"..."}.
type JSONSink struct {
	W io.Writer
}

// LogRecord is one line of JSONSink's output.
type LogRecord struct {
	Step   string `json:"step"`
	Offset int64  `json:"offset"`
	Text   string `json:"text"`
}

// Header writes nothing: every record names its step.
func (s *JSONSink) Header(string) error { return nil }

// Data writes one record.
func (s *JSONSink) Data(step string, offset int64, data []byte) error {
	return json.NewEncoder(s.W).Encode(LogRecord{Step: step, Offset: offset, Text: string(data)})
}
