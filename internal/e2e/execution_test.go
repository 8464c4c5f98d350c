package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestTriggersAndJoins: A → (B, C in parallel) → D, where D requires B and C.
// One commit event runs A, then B and C overlapping in time, then D after
// both. When C fails, D does not run and its reason names C.
func TestTriggersAndJoins(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	rec := recordsFile(t)
	// B and C meet: each opens its gate and waits (up to the gate's bound)
	// for the other's, so they overlap however slowly the machine starts
	// them, and never finish if they do not run side by side.
	bRuns, cRuns := testenv.NewGate(t), testenv.NewGate(t)
	meets := func(me, other *testenv.Gate) string { return me.OpenCmd() + "; " + other.Wait() }
	spec := func(cFails bool) string {
		b, c := record(rec, meets(bRuns, cRuns)), record(rec, meets(cRuns, bRuns))
		if cFails {
			b, c = record(rec, "true"), record(rec, "sleep 1")+"; exit 3"
		}
		return fmt.Sprintf(`
shared: {image: alpine}
jobs:
  A:
    requires: [~commit]
    steps:
      - a: %q
  B:
    requires: [A]
    steps:
      - b: %q
  C:
    requires: [A]
    steps:
      - c: %q
  D:
    requires: [B, C]
    steps:
      - d: %q
`, record(rec, "true"), b, c, record(rec, "true"))
	}
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec(false)})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "joins", Repo: repo.Dir})
	require.NoError(t, err)

	started, err := e.StartEvent(ctx, "joins", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "event: %+v", ev)
	require.Len(t, ev.Builds, 4)
	for _, b := range ev.Builds {
		require.Equal(t, workflows.StatusSuccess, b.Status, "build %s", b.ID)
		require.Equal(t, "local", b.Executor)
	}
	spans := readSpans(t, rec)
	a, b, c, d := spanOf(t, spans, "A"), spanOf(t, spans, "B"), spanOf(t, spans, "C"), spanOf(t, spans, "D")
	require.True(t, !b.Start.Before(a.End) && !c.Start.Before(a.End), "B and C start after A ends")
	require.True(t, b.Start.Before(c.End) && c.Start.Before(b.End), "B %v-%v and C %v-%v overlap", b.Start, b.End, c.Start, c.End)
	require.True(t, !d.Start.Before(b.End) && !d.Start.Before(c.End), "D starts after both B and C end")

	// Now C fails: D must not run, and say why.
	sha := repo.Commit(map[string]string{"screwdriver.yaml": spec(true)}, "make C fail")
	started, err = e.StartEvent(ctx, "joins", api.StartEventRequest{Type: "commit", Branch: "main", SHA: sha})
	require.NoError(t, err)
	ev = e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	require.Equal(t, sha, ev.SHA)
	require.Equal(t, workflows.StatusFailure, buildOf(t, ev, "C").Status)
	require.Contains(t, buildOf(t, ev, "C").Reason, "exited with code 3")
	require.Equal(t, workflows.StatusSuccess, buildOf(t, ev, "B").Status)
	dOut := jobOf(t, ev, "D")
	require.Equal(t, workflows.StatusSkipped, dOut.Status)
	require.Contains(t, dOut.Reason, "C")
	require.Contains(t, dOut.Reason, "FAILURE")
	for _, b := range ev.Builds {
		require.NotEqual(t, "D", b.Job, "D must not run")
	}
}

// TestCollapse: A runs until the test lets it go and B requires A. Five
// commit events at once, with different shas: A runs for the last event
// (and for an earlier one an executor claimed before newer pushes arrived),
// the others are COLLAPSED into a newer build, and B runs after each A that
// ran.
func TestCollapse(t *testing.T) {
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	rec := recordsFile(t)
	gate := testenv.NewGate(t)
	spec := fmt.Sprintf(`
shared: {image: alpine}
jobs:
  A:
    requires: [~commit]
    steps:
      - a: %q
  B:
    requires: [A]
    steps:
      - b: %q
`, record(rec, gate.Wait()), record(rec, "true"))
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "collapse", Repo: repo.Dir})
	require.NoError(t, err)
	var shas []string
	for i := range 5 {
		shas = append(shas, repo.Commit(map[string]string{"file": strconv.Itoa(i)}, "commit "+strconv.Itoa(i)))
	}
	// Five pushes arriving together, as webhooks do.
	ids := make([]string, len(shas))
	begin := time.Now()
	var wg sync.WaitGroup
	for i, sha := range shas {
		wg.Go(func() {
			ev, err := e.StartEvent(ctx, "collapse", api.StartEventRequest{Type: "commit", Branch: "main", SHA: sha})
			assert.NoError(t, err)
			ids[i] = ev.ID
		})
	}
	wg.Wait()
	t.Logf("the five events started in %s", time.Since(begin).Round(time.Millisecond))
	// Events are numbered in the order the pipeline took them.
	sort.Slice(ids, func(i, j int) bool {
		a, _ := workflows.ParseEventRef(ids[i])
		b, _ := workflows.ParseEventRef(ids[j])
		return a.Number < b.Number
	})
	// The first A runs until every push has reached the pipeline and the
	// newest build of A waits behind it.
	newest, err := workflows.ParseEventRef(ids[4])
	require.NoError(t, err)
	waitBuild(t, e, fmt.Sprintf("collapse/A/%d", newest.Number), time.Minute, workflows.StatusBlocked, workflows.StatusQueued, workflows.StatusRunning)
	gate.Open()

	events := make([]api.Event, len(ids))
	for i, id := range ids {
		events[i] = e.WaitEvent(id, 3*time.Minute)
	}
	last := ids[4]
	require.Equal(t, workflows.StatusSuccess, events[4].Status)
	require.Equal(t, workflows.StatusSuccess, buildOf(t, events[4], "A").Status, "A runs for the last event")
	// An A that an executor claimed before a newer push reached the
	// pipeline runs; a waiting one is replaced by the newest build of A
	// (design.md §3). Which ones ran depends on how the busy machine spread
	// the pushes; that every other one collapsed into a newer build, and
	// that something collapsed, does not.
	want := []string{}
	collapsed := 0
	for i := 0; i <= 3; i++ {
		a := buildOf(t, events[i], "A")
		if a.Status == workflows.StatusSuccess {
			want = append(want, ids[i])
			require.Equal(t, workflows.StatusSuccess, jobOf(t, events[i], "B").Status, "event %s: B runs after its A", ids[i])
			continue
		}
		require.Equal(t, workflows.StatusCollapsed, a.Status, "event %s", ids[i])
		collapsed++
		into, ok := strings.CutPrefix(a.Reason, "collapsed into build collapse/A/")
		require.True(t, ok, "event %s: %s", ids[i], a.Reason)
		n, err := strconv.Atoi(into)
		require.NoError(t, err, a.Reason)
		require.Greater(t, n, events[i].Number, "event %s collapsed into a newer build: %s", ids[i], a.Reason)
		require.Equal(t, workflows.StatusSkipped, jobOf(t, events[i], "B").Status)
	}
	want = append(want, last)
	require.Positive(t, collapsed, "five pushes while A runs: some builds of A collapse")
	spans := readSpans(t, rec)
	var aRuns, bRuns []string
	for _, s := range spans {
		switch s.Job {
		case "A":
			aRuns = append(aRuns, s.Event)
		case "B":
			bRuns = append(bRuns, s.Event)
		}
	}
	require.Equal(t, want, aRuns, "A runs for the builds that were not collapsed, in order")
	require.Equal(t, want, bRuns, "B runs after each A that ran")
}

// TestFreezeWindow: a build started inside a freeze window is FROZEN with a
// reason naming the end time and runs after it; --force runs at once.
func TestFreezeWindow(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	// A window covering only the current minute, so the test waits at most
	// a minute. Leave the window at least 40 s for the forced event, on a
	// busy machine too.
	now := time.Now().UTC()
	if now.Second() > 20 {
		time.Sleep(time.Duration(61-now.Second()) * time.Second)
		now = time.Now().UTC()
	}
	window := fmt.Sprintf("%d %d * * ?", now.Minute(), now.Hour())
	end := now.Truncate(time.Minute).Add(time.Minute)
	spec := fmt.Sprintf(`
shared: {image: alpine}
jobs:
  deploy:
    requires: [~commit]
    freezeWindows: [%q]
    steps:
      - go: echo deploying
`, window)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	// Two pipelines on the same repository: one shows the wait, the other
	// --force (in one pipeline the forced build, being newer, would take the
	// frozen one's place: frozen builds of a job collapse to the newest).
	for _, name := range []string{"freeze", "forced"} {
		_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: name, Repo: repo.Dir})
		require.NoError(t, err)
	}

	frozen, err := e.StartEvent(ctx, "freeze", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	var b api.Build
	e.WaitFor("the build to be FROZEN", 30*time.Second, func() bool {
		b, err = e.API.GetBuild(ctx, "freeze/deploy/"+strconv.Itoa(frozen.Number))
		return err == nil && b.Status == workflows.StatusFrozen
	})
	require.Contains(t, b.Reason, "frozen until "+end.Format(time.RFC3339))
	require.Contains(t, b.Reason, window)

	// A forced start runs through the window.
	forced, err := e.StartEvent(ctx, "forced", api.StartEventRequest{Type: "commit", Branch: "main", Force: true})
	require.NoError(t, err)
	fev := e.WaitEvent(forced.ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, fev.Status)
	require.True(t, time.Now().UTC().Before(end), "the forced build finished inside the window")

	// The frozen one runs once the window ends.
	ev := e.WaitEvent(frozen.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status)
	started := buildOf(t, ev, "deploy").StartTime
	require.False(t, started.Before(end), "frozen build started at %v, window ends %v", started, end)
}

// TestCancel: a cancelled queued build never starts, even when the slot it
// waited for frees; cancelling a running `sleep 600` kills its process and
// the build ends ABORTED.
func TestCancel(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	// A queue with one slot on one executor; a build holds it until the
	// gate file appears.
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "gated", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	e.StartExecutor(testenv.ExecutorOptions{Name: "gate-1", Queues: []string{"gated"}})
	e.WaitExecutorLive("gate-1")
	dir := t.TempDir()
	gate, holding := filepath.Join(dir, "gate"), filepath.Join(dir, "holding")
	holder := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: alpine}
jobs:
  hold:
    requires: [~commit]
    annotations:
      screwdriver.cd/executor: gated
    steps:
      - hold: touch %s; while [ ! -e %s ]; do sleep 0.1; done
`, holding, gate)})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "holder", Repo: holder.Dir})
	require.NoError(t, err)
	held, err := e.StartEvent(ctx, "holder", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	e.WaitFor("the holder to take the slot", 30*time.Second, func() bool { _, err := os.Stat(holding); return err == nil })

	pidFile := filepath.Join(dir, "pid")
	marker := filepath.Join(dir, "queued-ran")
	spec := fmt.Sprintf(`
shared: {image: alpine}
jobs:
  queued:
    requires: [~commit]
    annotations:
      screwdriver.cd/executor: gated
    steps:
      - never: touch %s
  long:
    requires: [~commit]
    steps:
      - sleep: sh -c 'echo $$ > %s; exec sleep 600'
`, marker, pidFile)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "cancel", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "cancel", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	queuedID := "cancel/queued/" + strconv.Itoa(ev.Number)
	longID := "cancel/long/" + strconv.Itoa(ev.Number)

	var queued api.Build
	// The registry learns that gate-1 runs the holder with gate-1's next
	// report, which may come after the queued build is dispatched.
	e.WaitFor("the queued build to wait for the busy slot", 30*time.Second, func() bool {
		queued, err = e.API.GetBuild(ctx, queuedID)
		return err == nil && queued.Status == workflows.StatusQueued && !queued.QueuedTime.IsZero() &&
			strings.Contains(queued.Reason, "1/1 busy")
	})
	require.Contains(t, queued.Reason, "gated")
	// event show gives the waiting build the same detailed reason.
	shown, err := e.API.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	require.Equal(t, queued.Reason, buildOf(t, shown, "queued").Reason)
	require.NoError(t, e.API.CancelBuild(ctx, queuedID))
	e.WaitFor("the queued build to end", 30*time.Second, func() bool {
		b, err := e.API.GetBuild(ctx, queuedID)
		return err == nil && b.Status.Final()
	})
	// The slot frees: the cancelled build must not take it.
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(held.ID, time.Minute).Status)

	var pid int
	e.WaitFor("the long build to start", 30*time.Second, func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	require.NoError(t, syscall.Kill(pid, 0), "sleep 600 runs")
	require.NoError(t, e.API.CancelBuild(ctx, longID))
	e.WaitFor("the sleep process to die", 15*time.Second, func() bool {
		return !alive(pid)
	})

	final := e.WaitEvent(ev.ID, time.Minute)
	require.Equal(t, workflows.StatusAborted, buildOf(t, final, "long").Status)
	q := buildOf(t, final, "queued")
	require.Equal(t, workflows.StatusAborted, q.Status)
	require.True(t, q.StartTime.IsZero(), "the cancelled queued build never started")
	require.NoFileExists(t, marker, "the cancelled build never ran, though its slot freed")
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
