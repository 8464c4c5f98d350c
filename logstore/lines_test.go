package logstore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/logstore"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type shownLine struct {
	N       int64
	Text    string
	Time    time.Time
	Partial bool
}

func shown(pg logstore.LinePage) []shownLine {
	out := []shownLine{}
	for _, l := range pg.Lines {
		out = append(out, shownLine{N: l.Number, Text: string(l.Text), Time: l.Time, Partial: l.Partial})
	}
	return out
}

// Each line carries the time of the append that wrote its first byte; the
// log file keeps only the bytes written.
func TestLinesCarryTheTimeTheyWereWritten(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := &clock{t: t0}
	logstore.SetClock(s, c.now)
	const build, step = "app/test/1", "run"
	require.NoError(t, s.Append(build, step, []byte("a\nb")))
	t1 := t0.Add(1500 * time.Millisecond)
	c.set(t1)
	require.NoError(t, s.Append(build, step, []byte("c\nd\n")))
	require.NoError(t, s.Append(build, step, []byte("e\nf"))) // same millisecond: no new mark

	pg, err := s.ReadLines(build, step, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []shownLine{
		{N: 1, Text: "a", Time: t0},
		{N: 2, Text: "bc", Time: t0},
		{N: 3, Text: "d", Time: t1},
		{N: 4, Text: "e", Time: t1},
		{N: 5, Text: "f", Time: t1, Partial: true},
	}, shown(pg))
	require.Equal(t, int64(len("a\nbc\nd\ne\n")), pg.Next, "the partial line is read again")
	marks, err := s.Marks(build, step)
	require.NoError(t, err)
	require.Equal(t, []logstore.Mark{{Offset: 0, Line: 0, Time: t0}, {Offset: 3, Line: 1, Time: t1}}, marks)

	text, complete := readAll(t, s, build, step)
	require.Equal(t, "a\nbc\nd\ne\nf", text, "the raw log is the bytes written, without times")
	require.False(t, complete)

	require.NoError(t, s.Finish(build, step))
	pg, err = s.ReadLines(build, step, pg.Next, 0)
	require.NoError(t, err)
	require.Equal(t, []shownLine{{N: 5, Text: "f", Time: t1}}, shown(pg), "finished: the last line is whole")
	require.Equal(t, pg.Size, pg.Next)
}

// A log written before marks existed (no .times file) still reads, with
// line numbers and no times, and gets no marks when it grows.
func TestLogsWithoutMarksStillRead(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const build, step = "app/test/2", "run"
	require.NoError(t, s.Append(build, step, []byte("old 1\nold 2\n")))
	require.NoError(t, os.Remove(filepath.Join(s.Dir(), "app", "test", "2", "@", "run.times")))
	require.NoError(t, s.Append(build, step, []byte("new 3\n")))
	_, err := os.Stat(filepath.Join(s.Dir(), "app", "test", "2", "@", "run.times"))
	require.ErrorIs(t, err, os.ErrNotExist, "an old log gets no marks midway")

	marks, err := s.Marks(build, step)
	require.NoError(t, err)
	require.Empty(t, marks)
	pg, err := s.ReadLines(build, step, 6, 0)
	require.NoError(t, err)
	require.Equal(t, []shownLine{{N: 2, Text: "old 2"}, {N: 3, Text: "new 3"}}, shown(pg))
	off, err := s.LineOffset(build, step, 3)
	require.NoError(t, err)
	require.Equal(t, int64(12), off)
}

// The whole log pages backwards from its end and forwards from any line,
// with the right line numbers, marks or none.
func TestLinePaging(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := &clock{t: t0}
	logstore.SetClock(s, c.now)
	const build, step = "app/test/3", "run"
	var want []string
	for i := 1; i <= 1000; i++ {
		line := fmt.Sprintf("line %d %s", i, strings.Repeat("x", i%17))
		want = append(want, line)
		c.set(t0.Add(time.Duration(i) * time.Millisecond))
		require.NoError(t, s.Append(build, step, []byte(line+"\n")))
	}
	require.NoError(t, s.Finish(build, step))

	// Backwards from the end, 300 bytes a page.
	var got []string
	var lastN int64
	before := int64(-1)
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000)
		pg, err := s.LinesBefore(build, step, before, 300)
		require.NoError(t, err)
		var texts []string
		for i, l := range pg.Lines {
			texts = append(texts, string(l.Text))
			if i > 0 {
				require.Equal(t, pg.Lines[i-1].Number+1, l.Number)
			}
			require.Equal(t, t0.Add(time.Duration(l.Number)*time.Millisecond), l.Time, "line %d", l.Number)
		}
		if lastN != 0 {
			require.Equal(t, lastN-1, pg.Lines[len(pg.Lines)-1].Number)
		}
		lastN = pg.Lines[0].Number
		got = append(texts, got...)
		if pg.Start == 0 {
			break
		}
		before = pg.Start
	}
	require.Equal(t, want, got)
	require.Equal(t, int64(1), lastN)

	// Forwards from line 500.
	off, err := s.LineOffset(build, step, 500)
	require.NoError(t, err)
	pg, err := s.ReadLines(build, step, off, 40)
	require.NoError(t, err)
	require.Equal(t, int64(500), pg.Lines[0].Number)
	require.Equal(t, want[499], string(pg.Lines[0].Text))
	_, err = s.LineOffset(build, step, 1001)
	require.ErrorIs(t, err, logstore.ErrBadOffset)

	// A line longer than the page comes in pieces with its number.
	require.NoError(t, s.Append(build, "long", []byte("short\n"+strings.Repeat("y", 50)+"\n")))
	pg, err = s.ReadLines(build, "long", 6, 20)
	require.NoError(t, err)
	require.Equal(t, int64(2), pg.Lines[0].Number)
	require.Equal(t, int64(26), pg.Next)
}

// Two API replicas without a shared directory, one bucket: a running
// build's log written through one is listed, read with its times and
// waited for on the other, at most a flush behind; once finished it is
// archived whole and its live chunks are gone. A replica that restarts on
// the same directory flushes on after what it flushed before.
func TestLiveLogsReadThroughAnotherReplica(t *testing.T) {
	for name, b := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, other := replica(t, b), replica(t, b)
			c := &clock{t: t0}
			logstore.SetClock(a, c.now)
			const build = "app/test/9/1"
			require.NoError(t, a.Append(build, "setup", []byte("done\n")))
			require.NoError(t, a.Finish(build, "setup"))
			require.NoError(t, a.Append(build, "run", []byte("\x1b[32mok 1\x1b[0m\n")))

			_, err := other.Stat(build, "run")
			require.ErrorIs(t, err, logstore.ErrNotFound, "not flushed yet")
			require.NoError(t, a.Flush(ctx))
			steps, err := other.Steps(build)
			require.NoError(t, err)
			require.Equal(t, []logstore.StepInfo{{Name: "setup", Size: 5, Complete: true}, {Name: "run", Size: 14}}, steps)
			pg, err := other.ReadLines(build, "run", 0, 0)
			require.NoError(t, err)
			require.Equal(t, []shownLine{{N: 1, Text: "\x1b[32mok 1\x1b[0m", Time: t0}}, shown(pg))

			// A writer that moved to the other replica mid-log is refused
			// there, and leaves nothing that would hide the flushed log.
			_, err = other.AppendAt(build, "run", 14, []byte("ok 2\n"))
			require.ErrorIs(t, err, logstore.ErrOffsetMismatch)
			text, _ := readAll(t, other, build, "run")
			require.Equal(t, "\x1b[32mok 1\x1b[0m\n", text)

			// A follower on the other replica wakes when the log grows there.
			woke := make(chan error, 1)
			waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			go func() { woke <- other.Wait(waitCtx, build, "run", 14) }()
			t1 := t0.Add(time.Second)
			c.set(t1)
			require.NoError(t, a.Append(build, "run", []byte("ok 2\npart")))
			require.NoError(t, a.Flush(ctx))
			require.NoError(t, <-woke)
			pg, err = other.ReadLines(build, "run", 14, 0)
			require.NoError(t, err)
			require.Equal(t, []shownLine{{N: 2, Text: "ok 2", Time: t1}, {N: 3, Text: "part", Time: t1, Partial: true}}, shown(pg))

			// Replica a restarts on its directory and flushes on.
			restarted, err := logstore.Open(a.Dir())
			require.NoError(t, err)
			restarted.SetArchive(b, func(err error) { t.Errorf("archive: %v", err) })
			logstore.SetClock(restarted, c.now)
			require.NoError(t, restarted.Append(build, "run", []byte("ial\n")))
			require.NoError(t, restarted.Flush(ctx))
			text, complete := readAll(t, other, build, "run")
			require.Equal(t, "\x1b[32mok 1\x1b[0m\nok 2\npartial\n", text)
			require.False(t, complete)

			require.NoError(t, restarted.Finish(build, "run"))
			text, complete = readAll(t, other, build, "run")
			require.Equal(t, "\x1b[32mok 1\x1b[0m\nok 2\npartial\n", text)
			require.True(t, complete)
			marks, err := other.Marks(build, "run")
			require.NoError(t, err)
			require.Equal(t, []logstore.Mark{{Offset: 0, Line: 0, Time: t0}, {Offset: 14, Line: 1, Time: t1}}, marks)
			left, err := b.List(ctx, "logs/")
			require.NoError(t, err)
			for _, i := range left {
				require.NotContains(t, i.Key, ".live/", "live chunks go once the log is archived")
			}
		})
	}
}

// A remote writer's lines keep the times it saw them written, though it
// ships them together; an old writer's (no marks header) take the time
// they arrive.
func TestRemoteWritersLinesKeepTheirOwnTimes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	arrival := t0.Add(time.Hour)
	logstore.SetClock(s, func() time.Time { return arrival })
	srv := httptest.NewServer(logstore.NewHTTPHandler(s))
	t.Cleanup(srv.Close)
	c := &clock{t: t0}
	const build = "app/test/5"
	w, err := logstore.NewRemoteSink(srv.URL, build, nil, logstore.RemoteOptions{Now: c.now, FlushInterval: time.Hour}).Open("run")
	require.NoError(t, err)
	_, err = io.WriteString(w, "first\nsec")
	require.NoError(t, err)
	t1 := t0.Add(1500 * time.Millisecond)
	c.set(t1)
	_, err = io.WriteString(w, "ond\nthird\n")
	require.NoError(t, err)
	c.set(arrival.Add(time.Hour)) // a clock ahead of the server's
	_, err = io.WriteString(w, "fourth\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	pg, err := s.ReadLines(build, "run", 0, 0)
	require.NoError(t, err)
	require.Equal(t, []shownLine{
		{N: 1, Text: "first", Time: t0},
		{N: 2, Text: "second", Time: t0},
		{N: 3, Text: "third", Time: t1},
		{N: 4, Text: "fourth", Time: arrival},
	}, shown(pg))

	// An old writer: plain appends, stamped on arrival.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, logstore.LogsURL(srv.URL, build, "old")+"?offset=0", strings.NewReader("x\n"))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	marks, err := s.Marks(build, "old")
	require.NoError(t, err)
	require.Equal(t, []logstore.Mark{{Offset: 0, Line: 0, Time: arrival}}, marks)
	require.Equal(t, []logstore.Mark{{Offset: 2, Time: t1}}, logstore.ParseMarks(" 2@"+strconv.FormatInt(t1.UnixMilli(), 10)+",bad,-1@5"))
}
