package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// parallelSpec is a pipeline of n independent jobs j0..j(n-1) on queue q,
// each running cmd with its start and end recorded in rec.
func parallelSpec(n int, q, rec, cmd string) string {
	var b strings.Builder
	b.WriteString("shared: {image: alpine}\njobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  j%d:\n    requires: [~commit]\n    annotations:\n      screwdriver.cd/executor: %q\n    steps:\n      - run: %q\n",
			i, q, record(rec, cmd))
	}
	return b.String()
}

func startParallel(t *testing.T, e *testenv.Env, name string, n int, q, rec, cmd string) api.EventStarted {
	t.Helper()
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": parallelSpec(n, q, rec, cmd)})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: name, Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, name, api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	return ev
}

// waitDispatched waits until n builds of the event wait for a slot and
// returns them.
func waitDispatched(t *testing.T, e *testenv.Env, event string, n int) []api.Build {
	t.Helper()
	var bs []api.Build
	e.WaitFor(fmt.Sprintf("%d builds of %s to wait for a slot", n, event), time.Minute, func() bool {
		all, err := e.API.ListBuilds(e.Context(), api.BuildFilter{Event: event, Status: workflows.StatusQueued, Limit: 100})
		if err != nil {
			return false
		}
		bs = bs[:0]
		for _, b := range all {
			if !b.QueuedTime.IsZero() {
				bs = append(bs, b)
			}
		}
		return len(bs) == n
	})
	return bs
}

// maxConcurrent is the largest number of spans (filtered by keep) running at once.
func maxConcurrent(spans []span, keep func(span) bool) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if keep(s) {
			edges = append(edges, edge{s.Start, 1}, edge{s.End, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	cur, best := 0, 0
	for _, e := range edges {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

// TestNoExecutor: with no live executor, 10 builds stay QUEUED with the
// reason "no live member"; starting an executor runs all 10, none dropped.
// Logs shipped by the executor process are readable through the API.
func TestNoExecutor(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{
		Name: "idle", Description: "executors only",
		Rules: []string{"run-on=executors,max-parallel=4"},
	})
	require.NoError(t, err)
	rec := recordsFile(t)
	ev := startParallel(t, e, "noexec", 10, "idle", rec, "echo built; sleep 1")

	queued := waitDispatched(t, e, ev.ID, 10)
	for _, b := range queued {
		require.Contains(t, b.Reason, "no live member", "build %s", b.ID)
		require.Contains(t, b.Reason, "idle")
	}
	// They stay queued: nothing can take them.
	time.Sleep(2 * time.Second)
	st, err := e.API.QueueStatus(ctx, "idle")
	require.NoError(t, err)
	require.Equal(t, 10, st.Backlog)
	require.NotEmpty(t, st.Oldest)
	require.Contains(t, st.Why, "no live member")
	b, err := e.API.GetBuild(ctx, queued[0].ID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusQueued, b.Status)
	require.Contains(t, b.Reason, "no live member")

	e.StartExecutor(testenv.ExecutorOptions{Name: "late", Queues: []string{"idle"}})
	final := e.WaitEvent(ev.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)
	require.Len(t, final.Builds, 10)
	for _, b := range final.Builds {
		require.Equal(t, workflows.StatusSuccess, b.Status)
		require.Equal(t, "late", b.Executor)
	}
	require.Len(t, readSpans(t, rec), 10, "every build ran exactly once")

	// Logs shipped from the executor process to the API.
	b, err = e.API.GetBuild(ctx, final.Builds[0].ID)
	require.NoError(t, err)
	e.WaitFor("the shipped log to be complete", 10*time.Second, func() bool {
		ch, err := e.API.ReadLog(ctx, b.LogKey, "run", 0, 0)
		return err == nil && ch.Complete && strings.Contains(string(ch.Data), "built")
	})
	ch, err := e.API.ReadLog(ctx, b.LogKey, "run", 2, 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), ch.Offset)
	require.Len(t, ch.Data, 3, "offset/length reads")
}

// TestSlotsAndGap: queue q has run-on=executors,max-parallel=2,min-gap=3s and
// two executors. 12 builds of `sleep 2` never exceed 2 concurrent per
// executor (4 in all), and a slot stays busy 3 s after each build.
func TestSlotsAndGap(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "q", Rules: []string{"run-on=executors,max-parallel=2,min-gap=3s"}})
	require.NoError(t, err)
	for _, name := range []string{"exec-a", "exec-b"} {
		e.StartExecutor(testenv.ExecutorOptions{Name: name, Queues: []string{"q"}})
		e.WaitExecutorLive(name)
	}
	rec := recordsFile(t)
	ev := startParallel(t, e, "slots", 12, "q", rec, "sleep 2")
	final := e.WaitEvent(ev.ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)

	spans := readSpans(t, rec)
	require.Len(t, spans, 12)
	require.LessOrEqual(t, maxConcurrent(spans, func(span) bool { return true }), 4)
	const gap = 3 * time.Second
	for _, ex := range []string{"exec-a", "exec-b"} {
		mine := func(s span) bool { return s.Executor == ex }
		require.LessOrEqual(t, maxConcurrent(spans, mine), 2, "executor %s", ex)
		// A slot is busy from a build's start until min-gap after its end:
		// when a build starts, at most one other build of this executor may
		// occupy a slot (max-parallel 2).
		for _, s := range spans {
			if !mine(s) {
				continue
			}
			busy := 0
			for _, o := range spans {
				if mine(o) && o != s && !o.Start.After(s.Start) && s.Start.Before(o.End.Add(gap)) {
					busy++
				}
			}
			require.LessOrEqual(t, busy, 1, "build %s on %s started at %s while both slots were busy or resting", s.Job, ex, s.Start.Format("15:04:05.000"))
		}
	}
}

// TestFallbackToController: rules executors max-parallel=4, then controller
// max-parallel=1 min-gap=5s. Killing every executor moves dispatch to the
// controller, one build at a time with ≥ 5 s between builds; restarting an
// executor returns to rule 1.
func TestFallbackToController(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "fb", Rules: []string{
		"run-on=executors,max-parallel=4", "run-on=controller,max-parallel=1,min-gap=5s",
	}})
	require.NoError(t, err)
	var execs []*testenv.Process
	for _, name := range []string{"fb-1", "fb-2"} {
		execs = append(execs, e.StartExecutor(testenv.ExecutorOptions{Name: name, Queues: []string{"fb"}}))
		e.WaitExecutorLive(name)
	}
	st, err := e.API.QueueStatus(ctx, "fb")
	require.NoError(t, err)
	require.Equal(t, 0, st.ActiveRule, "rule 1 is active with executors: %s", st.Why)

	rec := recordsFile(t)
	ev := startParallel(t, e, "fallback", 6, "fb", rec, "sleep 2")
	e.WaitFor("builds to run on the executors", time.Minute, func() bool {
		bs, err := e.API.ListBuilds(ctx, api.BuildFilter{Event: ev.ID, Status: workflows.StatusRunning})
		return err == nil && len(bs) > 0
	})
	for _, p := range execs {
		p.Kill()
	}
	killed := time.Now()
	e.WaitFor("the controller rule to take over", 30*time.Second, func() bool {
		st, err = e.API.QueueStatus(ctx, "fb")
		return err == nil && st.ActiveRule == 1
	})
	require.Contains(t, st.Why, "falling back")

	// Let the controller run at least two builds, then bring an executor back.
	e.WaitFor("two builds on the controller", 2*time.Minute, func() bool {
		n := 0
		for _, s := range readSpans(t, rec) {
			if s.Executor == "controller" {
				n++
			}
		}
		return n >= 2
	})
	back := time.Now()
	e.StartExecutor(testenv.ExecutorOptions{Name: "fb-3", Queues: []string{"fb"}})
	e.WaitFor("rule 1 to be active again", 30*time.Second, func() bool {
		st, err = e.API.QueueStatus(ctx, "fb")
		return err == nil && st.ActiveRule == 0
	})
	final := e.WaitEvent(ev.ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)

	spans := readSpans(t, rec)
	var onController []span
	onBack := 0
	for _, s := range spans {
		switch s.Executor {
		case "controller":
			onController = append(onController, s)
			require.True(t, s.Start.After(killed), "the controller ran a build only after the executors died")
		case "fb-3":
			onBack++
			require.True(t, s.Start.After(back))
		}
	}
	require.GreaterOrEqual(t, len(onController), 2)
	require.Equal(t, 1, maxConcurrent(onController, func(span) bool { return true }), "one at a time on the controller")
	for i := 1; i < len(onController); i++ {
		gap := onController[i].Start.Sub(onController[i-1].End)
		require.GreaterOrEqual(t, gap, 5*time.Second, "min-gap between controller builds %d and %d", i-1, i)
	}
	require.Positive(t, onBack, "builds returned to the restarted executor")
}

// TestFailover: killing the executor during a running build makes the build
// finish on the other executor, and its record shows 2 attempts.
func TestFailover(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{BuildHeartbeat: 4 * time.Second})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "fo", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	procs := map[string]*testenv.Process{}
	for _, name := range []string{"fo-1", "fo-2"} {
		procs[name] = e.StartExecutor(testenv.ExecutorOptions{Name: name, Queues: []string{"fo"}})
		e.WaitExecutorLive(name)
	}
	rec := recordsFile(t)
	ev := startParallel(t, e, "failover", 1, "fo", rec, "sleep 6")
	id := "failover/j0/" + strconv.Itoa(ev.Number)
	var b api.Build
	e.WaitFor("the build to run", time.Minute, func() bool {
		b, err = e.API.GetBuild(ctx, id)
		return err == nil && b.Status == workflows.StatusRunning
	})
	first := b.Executor
	time.Sleep(time.Second)
	procs[first].Kill()
	killed := time.Now()

	final := e.WaitEvent(ev.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)
	b, err = e.API.GetBuild(ctx, id)
	require.NoError(t, err)
	require.Len(t, b.AttemptList, 2, "attempts: %+v", b.AttemptList)
	require.Equal(t, first, b.AttemptList[0].Executor)
	require.Contains(t, b.AttemptList[0].Outcome, "lost")
	require.NotEqual(t, first, b.AttemptList[1].Executor)
	require.Equal(t, b.AttemptList[1].Executor, b.Executor)
	require.Less(t, b.AttemptList[1].Start.Sub(killed), 4*time.Second+30*time.Second, "re-dispatched within heartbeat timeout + 30s")
	spans := readSpans(t, rec)
	require.Len(t, spans, 1, "the killed attempt never completed; the second did, once")
	require.Equal(t, b.Executor, spans[0].Executor)
}

// TestLiveQueueUpdate: raising max-parallel from 1 to 3 raises concurrency
// on a running executor without restarting it.
func TestLiveQueueUpdate(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "live", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	proc := e.StartExecutor(testenv.ExecutorOptions{Name: "live-1", Queues: []string{"live"}})
	e.WaitExecutorLive("live-1")
	rec := recordsFile(t)
	ev := startParallel(t, e, "live", 9, "live", rec, "sleep 3")
	e.WaitFor("two builds to finish one at a time", time.Minute, func() bool {
		return len(readSpans(t, rec)) >= 2
	})
	require.Equal(t, 1, maxConcurrent(readSpans(t, rec), func(span) bool { return true }))
	updated := time.Now()
	_, err = e.API.UpdateQueue(ctx, api.QueueRequest{Name: "live", Rules: []string{"run-on=executors,max-parallel=3"}})
	require.NoError(t, err)
	final := e.WaitEvent(ev.ID, 3*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)
	spans := readSpans(t, rec)
	after := maxConcurrent(spans, func(s span) bool { return s.Start.After(updated) })
	require.Equal(t, 3, after, "three at once after the update")
	before := maxConcurrent(spans, func(s span) bool { return s.End.Before(updated) })
	require.Equal(t, 1, before)
	// The same process applied the change: it logged the new slot count and
	// started only once.
	require.Contains(t, proc.Output(), "queue=live slots=3")
	require.Equal(t, 1, strings.Count(proc.Output(), "msg=executor_started"))
}

// TestQueueDeleteRefusedWhileReachable: a queue that a running event's later
// job names cannot be deleted (the build would wait on a task queue nobody
// polls), even before that job has a build; once the event ends it can.
func TestQueueDeleteRefusedWhileReachable(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "late", Rules: []string{"run-on=executors"}})
	require.NoError(t, err)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  build: {requires: [~commit], steps: [{wait: 'sleep 30'}]}
  deploy:
    requires: [build]
    annotations: {screwdriver.cd/executor: late}
    steps: [{ship: 'true'}]
`})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "reach", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "reach", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	e.WaitFor("build to run", 30*time.Second, func() bool {
		b, err := e.API.GetBuild(ctx, "reach/build/"+strconv.Itoa(ev.Number))
		return err == nil && b.Status == workflows.StatusRunning
	})
	var derr error
	e.WaitFor("the delete to be refused for the running event", 30*time.Second, func() bool {
		derr = e.API.DeleteQueue(ctx, "late")
		return derr != nil && strings.Contains(derr.Error(), "can still be reached by running events ("+ev.ID+")")
	})
	var ae *api.Error
	require.ErrorAs(t, derr, &ae)
	require.Equal(t, 409, ae.Status)
	qs, err := e.API.ListQueues(ctx)
	require.NoError(t, err)
	require.True(t, func() bool {
		for _, q := range qs {
			if q.Name == "late" {
				return true
			}
		}
		return false
	}(), "the refused delete left the queue in place")

	require.NoError(t, e.API.CancelEvent(ctx, ev.ID))
	require.Equal(t, workflows.StatusAborted, e.WaitEvent(ev.ID, time.Minute).Status)
	e.WaitFor("the delete to succeed once the event ended", 30*time.Second, func() bool {
		return e.API.DeleteQueue(ctx, "late") == nil
	})
}
