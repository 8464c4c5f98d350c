package workflows

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Tests of the enqueue-by-update path: an event hands its builds to the
// lanes by UpdateEnqueue and starts them with the lanes' answer
// (EventInput.EnqueueUpdate, changeEnqueueUpdate).

// enqueueByUpdate sends the pipeline an UpdateEnqueue d after the start.
func (h *pipelineHarness) enqueueByUpdate(d time.Duration, batch EnqueueBatch) *updateResult {
	return updateAt(h.env, d, UpdateEnqueue, batch)
}

func enqueueAnswer(t *testing.T, res *updateResult) EnqueueAnswer {
	t.Helper()
	require.True(t, res.Done, "update did not finish")
	require.NoError(t, res.Rejected)
	require.NoError(t, res.Err)
	out, ok := res.Value.(EnqueueAnswer)
	require.True(t, ok, "update returned %T", res.Value)
	return out
}

func sameJobBlock(b BuildRef) LaneMessage {
	return LaneMessage{Kind: LaneStatus, Status: StatusBlocked, Code: WaitBlockedBy, Reason: "blocked by build " + b.String() + " of the same job"}
}

// TestPipelineEnqueueUpdateAnswersItsBuilds: the lanes' messages to the
// builds of an UpdateEnqueue batch are its answer, not signals (their
// workflows do not exist yet): a grant for the first build of a job, a
// wait for the next; when the first build's end arrives, however it comes,
// the next is granted by signal.
func TestPipelineEnqueueUpdateAnswersItsBuilds(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	// Each way test/1's end may come; the returned check runs after the run.
	ends := []struct {
		name string
		end  func(h *pipelineHarness, d time.Duration) (check func(t *testing.T))
	}{
		{"build-done signal", func(h *pipelineHarness, d time.Duration) func(*testing.T) {
			h.done(d, test1, StatusSuccess)
			return nil
		}},
		{"done in a later signalled batch", func(h *pipelineHarness, d time.Duration) func(*testing.T) {
			h.signal(d, SignalEnqueue, EnqueueBatch{Event: 1, Done: []BuildRef{test1}})
			return nil
		}},
		{"done in a later update", func(h *pipelineHarness, d time.Duration) func(*testing.T) {
			res := h.enqueueByUpdate(d, EnqueueBatch{Event: 1, Done: []BuildRef{test1}})
			return func(t *testing.T) {
				require.Empty(t, enqueueAnswer(t, res).Messages, "the batch names no build to answer")
			}
		}},
	}
	for _, tc := range ends {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			first := h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
			second := h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			at(h.env, 150*time.Second, func() {
				require.Empty(t, h.rec.laneMessages(), "answered builds are not signalled")
				info := query[PipelineInfo](t, h.env, QueryPipeline)
				require.Equal(t, 2, info.Lanes.Len())
				for _, b := range []BuildRef{test1, test2} {
					en, _ := info.Lanes.find(b)
					require.NotNil(t, en, "the lanes hold %s", b)
					require.True(t, en.ByUpdate, "%s came by update", b)
				}
			})
			check := tc.end(h, 3*time.Minute)
			h.done(4*time.Minute, test2, StatusSuccess)
			h.deleteAt(5 * time.Minute)
			h.run(PipelineInput{Config: appConfig})

			require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test1.String(): {grantMsg}}}, enqueueAnswer(t, first))
			require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {sameJobBlock(test1)}}}, enqueueAnswer(t, second))
			require.Equal(t, map[string][]LaneMessage{test2.WorkflowID(): {grantMsg}}, h.rec.laneMessages(),
				"test/2 is granted by signal once test/1 ended; test/1 is never signalled")
			if check != nil {
				check(t)
			}
		})
	}
}

// TestPipelineEnqueueUpdateSignalsOtherBuilds: what the batch makes the
// lanes tell builds outside it goes out as signals (here the collapse of
// an older build granted but not claimed).
func TestPipelineEnqueueUpdateSignalsOtherBuilds(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	h := newPipelineHarness(t)
	h.enqueue(time.Minute, lreqFor(test1))
	second := h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2)}})
	h.done(3*time.Minute, test1, StatusCollapsed)
	h.done(4*time.Minute, test2, StatusSuccess)
	h.deleteAt(5 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	giveWay := LaneMessage{Kind: LaneStatus, Status: StatusQueued, Code: WaitLaneOrder, Reason: "waiting for build app/test/1 to give way"}
	require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {giveWay}}}, enqueueAnswer(t, second))
	collapse := LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Into: test2.String(), Reason: "collapsed into build " + test2.String()}
	require.Equal(t, map[string][]LaneMessage{
		test1.WorkflowID(): {grantMsg, collapse},
		test2.WorkflowID(): {grantMsg},
	}, h.rec.laneMessages())
}

// failingLane makes the lane signals to one build fail as if its workflow
// did not exist (the first n of them; n < 0: all), and records when each
// was sent.
type failingLane struct {
	mu    sync.Mutex
	build BuildRef
	n     int
	sent  []time.Time
}

func (f *failingLane) install(h *pipelineHarness) {
	h.rec.fail = func(workflowID, name string) error {
		if workflowID != f.build.WorkflowID() || name != SignalLane {
			return nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sent = append(f.sent, h.env.Now())
		if f.n < 0 || len(f.sent) <= f.n {
			return &temporal.UnknownExternalWorkflowExecutionError{}
		}
		return nil
	}
}

func (f *failingLane) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.sent...)
}

// TestPipelineResendsToABuildStillStarting: a lane signal to a build that
// came by update and whose workflow does not exist yet (its event starts
// it right after the answer) is sent again a second later, and the lanes
// keep the build; a build that came by signal and cannot be signalled has
// ended, so the lanes drop it (as before); and a build that came by update
// but still cannot be signalled a minute after it came is dropped too.
func TestPipelineResendsToABuildStillStarting(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	const (
		enqueued = 2 * time.Minute
		freed    = enqueued + 10*time.Second // test/1 ends: test/2 is granted
	)
	tests := []struct {
		name     string
		byUpdate bool
		failures int // -1: every signal fails
		// wantSent are when the lane signals to test/2 were sent (after the
		// start).
		wantSent []time.Duration
		// wantHeld: the lanes still hold test/2 at the check.
		wantHeld bool
	}{
		{name: "by update, starting", byUpdate: true, failures: 2, wantSent: []time.Duration{freed, freed + resendAfter, freed + 2*resendAfter}, wantHeld: true},
		// Its wait status, sent when it came, fails: it is dropped at once.
		{name: "by signal", byUpdate: false, failures: 2, wantSent: []time.Duration{enqueued}},
		{name: "by update, never started", byUpdate: true, failures: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			f := &failingLane{build: test2, n: tc.failures}
			f.install(h)
			h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
			req := lreqFor(test2, noCollapse)
			if tc.byUpdate {
				h.enqueueByUpdate(enqueued, EnqueueBatch{Event: 2, Requests: []LaneRequest{req}})
			} else {
				h.enqueue(enqueued, req)
			}
			h.done(freed, test1, StatusSuccess)
			// Past startGrace: whatever was to be resent was.
			check := enqueued + startGrace + 30*time.Second
			at(h.env, check, func() {
				info := query[PipelineInfo](t, h.env, QueryPipeline)
				en, active := info.Lanes.find(test2)
				if !tc.wantHeld {
					require.Nil(t, en, "the lanes dropped test/2")
					return
				}
				require.NotNil(t, en, "the lanes keep test/2")
				require.True(t, active, "test/2 holds its grant")
			})
			h.done(check+time.Minute, test2, StatusSuccess)
			h.deleteAt(check + 2*time.Minute)
			h.run(PipelineInput{Config: appConfig})

			sent := f.times()
			if tc.failures >= 0 {
				var got []time.Duration
				for _, s := range sent {
					got = append(got, s.Sub(wfT0))
				}
				require.Equal(t, tc.wantSent, got, "lane signals sent to test/2")
			} else {
				// Sent again every resendAfter while within startGrace of
				// its enqueue, then dropped.
				require.Greater(t, len(sent), 10, "sent %d times", len(sent))
				for i, s := range sent {
					require.True(t, s.Before(wfT0.Add(enqueued+startGrace+resendAfter)), "grant %d sent at %s, past the grace", i, s.Sub(wfT0))
				}
			}
			if tc.byUpdate {
				for _, m := range h.rec.laneMessages()[test2.WorkflowID()] {
					require.Equal(t, grantMsg, m, "only the grant is sent again")
				}
			}
		})
	}
}

// TestPipelineRestatesADuplicateRequest: a request for a build the lanes
// already hold (its event sends the batch again by signal when it could
// not learn the update's answer) is answered with what the lanes last
// told it; a run recorded before changeEnqueueUpdate ignores it.
func TestPipelineRestatesADuplicateRequest(t *testing.T) {
	t.Parallel()
	test1, test2 := appBuild("test", 1), appBuild("test", 2)
	for _, restates := range []bool{true, false} {
		name := "restated"
		if !restates {
			name = "before changeEnqueueUpdate"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newPipelineHarness(t)
			if restates {
				h.enqueueByUpdate(time.Minute, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
				h.enqueueByUpdate(2*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			} else {
				h.env.OnGetVersion(changeEnqueueUpdate, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				h.enqueue(time.Minute, lreqFor(test1))
				h.enqueue(2*time.Minute, lreqFor(test2, noCollapse))
			}
			before := map[string][]LaneMessage{}
			at(h.env, 150*time.Second, func() { before = h.rec.laneMessages() })
			// Both again, by signal.
			h.signal(3*time.Minute, SignalEnqueue, EnqueueBatch{Event: 1, Requests: []LaneRequest{lreqFor(test1)}})
			h.signal(4*time.Minute, SignalEnqueue, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			var again *updateResult
			if restates {
				// And by update: the answer restates too.
				again = h.enqueueByUpdate(5*time.Minute, EnqueueBatch{Event: 2, Requests: []LaneRequest{lreqFor(test2, noCollapse)}})
			}
			h.done(6*time.Minute, test1, StatusSuccess)
			h.done(7*time.Minute, test2, StatusSuccess)
			h.deleteAt(8 * time.Minute)
			h.run(PipelineInput{Config: appConfig})

			after := h.rec.laneMessages()
			if !restates {
				require.Equal(t, map[string][]LaneMessage{
					test1.WorkflowID(): {grantMsg},
					test2.WorkflowID(): {sameJobBlock(test1), grantMsg},
				}, after, "the duplicates are ignored")
				return
			}
			require.Empty(t, before, "answered by update, not signalled")
			require.Equal(t, map[string][]LaneMessage{
				test1.WorkflowID(): {grantMsg},                      // active: its grant
				test2.WorkflowID(): {sameJobBlock(test1), grantMsg}, // waiting: its last status, then its grant
			}, after)
			require.Equal(t, EnqueueAnswer{Messages: map[string][]LaneMessage{test2.String(): {sameJobBlock(test1)}}}, enqueueAnswer(t, again))
		})
	}
}

func TestLanesRestate(t *testing.T) {
	t.Parallel()
	j1, j2, j3, other := bref("j", 1), bref("j", 2), bref("j", 3), bref("k", 1)
	l := &Lanes{}
	require.Equal(t, []LaneEffect{grantFx(j1)}, l.Enqueue(lreq(j1), laneT0))
	blocked := statusFx(j2, StatusBlocked, "blocked by build p/j/1 of the same job")
	require.Equal(t, []LaneEffect{blocked}, l.Enqueue(lreq(j2, noCollapse), laneT0))
	// Added, not yet evaluated: it was told nothing.
	require.True(t, l.Add(lreq(j3, noCollapse), laneT0))

	for _, tc := range []struct {
		name string
		b    BuildRef
		want LaneEffect
		ok   bool
	}{
		{name: "active: its grant", b: j1, want: grantFx(j1), ok: true},
		{name: "waiting: its last status", b: j2, want: blocked, ok: true},
		{name: "told nothing yet", b: j3},
		{name: "not in the lanes", b: other},
	} {
		got, ok := l.restate(tc.b)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
	// A restatement changes nothing: the lanes decide as before.
	require.Equal(t, []LaneEffect{statusFx(j3, StatusBlocked, "waiting behind build p/j/2 of the same job")}, l.Evaluate(laneT0))
	require.Equal(t, []LaneEffect{grantFx(j2), statusFx(j3, StatusBlocked, "blocked by build p/j/2 of the same job")}, l.Done(j1, laneT0))
	got, ok := l.restate(j2)
	require.True(t, ok)
	require.Equal(t, grantFx(j2), got, "granted since: its grant")
}
