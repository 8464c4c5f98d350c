package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/internal/histcost"
	"github.com/sluice-ci/sluice/workflows"
)

// The model_b figure measures, in bare Temporal on the same server, what
// folding the build workflow into the event would save (option B,
// docs/option-b.md), before sluice is rebuilt around it. One 1-job event in
// three shapes, each doing the Temporal work sluice's event and build do for
// it today, with stand-ins for sluice's own code:
//
//   - child (today): the event workflow reads its spec and asks the lanes
//     (two local activities: two markers), upserts its commit and queues
//     with a memo, and starts the build as a child workflow that starts
//     dispatched; the build schedules the run on the executors' task queue,
//     whose activity claims it by an update (the build upserts its status and
//     executor, and a memo); the build ends with a status upsert and a memo;
//     the event notes the remote triggers (a marker), upserts its status and
//     ends;
//   - activity (option B): the same event runs the build's activity itself,
//     with the upsert option B needs to keep a waiting build findable (the
//     event's list of waiting builds) before it, takes the claim as an
//     update naming the build (a status upsert and a memo, as the build did),
//     and upserts its list and memo again when the build ends;
//   - started: the build is a workflow of its own but not a child.
//
// The activity is the comparable baseline's work (checkout + the step in sh)
// after the claim. The difference between the shapes, per build, is what
// option B takes off sluice's figures; docs/performance.md subtracts it.
const (
	modelWorkflowQueue = "model-workflows"
	modelActivityQueue = "model-activities"
	modelClaim         = "claim"
	modelRunActivity   = "ModelRun"
	modelStartBuild    = "ModelStartBuild"
	modelSignalEnd     = "ModelSignalEnd"
)

type modelShape int

const (
	childShape modelShape = iota
	activityShape
	// startedShape: the build is a workflow of its own, not a child: the
	// event's local activity that asks the lanes starts it, and its end
	// reaches the event as a signal from a local activity.
	startedShape
)

var modelShapes = []modelShape{childShape, activityShape, startedShape}

func (s modelShape) String() string {
	switch s {
	case activityShape:
		return "activity"
	case startedShape:
		return "started"
	}
	return "child"
}

// ModelInput is a model event's (or its child build's) input.
type ModelInput struct {
	Shape modelShape `json:"shape"`
	Build string     `json:"build"`
	// Jobs > 1 runs a chain of that many builds, one after the other.
	Jobs int `json:"jobs,omitempty"`
}

// ModelRunInput names the workflow the run claims from and the build.
type ModelRunInput struct {
	ClaimFrom string `json:"claim_from"`
	Build     string `json:"build"`
}

// ModelClaim is the claim update's argument.
type ModelClaim struct {
	Build    string `json:"build"`
	Executor string `json:"executor"`
}

// modelSummary stands in for a build's memo.
type modelSummary struct {
	Reason   string    `json:"reason"`
	Executor string    `json:"executor,omitempty"`
	Start    time.Time `json:"start"`
}

func modelNoop(context.Context) (string, error) { return "ok", nil }

// ModelEventWorkflow is the event, in its input's shape.
func ModelEventWorkflow(ctx workflow.Context, in ModelInput) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second})
	var out string
	if err := workflow.ExecuteLocalActivity(lctx, modelNoop).Get(lctx, &out); err != nil { // ResolveEvent
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.SASHA.ValueSet("0123456789abcdef"), workflows.SAQueues.ValueSet([]string{"bench"}))
	_ = workflow.UpsertMemo(ctx, map[string]any{"statuses": "none"})
	if err := workflow.ExecuteLocalActivity(lctx, modelNoop).Get(lctx, &out); err != nil { // UpdatePipeline
		return err
	}
	for j := range max(in.Jobs, 1) {
		b := in
		if j > 0 {
			b.Build = fmt.Sprintf("%s/%d", in.Build, j)
		}
		if err := modelBuild(ctx, lctx, b); err != nil {
			return err
		}
	}
	if err := workflow.ExecuteLocalActivity(lctx, modelNoop).Get(lctx, &out); err != nil { // TriggerRemote
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.SAStatus.ValueSet("SUCCESS"))
	return nil
}

// modelBuild runs one build of the event in its shape. In the activity
// shape the event then upserts its lists and memo again (the build left its
// running list): option B pays that where a child build closed.
func modelBuild(ctx, lctx workflow.Context, in ModelInput) error {
	switch in.Shape {
	case activityShape:
		if err := modelRunBuild(ctx, in.Build, true); err != nil {
			return err
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.SASubscriptions.ValueSet(nil))
		_ = workflow.UpsertMemo(ctx, map[string]any{"builds": modelSummary{Reason: "succeeded"}})
		return nil
	case startedShape:
		// The lanes' local activity above starts it in this shape; one
		// more here keeps the stand-in simple (a marker more than needed).
		if err := workflow.ExecuteLocalActivity(lctx, modelStartBuild, in).Get(lctx, nil); err != nil {
			return err
		}
		workflow.GetSignalChannel(ctx, "build-ended").Receive(ctx, nil)
		return nil
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            in.Build + "-build",
		TaskQueue:             modelWorkflowQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SAStatus.ValueSet("QUEUED"), workflows.SADispatchedAt.ValueSet(workflow.Now(ctx))),
		Memo:                  map[string]any{"build": modelSummary{Reason: "waiting for a slot"}},
	})
	return workflow.ExecuteChildWorkflow(cctx, ModelBuildWorkflow, in).Get(ctx, nil)
}

// ModelBuildWorkflow is the child shape's build workflow.
func ModelBuildWorkflow(ctx workflow.Context, in ModelInput) error {
	if err := modelRunBuild(ctx, in.Build, false); err != nil {
		return err
	}
	if in.Shape == startedShape {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second})
		if err := workflow.ExecuteLocalActivity(lctx, modelSignalEnd, in).Get(lctx, nil); err != nil {
			return err
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.SAStatus.ValueSet("SUCCESS"))
	_ = workflow.UpsertMemo(ctx, map[string]any{"build": modelSummary{Reason: "succeeded"}})
	return nil
}

// startBuild is the started shape's local activity that starts the build.
func (m *modelActivities) startBuild(ctx context.Context, in ModelInput) error {
	_, err := m.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: in.Build + "-build", TaskQueue: modelWorkflowQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SAStatus.ValueSet("QUEUED"), workflows.SADispatchedAt.ValueSet(time.Now())),
		Memo:                  map[string]any{"build": modelSummary{Reason: "waiting for a slot"}},
	}, ModelBuildWorkflow, in)
	return err
}

// signalEnd is the started shape's local activity that tells the event.
func (m *modelActivities) signalEnd(ctx context.Context, in ModelInput) error {
	event, _, _ := strings.Cut(in.Build, "/")
	return m.c.SignalWorkflow(ctx, event, "", "build-ended", "SUCCESS")
}

// modelRunBuild takes the claim and runs the build's activity. With waiting
// (the activity shape) the event first upserts its list of waiting builds,
// which option B needs to keep them findable.
func modelRunBuild(ctx workflow.Context, build string, waiting bool) error {
	claimed := false
	err := workflow.SetUpdateHandlerWithOptions(ctx, modelClaim, func(ctx workflow.Context, c ModelClaim) error {
		claimed = true
		_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.SAStatus.ValueSet("RUNNING"), workflows.SAExecutor.ValueSet(c.Executor))
		_ = workflow.UpsertMemo(ctx, map[string]any{"build": modelSummary{Reason: "running on " + c.Executor, Executor: c.Executor, Start: workflow.Now(ctx)}})
		return nil
	}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, c ModelClaim) error {
		if claimed || c.Build != build {
			return errors.New("refused")
		}
		return nil
	}})
	if err != nil {
		return err
	}
	if waiting {
		// A keyword list (SluiceSubscriptions stands in for it here).
		_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.SASubscriptions.ValueSet([]string{build}))
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: modelActivityQueue, StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(actx, modelRunActivity, ModelRunInput{ClaimFrom: workflow.GetInfo(ctx).WorkflowExecution.ID, Build: build}).Get(ctx, nil)
}

// modelActivities is the model's executor: the claim, then the comparable
// baseline's work.
type modelActivities struct {
	c     client.Client
	bare  *bareActivities
	marks sync.Map // event workflow ID -> time the activity started
}

func (m *modelActivities) run(ctx context.Context, in ModelRunInput) error {
	m.marks.Store(in.Build, time.Now())
	h, err := m.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: in.ClaimFrom, UpdateName: modelClaim, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{ModelClaim{Build: in.Build, Executor: "model-exec"}},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("claim %s: %w", in.Build, err)
	}
	return m.bare.comparable(ctx)
}

// modelEvents is the size of each model_b burst: the throughput figure's,
// at most 200 (a full run's 500 took 9 minutes for a few percent of
// precision).
func (p plan) modelEvents() int { return min(p.throughputEvents, 200) }

// modelLatencyRuns is how many events of each shape model_b runs one at a
// time for the dispatch figures.
func (p plan) modelLatencyRuns() int { return min(p.latencyEvents, 50) }

// modelRun holds the figure's workers and bursts.
type modelRun struct {
	s    *stack
	b    *bench
	bl   *baseline
	acts *modelActivities
	runs map[modelShape]*bursts
	comp bursts
}

func runModelB(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStack(ctx, "model_b", stackOptions{})
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	r, err := newRepo(ctx, filepath.Join(s.dir, "repo"), specYAML([]job{{name: "main", cmd: "true"}}))
	if err != nil {
		return "", err
	}
	work, err := newCheckoutWork(ctx, r, filepath.Join(s.dir, "baseline"))
	if err != nil {
		return "", err
	}
	m := &modelRun{s: s, b: b, runs: map[modelShape]*bursts{childShape: {}, activityShape: {}, startedShape: {}}}
	m.bl, err = startBaseline(s.Client, work, 2, b.plan.executorSlots, comparableBaseline)
	if err != nil {
		return "", err
	}
	defer m.bl.stop()
	m.acts = &modelActivities{c: s.Client, bare: m.bl.acts}
	if err := m.start(); err != nil {
		return "", err
	}
	// Warm-up: the mirror, the workers' caches.
	for _, sh := range modelShapes {
		if _, err := m.once(ctx, sh, "model-warmup-"+sh.String()); err != nil {
			return "", err
		}
	}
	if _, _, err := m.bl.once(ctx, comparableBaseline, "model-warmup-comparable"); err != nil {
		return "", err
	}
	// Dispatch: start → the activity's start, one at a time, shapes taking turns.
	dispatch := map[modelShape][]time.Duration{}
	var compDispatch []time.Duration
	for i := range b.plan.modelLatencyRuns() {
		for _, sh := range modelShapes {
			d, err := m.once(ctx, sh, fmt.Sprintf("model-lat-%s-%d", sh, i))
			if err != nil {
				return "", err
			}
			dispatch[sh] = append(dispatch[sh], d)
		}
		d, _, err := m.bl.once(ctx, comparableBaseline, fmt.Sprintf("model-lat-comparable-%d", i))
		if err != nil {
			return "", err
		}
		compDispatch = append(compDispatch, d)
	}
	one, chain := map[modelShape]historyCost{}, map[modelShape]historyCost{}
	for _, sh := range modelShapes {
		h, err := m.eventCost(ctx, sh, fmt.Sprintf("model-lat-%s-0", sh), 1)
		if err != nil {
			return "", err
		}
		one[sh] = h
		// A chain of the history figure's length: the cost per build.
		id := "model-chain-" + sh.String()
		run, err := m.s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: modelWorkflowQueue},
			ModelEventWorkflow, ModelInput{Shape: sh, Build: id, Jobs: b.plan.chainJobs})
		if err == nil {
			err = run.Get(ctx, nil)
		}
		if err != nil {
			return "", fmt.Errorf("model chain %s: %w", id, err)
		}
		if chain[sh], err = m.eventCost(ctx, sh, id, b.plan.chainJobs); err != nil {
			return "", err
		}
	}
	// Throughput: bursts of n at once, the arms interleaved round by round.
	arms := []func(context.Context, int) error{
		func(ctx context.Context, round int) error { return m.burst(ctx, childShape, round) },
		func(ctx context.Context, round int) error { return m.burst(ctx, activityShape, round) },
		func(ctx context.Context, round int) error { return m.burst(ctx, startedShape, round) },
		func(ctx context.Context, round int) error {
			res, err := m.bl.burst(ctx, comparableBaseline, fmt.Sprintf("model-comparable-r%d", round), b.plan.modelEvents(), s.cpuTime)
			m.comp = append(m.comp, res)
			return err
		},
	}
	for round := range b.plan.rounds {
		for _, a := range armOrder(round, len(arms)) {
			if err := arms[a](ctx, round); err != nil {
				return "", err
			}
		}
	}
	child, act, started := *m.runs[childShape], *m.runs[activityShape], *m.runs[startedShape]
	compCPU := m.comp.cpuPerRun()
	perChained := func(sh modelShape) (events, tasks, visibility float64) { return per(chain[sh], b.plan.chainJobs) }
	cE, cT, cV := perChained(childShape)
	aE, aT, aV := perChained(activityShape)
	sE, sT, sV := perChained(startedShape)
	return fmt.Sprintf("model_b runs=%d child_history=%d activity_history=%d history_saved=%d "+
		"child_dispatch_p50_ms=%.1f activity_dispatch_p50_ms=%.1f comparable_dispatch_p50_ms=%.1f "+
		"child_cpu_ms_per_build=%.1f activity_cpu_ms_per_build=%.1f cpu_saved_ms_per_build=%.1f comparable_cpu_ms_per_run=%.1f "+
		"child_cpu_ratio_comparable=%.2f activity_cpu_ratio_comparable=%.2f child_per_s=%.2f activity_per_s=%.2f comparable_per_s=%.2f rounds=%d "+
		"started_history=%d started_dispatch_p50_ms=%.1f started_cpu_ms_per_build=%.1f started_per_s=%.2f "+
		"chain_child_per_build=%.1f chain_activity_per_build=%.1f chain_started_per_build=%.1f "+
		"child_tasks=%d activity_tasks=%d started_tasks=%d child_visibility=%d activity_visibility=%d started_visibility=%d "+
		"chain_child_tasks=%.1f chain_activity_tasks=%.1f chain_started_tasks=%.1f "+
		"chain_child_visibility=%.1f chain_activity_visibility=%.1f chain_started_visibility=%.1f",
		b.plan.modelEvents(), one[childShape].Events, one[activityShape].Events, one[childShape].Events-one[activityShape].Events,
		ms(percentile(dispatch[childShape], 50)), ms(percentile(dispatch[activityShape], 50)), ms(percentile(compDispatch, 50)),
		ms(child.cpuPerRun()), ms(act.cpuPerRun()), ms(child.cpuPerRun()-act.cpuPerRun()), ms(compCPU),
		round2(durRatio(child.cpuPerRun(), compCPU)), round2(durRatio(act.cpuPerRun(), compCPU)),
		child.rate(), act.rate(), m.comp.rate(), b.plan.rounds,
		one[startedShape].Events, ms(percentile(dispatch[startedShape], 50)), ms(started.cpuPerRun()), started.rate(),
		cE, aE, sE,
		one[childShape].Tasks, one[activityShape].Tasks, one[startedShape].Tasks,
		one[childShape].Visibility, one[activityShape].Visibility, one[startedShape].Visibility,
		cT, aT, sT, cV, aV, sV), nil
}

// eventCost sums the history cost of model event id and, in the shapes
// with build workflows, of its builds' workflows (jobs of them).
func (m *modelRun) eventCost(ctx context.Context, sh modelShape, id string, jobs int) (historyCost, error) {
	h, err := histcost.Run(ctx, m.s.Client, id, "")
	if err != nil || sh == activityShape {
		return h, err
	}
	for j := range jobs {
		bid := id
		if j > 0 {
			bid = fmt.Sprintf("%s/%d", id, j)
		}
		hb, err := histcost.Run(ctx, m.s.Client, bid+"-build", "")
		if err != nil {
			return h, err
		}
		h = h.Plus(hb)
	}
	return h, nil
}

// start runs the model's workflow worker and two activity workers of the
// executors' slots, like the two executors, beside the baseline's workers.
func (m *modelRun) start() error {
	ww := worker.New(m.s.Client, modelWorkflowQueue, worker.Options{})
	ww.RegisterWorkflow(ModelEventWorkflow)
	ww.RegisterWorkflow(ModelBuildWorkflow)
	ww.RegisterActivity(modelNoop)
	ww.RegisterActivityWithOptions(m.acts.startBuild, activity.RegisterOptions{Name: modelStartBuild})
	ww.RegisterActivityWithOptions(m.acts.signalEnd, activity.RegisterOptions{Name: modelSignalEnd})
	ws := []worker.Worker{ww}
	for range 2 {
		aw := worker.New(m.s.Client, modelActivityQueue, worker.Options{MaxConcurrentActivityExecutionSize: m.b.plan.executorSlots, DisableWorkflowWorker: true})
		aw.RegisterActivityWithOptions(m.acts.run, activity.RegisterOptions{Name: modelRunActivity})
		ws = append(ws, aw)
	}
	for _, w := range ws {
		if err := m.bl.start(w); err != nil { // stopped with the baseline's
			return err
		}
	}
	return nil
}

func (m *modelRun) startEvent(ctx context.Context, sh modelShape, id string) (client.WorkflowRun, error) {
	run, err := m.s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: modelWorkflowQueue},
		ModelEventWorkflow, ModelInput{Shape: sh, Build: id})
	if err != nil {
		return nil, fmt.Errorf("start model event %s: %w", id, err)
	}
	return run, nil
}

// once runs one model event and returns start → its activity's start.
func (m *modelRun) once(ctx context.Context, sh modelShape, id string) (time.Duration, error) {
	t0 := time.Now()
	run, err := m.startEvent(ctx, sh, id)
	if err != nil {
		return 0, err
	}
	if err := run.Get(ctx, nil); err != nil {
		return 0, fmt.Errorf("model event %s: %w", id, err)
	}
	v, ok := m.acts.marks.Load(id)
	if !ok {
		return 0, fmt.Errorf("model event %s ended without its activity", id)
	}
	at, _ := v.(time.Time)
	return at.Sub(t0), nil
}

// burst starts n model events of shape sh at once and waits for them.
func (m *modelRun) burst(ctx context.Context, sh modelShape, round int) error {
	n := m.b.plan.modelEvents()
	m.b.progress("model_b: round %d: %d %s-shaped events at once", round+1, n, sh)
	prefix := fmt.Sprintf("model-%s-r%d", sh, round)
	cpu0 := m.s.cpuTime()
	start := time.Now()
	runs := make([]client.WorkflowRun, n)
	err := parallel(n, 64, func(i int) error {
		run, err := m.startEvent(ctx, sh, fmt.Sprintf("%s-%d", prefix, i))
		runs[i] = run
		return err
	})
	if err == nil {
		err = parallel(n, 64, func(i int) error { return runs[i].Get(ctx, nil) })
	}
	if err != nil {
		return err
	}
	used := m.s.cpuTime() - cpu0
	_, last, err := closedSpan(ctx, m.s.Client, fmt.Sprintf("WorkflowType = 'ModelEventWorkflow' AND WorkflowId STARTS_WITH '%s-'", prefix), n)
	if err != nil {
		return err
	}
	*m.runs[sh] = append(*m.runs[sh], burst{runs: n, wall: last.Sub(start), cpu: used})
	return nil
}
