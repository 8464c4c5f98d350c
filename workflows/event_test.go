package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
)

const eventSHA = "c0ffee0000000000000000000000000000000001"

// graphSpec: a → (b, c) → d is an AND join; a → e is an OR edge; hotfix is
// detached; f (AND on a alone) names its own queue.
const graphSpec = `
shared:
  image: golang:1.26
  steps:
    - make: make
jobs:
  a: {requires: [~commit, ~pr]}
  b: {requires: [a]}
  c: {requires: [a]}
  d: {requires: [b, c]}
  e: {requires: [~a]}
  hotfix: {}
`

const matrixSpec = `
shared:
  image: golang:1.26
  steps:
    - test: go test ./...
jobs:
  test:
    requires: [~commit]
    matrix:
      GO: ["1.25", "1.26", "1.27"]
  deploy: {requires: [test]}
`

const stageSpec = `
shared:
  image: alpine
  steps:
    - run: ./run.sh
stages:
  canary:
    requires: [~commit]
    jobs: [deploy, verify]
jobs:
  deploy: {requires: []}
  verify: {requires: [deploy]}
  promote: {requires: [~stage@canary]}
`

func parseSpec(t *testing.T, yaml string) *pipeline.Spec {
	t.Helper()
	spec, err := pipeline.ParseWithOptions([]byte(yaml), pipeline.Options{Pipeline: "app"})
	require.NoError(t, err)
	return spec
}

// buildPlan is how a mocked build of a job behaves.
type buildPlan struct {
	took   time.Duration
	status Status
	reason string
	// laneRelease: the build ends holding its lane place (a Slim build).
	laneRelease bool
}

// buildRun is one mocked BuildWorkflow child.
type buildRun struct {
	WorkflowID string
	Input      BuildInput
	Start, End time.Time
	Cancelled  bool
	// Lane are the lane messages the build received.
	Lane []LaneMessage
}

type eventHarness struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	rec     *recorder
	resolve activities.ResolveEventResult
	// plans by job name, or "job.k" for one matrix permutation.
	plans map[string]buildPlan

	mu        sync.Mutex
	resolved  []activities.ResolveEventInput
	builds    []buildRun
	remote    []activities.TriggerRemoteInput
	remoteErr error
	// resolveBlocks makes ResolveEvent wait until it is cancelled.
	resolveBlocks bool
}

func newEventHarness(t *testing.T, yaml string, register ...func(*testsuite.TestWorkflowEnvironment)) *eventHarness {
	t.Helper()
	h := &eventHarness{t: t, plans: map[string]buildPlan{}, resolve: activities.ResolveEventResult{
		SHA: eventSHA, Queues: []queue.Queue{queue.DefaultQueue()},
	}}
	// A stand-in registered under BuildWorkflow's name (not a mock: the
	// testsuite cancels registered children with their parent, not mocked ones).
	registerBuild := func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in BuildInput) (BuildState, error) {
			h.mu.Lock()
			i := len(h.builds)
			h.builds = append(h.builds, buildRun{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Input: in, Start: workflow.Now(ctx)})
			p := h.planFor(in.Build)
			h.mu.Unlock()
			st := BuildState{ID: in.Build.String(), Build: in.Build, Status: p.status, Reason: p.reason, LaneRelease: p.laneRelease && in.Slim}
			if in.Virtual {
				st.Status, st.Reason = StatusSuccess, "virtual job: nothing to run"
			} else {
				// Run for p.took, unless cancelled or aborted by a lane message.
				timer := workflow.NewTimer(ctx, p.took)
				lane := workflow.GetSignalChannel(ctx, SignalLane)
				for ended := false; !ended; {
					sel := workflow.NewSelector(ctx)
					sel.AddFuture(timer, func(f workflow.Future) {
						ended = true
						if f.Get(ctx, nil) != nil {
							st.Status, st.Reason = StatusAborted, "cancelled while running on exec-a"
							h.mu.Lock()
							h.builds[i].Cancelled = true
							h.mu.Unlock()
						}
					})
					sel.AddReceive(lane, func(c workflow.ReceiveChannel, _ bool) {
						var msg LaneMessage
						c.Receive(ctx, &msg)
						h.mu.Lock()
						h.builds[i].Lane = append(h.builds[i].Lane, msg)
						h.mu.Unlock()
						if msg.Kind == LaneAbort {
							ended = true
							st.Status, st.Reason = StatusAborted, msg.Reason
						}
					})
					sel.Select(ctx)
				}
			}
			h.mu.Lock()
			h.builds[i].End = workflow.Now(ctx)
			h.mu.Unlock()
			return st, nil
		}, workflow.RegisterOptions{Name: "BuildWorkflow"})
	}
	env, rec := newEnv(t, append([]func(*testsuite.TestWorkflowEnvironment){registerBuild}, register...)...)
	h.env, h.rec = env, rec
	if yaml != "" {
		h.resolve.Spec = parseSpec(t, yaml)
	}
	env.OnActivity(acts.ResolveEvent, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.ResolveEventInput) (activities.ResolveEventResult, error) {
			h.mu.Lock()
			h.resolved = append(h.resolved, in)
			res, blocks := h.resolve, h.resolveBlocks
			h.mu.Unlock()
			if blocks {
				<-ctx.Done()
				return activities.ResolveEventResult{}, ctx.Err()
			}
			return res, nil
		}).Maybe()
	env.OnActivity(acts.TriggerRemote, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TriggerRemoteInput) ([]string, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.remote = append(h.remote, in)
			return nil, h.remoteErr
		}).Maybe()
	return h
}

func (h *eventHarness) planFor(b BuildRef) buildPlan {
	p, ok := h.plans[fmt.Sprintf("%s.%d", b.Job, b.Index)]
	if !ok {
		p, ok = h.plans[b.Job]
	}
	if !ok {
		p = buildPlan{took: time.Minute, status: StatusSuccess}
	}
	if p.took == 0 {
		p.took = time.Minute
	}
	return p
}

// eventInput is an event as pipelines start them now (Lean, Slim,
// DoneInResult).
func eventInput(trigger Trigger) EventInput {
	return EventInput{Event: EventRef{Pipeline: "app", Number: 1}, Config: appConfig, Trigger: trigger, Lean: true, Slim: true, DoneInResult: true}
}

var commitOnMain = Trigger{Kind: TriggerCommit, Branch: "main"}

func (h *eventHarness) run(in EventInput) EventState {
	h.t.Helper()
	h.env.ExecuteWorkflow(EventWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var st EventState
	require.NoError(h.t, h.env.GetWorkflowResult(&st))
	return st
}

// runsOf returns the builds of job, by matrix index.
func (h *eventHarness) runsOf(job string) []buildRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []buildRun
	for _, b := range h.builds {
		if b.Input.Build.Job == job {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y buildRun) int { return x.Input.Build.Index - y.Input.Build.Index })
	return out
}

// jobsStarted lists the jobs in the order the event started their first
// build.
func (h *eventHarness) jobsStarted() []string {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	var out []string
	for _, id := range h.rec.children {
		ref, err := ParseBuildRef(id)
		require.NoError(h.t, err)
		if !slices.Contains(out, ref.Job) {
			out = append(out, ref.Job)
		}
	}
	return out
}

func outcomeOf(t *testing.T, st EventState, job string) JobOutcome {
	t.Helper()
	for _, o := range st.Jobs {
		if o.Job == job {
			return o
		}
	}
	t.Fatalf("no outcome for job %s in %+v", job, st.Jobs)
	return JobOutcome{}
}

func TestEventGraphEdges(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, graphSpec)
	h.plans["b"] = buildPlan{took: 10 * time.Minute, status: StatusSuccess}
	h.plans["c"] = buildPlan{took: 20 * time.Minute, status: StatusSuccess}
	st := h.run(eventInput(commitOnMain))

	require.Equal(t, StatusSuccess, st.Status, st.Reason)
	require.Equal(t, eventSHA, st.SHA)
	// a alone starts on the commit; b, c (single-parent joins) and e (OR) start when it succeeds.
	require.Equal(t, []string{"a", "b", "c", "e", "d"}, h.jobsStarted())
	require.Len(t, h.builds, 5)
	a, b, c, d, e := h.runsOf("a")[0], h.runsOf("b")[0], h.runsOf("c")[0], h.runsOf("d")[0], h.runsOf("e")[0]
	require.Equal(t, a.End, b.Start)
	require.Equal(t, a.End, c.Start)
	require.Equal(t, a.End, e.Start)
	// The join d starts once, when the slower of its parents succeeded.
	require.Len(t, h.runsOf("d"), 1)
	require.True(t, d.Start.Equal(c.End), "d started at %s, c ended at %s", d.Start, c.End)
	require.True(t, d.Start.After(b.End))
	require.Empty(t, h.runsOf("hotfix"))
	for _, r := range h.builds {
		require.Equal(t, 1, r.Input.Build.Event)
		require.Equal(t, r.Input.Build.WorkflowID(), r.WorkflowID)
	}
	require.Equal(t, []string{"build/app/a/1", "build/app/b/1", "build/app/c/1", "build/app/e/1", "build/app/d/1"}, h.rec.children)
	for _, job := range []string{"a", "b", "c", "d", "e"} {
		o := outcomeOf(t, st, job)
		require.Equal(t, StatusSuccess, o.Status, job)
		require.Equal(t, []string{"app/" + job + "/1"}, o.Builds)
	}
	require.NotContains(t, jobNames(st), "hotfix")
}

func jobNames(st EventState) []string {
	var out []string
	for _, o := range st.Jobs {
		out = append(out, o.Job)
	}
	return out
}

func TestEventFailureStopsDownstream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		plans      map[string]buildPlan
		wantStatus Status
		wantReason string
		wantNotRun map[string]string
		wantRan    []string
	}{
		{
			name:       "a failed join parent",
			plans:      map[string]buildPlan{"c": {status: StatusFailure, reason: "step make exited 2"}},
			wantStatus: StatusFailure, wantReason: "c FAILURE",
			wantNotRun: map[string]string{"d": "not run: requires c, which ended FAILURE"},
			wantRan:    []string{"a", "b", "c", "e"},
		},
		{
			name:       "an aborted join parent",
			plans:      map[string]buildPlan{"b": {status: StatusAborted, reason: "killed"}},
			wantStatus: StatusAborted, wantReason: "b ABORTED",
			wantNotRun: map[string]string{"d": "not run: requires b, which ended ABORTED"},
			wantRan:    []string{"a", "b", "c", "e"},
		},
		{
			name:       "a collapsed upstream job",
			plans:      map[string]buildPlan{"a": {status: StatusCollapsed, reason: "collapsed into build app/a/2"}},
			wantStatus: StatusCollapsed, wantReason: "a COLLAPSED",
			wantNotRun: map[string]string{
				"b": "not run: requires a, which was collapsed into build app/a/2",
				"c": "not run: requires a, which was collapsed into build app/a/2",
				"e": "not run: requires a, which was collapsed into build app/a/2",
			},
			wantRan: []string{"a"},
		},
		{
			name:       "a failed first job",
			plans:      map[string]buildPlan{"a": {status: StatusFailure, reason: "boom"}},
			wantStatus: StatusFailure, wantReason: "a FAILURE",
			wantNotRun: map[string]string{
				"b": "not run: requires a, which ended FAILURE",
				"e": "not run: requires a, which ended FAILURE",
			},
			wantRan: []string{"a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, graphSpec)
			h.plans = tc.plans
			st := h.run(eventInput(commitOnMain))
			require.Equal(t, tc.wantStatus, st.Status)
			require.Equal(t, tc.wantReason, st.Reason)
			require.Equal(t, tc.wantRan, h.jobsStarted())
			for job, why := range tc.wantNotRun {
				o := outcomeOf(t, st, job)
				require.Equal(t, StatusSkipped, o.Status, job)
				require.Equal(t, why, o.Reason, job)
			}
			for job, p := range tc.plans {
				o := outcomeOf(t, st, job)
				require.Equal(t, p.status, o.Status)
				require.Equal(t, p.reason, o.Reason)
			}
		})
	}
}

func TestEventMatrix(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, matrixSpec)
	h.plans["test.2"] = buildPlan{took: 30 * time.Minute, status: StatusSuccess}
	st := h.run(eventInput(commitOnMain))
	require.Equal(t, StatusSuccess, st.Status, st.Reason)

	runs := h.runsOf("test")
	require.Len(t, runs, 3)
	for i, r := range runs {
		require.Equal(t, fmt.Sprintf("build/app/test/1.%d", i+1), r.WorkflowID)
		require.Equal(t, i+1, r.Input.Build.Index)
		require.Equal(t, r.Input.Build, r.Input.Lane.Build)
		require.Equal(t, wfT0, r.Start)
	}
	gos := []string{runs[0].Input.Environment["GO"], runs[1].Input.Environment["GO"], runs[2].Input.Environment["GO"]}
	require.ElementsMatch(t, []string{"1.25", "1.26", "1.27"}, gos)
	// deploy waits for every permutation: it starts when the slowest ends.
	deploy := h.runsOf("deploy")
	require.Len(t, deploy, 1)
	require.True(t, deploy[0].Start.Equal(runs[1].End), "deploy started %s, slowest permutation ended %s", deploy[0].Start, runs[1].End)
	require.Equal(t, "build/app/deploy/1", deploy[0].WorkflowID)
	require.Equal(t, []string{"app/test/1.1", "app/test/1.2", "app/test/1.3"}, outcomeOf(t, st, "test").Builds)
}

func TestEventMatrixPermutationFails(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, matrixSpec)
	h.plans["test.3"] = buildPlan{took: 5 * time.Minute, status: StatusFailure, reason: "go test failed"}
	st := h.run(eventInput(commitOnMain))
	require.Equal(t, StatusFailure, st.Status)
	require.Len(t, h.runsOf("test"), 3)
	require.Empty(t, h.runsOf("deploy"))
	test := outcomeOf(t, st, "test")
	require.Equal(t, StatusFailure, test.Status)
	require.Equal(t, "build app/test/1.3: go test failed", test.Reason)
	require.Equal(t, "not run: requires test, which ended FAILURE", outcomeOf(t, st, "deploy").Reason)
}

func TestEventStages(t *testing.T) {
	t.Parallel()
	const setup, teardown = "stage@canary:setup", "stage@canary:teardown"
	tests := []struct {
		name       string
		plans      map[string]buildPlan
		wantStatus Status
		wantRan    []string
		wantNotRun map[string]string
	}{
		{
			name:       "every member succeeds",
			wantStatus: StatusSuccess,
			wantRan:    []string{setup, "deploy", "verify", teardown, "promote"},
		},
		{
			name:       "a member fails: teardown still runs, downstream does not",
			plans:      map[string]buildPlan{"deploy": {status: StatusFailure, reason: "deploy failed"}},
			wantStatus: StatusFailure,
			wantRan:    []string{setup, "deploy", teardown},
			wantNotRun: map[string]string{
				"verify":  "not run: requires deploy, which ended FAILURE",
				"promote": "not run: stage canary did not succeed (deploy ended FAILURE)",
			},
		},
		{
			name:       "the last member fails",
			plans:      map[string]buildPlan{"verify": {status: StatusFailure, reason: "verify failed"}},
			wantStatus: StatusFailure,
			wantRan:    []string{setup, "deploy", "verify", teardown},
			wantNotRun: map[string]string{"promote": "not run: stage canary did not succeed (verify ended FAILURE)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, stageSpec)
			if tc.plans != nil {
				h.plans = tc.plans
			}
			st := h.run(eventInput(commitOnMain))
			require.Equal(t, tc.wantStatus, st.Status, st.Reason)
			require.Equal(t, tc.wantRan, h.jobsStarted())
			require.True(t, h.runsOf(setup)[0].Input.Virtual)
			require.True(t, h.runsOf(teardown)[0].Input.Virtual)
			require.Equal(t, StatusSuccess, outcomeOf(t, st, teardown).Status)
			for job, why := range tc.wantNotRun {
				o := outcomeOf(t, st, job)
				require.Equal(t, StatusSkipped, o.Status, job)
				require.Equal(t, why, o.Reason, job)
			}
		})
	}
}

func TestEventStartFrom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		spec       string
		in         func(*EventInput)
		wantStatus Status
		wantReason string
		wantRan    []string
		wantNotRun map[string]string
	}{
		{
			name: "restart with the parent's successes satisfies joins",
			spec: graphSpec,
			in: func(in *EventInput) {
				in.Trigger, in.StartFrom, in.Parent, in.ParentSucceeded = Trigger{Kind: TriggerManual}, "c", 1, []string{"a", "b"}
			},
			wantStatus: StatusSuccess,
			wantRan:    []string{"c", "d"},
		},
		{
			name: "restart without the other join parent leaves the join",
			spec: graphSpec,
			in: func(in *EventInput) {
				in.Trigger, in.StartFrom = Trigger{Kind: TriggerManual}, "c"
			},
			wantStatus: StatusSuccess,
			wantRan:    []string{"c"},
			wantNotRun: map[string]string{"d": "not run: join parents b did not run in this event"},
		},
		{
			name:       "a detached job started by hand",
			spec:       graphSpec,
			in:         func(in *EventInput) { in.Trigger, in.StartFrom = Trigger{Kind: TriggerManual}, "hotfix" },
			wantStatus: StatusSuccess,
			wantRan:    []string{"hotfix"},
		},
		{
			name:       "a stage by name starts at its setup",
			spec:       stageSpec,
			in:         func(in *EventInput) { in.Trigger, in.StartFrom = Trigger{Kind: TriggerManual}, "stage@canary" },
			wantStatus: StatusSuccess,
			wantRan:    []string{"stage@canary:setup", "deploy", "verify", "stage@canary:teardown", "promote"},
		},
		{
			name:       "a periodic event starts its job",
			spec:       graphSpec,
			in:         func(in *EventInput) { in.Trigger, in.StartFrom = Trigger{Kind: TriggerPeriodic}, "hotfix" },
			wantStatus: StatusSuccess,
			wantRan:    []string{"hotfix"},
		},
		{
			name:       "a periodic event without its job",
			spec:       graphSpec,
			in:         func(in *EventInput) { in.Trigger = Trigger{Kind: TriggerPeriodic} },
			wantStatus: StatusFailure,
			wantReason: "a periodic event needs the job to start",
		},
		{
			name:       "an unknown job",
			spec:       graphSpec,
			in:         func(in *EventInput) { in.Trigger, in.StartFrom = Trigger{Kind: TriggerManual}, "nope" },
			wantStatus: StatusFailure,
			wantReason: `no job "nope" in screwdriver.yaml at c0ffee000000 (jobs: a, b, c, d, e, hotfix)`,
		},
		{
			name: "a job that may not be started by hand",
			spec: `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  deploy:
    requires: [~commit]
    annotations: {screwdriver.cd/manualStartEnabled: false}
`,
			in:         func(in *EventInput) { in.Trigger, in.StartFrom = Trigger{Kind: TriggerManual}, "deploy" },
			wantStatus: StatusFailure,
			wantReason: "job deploy cannot be started by hand (screwdriver.cd/manualStartEnabled: false)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, tc.spec)
			in := eventInput(commitOnMain)
			tc.in(&in)
			st := h.run(in)
			require.Equal(t, tc.wantStatus, st.Status, st.Reason)
			if tc.wantReason != "" {
				require.Equal(t, tc.wantReason, st.Reason)
			}
			require.Equal(t, tc.wantRan, h.jobsStarted())
			for job, why := range tc.wantNotRun {
				o := outcomeOf(t, st, job)
				require.Equal(t, StatusSkipped, o.Status, job)
				require.Equal(t, why, o.Reason, job)
			}
		})
	}
}

func TestEventTriggers(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  api:  {requires: [~commit], sourcePaths: ["api/"]}
  web:  {requires: [~commit], sourcePaths: ["web/", "!web/docs/"]}
  all:  {requires: [~commit]}
  pr:   {requires: [~pr]}
  rel:  {requires: ["~tag:/^v/"]}
  sub:  {requires: [~sd@lib:publish]}
  dev:  {requires: [~commit:dev]}
  rj:   {requires: [sd@lib:publish]}
  mixed: {requires: [sd@lib:publish, all]}
`
	tests := []struct {
		name        string
		trigger     Trigger
		changed     []string
		wantRan     []string
		wantReason  string
		wantResolve activities.ResolveEventInput
	}{
		{
			name:    "commit with changed files filters by sourcePaths",
			trigger: Trigger{Kind: TriggerCommit, Branch: "main", Before: "b4"},
			changed: []string{"api/main.go", "web/docs/index.md"},
			wantRan: []string{"api", "all"},
			wantResolve: activities.ResolveEventInput{
				Pipeline: "app", Repo: "/src/app", Ref: "main", Before: "b4",
				WantChanges: true,
			},
		},
		{
			name:    "commit touching the web",
			trigger: Trigger{Kind: TriggerCommit, Branch: "main", ChangedFiles: []string{"web/app.js"}},
			changed: []string{"web/app.js"},
			wantRan: []string{"web", "all"},
			wantResolve: activities.ResolveEventInput{
				Pipeline: "app", Repo: "/src/app", Ref: "main",
				ChangedFiles: []string{"web/app.js"}, WantChanges: true,
			},
		},
		{
			name:        "commit on another branch",
			trigger:     Trigger{Kind: TriggerCommit, Branch: "dev"},
			wantRan:     []string{"dev"},
			wantResolve: activities.ResolveEventInput{Pipeline: "app", Repo: "/src/app", Ref: "dev", WantChanges: true},
		},
		{
			name:        "pull request",
			trigger:     Trigger{Kind: TriggerPR, Branch: "main", PR: 12},
			wantRan:     []string{"pr"},
			wantResolve: activities.ResolveEventInput{Pipeline: "app", Repo: "/src/app", Ref: "refs/pull/12/head", BaseRef: "main"},
		},
		{
			name:        "tag",
			trigger:     Trigger{Kind: TriggerTag, Ref: "v1.2.0"},
			wantRan:     []string{"rel"},
			wantResolve: activities.ResolveEventInput{Pipeline: "app", Repo: "/src/app", Ref: "v1.2.0"},
		},
		{
			// A remote join parent counts as satisfied; a job that also
			// joins a local job does not start.
			name:        "remote trigger",
			trigger:     Trigger{Kind: TriggerRemote, Remote: "sd@lib:publish"},
			wantRan:     []string{"sub", "rj"},
			wantResolve: activities.ResolveEventInput{Pipeline: "app", Repo: "/src/app", Ref: "main"},
		},
		{
			name:        "nothing starts",
			trigger:     Trigger{Kind: TriggerRelease, Ref: "2026.1"},
			wantReason:  "no job starts on release 2026.1",
			wantResolve: activities.ResolveEventInput{Pipeline: "app", Repo: "/src/app", Ref: "2026.1"},
		},
		{
			// The webhook listed no changed file (an empty commit): jobs with
			// sourcePaths do not run; an empty list is not "unknown".
			name:    "commit that changed no file",
			trigger: Trigger{Kind: TriggerCommit, Branch: "main", ChangedFiles: []string{}},
			changed: []string{},
			wantRan: []string{"all"},
			wantResolve: activities.ResolveEventInput{
				Pipeline: "app", Repo: "/src/app", Ref: "main", ChangedFiles: []string{}, WantChanges: true,
			},
		},
		{
			name:        "commit changing nothing the jobs watch",
			trigger:     Trigger{Kind: TriggerCommit, Branch: "main"},
			changed:     []string{"docs/readme.md"},
			wantRan:     []string{"all"},
			wantResolve: activities.ResolveEventInput{Pipeline: "app", Repo: "/src/app", Ref: "main", WantChanges: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, spec)
			h.resolve.ChangedFiles = tc.changed
			st := h.run(eventInput(tc.trigger))
			require.Equal(t, StatusSuccess, st.Status, st.Reason)
			require.Equal(t, tc.wantRan, h.jobsStarted())
			if tc.wantReason != "" {
				require.Equal(t, tc.wantReason, st.Reason)
			}
			require.Equal(t, []activities.ResolveEventInput{tc.wantResolve}, h.resolved)
		})
	}
}

func TestEventBuildInput(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: "golang:{{GO}}", steps: [{test: go test}]}
jobs:
  deploy:
    requires: [~commit]
    environment: {GO: "1.26"}
    blockedBy: [~lint]
    freezeWindows: ["* 0-6 ? * *"]
    annotations:
      screwdriver.cd/collapseBuilds: false
      screwdriver.cd/blockedBySameJob: false
      screwdriver.cd/timeout: 15
      screwdriver.cd/executor: gpu
      sluice.dev/delay: 5m
      sluice.dev/priority: 1
  lint: {requires: [~commit]}
`
	h := newEventHarness(t, spec)
	h.resolve.Queues = append(h.resolve.Queues, queue.Queue{Name: "gpu", Rules: []queue.Rule{{RunOn: queue.RunOnAny, MaxParallel: 1}}})
	in := eventInput(Trigger{Kind: TriggerCommit, Branch: "main", Sender: "ann"})
	in.Force = true
	in.Config.Dispatch = Dispatch{HeartbeatTimeout: time.Minute, MaxAttempts: 7}
	st := h.run(in)
	require.Equal(t, StatusSuccess, st.Status, st.Reason)

	deploy := h.runsOf("deploy")
	require.Len(t, deploy, 1)
	ref := BuildRef{Pipeline: "app", Job: "deploy", Event: 1}
	require.Equal(t, BuildInput{
		Build: ref, Repo: "/src/app", SHA: eventSHA, Branch: "main", Trigger: in.Trigger, Queue: "gpu", Priority: 1,
		Image: "golang:1.26", Steps: []pipeline.Command{{Name: "test", Command: "go test"}},
		Environment: map[string]string{"GO": "1.26"}, Timeout: 15 * time.Minute,
		Dispatch: Dispatch{HeartbeatTimeout: time.Minute, MaxAttempts: 7}, Lean: true, Slim: true,
		Lane: LaneRequest{
			Build: ref, Collapse: false, BlockedBySameJob: false, BlockedBy: []string{"~lint"},
			FreezeWindows: []string{"* 0-6 ? * *"}, Delay: 5 * time.Minute, Force: true,
		},
	}, deploy[0].Input)
	lint := h.runsOf("lint")[0].Input
	require.Equal(t, queue.DefaultQueueName, lint.Queue)
	require.Equal(t, 3, lint.Priority)
	require.True(t, lint.Lane.Collapse)
	require.True(t, lint.Lane.BlockedBySameJob)
	require.Equal(t, 90*time.Minute, lint.Timeout)
}

func TestEventCannotStart(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  build: {requires: [~commit]}
  deploy:
    requires: [build]
    annotations: {screwdriver.cd/executor: prod}
  publish:
    requires: [build]
    annotations: {screwdriver.cd/executor: gpu}
`
	prod := queue.Queue{Name: "prod", Rules: []queue.Rule{{RunOn: queue.RunOnAny, MaxParallel: 1}}, UseRoles: []string{"deployers"}}
	tests := []struct {
		name       string
		queues     []queue.Queue
		identity   *queue.Identity
		wantReason string
	}{
		{
			name:       "a reachable job names a queue that does not exist",
			queues:     []queue.Queue{queue.DefaultQueue(), prod},
			wantReason: `cannot start: job publish names queue "gpu", which does not exist (queues: default, prod)`,
		},
		{
			name:       "the identity may not use a queue",
			queues:     []queue.Queue{queue.DefaultQueue(), prod, {Name: "gpu", Rules: prod.Rules}},
			identity:   &queue.Identity{User: "bob", Roles: []string{"devs"}},
			wantReason: `cannot start: job deploy: user "bob" may not use queue prod: it is restricted to roles deployers, and the user has roles devs`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, spec)
			h.resolve.Queues = tc.queues
			in := eventInput(commitOnMain)
			in.Identity = tc.identity
			st := h.run(in)
			require.Equal(t, StatusFailure, st.Status)
			require.Equal(t, tc.wantReason, st.Reason)
			require.Empty(t, h.builds, "no build starts")
			require.Equal(t, wfT0, st.EndTime)
		})
	}
	t.Run("the pipeline's queue", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, graphSpec)
		in := eventInput(commitOnMain)
		in.Config.Queue = "ci"
		st := h.run(in)
		require.Equal(t, StatusFailure, st.Status)
		require.Equal(t, `cannot start: job a names queue "ci", which does not exist (queues: default); `+
			`job b names queue "ci", which does not exist (queues: default); `+
			`job c names queue "ci", which does not exist (queues: default); `+
			`job e names queue "ci", which does not exist (queues: default); `+
			`job d names queue "ci", which does not exist (queues: default)`, st.Reason)
	})
}

func TestEventSpecProblems(t *testing.T) {
	t.Parallel()
	_, parseErr := pipeline.Parse([]byte("jobs:\n  a: {requires: [nope], image: alpine, steps: [{x: y}]}\n"))
	require.Error(t, parseErr)
	specErr := "screwdriver.yaml at c0ffee000000 is invalid:\n" + parseErr.Error()

	t.Run("the spec does not parse", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, "")
		h.resolve.SpecError = specErr
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusFailure, st.Status)
		require.Equal(t, specErr, st.Reason)
		require.Contains(t, st.Reason, "nope")
		require.Equal(t, eventSHA, st.SHA)
		require.Empty(t, h.builds)
	})
	t.Run("the repository cannot be read", func(t *testing.T) {
		t.Parallel()
		env, _ := newEnv(t)
		env.OnActivity(acts.ResolveEvent, mock.Anything, mock.Anything).Return(activities.ResolveEventResult{},
			temporal.NewNonRetryableApplicationError("open repository /src/app: not found", activities.ErrTypeRepo, nil))
		env.ExecuteWorkflow(EventWorkflow, eventInput(commitOnMain))
		var st EventState
		require.NoError(t, env.GetWorkflowResult(&st))
		require.Equal(t, StatusFailure, st.Status)
		require.Equal(t, "cannot read the pipeline's repository: open repository /src/app: not found", st.Reason)
	})
}

func TestEventCancel(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, graphSpec)
	h.plans["b"] = buildPlan{took: time.Hour, status: StatusSuccess}
	h.plans["c"] = buildPlan{took: time.Hour, status: StatusSuccess}
	at(h.env, 10*time.Minute, func() { h.env.CancelWorkflow() })
	st := h.run(eventInput(commitOnMain))

	require.Equal(t, StatusAborted, st.Status)
	require.Equal(t, "event cancelled", st.Reason)
	for _, job := range []string{"b", "c"} {
		runs := h.runsOf(job)
		require.Len(t, runs, 1)
		require.True(t, runs[0].Cancelled, "build of %s was not cancelled", job)
		require.Equal(t, wfT0.Add(10*time.Minute), runs[0].End)
		require.Equal(t, StatusAborted, outcomeOf(t, st, job).Status)
	}
	require.Empty(t, h.runsOf("d"))
	require.Equal(t, "not run: requires b, which ended ABORTED", outcomeOf(t, st, "d").Reason)
}

func TestEventRemoteTriggers(t *testing.T) {
	t.Parallel()
	t.Run("every successful job triggers its subscribers", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, graphSpec)
		h.plans["c"] = buildPlan{status: StatusFailure}
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusFailure, st.Status)
		var jobs []string
		for _, r := range h.remote {
			require.Equal(t, "app", r.Pipeline)
			require.Equal(t, "app/1", r.Event)
			jobs = append(jobs, r.Job)
		}
		require.ElementsMatch(t, []string{"a", "b", "e"}, jobs)
		require.Empty(t, st.Warnings)
	})
	t.Run("a failing trigger is a warning", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, matrixSpec)
		h.remoteErr = errors.New("pipeline web is not running")
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusSuccess, st.Status)
		// Once per job (not per permutation), each tried 3 times.
		require.Len(t, h.remote, 6)
		require.Len(t, st.Warnings, 2)
		require.Contains(t, st.Warnings[0], "remote trigger sd@app:test: ")
		require.Contains(t, st.Warnings[0], "pipeline web is not running")
	})
}

func TestEventSyncsDefaultBranchSpec(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  main: {requires: [~commit, ~sd@lib:publish]}
  nightly:
    requires: []
    annotations: {screwdriver.cd/buildPeriodically: "H 3 * * *"}
`
	tests := []struct {
		name     string
		trigger  Trigger
		wantSync bool
	}{
		{"commit on the default branch", Trigger{Kind: TriggerCommit, Branch: "main"}, true},
		{"commit on another branch", Trigger{Kind: TriggerCommit, Branch: "dev"}, false},
		{"pull request", Trigger{Kind: TriggerPR, Branch: "main", PR: 3}, false},
	}
	for _, tc := range tests {
		for _, lean := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/lean=%v", tc.name, lean), func(t *testing.T) {
				t.Parallel()
				h := newEventHarness(t, spec)
				in := eventInput(tc.trigger)
				in.Lean = lean
				h.run(in)
				syncs := h.rec.signalsTo("pipeline/app", SignalSpecSynced)
				if lean {
					// A lean event sends no spec-synced signal: its first
					// enqueue batch carries the sync.
					require.Empty(t, syncs)
					syncs = nil
					for i, b := range h.rec.signalsTo("pipeline/app", SignalEnqueue) {
						if s := b.(EnqueueBatch).Sync; s != nil {
							require.Zero(t, i, "only the first batch carries the sync")
							syncs = append(syncs, *s)
						}
					}
				}
				checkSync(t, syncs, tc.wantSync)
			})
		}
	}
}

func checkSync(t *testing.T, syncs []any, want bool) {
	t.Helper()
	if !want {
		require.Empty(t, syncs)
		return
	}
	require.Len(t, syncs, 1)
	s := syncs[0].(SpecSync)
	require.Equal(t, eventSHA, s.SHA)
	require.Equal(t, []string{"sd@lib:publish"}, s.Subscriptions)
	require.Equal(t, []string{"nightly"}, sortedKeys(s.Periodic))
	require.Regexp(t, `^\d+ 3 \* \* \*$`, s.Periodic["nightly"])
}

func TestEventQuery(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, graphSpec)
	h.plans["c"] = buildPlan{took: time.Hour, status: StatusSuccess}
	at(h.env, 30*time.Minute, func() {
		st := query[EventState](t, h.env, QueryEvent)
		require.Equal(t, StatusRunning, st.Status)
		require.Equal(t, StatusRunning, outcomeOf(t, st, "c").Status)
		require.Equal(t, StatusSuccess, outcomeOf(t, st, "b").Status)
		// d waits for c: it is not reported as skipped while the event runs.
		require.NotContains(t, jobNames(st), "d")
	})
	st := h.run(eventInput(commitOnMain))
	require.Equal(t, StatusSuccess, st.Status)
}

func enqueueBatches(h *eventHarness) []EnqueueBatch {
	var out []EnqueueBatch
	for _, s := range h.rec.signalsTo("pipeline/app", SignalEnqueue) {
		b := s.(EnqueueBatch)
		b.Sync = nil // TestEventSyncsDefaultBranchSpec checks it
		out = append(out, b)
	}
	return out
}

func TestEventHandsBuildsToLanes(t *testing.T) {
	t.Parallel()
	t.Run("in batches as builds start", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, graphSpec)
		h.plans["c"] = buildPlan{took: 20 * time.Minute, status: StatusSuccess}
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusSuccess, st.Status)
		lane := func(job string) LaneRequest {
			return h.runsOf(job)[0].Input.Lane
		}
		require.Equal(t, []EnqueueBatch{
			{Event: 1, Requests: []LaneRequest{lane("a")}},
			{Event: 1, Requests: []LaneRequest{lane("b"), lane("c"), lane("e")}},
			{Event: 1, Requests: []LaneRequest{lane("d")}},
		}, enqueueBatches(h))
	})
	t.Run("virtual builds are not handed over", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, stageSpec)
		h.run(eventInput(commitOnMain))
		var jobs []string
		for _, b := range enqueueBatches(h) {
			require.Equal(t, 1, b.Event)
			for _, r := range b.Requests {
				jobs = append(jobs, r.Build.Job)
			}
		}
		require.Equal(t, []string{"deploy", "verify", "promote"}, jobs)
	})
	t.Run("an event that starts nothing still releases its hold", func(t *testing.T) {
		t.Parallel()
		for _, spec := range []string{graphSpec, ""} {
			h := newEventHarness(t, spec)
			if spec == "" {
				h.resolve.SpecError = "screwdriver.yaml not found"
			}
			st := h.run(eventInput(Trigger{Kind: TriggerRelease, Ref: "r1"}))
			require.NotEqual(t, StatusRunning, st.Status)
			require.Equal(t, []EnqueueBatch{{Event: 1}}, enqueueBatches(h))
		}
	})
	t.Run("a pipeline that is gone aborts the builds", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, graphSpec)
		h.plans["a"] = buildPlan{took: time.Hour, status: StatusSuccess}
		h.rec.fail = func(workflowID, name string) error {
			if name == SignalEnqueue {
				return errors.New("workflow execution already completed")
			}
			return nil
		}
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusAborted, st.Status)
		a := h.runsOf("a")[0]
		require.Equal(t, wfT0, a.End, "the build ended at once")
		require.Len(t, a.Lane, 1)
		require.Equal(t, LaneAbort, a.Lane[0].Kind)
		require.Equal(t, "pipeline app is not running (deleted?): workflow execution already completed", a.Lane[0].Reason)
		require.Equal(t, a.Lane[0].Reason, outcomeOf(t, st, "a").Reason)
	})
}

func TestEventPullRequests(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  main: {requires: [~pr, ~commit]}
  deploy: {requires: [main]}
`
	pr := Trigger{Kind: TriggerPR, Branch: "main", PR: 12, SHA: eventSHA}
	t.Run("a pull request runs its ~pr jobs only, in its own lanes", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		st := h.run(eventInput(pr))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, []string{"main"}, h.jobsStarted())
		runs := h.runsOf("main")
		require.Len(t, runs, 1)
		require.Equal(t, "build/app/PR-12:main/1", runs[0].WorkflowID)
		require.Equal(t, 12, runs[0].Input.Build.PR)
		require.Equal(t, 12, runs[0].Input.Lane.Build.PR)
		require.Empty(t, h.remote, "a pull request fires no remote triggers")
		require.Equal(t, []string{"main"}, st.Succeeded)
	})
	t.Run("chainPR runs the downstream jobs too", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, "annotations: {screwdriver.cd/chainPR: true}\n"+spec)
		st := h.run(eventInput(pr))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, []string{"main", "deploy"}, h.jobsStarted())
		require.Equal(t, "build/app/PR-12:deploy/1", h.runsOf("deploy")[0].WorkflowID)
		require.Empty(t, h.remote, "a pull request fires no remote triggers")
	})
	t.Run("a commit runs everything and triggers subscribers", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, []string{"main", "deploy"}, h.jobsStarted())
		require.Equal(t, "build/app/main/1", h.runsOf("main")[0].WorkflowID)
		require.Len(t, h.remote, 2)
	})
}

func TestEventRestarts(t *testing.T) {
	t.Parallel()
	const spec = `
shared: {image: alpine, steps: [{run: ./run.sh}]}
jobs:
  p: {requires: [~commit]}
  q: {requires: [~commit]}
  j: {requires: [p, q]}
  locked:
    requires: [~commit]
    annotations: {screwdriver.cd/manualStartEnabled: false}
`
	t.Run("successes inherited along the chain satisfy a join", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		in := eventInput(Trigger{Kind: TriggerCommit, Branch: "main", SHA: eventSHA})
		// A restart of a restart: p succeeded in the grandparent.
		in.StartFrom, in.Parent, in.ParentSucceeded = "q", 2, []string{"p", "locked"}
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, []string{"q", "j"}, h.jobsStarted())
		require.Equal(t, []string{"p", "q", "j", "locked"}, st.Succeeded)
	})
	t.Run("several start jobs run together and their join follows", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		in := eventInput(Trigger{Kind: TriggerCommit, Branch: "main", SHA: eventSHA})
		in.StartJobs, in.StartFrom, in.Parent, in.Rerun = []string{"p", "q"}, "p", 1, true
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.ElementsMatch(t, []string{"p", "q", "j"}, h.jobsStarted())
		require.Equal(t, []string{"p", "q"}, st.StartJobs)
		require.True(t, st.Rerun)
	})
	for _, tc := range []struct {
		name string
		in   func(*EventInput)
	}{
		{name: "restart", in: func(in *EventInput) { in.StartFrom, in.Parent = "locked", 1 }},
		{name: "start-from on a commit", in: func(in *EventInput) { in.StartFrom = "locked" }},
		{name: "rerun", in: func(in *EventInput) {
			in.StartJobs, in.StartFrom, in.Parent, in.Rerun = []string{"q", "locked"}, "q", 1, true
		}},
	} {
		t.Run("manualStartEnabled: false refuses a "+tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, spec)
			in := eventInput(Trigger{Kind: TriggerCommit, Branch: "main", SHA: eventSHA})
			tc.in(&in)
			st := h.run(in)
			require.Equal(t, StatusFailure, st.Status)
			require.Equal(t, "job locked cannot be started by hand (screwdriver.cd/manualStartEnabled: false)", st.Reason)
			require.Empty(t, h.jobsStarted())
		})
	}
	// N8: a restart or re-run of a scheduled event is a person's doing: it
	// may not start a job locked to schedules.
	for _, tc := range []struct {
		name string
		in   func(*EventInput)
	}{
		{name: "restart", in: func(in *EventInput) { in.StartFrom, in.Parent = "locked", 1 }},
		{name: "rerun", in: func(in *EventInput) {
			in.StartJobs, in.StartFrom, in.Parent, in.Rerun = []string{"locked"}, "locked", 1, true
		}},
	} {
		t.Run("manualStartEnabled: false refuses a "+tc.name+" of a periodic event", func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, spec)
			in := eventInput(Trigger{Kind: TriggerPeriodic, SHA: eventSHA})
			tc.in(&in)
			st := h.run(in)
			require.Equal(t, StatusFailure, st.Status)
			require.Equal(t, "job locked cannot be started by hand (screwdriver.cd/manualStartEnabled: false)", st.Reason)
			require.Empty(t, h.jobsStarted())
		})
	}
	t.Run("a schedule may start it", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		in := eventInput(Trigger{Kind: TriggerPeriodic})
		in.StartFrom = "locked"
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, []string{"locked"}, h.jobsStarted())
	})
}

func TestEventCancelWhileReadingSpec(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, graphSpec)
	// ResolveEvent is slow: the event is cancelled while it runs.
	h.resolveBlocks = true
	at(h.env, time.Second, func() { h.env.CancelWorkflow() })
	st := h.run(eventInput(commitOnMain))
	require.Equal(t, StatusAborted, st.Status)
	require.Equal(t, "event cancelled while reading its spec", st.Reason)
}

func TestEventNotifiesPeriodicFire(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, graphSpec)
	h.plans["hotfix"] = buildPlan{took: time.Hour, status: StatusFailure, reason: "step make failed"}
	in := eventInput(Trigger{Kind: TriggerPeriodic})
	in.StartFrom, in.Notify = "hotfix", "periodic-fire"
	st := h.run(in)
	require.Equal(t, StatusFailure, st.Status)
	require.Equal(t, []any{PeriodicDone{Event: "app/1", Status: StatusFailure, Reason: "step make failed"}},
		h.rec.signalsTo("periodic-fire", SignalPeriodicDone))
}

func TestEventParameters(t *testing.T) {
	t.Parallel()
	const spec = `
parameters:
  target: {value: [staging, production], description: where}
  dry-run: "no"
shared: {image: alpine, steps: [{ship: ./ship}]}
jobs:
  deploy: {requires: [~commit], environment: {SD_PARAM_TARGET: from-job, KEEP: yes}}
`
	t.Run("given values and defaults reach the builds and the event", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		in := eventInput(commitOnMain)
		in.Parameters = map[string]string{"target": "production"}
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		want := map[string]string{"target": "production", "dry-run": "no"}
		require.Equal(t, want, st.Parameters)
		deploy := h.runsOf("deploy")[0].Input
		require.Equal(t, want, deploy.Parameters)
		require.Equal(t, map[string]string{"SD_PARAM_TARGET": "production", "SD_PARAM_DRY_RUN": "no", "KEEP": "yes"}, deploy.Environment,
			"a parameter wins over a job variable of the same name")
	})
	t.Run("an event given nothing gets the defaults", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		st := h.run(eventInput(commitOnMain))
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, map[string]string{"target": "staging", "dry-run": "no"}, st.Parameters)
	})
	t.Run("a value the spec at the event's commit refuses starts no build", func(t *testing.T) {
		t.Parallel()
		h := newEventHarness(t, spec)
		in := eventInput(commitOnMain)
		in.Parameters = map[string]string{"target": "qa"}
		st := h.run(in)
		require.Equal(t, StatusFailure, st.Status)
		require.Equal(t, `parameters: parameter "target": "qa" is not one of the allowed values: "staging", "production"`, st.Reason)
		require.Empty(t, h.builds)
		require.Nil(t, st.Parameters)
	})
}

// TestEventResolvesLocallyThenFallsBack: a Slim event reads its spec with
// a local activity; when that fails for a reason other than an unreadable
// repository (or takes longer than resolveLocalFor), the regular activity
// reads it, with its own attempts; an unreadable repository fails the
// event at once; an event recorded before Slim uses the activity alone.
func TestEventResolvesLocallyThenFallsBack(t *testing.T) {
	t.Parallel()
	spec := parseSpec(t, graphSpec)
	type call struct{ local bool }
	run := func(t *testing.T, slim bool, answer func(local bool, n int) error) ([]call, EventState) {
		env, _ := newEnv(t)
		var mu sync.Mutex
		var calls []call
		env.OnActivity(acts.ResolveEvent, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, _ activities.ResolveEventInput) (activities.ResolveEventResult, error) {
				local := activity.GetInfo(ctx).IsLocalActivity
				mu.Lock()
				calls = append(calls, call{local: local})
				n := len(calls)
				mu.Unlock()
				if err := answer(local, n); err != nil {
					return activities.ResolveEventResult{}, err
				}
				// No job starts: the event ends once it has its spec.
				return activities.ResolveEventResult{SHA: eventSHA, Spec: spec, Queues: []queue.Queue{queue.DefaultQueue()}}, nil
			})
		in := eventInput(Trigger{Kind: TriggerTag, Ref: "v1"})
		in.Slim = slim
		env.ExecuteWorkflow(EventWorkflow, in)
		require.True(t, env.IsWorkflowCompleted())
		var st EventState
		require.NoError(t, env.GetWorkflowResult(&st))
		return calls, st
	}
	t.Run("locally", func(t *testing.T) {
		t.Parallel()
		calls, st := run(t, true, func(bool, int) error { return nil })
		require.Equal(t, []call{{local: true}}, calls)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, eventSHA, st.SHA)
	})
	t.Run("a transient failure falls back to the activity", func(t *testing.T) {
		t.Parallel()
		calls, st := run(t, true, func(local bool, _ int) error {
			if local {
				return errors.New("the API did not answer")
			}
			return nil
		})
		require.NotEmpty(t, calls)
		for _, c := range calls[:len(calls)-1] {
			require.True(t, c.local, "the local attempts come first: %v", calls)
		}
		require.False(t, calls[len(calls)-1].local, "the activity read the spec in the end: %v", calls)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		require.Equal(t, eventSHA, st.SHA)
	})
	t.Run("an unreadable repository fails the event at once", func(t *testing.T) {
		t.Parallel()
		calls, st := run(t, true, func(bool, int) error {
			return temporal.NewNonRetryableApplicationError("open repository /src/app: not found", activities.ErrTypeRepo, nil)
		})
		require.Equal(t, []call{{local: true}}, calls)
		require.Equal(t, StatusFailure, st.Status)
		require.Equal(t, "cannot read the pipeline's repository: open repository /src/app: not found", st.Reason)
	})
	t.Run("an event recorded before Slim uses the activity", func(t *testing.T) {
		t.Parallel()
		calls, st := run(t, false, func(bool, int) error { return nil })
		require.Equal(t, []call{{local: false}}, calls)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
	})
}

// TestSlimEventGivesBackLanePlaces: the lane places of a Slim event's
// builds that ended holding them (BuildState.LaneRelease) go back to the
// pipeline with the event's next batch, each once: with the builds that
// their end started when there are any, else in a batch of their own; the
// places its last builds hold go back in its result (DoneInResult), unless
// the pipeline handed that back (SignalHandBack): then in a last batch.
// Without DoneInResult, only builds whose end may start more builds leave
// it to the event (a leaf job's build signals the pipeline itself).
func TestSlimEventGivesBackLanePlaces(t *testing.T) {
	t.Parallel()
	ref := func(job string) BuildRef { return BuildRef{Pipeline: "app", Job: job, Event: 1} }
	run := func(t *testing.T, doneInResult, handBack bool) (*eventHarness, EventState, []EnqueueBatch) {
		h := newEventHarness(t, graphSpec)
		for _, job := range []string{"a", "b", "c", "d", "e"} {
			h.plans[job] = buildPlan{took: time.Minute, status: StatusSuccess, laneRelease: true}
		}
		h.plans["c"] = buildPlan{took: 20 * time.Minute, status: StatusSuccess, laneRelease: true}
		if handBack {
			at(h.env, 10*time.Minute, func() { h.env.SignalWorkflow(SignalHandBack, "continue-as-new") })
		}
		in := eventInput(commitOnMain)
		in.DoneInResult = doneInResult
		st := h.run(in)
		require.Equal(t, StatusSuccess, st.Status, st.Reason)
		return h, st, enqueueBatches(h)
	}
	batchOf := func(t *testing.T, batches []EnqueueBatch, b BuildRef, done bool) int {
		t.Helper()
		found := -1
		for i, batch := range batches {
			list := batch.Done
			if !done {
				list = nil
				for _, r := range batch.Requests {
					list = append(list, r.Build)
				}
			}
			for _, x := range list {
				if x == b {
					require.Equal(t, -1, found, "%s is in two batches: %+v", b, batches)
					found = i
				}
			}
		}
		return found
	}
	common := func(t *testing.T, batches []EnqueueBatch) {
		t.Helper()
		for _, job := range []string{"a", "b", "c"} {
			require.NotEqual(t, -1, batchOf(t, batches, ref(job), true), "%s's place never went back: %+v", job, batches)
		}
		require.Equal(t, batchOf(t, batches, ref("b"), false), batchOf(t, batches, ref("a"), true), "a's place goes back with the builds its end started")
		require.Equal(t, batchOf(t, batches, ref("d"), false), batchOf(t, batches, ref("c"), true), "c's place goes back with d")
	}
	t.Run("the last places in the result", func(t *testing.T) {
		t.Parallel()
		h, st, batches := run(t, true, false)
		for _, job := range []string{"a", "b", "c", "d", "e"} {
			require.True(t, h.runsOf(job)[0].Input.Slim, "job %s", job)
		}
		common(t, batches)
		require.NotEqual(t, -1, batchOf(t, batches, ref("e"), true), "e ended while c ran: its place went back at once: %+v", batches)
		require.Equal(t, -1, batchOf(t, batches, ref("d"), true))
		require.Equal(t, []BuildRef{ref("d")}, st.LaneDone, "the last build's place goes back in the result")
	})
	t.Run("handed back: the last places in a batch", func(t *testing.T) {
		t.Parallel()
		_, st, batches := run(t, true, true)
		common(t, batches)
		require.Empty(t, st.LaneDone)
		last := batches[len(batches)-1]
		require.Equal(t, []BuildRef{ref("d")}, last.Done, "%+v", batches)
		require.Empty(t, last.Requests)
	})
	t.Run("without DoneInResult", func(t *testing.T) {
		t.Parallel()
		h, st, batches := run(t, false, false)
		for job, slim := range map[string]bool{"a": true, "b": true, "c": true, "d": false, "e": false} {
			require.Equal(t, slim, h.runsOf(job)[0].Input.Slim, "job %s", job)
		}
		common(t, batches)
		for _, job := range []string{"d", "e"} {
			require.Equal(t, -1, batchOf(t, batches, ref(job), true), "%s's place went back through the event: %+v", job, batches)
		}
		require.Empty(t, st.LaneDone)
	})
}
