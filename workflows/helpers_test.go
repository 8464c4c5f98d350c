package workflows

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
)

// acts is the receiver the mocks name activities by (RunBuild, ResolveEvent,
// ...); the workflows use the package var a, which resolves to the same names.
var acts = &activities.Activities{}

// wfT0 is the workflow clock's start in the SDK testsuite tests: a Monday,
// 10:00 UTC, derived from the real clock so that it always lies ahead of it.
// The SDK's test environment checks some deadlines (a local activity's
// start-to-close timeout) against the real clock, so a workflow clock pinned
// to a fixed date turns every such call into a timeout once that date has
// passed. No test may depend on today's date.
var wfT0 = mondayAfter(time.Now().Add(48*time.Hour), 10)

// wfNight is wfT0's Monday at 03:00 UTC: inside the test freeze window
// `* 0-6 ? * *`, and still ahead of the real clock.
var wfNight = wfT0.Add(-7 * time.Hour)

// mondayAfter returns the first Monday at hour:00 UTC at or after t.
func mondayAfter(t time.Time, hour int) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), hour, 0, 0, 0, time.UTC)
	for day.Before(t) || day.Weekday() != time.Monday {
		day = day.AddDate(0, 0, 1)
	}
	return day
}

// sentSignal is one signal a workflow under test sent to another workflow.
type sentSignal struct {
	WorkflowID string
	Name       string
	Arg        any
}

// recorder collects what workflows under test did that the testsuite does
// not report: external signals and the options of scheduled activities.
type recorder struct {
	mu       sync.Mutex
	counters map[string]int64
	signals  []sentSignal
	actOpts  map[string][]workflow.ActivityOptions
	children []string
	// childOpts are the options of each child started, by workflow ID.
	childOpts map[string]workflow.ChildWorkflowOptions
	// issued are the external signals the workflow issued, including
	// those the test environment delivers to its own child workflows
	// (which never reach the SignalExternalWorkflow mock).
	issued []sentSignal
	// fail, when set, makes matching external signals fail.
	fail func(workflowID, name string) error
}

// countingHandler records the counters workflows increment, by name and
// tags ("name{k=v,...}"); gauges and timers are dropped.
type countingHandler struct {
	rec  *recorder
	tags map[string]string
}

func (h countingHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return countingHandler{rec: h.rec, tags: merged}
}

func (h countingHandler) Counter(name string) client.MetricsCounter {
	keys := slices.Sorted(maps.Keys(h.tags))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+h.tags[k])
	}
	key := name + "{" + strings.Join(parts, ",") + "}"
	return counterFunc(func(n int64) {
		h.rec.mu.Lock()
		defer h.rec.mu.Unlock()
		if h.rec.counters == nil {
			h.rec.counters = map[string]int64{}
		}
		h.rec.counters[key] += n
	})
}

type counterFunc func(int64)

func (f counterFunc) Inc(n int64) { f(n) }

func (countingHandler) Gauge(string) client.MetricsGauge { return client.MetricsNopHandler.Gauge("") }

func (countingHandler) Timer(string) client.MetricsTimer { return client.MetricsNopHandler.Timer("") }

// counter returns a counter's value ("name{k=v,...}").
func (r *recorder) counter(key string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counters[key]
}

func (r *recorder) addSignal(s sentSignal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signals = append(r.signals, s)
}

// signalsTo returns the signals named name sent to workflowID, in order.
func (r *recorder) signalsTo(workflowID, name string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, s := range r.signals {
		if s.WorkflowID == workflowID && s.Name == name {
			out = append(out, s.Arg)
		}
	}
	return out
}

// laneMessages returns the lane messages sent to each build, by build ID.
// signalLog returns every signal sent, in the order sent.
func (r *recorder) signalLog() []sentSignal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentSignal(nil), r.signals...)
}

func (r *recorder) laneMessages() map[string][]LaneMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]LaneMessage{}
	for _, s := range r.signals {
		if s.Name == SignalLane {
			out[s.WorkflowID] = append(out[s.WorkflowID], s.Arg.(LaneMessage))
		}
	}
	return out
}

func (r *recorder) activityOptions(name string) []workflow.ActivityOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]workflow.ActivityOptions(nil), r.actOpts[name]...)
}

// Interceptor records the options of every activity a workflow schedules.
func (r *recorder) interceptor() interceptor.WorkerInterceptor {
	return &recordingWorker{rec: r}
}

type recordingWorker struct {
	interceptor.WorkerInterceptorBase
	rec *recorder
}

func (w *recordingWorker) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &recordingInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, rec: w.rec}
}

type recordingInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	rec *recorder
}

func (i *recordingInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&recordingOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, rec: i.rec})
}

type recordingOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	rec *recorder
}

func (o *recordingOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.rec.mu.Lock()
	if o.rec.actOpts == nil {
		o.rec.actOpts = map[string][]workflow.ActivityOptions{}
	}
	o.rec.actOpts[activityType] = append(o.rec.actOpts[activityType], workflow.GetActivityOptions(ctx))
	o.rec.mu.Unlock()
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *recordingOutbound) SignalExternalWorkflow(ctx workflow.Context, workflowID, runID, signalName string, arg any) workflow.Future {
	o.rec.mu.Lock()
	o.rec.issued = append(o.rec.issued, sentSignal{WorkflowID: workflowID, Name: signalName, Arg: arg})
	o.rec.mu.Unlock()
	return o.Next.SignalExternalWorkflow(ctx, workflowID, runID, signalName, arg)
}

// issuedTo returns the signals named name the workflow issued to
// workflowID, in order.
func (r *recorder) issuedTo(workflowID, name string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, s := range r.issued {
		if s.WorkflowID == workflowID && s.Name == name {
			out = append(out, s.Arg)
		}
	}
	return out
}

func (o *recordingOutbound) ExecuteChildWorkflow(ctx workflow.Context, childWorkflowType string, args ...any) workflow.ChildWorkflowFuture {
	opts := workflow.GetChildWorkflowOptions(ctx)
	o.rec.mu.Lock()
	o.rec.children = append(o.rec.children, opts.WorkflowID)
	if o.rec.childOpts == nil {
		o.rec.childOpts = map[string]workflow.ChildWorkflowOptions{}
	}
	o.rec.childOpts[opts.WorkflowID] = opts
	o.rec.mu.Unlock()
	return o.Next.ExecuteChildWorkflow(ctx, childWorkflowType, args...)
}

// childOptions are the options the workflow last started child workflowID
// with (its search attributes and memo).
func (r *recorder) childOptions(workflowID string) workflow.ChildWorkflowOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.childOpts[workflowID]
}

// newEnv returns a testsuite environment starting at wfT0 whose external
// signals succeed and are recorded, with a quiet logger. register runs
// before any mock is set up (the testsuite wants registrations first).
func newEnv(t *testing.T, register ...func(*testsuite.TestWorkflowEnvironment)) (*testsuite.TestWorkflowEnvironment, *recorder) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	rec := &recorder{}
	s.SetMetricsHandler(countingHandler{rec: rec})

	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(wfT0)
	env.SetTestTimeout(20 * time.Second)
	// The race detector and a busy machine slow a workflow task several
	// times over: the SDK's 1 s deadlock check would fail a test that a
	// controller (5 s, without the race detector) runs easily.
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec.interceptor()}, DeadlockDetectionTimeout: 10 * time.Second})
	for _, r := range register {
		r(env)
	}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_, workflowID, _, name string, arg any) error {
			rec.addSignal(sentSignal{WorkflowID: workflowID, Name: name, Arg: arg})
			rec.mu.Lock()
			fail := rec.fail
			rec.mu.Unlock()
			if fail != nil {
				return fail(workflowID, name)
			}
			return nil
		}).Maybe()
	t.Cleanup(func() {
		if !t.Failed() {
			env.AssertExpectations(t)
		}
	})
	return env, rec
}

// at runs fn on the workflow clock, d after the start.
func at(env *testsuite.TestWorkflowEnvironment, d time.Duration, fn func()) {
	env.RegisterDelayedCallback(fn, d)
}

// query runs a query and decodes its answer.
func query[T any](t *testing.T, env *testsuite.TestWorkflowEnvironment, name string, args ...any) T {
	t.Helper()
	v, err := env.QueryWorkflow(name, args...)
	require.NoError(t, err)
	var out T
	require.NoError(t, v.Get(&out))
	return out
}

// updateResult is what one update returned.
type updateResult struct {
	Accepted bool
	Rejected error
	Value    any
	Err      error
	Done     bool
}

// updateAt sends an update d after the start.
func updateAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, arg any) *updateResult {
	res := &updateResult{}
	at(env, d, func() { sendUpdate(env, res, name, arg) })
	return res
}

func sendUpdate(env *testsuite.TestWorkflowEnvironment, res *updateResult, name string, arg any) {
	env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnAccept:   func() { res.Accepted = true },
		OnReject:   func(err error) { res.Rejected = err; res.Done = true },
		OnComplete: func(v any, err error) { res.Value, res.Err, res.Done = v, err, true },
	}, arg)
}
