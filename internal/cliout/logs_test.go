package cliout

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type fakeStep struct {
	name     string
	text     string
	complete bool
}

// fakeLogs plays a build over polls: poll i (counted by State calls) sees
// states[i] and logs[i] (the last entries repeat).
type fakeLogs struct {
	states  []LogState
	logs    []map[string][]fakeStep
	readMax int
	poll    int
}

func (f *fakeLogs) at() int { return min(f.poll, len(f.states)) - 1 }

func (f *fakeLogs) State(context.Context) (LogState, error) {
	f.poll++
	return f.states[f.at()], nil
}

func (f *fakeLogs) current(key string) []fakeStep {
	return f.logs[min(f.at(), len(f.logs)-1)][key]
}

func (f *fakeLogs) Steps(_ context.Context, key string) ([]LogStep, error) {
	steps := f.current(key)
	if len(steps) == 0 {
		return nil, ErrNoLogs
	}
	out := make([]LogStep, len(steps))
	for i, s := range steps {
		out[i] = LogStep{Name: s.name, Size: int64(len(s.text)), Complete: s.complete}
	}
	return out, nil
}

func (f *fakeLogs) Read(_ context.Context, key, step string, offset int64) (LogChunk, error) {
	for _, s := range f.current(key) {
		if s.name != step {
			continue
		}
		end := min(int(offset)+f.readMax, len(s.text))
		return LogChunk{Data: []byte(s.text[offset:end]), NextOffset: int64(end), Size: int64(len(s.text)), Complete: s.complete}, nil
	}
	return LogChunk{}, errors.New("no such step")
}

func run(t *testing.T, src *fakeLogs, step string, follow bool) (string, int, error) {
	t.Helper()
	var out strings.Builder
	waits := 0
	f := &LogFollower{
		Build: "app/test/3", Source: src, Sink: &TextSink{W: &out}, Step: step, Follow: follow, FinalGrace: 2,
		Wait: func(context.Context) error {
			waits++
			if waits > 50 {
				return errors.New("too many polls")
			}
			return nil
		},
	}
	err := f.Run(context.Background())
	return out.String(), waits, err
}

func TestLogFollowerOnce(t *testing.T) {
	t.Parallel()
	final := LogState{Key: "app/test/3/1", Final: true, Status: "SUCCESS"}
	twoSteps := map[string][]fakeStep{"app/test/3/1": {{"setup", "installing\ndone\n", true}, {"test", "ok\n", true}}}
	tests := []struct {
		name    string
		state   LogState
		logs    map[string][]fakeStep
		step    string
		want    string
		wantErr string
	}{
		{
			name: "one step without header, read in chunks", state: final,
			logs: map[string][]fakeStep{"app/test/3/1": {{"test", "line one\nline two\n", true}}},
			want: "line one\nline two\n",
		},
		{
			name: "several steps with headers", state: final, logs: twoSteps,
			want: "==> step setup <==\ninstalling\ndone\n\n==> step test <==\nok\n",
		},
		{name: "one step chosen", state: final, logs: twoSteps, step: "test", want: "ok\n"},
		{
			name: "running build: what is there so far", state: LogState{Key: "app/test/3/1", Status: "RUNNING"},
			logs: map[string][]fakeStep{"app/test/3/1": {{"test", "partial", false}}}, want: "partial",
		},
		{
			name: "unknown step", state: final, logs: twoSteps, step: "deploy",
			wantErr: `build app/test/3 has no step "deploy" (steps: setup, test)`,
		},
		{
			name: "no attempt yet", state: LogState{Status: "QUEUED", Reason: "waiting for a slot on queue default: 1/1 busy"},
			logs:    map[string][]fakeStep{},
			wantErr: "build app/test/3 has no logs yet (status QUEUED: waiting for a slot on queue default: 1/1 busy)",
		},
		{
			name: "attempt without logs", state: LogState{Key: "app/test/3/1", Status: "RUNNING"},
			logs: map[string][]fakeStep{}, wantErr: "build app/test/3 has no logs yet (status RUNNING)",
		},
		{
			name: "ended without logs", state: LogState{Final: true, Status: "ABORTED", Reason: "cancelled"},
			logs: map[string][]fakeStep{}, wantErr: "build app/test/3 has no logs (status ABORTED: cancelled)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeLogs{states: []LogState{tt.state}, logs: []map[string][]fakeStep{tt.logs}, readMax: 4}
			out, waits, err := run(t, src, tt.step, false)
			require.Zero(t, waits)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, out)
		})
	}
}

func TestLogFollowerFollow(t *testing.T) {
	t.Parallel()
	const k1, k2 = "app/test/3/1", "app/test/3/2"
	queued := LogState{Status: "QUEUED", Reason: "waiting"}
	running := LogState{Key: k1, Status: "RUNNING"}
	done := LogState{Key: k1, Final: true, Status: "SUCCESS"}
	tests := []struct {
		name    string
		states  []LogState
		logs    []map[string][]fakeStep
		step    string
		want    string
		wantErr string
	}{
		{
			name:   "waits for logs, then follows steps to the end",
			states: []LogState{queued, running, running, running, done},
			logs: []map[string][]fakeStep{
				{},
				{k1: {{"build", "hel", false}}},
				{k1: {{"build", "hello\n", true}}},
				{k1: {{"build", "hello\n", true}, {"test", "wor", false}}},
				{k1: {{"build", "hello\n", true}, {"test", "world\n", true}}},
			},
			want: "==> step build <==\nhello\n\n==> step test <==\nworld\n",
		},
		{
			name:   "output of a step that was left repeats its header",
			states: []LogState{running, done},
			logs: []map[string][]fakeStep{
				{k1: {{"a", "1", false}, {"b", "x", false}}},
				{k1: {{"a", "12", true}, {"b", "xy", true}}},
			},
			want: "==> step a <==\n1\n==> step b <==\nx\n==> step a <==\n2\n==> step b <==\ny",
		},
		{
			name:   "one step followed, no header",
			states: []LogState{running, done},
			logs: []map[string][]fakeStep{
				{k1: {{"a", "skip me", true}, {"b", "go", false}}},
				{k1: {{"a", "skip me", true}, {"b", "gone\n", true}}},
			},
			step: "b",
			want: "gone\n",
		},
		{
			name:   "a new attempt starts over",
			states: []LogState{running, {Key: k2, Status: "RUNNING"}, {Key: k2, Final: true, Status: "SUCCESS"}},
			logs: []map[string][]fakeStep{
				{k1: {{"a", "first try", false}}},
				{k1: {{"a", "first try", false}}, k2: {{"a", "second", false}}},
				{k2: {{"a", "second try\n", true}}},
			},
			want: "==> step a <==\nfirst try\n==> step a <==\nsecond try\n",
		},
		{
			name:   "logs that never complete stop after the grace polls",
			states: []LogState{running, done},
			logs:   []map[string][]fakeStep{{k1: {{"a", "cut", false}}}},
			want:   "==> step a <==\ncut",
		},
		{
			name:    "the chosen step never ran",
			states:  []LogState{running, done},
			logs:    []map[string][]fakeStep{{k1: {{"a", "x", true}}}},
			step:    "deploy",
			wantErr: `build app/test/3 has no step "deploy" (steps: a)`,
		},
		{
			name:    "ended before any log",
			states:  []LogState{queued, {Final: true, Status: "ABORTED", Reason: "cancelled"}},
			logs:    []map[string][]fakeStep{{}},
			wantErr: "build app/test/3 has no logs (status ABORTED: cancelled)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeLogs{states: tt.states, logs: tt.logs, readMax: 3}
			out, _, err := run(t, src, tt.step, true)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, out)
		})
	}
}

func TestLogFollowerStopsWhenWaitFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := &fakeLogs{states: []LogState{{Status: "QUEUED"}}, logs: []map[string][]fakeStep{{}}, readMax: 8}
	f := &LogFollower{
		Build: "b", Source: src, Sink: &TextSink{W: &strings.Builder{}}, Follow: true,
		Wait: func(ctx context.Context) error { return ctx.Err() },
	}
	require.ErrorIs(t, f.Run(ctx), context.Canceled)
}

func TestJSONSink(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	src := &fakeLogs{states: []LogState{{Key: "k", Final: true}}, logs: []map[string][]fakeStep{{"k": {{"a", "hi\n", true}, {"b", "yo", true}}}}, readMax: 100}
	f := &LogFollower{Build: "b", Source: src, Sink: &JSONSink{W: &out}}
	require.NoError(t, f.Run(context.Background()))
	require.Equal(t, `{"step":"a","offset":0,"text":"hi\n"}`+"\n"+`{"step":"b","offset":0,"text":"yo"}`+"\n", out.String()) //nolint:testifylint // JSON lines, not one JSON document: the exact bytes (framing, key order) are the output format
}
