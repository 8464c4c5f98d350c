package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/scm"
)

// The baselines: one bare workflow that runs one activity, the activity on
// its own worker and task queue, on the same server as sluice. Two kinds:
//
//   - no-op: the activity does nothing — Temporal's floor for "start
//     something, then run a task somewhere else";
//   - comparable: the activity does what an executor does for a build, with
//     the executor's own code: open the repository's mirror (scm.Open), check
//     the same commit out into a fresh directory (scm.Repo.Checkout, the
//     executor's own: docs/performance.md says what it runs), run the figures'
//     step (`true` between two records of the shell's clock, recordCmd) in
//     `sh -c` there, and remove the directory. What is left between sluice
//     and it is orchestration: resolving the event, the lanes, the claim,
//     the runner.
//
// The activity workers run in the bench process (their git and sh children
// count towards its CPU); sluice's executors are processes of their own.
const bareWorkflowQueue = "bare-workflows"

// baselineKind is which activity a bare workflow runs.
type baselineKind int

const (
	noopBaseline baselineKind = iota
	comparableBaseline
)

func (k baselineKind) String() string {
	if k == comparableBaseline {
		return "comparable"
	}
	return "no-op"
}

// activity is the activity's registered name.
func (k baselineKind) activity() string {
	if k == comparableBaseline {
		return "ComparableActivity"
	}
	return "BareActivity"
}

// queue is the activity's task queue.
func (k baselineKind) queue() string {
	if k == comparableBaseline {
		return "comparable-activities"
	}
	return "bare-activities"
}

// BareInput names the activity and its task queue.
type BareInput struct {
	ActivityQueue string `json:"activity_queue"`
	Activity      string `json:"activity,omitempty"`
}

// BareWorkflow runs one activity once (BareActivity when none is named).
func BareWorkflow(ctx workflow.Context, in BareInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           in.ActivityQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	name := in.Activity
	if name == "" {
		name = noopBaseline.activity()
	}
	return workflow.ExecuteActivity(ctx, name).Get(ctx, nil)
}

// checkoutWork is what the comparable activity checks out: the commit sha
// of the repository at repo (the pipeline's own), with its mirror under
// cache and fresh directories under workDir.
type checkoutWork struct {
	repo, sha      string
	cache, workDir string
}

// newCheckoutWork is the comparable baseline's work for a repository at its
// HEAD, with its mirror and workspaces under dir.
func newCheckoutWork(ctx context.Context, r *repo, dir string) (checkoutWork, error) {
	sha, err := r.head(ctx)
	if err != nil {
		return checkoutWork{}, err
	}
	return checkoutWork{repo: r.dir, sha: sha, cache: filepath.Join(dir, "git"), workDir: filepath.Join(dir, "work")}, nil
}

// runMarks are the moments a bare run's activity reached: its start, and
// (comparable) its step's start after the checkout, as the step's shell
// read it from the clock (sluice's steps are timed the same way).
type runMarks struct {
	activity, step time.Time
}

// bareActivities runs both activities and notes their marks.
type bareActivities struct {
	work  checkoutWork
	marks sync.Map // workflow ID -> runMarks
}

// noop is the no-op activity.
func (a *bareActivities) noop(ctx context.Context) error {
	now := time.Now()
	a.marks.Store(activity.GetInfo(ctx).WorkflowExecution.ID, runMarks{activity: now, step: now})
	return nil
}

// comparable is the executor's work for a build: the checkout into a fresh
// directory, then the latency figure's step in `sh -c` there.
func (a *bareActivities) comparable(ctx context.Context) error {
	started := time.Now()
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	dir := filepath.Join(a.work.workDir, id)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("prepare %s: %w", dir, err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	r, err := scm.Open(ctx, a.work.repo, a.work.cache)
	if err == nil {
		err = r.Checkout(ctx, a.work.sha, dir)
	}
	if err != nil {
		return fmt.Errorf("comparable baseline %s: %w", id, err)
	}
	// The step is the bench's sluice step, `true` between two records, and
	// its start is read the same way: from the shell's own clock.
	rec := dir + ".rec"
	defer func() { _ = os.Remove(rec) }()
	cmd := exec.CommandContext(ctx, "sh", "-c", recordCmd(rec, "true"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SD_BUILD_ID="+id)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("comparable baseline %s: sh: %w: %s", id, err, out)
	}
	spans, err := readRecords(rec)
	if err != nil {
		return fmt.Errorf("comparable baseline %s: %w", id, err)
	}
	sp, ok := spans[id]
	if !ok || sp.start.IsZero() {
		return fmt.Errorf("comparable baseline %s: its step recorded no start", id)
	}
	a.marks.Store(id, runMarks{activity: started, step: sp.start})
	return nil
}

// baseline runs the bare workflows' workers: one for workflows, and
// activity workers per kind.
type baseline struct {
	c       client.Client
	acts    *bareActivities
	workers []worker.Worker
}

// startBaseline starts the workflow worker and, for each kind, activityWorkers
// workers of slots each (none: add them later with addActivityWorkers).
func startBaseline(c client.Client, work checkoutWork, activityWorkers, slots int, kinds ...baselineKind) (*baseline, error) {
	bl := &baseline{c: c, acts: &bareActivities{work: work}}
	ww := worker.New(c, bareWorkflowQueue, worker.Options{})
	ww.RegisterWorkflow(BareWorkflow)
	if err := bl.start(ww); err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if err := bl.addActivityWorkers(k, activityWorkers, slots); err != nil {
			bl.stop()
			return nil, err
		}
	}
	return bl, nil
}

// addActivityWorkers starts n workers of slots each for kind's activity.
func (bl *baseline) addActivityWorkers(k baselineKind, n, slots int) error {
	fn := bl.acts.noop
	if k == comparableBaseline {
		fn = bl.acts.comparable
	}
	for range n {
		aw := worker.New(bl.c, k.queue(), worker.Options{MaxConcurrentActivityExecutionSize: slots})
		aw.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: k.activity()})
		if err := bl.start(aw); err != nil {
			return err
		}
	}
	return nil
}

func (bl *baseline) start(w worker.Worker) error {
	if err := w.Start(); err != nil {
		return fmt.Errorf("start baseline worker: %w", err)
	}
	bl.workers = append(bl.workers, w)
	return nil
}

func (bl *baseline) stop() {
	for _, w := range bl.workers {
		w.Stop()
	}
}

// startRun starts one bare workflow of kind k.
func (bl *baseline) startRun(ctx context.Context, k baselineKind, id string) (client.WorkflowRun, error) {
	run, err := bl.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareWorkflowQueue},
		BareWorkflow, BareInput{ActivityQueue: k.queue(), Activity: k.activity()})
	if err != nil {
		return nil, fmt.Errorf("start %s baseline workflow %s: %w", k, id, err)
	}
	return run, nil
}

// once starts one bare workflow and waits for it; it returns the time from
// the start call to the activity's start and to its step's start (the same
// for the no-op kind).
func (bl *baseline) once(ctx context.Context, k baselineKind, id string) (toActivity, toStep time.Duration, err error) {
	t0 := time.Now()
	run, err := bl.startRun(ctx, k, id)
	if err != nil {
		return 0, 0, err
	}
	if err := run.Get(ctx, nil); err != nil {
		return 0, 0, fmt.Errorf("%s baseline workflow %s: %w", k, id, err)
	}
	v, ok := bl.acts.marks.Load(id)
	if !ok {
		return 0, 0, fmt.Errorf("%s baseline workflow %s ended without its activity", k, id)
	}
	m, _ := v.(runMarks)
	return m.activity.Sub(t0), m.step.Sub(t0), nil
}

// burst starts n bare workflows of kind k at once and waits for them: the
// wall time from the first start call to the last close, and the stack's
// CPU (cpu) from the first start until every run has ended — read before
// visibility is polled for the close times.
func (bl *baseline) burst(ctx context.Context, k baselineKind, prefix string, n int, cpu func() time.Duration) (burst, error) {
	cpu0 := cpu()
	start := time.Now()
	runs, err := bl.startRuns(ctx, k, prefix, n)
	if err != nil {
		return burst{}, err
	}
	if err := waitRuns(ctx, k, runs); err != nil {
		return burst{}, err
	}
	used := cpu() - cpu0
	last, err := bl.lastClose(ctx, prefix, n)
	if err != nil {
		return burst{}, err
	}
	return burst{runs: n, wall: last.Sub(start), cpu: used}, nil
}

// startRuns starts n bare workflows of kind k, <prefix>-0 .. <prefix>-(n-1),
// 64 calls at a time.
func (bl *baseline) startRuns(ctx context.Context, k baselineKind, prefix string, n int) ([]client.WorkflowRun, error) {
	runs := make([]client.WorkflowRun, n)
	err := parallel(n, 64, func(i int) error {
		run, err := bl.startRun(ctx, k, fmt.Sprintf("%s-%d", prefix, i))
		runs[i] = run
		return err
	})
	return runs, err
}

// waitRuns waits until every run has ended (long polls, 64 at a time).
func waitRuns(ctx context.Context, k baselineKind, runs []client.WorkflowRun) error {
	return parallel(len(runs), 64, func(i int) error {
		if err := runs[i].Get(ctx, nil); err != nil {
			return fmt.Errorf("%s baseline workflow %s: %w", k, runs[i].GetID(), err)
		}
		return nil
	})
}

// lastClose is the close time of the last of the n bare runs named
// <prefix>-*, from visibility.
func (bl *baseline) lastClose(ctx context.Context, prefix string, n int) (time.Time, error) {
	_, last, err := closedSpan(ctx, bl.c, fmt.Sprintf("WorkflowType = 'BareWorkflow' AND WorkflowId STARTS_WITH '%s-'", prefix), n)
	return last, err
}
