package logstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/runner"
)

func setup(t *testing.T) *logstore.Store {
	t.Helper()
	s, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	return s
}

// readAll reads a whole step log through Read, chunk by chunk.
func readAll(t *testing.T, s *logstore.Store, build, step string) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	var offset int64
	for {
		c, err := s.Read(build, step, offset, 0)
		require.NoError(t, err)
		require.Equal(t, offset, c.Offset)
		out.Write(c.Data)
		offset = c.NextOffset
		if offset == c.Size {
			return out.String(), c.Complete
		}
	}
}

func TestReadOffsetsAndLengths(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const build, step = "myapp/test/42", "build"
	require.NoError(t, s.Append(build, step, []byte("hello ")))
	require.NoError(t, s.Append(build, step, []byte("world\n")))

	tests := []struct {
		name           string
		offset, length int64
		want           string
		wantErr        error
		wantMsg        string
	}{
		{name: "whole log", offset: 0, length: 0, want: "hello world\n"},
		{name: "negative length means to end", offset: 0, length: -1, want: "hello world\n"},
		{name: "prefix", offset: 0, length: 5, want: "hello"},
		{name: "middle", offset: 6, length: 5, want: "world"},
		{name: "tail", offset: 6, length: 0, want: "world\n"},
		{name: "length past end", offset: 6, length: 100, want: "world\n"},
		{name: "at end", offset: 12, length: 0, want: ""},
		{name: "beyond end", offset: 13, wantErr: logstore.ErrBadOffset, wantMsg: "offset 13 is beyond the end of the log (size 12)"},
		{name: "negative offset", offset: -1, wantErr: logstore.ErrBadOffset, wantMsg: "offset -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := s.Read(build, step, tt.offset, tt.length)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorContains(t, err, tt.wantMsg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, string(c.Data))
			require.NotNil(t, c.Data)
			require.Equal(t, tt.offset, c.Offset)
			require.Equal(t, tt.offset+int64(len(tt.want)), c.NextOffset)
			require.Equal(t, int64(12), c.Size)
			require.False(t, c.Complete)
		})
	}
}

func TestReadIsCapped(t *testing.T) {
	t.Parallel()
	s := setup(t)
	big := bytes.Repeat([]byte("x"), logstore.MaxReadLength+10)
	require.NoError(t, s.Append("b", "s", big))

	for _, length := range []int64{0, 2 * logstore.MaxReadLength} {
		c, err := s.Read("b", "s", 0, length)
		require.NoError(t, err)
		require.Len(t, c.Data, logstore.MaxReadLength)
		require.Equal(t, int64(logstore.MaxReadLength), c.NextOffset)
	}
	c, err := s.Read("b", "s", logstore.MaxReadLength, 0)
	require.NoError(t, err)
	require.Len(t, c.Data, 10)
}

func TestReadMissing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	_, err := s.Read("nobuild", "nostep", 0, 0)
	require.ErrorIs(t, err, logstore.ErrNotFound)
	require.ErrorContains(t, err, "nobuild/nostep")
}

func TestFinish(t *testing.T) {
	t.Parallel()
	s := setup(t)
	require.NoError(t, s.Append("b/1", "s", []byte("out\n")))
	c, err := s.Read("b/1", "s", 0, 0)
	require.NoError(t, err)
	require.False(t, c.Complete)

	require.NoError(t, s.Finish("b/1", "s"))
	require.NoError(t, s.Finish("b/1", "s"), "finishing twice is fine")

	c, err = s.Read("b/1", "s", 0, 0)
	require.NoError(t, err)
	require.True(t, c.Complete)
	require.Equal(t, "out\n", string(c.Data))
	require.ErrorIs(t, s.Append("b/1", "s", []byte("late")), logstore.ErrComplete)

	require.NoError(t, s.Finish("b/1", "silent"), "a step that wrote nothing")
	info, err := s.Stat("b/1", "silent")
	require.NoError(t, err)
	require.Equal(t, logstore.StepInfo{Name: "silent", Size: 0, Complete: true}, info)
}

func TestAppendAt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	size, err := s.AppendAt("b", "s", 0, nil)
	require.NoError(t, err)
	require.Zero(t, size)
	size, err = s.AppendAt("b", "s", 0, []byte("abc"))
	require.NoError(t, err)
	require.Equal(t, int64(3), size)

	_, err = s.AppendAt("b", "s", 0, []byte("abc"))
	require.ErrorIs(t, err, logstore.ErrOffsetMismatch)
	var mismatch *logstore.OffsetMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.Equal(t, int64(3), mismatch.Size)
	require.ErrorContains(t, err, "offset 0 does not match the size 3")

	_, err = s.AppendAt("b", "s", -2, []byte("x"))
	require.ErrorIs(t, err, logstore.ErrBadOffset)
	got, _ := readAll(t, s, "b", "s")
	require.Equal(t, "abc", got)
}

func TestStepsInCreationOrder(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const build = "myapp/test/42"
	for _, step := range []string{"install", "build", "test", "teardown-upload"} {
		require.NoError(t, s.Append(build, step, []byte(step)))
	}
	require.NoError(t, s.Append(build, "install", []byte("more")))
	require.NoError(t, s.Finish(build, "install"))

	steps, err := s.Steps(build)
	require.NoError(t, err)
	require.Equal(t, []logstore.StepInfo{
		{Name: "install", Size: 11, Complete: true},
		{Name: "build", Size: 5},
		{Name: "test", Size: 4},
		{Name: "teardown-upload", Size: 15},
	}, steps)

	_, err = s.Steps("myapp/test/43")
	require.ErrorIs(t, err, logstore.ErrNotFound)
	_, err = s.Steps("myapp/test")
	require.ErrorIs(t, err, logstore.ErrNotFound, "a prefix of a build ID is not a build")
}

func TestIDValidation(t *testing.T) {
	t.Parallel()
	s := setup(t)
	tests := []struct {
		name, build, step string
		wantMsg           string
	}{
		{name: "empty build", build: "", step: "s", wantMsg: "build id is empty"},
		{name: "absolute", build: "/etc/passwd", step: "s", wantMsg: `build id "/etc/passwd" is absolute`},
		{name: "parent", build: "../outside", step: "s", wantMsg: `build id "../outside": segment ".." not allowed`},
		{name: "parent inside", build: "a/../../b", step: "s", wantMsg: `build id "a/../../b"`},
		{name: "dot", build: "a/./b", step: "s", wantMsg: `segment "." not allowed`},
		{name: "empty segment", build: "a//b", step: "s", wantMsg: `build id "a//b": empty segment`},
		{name: "trailing slash", build: "a/b/", step: "s", wantMsg: `build id "a/b/"`},
		{name: "NUL", build: "a\x00b", step: "s", wantMsg: "NUL"},
		{name: "empty step", build: "b", step: "", wantMsg: `step name ""`},
		{name: "parent step", build: "b", step: "..", wantMsg: `step name ".."`},
		{name: "slash in step", build: "b", step: "x/y", wantMsg: `step name "x/y" contains '/'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Append(tt.build, tt.step, []byte("x"))
			require.ErrorIs(t, err, logstore.ErrInvalidID)
			require.ErrorContains(t, err, tt.wantMsg)
			_, err = s.Read(tt.build, tt.step, 0, 0)
			require.ErrorIs(t, err, logstore.ErrInvalidID)
			require.ErrorIs(t, s.Finish(tt.build, tt.step), logstore.ErrInvalidID)
			require.ErrorIs(t, s.Wait(t.Context(), tt.build, tt.step, 0), logstore.ErrInvalidID)
		})
	}
}

func TestPathsStayInsideTheStore(t *testing.T) {
	t.Parallel()
	s := setup(t)
	tests := []struct{ build, step string }{
		{"myapp/test/42", "build"},
		{"myapp/test", "build"}, // a prefix of another build ID
		{"my app/te%st/42", "step with space"},
		{"..a/b..", "...x"},
		{"ünïcode/@/~", "ünï\\code"},
		{`back\slash/c:\x`, "a:b*c?"},
	}
	for _, tt := range tests {
		require.NoError(t, s.Append(tt.build, tt.step, []byte(tt.build+"|"+tt.step)))
	}
	for _, tt := range tests {
		got, _ := readAll(t, s, tt.build, tt.step)
		require.Equal(t, tt.build+"|"+tt.step, got, "no two IDs share a file")
		steps, err := s.Steps(tt.build)
		require.NoError(t, err)
		require.Equal(t, []logstore.StepInfo{{Name: tt.step, Size: int64(len(got))}}, steps)
	}
	_, err := os.Stat(filepath.Join(s.Dir(), "myapp", "test", "42", "@", "build.log"))
	require.NoError(t, err, "build IDs map to nested directories")
	require.NoError(t, filepath.WalkDir(s.Dir(), func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, err := filepath.Rel(s.Dir(), path)
		require.NoError(t, err)
		require.NotContains(t, strings.Split(rel, string(filepath.Separator)), "..")
		require.Regexp(t, `^[A-Za-z0-9._%@/-]+$`, rel)
		return nil
	}))
}

func TestWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		offset  int64
		prepare func(s *logstore.Store)
		act     func(s *logstore.Store, cancel context.CancelFunc)
		wantErr error
	}{
		{
			name:   "wakes on append",
			offset: 3,
			prepare: func(s *logstore.Store) {
				_ = s.Append("b", "s", []byte("abc"))
			},
			act: func(s *logstore.Store, _ context.CancelFunc) { _ = s.Append("b", "s", []byte("d")) },
		},
		{
			name: "wakes on first append to a log not created yet",
			act:  func(s *logstore.Store, _ context.CancelFunc) { _ = s.Append("b", "s", []byte("a")) },
		},
		{
			name:    "wakes on finish",
			offset:  3,
			prepare: func(s *logstore.Store) { _ = s.Append("b", "s", []byte("abc")) },
			act:     func(s *logstore.Store, _ context.CancelFunc) { _ = s.Finish("b", "s") },
		},
		{
			name:    "returns on cancel",
			prepare: func(s *logstore.Store) { _ = s.Append("b", "s", nil) },
			act:     func(_ *logstore.Store, cancel context.CancelFunc) { cancel() },
			wantErr: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			if tt.prepare != nil {
				tt.prepare(s)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			waited := make(chan error, 1)
			go func() { waited <- s.Wait(ctx, "b", "s", tt.offset) }()

			select {
			case err := <-waited:
				t.Fatalf("Wait returned before anything happened: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			tt.act(s, cancel)
			select {
			case err := <-waited:
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr)
					require.ErrorContains(t, err, "b/s")
				} else {
					require.NoError(t, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Wait did not return")
			}
		})
	}
}

func TestWaitReturnsAtOnceWhenDataIsThere(t *testing.T) {
	t.Parallel()
	s := setup(t)
	require.NoError(t, s.Append("b", "s", []byte("abc")))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Wait(ctx, "b", "s", 2))
	require.ErrorIs(t, s.Wait(ctx, "b", "s", -1), logstore.ErrBadOffset)
}

func TestWaitSeesOtherProcessesAppends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reader, err := logstore.Open(dir)
	require.NoError(t, err)
	writer, err := logstore.Open(dir) // stands for another process
	require.NoError(t, err)

	blocked := make(chan struct{}, 1)
	logstore.SetWaiting(reader, func() {
		select {
		case blocked <- struct{}{}:
		default:
		}
	})
	waited := make(chan error, 1)
	go func() { waited <- reader.Wait(t.Context(), "b", "s", 0) }()
	<-blocked // Wait found nothing and waits: only the other store's append can wake it
	require.NoError(t, writer.Append("b", "s", []byte("x")))
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not notice the other store's append")
	}
}

func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				require.NoError(t, s.Append("b/1", "shared", fmt.Appendf(nil, "g%02d-%04d\n", g, i)))
				require.NoError(t, s.Append("b/1", fmt.Sprintf("own-%d", g), []byte("y")))
			}
		})
	}
	// A follower reads along while the writers write.
	wg.Go(func() {
		var offset int64
		for offset < writers*lines*9 {
			require.NoError(t, s.Wait(t.Context(), "b/1", "shared", offset))
			c, err := s.Read("b/1", "shared", offset, 0)
			require.NoError(t, err)
			offset = c.NextOffset
		}
	})
	wg.Wait()

	got, _ := readAll(t, s, "b/1", "shared")
	seen := map[string]bool{}
	for line := range strings.Lines(got) {
		require.Regexp(t, `^g\d\d-\d{4}\n$`, line, "appends never interleave")
		require.False(t, seen[line], "duplicate %q", line)
		seen[line] = true
	}
	require.Len(t, seen, writers*lines)
	steps, err := s.Steps("b/1")
	require.NoError(t, err)
	require.Len(t, steps, writers+1)
	for _, st := range steps[1:] {
		require.Equal(t, int64(lines), st.Size)
	}
}

func TestSinkWithRunner(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const build = "myapp/main/7"
	res := runner.Run(t.Context(), runner.Spec{
		Dir:   t.TempDir(),
		Env:   []string{"PATH=" + os.Getenv("PATH")},
		Steps: []runner.Step{{Name: "hello", Command: "echo hello; echo oops >&2"}, {Name: "quiet", Command: "true"}},
		Logs:  s.Sink(build),
	})
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)

	got, complete := readAll(t, s, build, "hello")
	require.Equal(t, "hello\noops\n", got)
	require.True(t, complete)
	steps, err := s.Steps(build)
	require.NoError(t, err)
	require.Equal(t, []logstore.StepInfo{
		{Name: "hello", Size: 11, Complete: true},
		{Name: "quiet", Size: 0, Complete: true},
	}, steps)

	_, err = s.Sink(build).Open("hello")
	require.ErrorIs(t, err, logstore.ErrComplete, "a finished step log is not reopened")
	_, err = s.Sink("../x").Open("s")
	require.ErrorIs(t, err, logstore.ErrInvalidID)
}
