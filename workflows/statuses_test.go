package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/scm"
)

// fakeReporter stands in for StatusWorkflow: it records its input and the
// batches it receives until one says Done.
type fakeReporter struct {
	mu      sync.Mutex
	started []StatusInput
	batches []StatusBatch
}

func (f *fakeReporter) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in StatusInput) (StatusReport, error) {
		f.mu.Lock()
		f.started = append(f.started, in)
		f.mu.Unlock()
		ch := workflow.GetSignalChannel(ctx, SignalCommitStatus)
		for done := in.Done; !done; {
			var b StatusBatch
			ch.Receive(ctx, &b)
			f.mu.Lock()
			f.batches = append(f.batches, b)
			f.mu.Unlock()
			done = b.Done
		}
		return StatusReport{Done: true}, nil
	}, workflow.RegisterOptions{Name: "StatusWorkflow"})
}

// updates returns the updates received per context and whether the last
// batch said Done.
func (f *fakeReporter) updates(t *testing.T) (map[string][]StatusUpdate, bool) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]StatusUpdate{}
	done := false
	for _, b := range f.batches {
		require.False(t, done, "nothing is sent after Done")
		for _, u := range b.Updates {
			out[u.Context] = append(out[u.Context], u)
		}
		done = b.Done
	}
	return out, done
}

// TestEventCommitStatuses: for A → B → C where B fails, the reporter starts
// with a pending status per job, each job's final status follows its end,
// C's says why it did not run, and the last batch says Done.
func TestEventCommitStatuses(t *testing.T) {
	t.Parallel()
	f := &fakeReporter{}
	h := newEventHarness(t, `
shared: {image: alpine}
jobs:
  A: {requires: [~commit], steps: [{a: "true"}]}
  B: {requires: [A], steps: [{b: "false"}]}
  C: {requires: [B], steps: [{c: "true"}]}
`, f.register)
	h.resolve.Statuses = &scm.StatusTarget{Provider: scm.ProviderGitHub, Repo: "octo/app"}
	h.plans["B"] = buildPlan{status: StatusFailure, reason: "step b exited 1"}
	in := eventInput(commitOnMain)
	st := h.run(in)
	require.Equal(t, StatusFailure, st.Status)
	require.Equal(t, "github:octo/app", st.Statuses)

	started := f.started
	require.Len(t, started, 1)
	require.Equal(t, eventSHA, started[0].SHA)
	var initial []string
	for _, c := range started[0].Contexts {
		require.Equal(t, scm.StatePending, c.Want.State)
		initial = append(initial, c.Want.Context+": "+c.Want.Description)
	}
	require.Equal(t, []string{"sluice/app/A: waiting to be queued", "sluice/app/B: waiting for A", "sluice/app/C: waiting for B"}, initial)
	for _, b := range h.builds {
		require.Equal(t, StatusWorkflowID(in.Event), b.Input.Statuses, "builds report to the event's reporter")
		require.Equal(t, "sluice/app/"+b.Input.Build.Job, b.Input.StatusContext)
	}

	got, done := f.updates(t)
	require.True(t, done)
	last := func(c string) StatusUpdate { return got[c][len(got[c])-1] }
	require.Equal(t, scm.StateSuccess, last("sluice/app/A").State)
	require.Equal(t, "/ui/builds/app/A/1", last("sluice/app/A").Page)
	require.Equal(t, scm.StateFailure, last("sluice/app/B").State)
	require.Equal(t, "step b exited 1", last("sluice/app/B").Description)
	require.Equal(t, scm.StateSkipped, last("sluice/app/C").State)
	require.Equal(t, "not run: requires B, which ended FAILURE", last("sluice/app/C").Description)
}

// TestEventCommitStatusesOff: no target, no reporter; the event says why.
func TestEventCommitStatusesOff(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, "shared: {image: alpine}\njobs:\n  A: {requires: [~commit], steps: [{a: \"true\"}]}\n")
	h.resolve.StatusesOff = "no GitHub credentials"
	st := h.run(eventInput(commitOnMain))
	require.Equal(t, "off: no GitHub credentials", st.Statuses)
	require.NotContains(t, h.rec.children, StatusWorkflowID(EventRef{Pipeline: "app", Number: 1}))
	require.Empty(t, h.builds[0].Input.Statuses)
}

// TestEventCommitStatusSpecError: a spec that does not parse posts one
// failure for the pipeline.
func TestEventCommitStatusSpecError(t *testing.T) {
	t.Parallel()
	f := &fakeReporter{}
	h := newEventHarness(t, "", f.register)
	h.resolve.Statuses = &scm.StatusTarget{Provider: scm.ProviderGitLab, Repo: "g/app"}
	h.resolve.SpecError = "screwdriver.yaml:3:5: jobs.A: unknown field"
	st := h.run(eventInput(commitOnMain))
	require.Equal(t, StatusFailure, st.Status)
	started := f.started
	require.Len(t, started, 1)
	require.True(t, started[0].Done)
	require.Len(t, started[0].Contexts, 1)
	require.Equal(t, StatusUpdate{
		Context: "sluice/app", State: scm.StateFailure, Description: h.resolve.SpecError,
		Page: "/ui/pipelines/app/events/1", At: started[0].Contexts[0].Want.At,
	}, started[0].Contexts[0].Want)
}

// TestStatusWorkflowOrder: updates are posted one at a time, a final state
// is never followed by another, an older pending update never replaces a
// newer one, and a failing provider delays statuses until it recovers.
func TestStatusWorkflowOrder(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	env.RegisterWorkflow(StatusWorkflow)
	var mu sync.Mutex
	var posted []activities.PostStatusInput
	failures := 3
	env.OnActivity(acts.PostCommitStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PostStatusInput) error {
			mu.Lock()
			defer mu.Unlock()
			if in.Status.Context == "c/B" && failures > 0 {
				failures--
				return errors.New("GitHub answered 500")
			}
			if in.Status.Context == "c/refused" {
				return temporal.NewNonRetryableApplicationError("GitHub answered 401 Bad credentials", activities.ErrTypeStatusRefused, nil)
			}
			posted = append(posted, in)
			return nil
		})
	t0 := wfT0
	u := func(c, state, desc string, at time.Duration) StatusUpdate {
		return StatusUpdate{Context: c, State: state, Description: desc, At: t0.Add(at)}
	}
	signal := func(d time.Duration, b StatusBatch) {
		at(env, d, func() { env.SignalWorkflow(SignalCommitStatus, b) })
	}
	signal(time.Second, StatusBatch{Updates: []StatusUpdate{u("c/A", scm.StateRunning, "running on x", time.Second)}})
	// An update sent earlier but delivered late is older: dropped.
	signal(2*time.Second, StatusBatch{Updates: []StatusUpdate{u("c/A", scm.StatePending, "stale", 500*time.Millisecond)}})
	signal(3*time.Second, StatusBatch{Updates: []StatusUpdate{u("c/A", scm.StateSuccess, "succeeded", 3*time.Second), u("c/B", scm.StateRunning, "running", 3*time.Second)}})
	// After a final state nothing replaces it.
	signal(4*time.Second, StatusBatch{Updates: []StatusUpdate{u("c/A", scm.StateRunning, "late", 4*time.Second), u("c/refused", scm.StateSuccess, "", 4*time.Second)}})
	signal(5*time.Minute, StatusBatch{Updates: []StatusUpdate{u("c/B", scm.StateFailure, "step exited 1", 5*time.Minute)}, Done: true})
	env.ExecuteWorkflow(StatusWorkflow, StatusInput{
		Event: EventRef{Pipeline: "app", Number: 1}, Target: scm.StatusTarget{Provider: "github", Repo: "o/app"}, SHA: eventSHA,
		Contexts: []StatusContextState{{Want: u("c/A", scm.StatePending, "waiting", 0)}, {Want: u("c/B", scm.StatePending, "waiting", 0)}},
	})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var rep StatusReport
	require.NoError(t, env.GetWorkflowResult(&rep))

	byContext := map[string][]string{}
	for _, p := range posted {
		require.Equal(t, eventSHA, p.SHA)
		byContext[p.Status.Context] = append(byContext[p.Status.Context], p.Status.State+" "+p.Status.Description)
	}
	// B's pending was retried through the outage (~14s) while A went
	// running, then success: A's running was replaced before its turn.
	require.Equal(t, []string{"pending waiting", "success succeeded"}, byContext["c/A"])
	require.Equal(t, []string{"pending waiting", "running running", "failure step exited 1"}, byContext["c/B"])
	require.Len(t, rep.Contexts, 3)
	require.Contains(t, rep.Contexts[2].Error, "401", "a refused status is given up and reported")
	require.True(t, rep.Done)
}
