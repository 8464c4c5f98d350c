package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// laneT0 is a Monday, 10:00 UTC: outside the test freeze window.
var laneT0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// nightT0 is the same Monday at 03:00 UTC: inside the test freeze window.
var nightT0 = time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)

const nightWindow = "* 0-6 ? * *"

func bref(job string, event int) BuildRef {
	return BuildRef{Pipeline: "p", Job: job, Event: event}
}

func mref(job string, event, index int) BuildRef {
	return BuildRef{Pipeline: "p", Job: job, Event: event, Index: index}
}

// lreq is a lane request with Screwdriver's defaults: collapse and
// blockedBySameJob on.
func lreq(b BuildRef, opts ...func(*LaneRequest)) LaneRequest {
	r := LaneRequest{Build: b, Collapse: true, BlockedBySameJob: true}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func noCollapse(r *LaneRequest)    { r.Collapse = false }
func notSameJob(r *LaneRequest)    { r.BlockedBySameJob = false }
func forced(r *LaneRequest)        { r.Force = true }
func frozenAtNight(r *LaneRequest) { r.FreezeWindows = []string{nightWindow} }

func blockedBy(jobs ...string) func(*LaneRequest) {
	return func(r *LaneRequest) { r.BlockedBy = jobs }
}

func delayed(d time.Duration) func(*LaneRequest) {
	return func(r *LaneRequest) { r.Delay = d }
}

func grantFx(b BuildRef) LaneEffect {
	return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneGrant}}
}

func statusFx(b BuildRef, s Status, reason string) LaneEffect {
	return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneStatus, Status: s, Reason: reason, Code: WaitCodeOf(s, reason)}}
}

func timedFx(b BuildRef, s Status, reason string, until time.Time) LaneEffect {
	return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneStatus, Status: s, Reason: reason, Code: WaitCodeOf(s, reason), Until: until}}
}

func collapseFx(b, into BuildRef) LaneEffect {
	return LaneEffect{Build: b, Msg: LaneMessage{
		Kind: LaneCollapse, Status: StatusCollapsed,
		Into: into.String(), Reason: "collapsed into build " + into.String(),
	}}
}

// laneOp is one call on a Lanes value and the effects it must return.
type laneOp struct {
	at       time.Duration // after the case's start time
	enqueue  *LaneRequest
	done     *BuildRef
	evaluate bool
	// batch is an event's enqueue batch as the pipeline applies it: release
	// the event's hold, add every request, then evaluate.
	batch *laneBatch
	// holdEvent holds builds of later events until holdUntil (no effects).
	holdEvent int
	holdUntil time.Duration
	// started reports that an executor claimed the build, then evaluates.
	started *BuildRef
	want    []LaneEffect
	// wantWake is NextWake after the op (zero: nothing waits on the clock).
	wantWake time.Time
	// wantLen is Len after the op.
	wantLen int
}

func enq(r LaneRequest, want ...LaneEffect) laneOp { return laneOp{enqueue: &r, want: want} }
func done(b BuildRef, want ...LaneEffect) laneOp   { return laneOp{done: &b, want: want} }
func eval(want ...LaneEffect) laneOp               { return laneOp{evaluate: true, want: want} }
func started(b BuildRef, want ...LaneEffect) laneOp {
	return laneOp{started: &b, want: want}
}

type laneBatch struct {
	event int
	reqs  []LaneRequest
}

func batch(event int, reqs ...LaneRequest) laneOp {
	return laneOp{batch: &laneBatch{event: event, reqs: reqs}}
}

func (op laneOp) then(want ...LaneEffect) laneOp { op.want = want; return op }

func hold(event int, until time.Duration) laneOp { return laneOp{holdEvent: event, holdUntil: until} }

func (op laneOp) after(d time.Duration) laneOp { op.at = d; return op }
func (op laneOp) wake(t time.Time) laneOp      { op.wantWake = t; return op }
func (op laneOp) holds(n int) laneOp           { op.wantLen = n; return op }

func runLaneOps(t *testing.T, start time.Time, ops []laneOp) *Lanes {
	t.Helper()
	return runLaneOpsOn(t, &Lanes{}, start, ops)
}

func runLaneOpsOn(t *testing.T, l *Lanes, start time.Time, ops []laneOp) *Lanes {
	t.Helper()
	for i, op := range ops {
		now := start.Add(op.at)
		var got []LaneEffect
		switch {
		case op.enqueue != nil:
			got = l.Enqueue(*op.enqueue, now)
		case op.done != nil:
			got = l.Done(*op.done, now)
		case op.evaluate:
			got = l.Evaluate(now)
		case op.batch != nil:
			l.Release(op.batch.event)
			for _, r := range op.batch.reqs {
				l.Add(r, now)
			}
			got = l.Evaluate(now)
		case op.holdEvent != 0:
			l.Hold(op.holdEvent, start.Add(op.holdUntil))
		case op.started != nil:
			require.True(t, l.Started(*op.started), "op %d: the lanes do not hold %s as granted", i, op.started)
			got = l.Evaluate(now)
		default:
			t.Fatalf("op %d does nothing", i)
		}
		require.Equal(t, op.want, got, "effects of op %d", i)
		require.True(t, op.wantWake.Equal(l.NextWake(now)), "op %d: NextWake = %s, want %s", i, l.NextWake(now), op.wantWake)
		if op.wantLen > 0 {
			require.Equal(t, op.wantLen, l.Len(), "Len after op %d", i)
		}
	}
	return l
}

func TestLanesCollapse(t *testing.T) {
	t.Parallel()
	j1, j2, j3, j4, j5 := bref("j", 1), bref("j", 2), bref("j", 3), bref("j", 4), bref("j", 5)
	blocked := func(by BuildRef) string { return "blocked by build " + by.String() + " of the same job" }
	giving := func(b BuildRef) string { return "waiting for build " + b.String() + " to give way" }
	behind := func(b BuildRef) string { return "waiting behind build " + b.String() + " of the same job" }
	superseded := func(b, by BuildRef) LaneEffect {
		return LaneEffect{Build: b, Msg: LaneMessage{
			Kind: LaneCollapse, Status: StatusCollapsed, Into: by.String(), Reason: "superseded by build " + by.String(),
		}}
	}
	tests := []struct {
		name string
		ops  []laneOp
	}{
		{
			name: "first build is granted at once",
			ops:  []laneOp{enq(lreq(j1), grantFx(j1)).holds(1)},
		},
		{
			name: "waiting builds collapse into the newest when the running build ends",
			ops: []laneOp{
				enq(lreq(j1), grantFx(j1)),
				started(j1),
				// j1 runs: it is never collapsed, whatever comes next.
				enq(lreq(j2), statusFx(j2, StatusBlocked, blocked(j1))).holds(2),
				enq(lreq(j3), statusFx(j3, StatusBlocked, behind(j2))).holds(3),
				eval(),
				// The job frees: j2 collapses into the newest, which runs.
				done(j1, collapseFx(j2, j3), grantFx(j3)).holds(1),
				// j2 already left the lane; a late done changes nothing.
				done(j2).holds(1),
			},
		},
		{
			// Granted but not claimed by an executor, j1 still waits (for a
			// slot on its queue): the newer request replaces it, and nothing
			// newer is granted until j1 has answered.
			name: "a granted build that no executor claimed collapses into a newer one",
			ops: []laneOp{
				enq(lreq(j1), grantFx(j1)),
				enq(lreq(j2), collapseFx(j1, j2), statusFx(j2, StatusQueued, giving(j1))).holds(2),
				// A newer request while j1 gives way: j2 collapses into it
				// only when it could start; meanwhile it waits too.
				enq(lreq(j3), statusFx(j3, StatusQueued, giving(j1))).holds(3),
				done(j1, collapseFx(j2, j3), grantFx(j3)).holds(1),
			},
		},
		{
			// The executor's claim won the race: j1 runs and says so; the
			// newer build waits for it as for any running build.
			name: "a granted build that already started stays",
			ops: []laneOp{
				enq(lreq(j1), grantFx(j1)),
				enq(lreq(j2), collapseFx(j1, j2), statusFx(j2, StatusQueued, giving(j1))),
				started(j1, statusFx(j2, StatusBlocked, blocked(j1))),
				enq(lreq(j3), statusFx(j3, StatusBlocked, behind(j2))),
				done(j1, collapseFx(j2, j3), grantFx(j3)),
			},
		},
		{
			name: "an older request arriving after a newer one was granted is superseded",
			ops: []laneOp{
				enq(lreq(j3), grantFx(j3)),
				started(j3),
				enq(lreq(j5), statusFx(j5, StatusBlocked, blocked(j3))),
				// j4 arrives before j5 was granted: it waits, and collapses
				// into j5 when the job frees.
				enq(lreq(j4), statusFx(j4, StatusBlocked, blocked(j3)), statusFx(j5, StatusBlocked, behind(j4))).holds(3),
				done(j3, collapseFx(j4, j5), grantFx(j5)).holds(1),
				done(j5).holds(0),
				// Even when the lane is empty the order is remembered.
				enq(lreq(j2), superseded(j2, j5)).holds(0),
			},
		},
		{
			name: "an older request after a newer one ran is superseded even with the job free",
			ops: []laneOp{
				enq(lreq(j3, notSameJob), grantFx(j3)),
				done(j3),
				enq(lreq(j1, notSameJob), superseded(j1, j3)),
			},
		},
		{
			name: "a free job's build is granted even when a newer one follows at once",
			ops: []laneOp{
				enq(lreq(j1), grantFx(j1)),
				started(j1),
				enq(lreq(j2), statusFx(j2, StatusBlocked, blocked(j1))),
				done(j1, grantFx(j2)),
				started(j2),
				enq(lreq(j3), statusFx(j3, StatusBlocked, blocked(j2))),
			},
		},
		{
			name: "a repeated request is ignored",
			ops: []laneOp{
				enq(lreq(j1), grantFx(j1)),
				enq(lreq(j1)).holds(1),
			},
		},
		{
			name: "collapse off keeps every build in FIFO order",
			ops: []laneOp{
				enq(lreq(j1, noCollapse), grantFx(j1)),
				enq(lreq(j2, noCollapse), statusFx(j2, StatusBlocked, blocked(j1))),
				enq(lreq(j3, noCollapse), statusFx(j3, StatusBlocked, behind(j2))).holds(3),
				done(j1, grantFx(j2), statusFx(j3, StatusBlocked, blocked(j2))).holds(2),
				done(j2, grantFx(j3)).holds(1),
				done(j3).holds(0),
			},
		},
		{
			name: "collapse off: an older request after a newer one runs, in the order received",
			ops: []laneOp{
				enq(lreq(j3, noCollapse), grantFx(j3)),
				enq(lreq(j1, noCollapse), statusFx(j1, StatusBlocked, blocked(j3))),
				done(j3, grantFx(j1)),
			},
		},
		{
			name: "collapse off: each waiting build names the build right ahead of it",
			ops: []laneOp{
				enq(lreq(bref("other", 1)), grantFx(bref("other", 1))),
				enq(lreq(j1, noCollapse, blockedBy("~other")),
					statusFx(j1, StatusBlocked, "blocked by running builds of job other")),
				enq(lreq(j2, noCollapse, blockedBy("~other")), statusFx(j2, StatusBlocked, behind(j1))),
				enq(lreq(j3, noCollapse, blockedBy("~other")), statusFx(j3, StatusBlocked, behind(j2))),
				// j1 runs: only j2's reason changes.
				done(bref("other", 1), grantFx(j1), statusFx(j2, StatusBlocked, blocked(j1))),
			},
		},
		{
			name: "the newest build's collapse setting decides",
			ops: []laneOp{
				enq(lreq(j1, noCollapse), grantFx(j1)),
				started(j1),
				enq(lreq(j2, noCollapse), statusFx(j2, StatusBlocked, blocked(j1))),
				enq(lreq(j3), statusFx(j3, StatusBlocked, behind(j2))),
				done(j1, collapseFx(j2, j3), grantFx(j3)),
			},
		},
		{
			name: "a newest build with collapse off replaces nothing",
			ops: []laneOp{
				enq(lreq(j1), grantFx(j1)),
				started(j1),
				enq(lreq(j2), statusFx(j2, StatusBlocked, blocked(j1))),
				enq(lreq(j3, noCollapse), statusFx(j3, StatusBlocked, behind(j2))),
				done(j1, grantFx(j2), statusFx(j3, StatusBlocked, blocked(j2))),
			},
		},
		{
			name: "a batch of several events runs the newest only",
			ops: []laneOp{
				batch(3, lreq(j1), lreq(j2), lreq(j3)).then(
					collapseFx(j1, j3), collapseFx(j2, j3), grantFx(j3)).holds(1),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runLaneOps(t, laneT0, tc.ops)
		})
	}
}

// TestLanesLegacy: runs recorded before lanes kept the order of granted
// builds replay with the old rules (granted builds never collapse).
func TestLanesLegacy(t *testing.T) {
	t.Parallel()
	j1, j2, j3 := bref("j", 1), bref("j", 2), bref("j", 3)
	blocked := func(by BuildRef) string { return "blocked by build " + by.String() + " of the same job" }
	runLaneOpsOn(t, &Lanes{legacy: true}, laneT0, []laneOp{
		batch(3, lreq(j1), lreq(j2), lreq(j3)).then(
			grantFx(j1), statusFx(j2, StatusBlocked, blocked(j1)), statusFx(j3, StatusBlocked, blocked(j1))).holds(3),
		done(j1, collapseFx(j2, j3), grantFx(j3)),
		enq(lreq(bref("j", 2)), statusFx(j2, StatusBlocked, blocked(j3))),
	})
}

func TestLanesSameJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  []laneOp
	}{
		{
			name: "matrix permutations of one event run together",
			ops: []laneOp{
				enq(lreq(mref("m", 1, 1)), grantFx(mref("m", 1, 1))),
				enq(lreq(mref("m", 1, 2)), grantFx(mref("m", 1, 2))),
				enq(lreq(mref("m", 1, 3)), grantFx(mref("m", 1, 3))).holds(3),
			},
		},
		{
			name: "a newer event's permutations collapse the older ones index by index",
			ops: []laneOp{
				enq(lreq(mref("m", 1, 1), noCollapse), grantFx(mref("m", 1, 1))),
				started(mref("m", 1, 1)),
				enq(lreq(mref("m", 2, 1), noCollapse), statusFx(mref("m", 2, 1), StatusBlocked, "blocked by build p/m/1.1 of the same job")),
				enq(lreq(mref("m", 2, 2), noCollapse), statusFx(mref("m", 2, 2), StatusBlocked, "blocked by build p/m/1.1 of the same job")),
				// A whole event's permutations wait behind the event before.
				enq(lreq(mref("m", 3, 1)), statusFx(mref("m", 3, 1), StatusBlocked, "waiting behind build p/m/2.2 of the same job")),
				enq(lreq(mref("m", 3, 2)), statusFx(mref("m", 3, 2), StatusBlocked, "waiting behind build p/m/2.2 of the same job")),
				done(mref("m", 1, 1),
					collapseFx(mref("m", 2, 1), mref("m", 3, 1)),
					collapseFx(mref("m", 2, 2), mref("m", 3, 2)),
					grantFx(mref("m", 3, 1)), grantFx(mref("m", 3, 2))),
			},
		},
		{
			name: "blockedBySameJob on: the next event waits for the running build",
			ops: []laneOp{
				enq(lreq(bref("j", 1), noCollapse), grantFx(bref("j", 1))),
				enq(lreq(bref("j", 2), noCollapse), statusFx(bref("j", 2), StatusBlocked, "blocked by build p/j/1 of the same job")),
			},
		},
		{
			name: "blockedBySameJob off: builds of several events run at once",
			ops: []laneOp{
				enq(lreq(bref("j", 1), noCollapse, notSameJob), grantFx(bref("j", 1))),
				enq(lreq(bref("j", 2), noCollapse, notSameJob), grantFx(bref("j", 2))),
				enq(lreq(bref("j", 3), noCollapse, notSameJob), grantFx(bref("j", 3))).holds(3),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runLaneOps(t, laneT0, tc.ops)
		})
	}
}

func TestLanesBlockedBy(t *testing.T) {
	t.Parallel()
	test1, deploy1, deploy2 := bref("test", 1), bref("deploy", 1), bref("deploy", 2)
	tests := []struct {
		name string
		ops  []laneOp
	}{
		{
			name: "blocked while a listed job is active, released when it is done",
			ops: []laneOp{
				enq(lreq(test1), grantFx(test1)),
				enq(lreq(deploy1, blockedBy("test")), statusFx(deploy1, StatusBlocked, "blocked by running builds of job test")),
				eval(),
				done(test1, grantFx(deploy1)),
			},
		},
		{
			name: "a tilde prefix names the same job",
			ops: []laneOp{
				enq(lreq(test1), grantFx(test1)),
				enq(lreq(deploy1, blockedBy("~test")), statusFx(deploy1, StatusBlocked, "blocked by running builds of job test")),
				done(test1, grantFx(deploy1)),
			},
		},
		{
			name: "the job itself and remote jobs are ignored",
			ops: []laneOp{
				enq(lreq(deploy1, notSameJob, blockedBy("deploy", "~deploy", "sd@other:test", "~sd@other:test")), grantFx(deploy1)),
				enq(lreq(deploy2, noCollapse, notSameJob, blockedBy("deploy", "~deploy", "sd@other:test")), grantFx(deploy2)),
			},
		},
		{
			name: "a listed job with only waiting builds does not block",
			ops: []laneOp{
				enq(lreq(bref("test", 1), blockedBy("lint")), grantFx(bref("test", 1))),
				enq(lreq(bref("test", 2), noCollapse), statusFx(bref("test", 2), StatusBlocked, "blocked by build p/test/1 of the same job")),
				enq(lreq(deploy1, blockedBy("unknown")), grantFx(deploy1)),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runLaneOps(t, laneT0, tc.ops)
		})
	}
}

func TestLanesFreezeAndDelay(t *testing.T) {
	t.Parallel()
	j1, j2 := bref("j", 1), bref("j", 2)
	seven := time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)
	frozen := "frozen until 2026-11-23T07:00:00Z by freeze window `" + nightWindow + "`"
	tests := []struct {
		name  string
		start time.Time
		ops   []laneOp
	}{
		{
			name:  "frozen until the window ends, then granted",
			start: nightT0,
			ops: []laneOp{
				enq(lreq(j1, frozenAtNight), timedFx(j1, StatusFrozen, frozen, seven)).wake(seven),
				eval().after(time.Hour).wake(seven),
				eval(grantFx(j1)).after(4 * time.Hour),
			},
		},
		{
			name:  "force starts through the window",
			start: nightT0,
			ops:   []laneOp{enq(lreq(j1, frozenAtNight, forced), grantFx(j1))},
		},
		{
			// Forcing a build through the window must not leave it behind an
			// older frozen build of the job: the frozen one collapses into it.
			name:  "a forced build replaces an older frozen one",
			start: nightT0,
			ops: []laneOp{
				enq(lreq(j1, frozenAtNight), timedFx(j1, StatusFrozen, frozen, seven)).wake(seven),
				enq(lreq(j2, frozenAtNight, forced), collapseFx(j1, j2), grantFx(j2)).holds(1),
			},
		},
		{
			name:  "outside the window the build is granted",
			start: laneT0,
			ops:   []laneOp{enq(lreq(j1, frozenAtNight), grantFx(j1))},
		},
		{
			name:  "frozen builds collapse to the newest even with collapse off",
			start: nightT0,
			ops: []laneOp{
				enq(lreq(j1, frozenAtNight, noCollapse), timedFx(j1, StatusFrozen, frozen, seven)).wake(seven),
				enq(lreq(j2, frozenAtNight, noCollapse), timedFx(j2, StatusFrozen, frozen, seven)).holds(2).wake(seven),
				// When the window ends the older frozen build collapses.
				eval(collapseFx(j1, j2), grantFx(j2)).after(4 * time.Hour).holds(1),
			},
		},
		{
			name:  "an older request after a newer frozen one collapses into it, collapse off",
			start: nightT0,
			ops: []laneOp{
				enq(lreq(j2, frozenAtNight, noCollapse), timedFx(j2, StatusFrozen, frozen, seven)).wake(seven),
				enq(lreq(j1, frozenAtNight, noCollapse), timedFx(j1, StatusFrozen, frozen, seven)).holds(2).wake(seven),
				eval(collapseFx(j1, j2), grantFx(j2)).after(4 * time.Hour).holds(1),
			},
		},
		{
			name:  "a delayed build stays queued, then is granted",
			start: laneT0,
			ops: []laneOp{
				enq(lreq(j1, delayed(10*time.Minute)), timedFx(j1, StatusQueued,
					"delayed until 2026-11-23T10:10:00Z (sluice.dev/delay 10m0s)", laneT0.Add(10*time.Minute))).
					wake(laneT0.Add(10 * time.Minute)),
				eval().after(5 * time.Minute).wake(laneT0.Add(10 * time.Minute)),
				eval(grantFx(j1)).after(10 * time.Minute),
			},
		},
		{
			name:  "NextWake is the earliest timed wait",
			start: nightT0,
			ops: []laneOp{
				enq(lreq(bref("late", 1), frozenAtNight), timedFx(bref("late", 1), StatusFrozen, frozen, seven)).wake(seven),
				enq(lreq(bref("soon", 1), delayed(time.Hour)), timedFx(bref("soon", 1), StatusQueued,
					"delayed until 2026-11-23T04:00:00Z (sluice.dev/delay 1h0m0s)", nightT0.Add(time.Hour))).wake(nightT0.Add(time.Hour)),
				eval(grantFx(bref("soon", 1))).after(time.Hour).wake(seven),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runLaneOps(t, tc.start, tc.ops)
		})
	}
}

func TestLanesEventHold(t *testing.T) {
	t.Parallel()
	j2, j3 := bref("j", 2), bref("j", 3)
	heldBy2 := HeldReason
	tests := []struct {
		name string
		ops  []laneOp
	}{
		{
			name: "a later event waits for the held one, released by its batch",
			ops: []laneOp{
				hold(2, 10*time.Minute).wake(laneT0.Add(10 * time.Minute)),
				batch(3, lreq(j3)).then(statusFx(j3, StatusQueued, heldBy2)).wake(laneT0.Add(10 * time.Minute)),
				batch(2).then(grantFx(j3)).after(time.Minute),
			},
		},
		{
			name: "the hold ends at its deadline",
			ops: []laneOp{
				hold(2, 10*time.Minute).wake(laneT0.Add(10 * time.Minute)),
				batch(3, lreq(j3)).then(statusFx(j3, StatusQueued, heldBy2)).wake(laneT0.Add(10 * time.Minute)),
				eval().after(9 * time.Minute).wake(laneT0.Add(10 * time.Minute)),
				eval(grantFx(j3)).after(10 * time.Minute),
			},
		},
		{
			name: "earlier events are not held",
			ops: []laneOp{
				hold(5, 10*time.Minute).wake(laneT0.Add(10 * time.Minute)),
				batch(3, lreq(j3)).then(grantFx(j3)).wake(laneT0.Add(10 * time.Minute)),
			},
		},
		{
			// The hold exists so a job's builds run in event order even when a
			// later event reads its spec first: event 2's build takes the free
			// job, as if it had arrived first, and event 3's waits for it.
			name: "the held event's builds come first",
			ops: []laneOp{
				hold(2, 10*time.Minute).wake(laneT0.Add(10 * time.Minute)),
				batch(3, lreq(j3)).then(statusFx(j3, StatusQueued, heldBy2)).wake(laneT0.Add(10 * time.Minute)),
				batch(2, lreq(j2)).then(collapseFx(j2, j3), grantFx(j3)).after(time.Minute),
			},
		},
		{
			name: "the held event's builds come first, collapse off",
			ops: []laneOp{
				hold(2, 10*time.Minute).wake(laneT0.Add(10 * time.Minute)),
				batch(3, lreq(j3, noCollapse)).then(statusFx(j3, StatusQueued, heldBy2)).wake(laneT0.Add(10 * time.Minute)),
				batch(2, lreq(j2, noCollapse)).then(grantFx(j2), statusFx(j3, StatusBlocked, "blocked by build p/j/2 of the same job")).after(time.Minute),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runLaneOps(t, laneT0, tc.ops)
		})
	}
}

// In a burst, a build of the last event is held by each earlier event in
// turn: it is told once that it waits for earlier events, and then its
// grant, not once more for each event that starts its jobs. Runs recorded
// before (oldHolds) named the oldest event holding it, and told it
// again whenever that one changed.
func TestLanesHeldBuildToldOnceThroughABurst(t *testing.T) {
	t.Parallel()
	j5 := bref("j", 5)
	wake := laneT0.Add(10 * time.Minute)
	heldBy := func(e int) LaneEffect {
		return statusFx(j5, StatusQueued, fmt.Sprintf("waiting for the earlier event %d to start its jobs", e))
	}
	for _, tc := range []struct {
		name  string
		lanes *Lanes
		// told are the messages as event 5's build arrives, then as events
		// 2 and 3 start their jobs.
		told [3][]LaneEffect
	}{
		{"now", &Lanes{}, [3][]LaneEffect{{statusFx(j5, StatusQueued, HeldReason)}, nil, nil}},
		{"runs recorded before", &Lanes{oldHolds: true}, [3][]LaneEffect{{heldBy(2)}, {heldBy(3)}, {heldBy(4)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runLaneOpsOn(t, tc.lanes, laneT0, []laneOp{
				hold(2, 10*time.Minute).wake(wake),
				hold(3, 10*time.Minute).wake(wake),
				hold(4, 10*time.Minute).wake(wake),
				batch(5, lreq(j5)).then(tc.told[0]...).wake(wake),
				batch(2).then(tc.told[1]...).wake(wake),
				batch(3).then(tc.told[2]...).wake(wake),
				batch(4).then(grantFx(j5)),
			})
		})
	}
}

// A build its lane can never keep waiting (collapse and blockedBySameJob off,
// no blockedBy, freeze window or delay) has no order to keep: an earlier
// event that has not started its jobs does not hold it, and no timer waits
// for that event on its account. Any one of the rules holds it again.
// Runs recorded before (oldHolds) held every build.
func TestLanesInertBuildsAreNotHeld(t *testing.T) {
	t.Parallel()
	j3 := bref("j", 3)
	wake := laneT0.Add(10 * time.Minute)
	t.Run("inert", func(t *testing.T) {
		t.Parallel()
		runLaneOps(t, laneT0, []laneOp{
			hold(2, 10*time.Minute).wake(wake),
			batch(3, lreq(j3, noCollapse, notSameJob)).then(grantFx(j3)).wake(wake),
			batch(2),
		})
	})
	for name, rule := range map[string]func(*LaneRequest){
		"collapse":         func(r *LaneRequest) { r.Collapse = true },
		"blockedBySameJob": func(r *LaneRequest) { r.BlockedBySameJob = true },
		"blockedBy":        blockedBy("other"),
		"freeze window":    frozenAtNight, // laneT0 is at 10:00: outside it
	} {
		t.Run("with "+name, func(t *testing.T) {
			t.Parallel()
			req := lreq(j3, noCollapse, notSameJob, rule)
			require.False(t, req.Inert())
			runLaneOps(t, laneT0, []laneOp{
				hold(2, 10*time.Minute).wake(wake),
				batch(3, req).then(statusFx(j3, StatusQueued, HeldReason)).wake(wake),
				batch(2).then(grantFx(j3)),
			})
		})
	}
	t.Run("with a delay", func(t *testing.T) {
		t.Parallel()
		require.False(t, lreq(j3, noCollapse, notSameJob, delayed(time.Minute)).Inert())
	})
	t.Run("runs recorded before", func(t *testing.T) {
		t.Parallel()
		runLaneOpsOn(t, &Lanes{oldHolds: true}, laneT0, []laneOp{
			hold(2, 10*time.Minute).wake(wake),
			batch(3, lreq(j3, noCollapse, notSameJob)).then(statusFx(j3, StatusQueued, "waiting for the earlier event 2 to start its jobs")).wake(wake),
			batch(2).then(grantFx(j3)),
		})
	})
}

func TestLanesStatusOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	var l Lanes
	j1, j2 := bref("j", 1), bref("j", 2)
	require.Equal(t, []LaneEffect{grantFx(j1)}, l.Enqueue(lreq(j1), laneT0))
	require.Len(t, l.Enqueue(lreq(j2, noCollapse), laneT0), 1)
	for range 3 {
		require.Empty(t, l.Evaluate(laneT0.Add(time.Minute)))
	}
	// The waiting entry remembers what the build was last told.
	e, active := l.find(j2)
	require.False(t, active)
	require.Equal(t, StatusBlocked, e.Status)
	require.Equal(t, "blocked by build p/j/1 of the same job", e.Reason)
}

func TestLanesAbortAll(t *testing.T) {
	t.Parallel()
	abort := func(b BuildRef) LaneEffect {
		return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: "pipeline p was deleted"}}
	}
	a1, a2, b1, c1 := bref("a", 1), bref("a", 2), bref("b", 1), bref("c", 1)
	setup := func() *Lanes {
		var l Lanes
		l.Enqueue(lreq(a1), laneT0)
		l.Enqueue(lreq(a2, noCollapse), laneT0)
		l.Enqueue(lreq(b1, blockedBy("a")), laneT0)
		l.Enqueue(lreq(c1), laneT0)
		require.True(t, l.Started(c1), "c1 was claimed by an executor")
		require.Equal(t, 4, l.Len())
		return &l
	}

	// Runs recorded before N10: only waiting builds end.
	l := setup()
	require.Equal(t, []LaneEffect{abort(a2), abort(b1)}, l.AbortAll("pipeline p was deleted", false))
	require.Equal(t, 2, l.Len())
	require.Empty(t, l.AbortAll("again", false))

	// N10: the granted but unclaimed a1 ends too; the running c1 runs on,
	// and both stay in their lanes until they report their end.
	l = setup()
	require.Equal(t, []LaneEffect{abort(a2), abort(a1), abort(b1)}, l.AbortAll("pipeline p was deleted", true))
	require.Equal(t, 2, l.Len())
	require.Empty(t, l.Done(a1, laneT0))
	require.Empty(t, l.Done(c1, laneT0))
	require.Zero(t, l.Len())
}

func TestLanesDoneUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(*Lanes)
		done  BuildRef
	}{
		{name: "empty lanes", setup: func(*Lanes) {}, done: bref("j", 1)},
		{name: "another build of a known job", setup: func(l *Lanes) { l.Enqueue(lreq(bref("j", 1)), laneT0) }, done: bref("j", 7)},
		{name: "another permutation", setup: func(l *Lanes) { l.Enqueue(lreq(mref("j", 1, 1)), laneT0) }, done: mref("j", 1, 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var l Lanes
			tc.setup(&l)
			before := l.Len()
			require.Empty(t, l.Done(tc.done, laneT0))
			require.Equal(t, before, l.Len())
		})
	}
}

func TestLanesZeroValue(t *testing.T) {
	t.Parallel()
	var l Lanes
	require.Zero(t, l.Len())
	require.True(t, l.NextWake(laneT0).IsZero())
	require.Empty(t, l.Evaluate(laneT0))
	require.Empty(t, l.AbortAll("x", true))
}

func prref(job string, pr, event int) BuildRef {
	return BuildRef{Pipeline: "p", Job: job, Event: event, PR: pr}
}

func TestLanesPullRequests(t *testing.T) {
	t.Parallel()
	main1, main3 := bref("main", 1), bref("main", 3)
	pr1a, pr2, pr1b := prref("main", 1, 2), prref("main", 2, 4), prref("main", 1, 5)
	blocked := func(by BuildRef) string { return "blocked by build " + by.String() + " of the same job" }
	t.Run("each pull request has its own lane", func(t *testing.T) {
		t.Parallel()
		l := runLaneOps(t, laneT0, []laneOp{
			enq(lreq(main1), grantFx(main1)),
			started(main1),
			// Pull requests neither wait for the branch's build nor for each
			// other, and the branch's next build does not collapse into them.
			enq(lreq(pr1a), grantFx(pr1a)),
			enq(lreq(pr2), grantFx(pr2)),
			enq(lreq(main3), statusFx(main3, StatusBlocked, blocked(main1))),
			started(pr1a),
			// A newer commit to pull request 1 waits for its own lane only.
			enq(lreq(pr1b), statusFx(pr1b, StatusBlocked, blocked(pr1a))).holds(5),
		})
		require.ElementsMatch(t, []string{"main", "PR-1:main", "PR-2:main"}, l.sortedJobs())
	})
	t.Run("a newer commit supersedes the pull request's older builds", func(t *testing.T) {
		t.Parallel()
		var l Lanes
		older := prref("main", 1, 3)
		l.Enqueue(lreq(pr1a), laneT0) // granted
		l.Enqueue(lreq(older, noCollapse), laneT0)
		l.Enqueue(lreq(pr2), laneT0)
		got := l.SupersedePR(1, 5, LaneCollapse, "superseded by abc (event 5)")
		require.Equal(t, []LaneEffect{
			{Build: pr1a, Msg: LaneMessage{Kind: LaneCancel, Reason: "superseded by abc (event 5)"}},
			{Build: older, Msg: LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Reason: "superseded by abc (event 5)"}},
		}, got)
		// The granted build stays until it reports its end; it is told once.
		require.Equal(t, 2, l.Len())
		require.Empty(t, l.SupersedePR(1, 5, LaneCollapse, "again"))
		// Nothing newer of the pull request is granted before it ended.
		require.Equal(t, []LaneEffect{statusFx(pr1b, StatusQueued, "waiting for build "+pr1a.String()+" to give way")},
			l.Enqueue(lreq(pr1b), laneT0))
		require.Equal(t, []LaneEffect{grantFx(pr1b)}, l.Done(pr1a, laneT0))
	})
	t.Run("closing aborts the waiting builds", func(t *testing.T) {
		t.Parallel()
		var l Lanes
		l.Enqueue(lreq(pr2), laneT0)
		l.Enqueue(lreq(prref("main", 2, 6), noCollapse), laneT0)
		got := l.SupersedePR(2, 7, LaneAbort, "pull request #2 was closed")
		require.Equal(t, []LaneEffect{
			{Build: pr2, Msg: LaneMessage{Kind: LaneCancel, Reason: "pull request #2 was closed"}},
			{Build: prref("main", 2, 6), Msg: LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: "pull request #2 was closed"}},
		}, got)
		l.Done(pr2, laneT0)
		require.Zero(t, l.Len())
		require.Contains(t, l.Latest, "PR-2:main")
		l.ForgetPR(2)
		require.NotContains(t, l.Latest, "PR-2:main")
	})
	t.Run("an explicit blockedBy reaches the branch and the same pull request", func(t *testing.T) {
		t.Parallel()
		deploy, prTest := bref("deploy", 1), prref("test", 3, 2)
		runLaneOps(t, laneT0, []laneOp{
			enq(lreq(deploy), grantFx(deploy)),
			enq(lreq(prTest, blockedBy("~deploy")), statusFx(prTest, StatusBlocked, "blocked by running builds of job deploy")),
			done(deploy, grantFx(prTest)),
		})
	})
	t.Run("the same pull request's build blocks, another pull request's does not", func(t *testing.T) {
		t.Parallel()
		// M2b: without the PR's own lane key, PR-3's deploy did not block
		// PR-3's test.
		prDeploy, prTest := prref("deploy", 3, 2), prref("test", 3, 2)
		otherDeploy, otherTest := prref("deploy", 4, 3), prref("test", 4, 3)
		runLaneOps(t, laneT0, []laneOp{
			enq(lreq(prDeploy), grantFx(prDeploy)),
			enq(lreq(prTest, blockedBy("~deploy")), statusFx(prTest, StatusBlocked, "blocked by running builds of job deploy")),
			enq(lreq(otherDeploy), grantFx(otherDeploy)),
			done(otherDeploy),
			enq(lreq(otherTest, blockedBy("~deploy")), grantFx(otherTest)),
			done(prDeploy, grantFx(prTest)),
		})
	})
}

func TestLanesForcedBuilds(t *testing.T) {
	t.Parallel()
	j1, j2, j3 := bref("j", 1), bref("j", 2), bref("j", 3)
	frozen := "frozen until " + nightT0.Add(4*time.Hour).Format(time.RFC3339) + " by freeze window `" + nightWindow + "`"
	seven := nightT0.Add(4 * time.Hour)
	runLaneOps(t, nightT0, []laneOp{
		enq(lreq(j1, frozenAtNight, forced), grantFx(j1)),
		started(j1),
		// A forced build waits behind the running one.
		enq(lreq(j2, frozenAtNight, forced), statusFx(j2, StatusBlocked, "blocked by build p/j/1 of the same job")),
		// A newer commit arrives inside the window, not forced: it is frozen.
		enq(lreq(j3, frozenAtNight), timedFx(j3, StatusFrozen, frozen, seven)).wake(seven),
		// When the job frees, the forced build runs: it is not collapsed into
		// the frozen one (the force would be lost).
		// j3 keeps waiting for the window's end.
		done(j1, grantFx(j2)).wake(seven),
	})
}

func TestLanesMatrixCollapseNamesAnExistingBuild(t *testing.T) {
	t.Parallel()
	// Event 2 has three permutations, event 3 only one: builds 2.2 and 2.3
	// collapse into 3.1, which exists, not into "3.2" or "3.3".
	var l Lanes
	l.Enqueue(lreq(bref("other", 1)), laneT0)
	for i := 1; i <= 3; i++ {
		l.Enqueue(lreq(mref("m", 2, i), blockedBy("~other")), laneT0)
	}
	l.Enqueue(lreq(mref("m", 3, 1), blockedBy("~other")), laneT0)
	got := l.Done(bref("other", 1), laneT0)
	require.Equal(t, []LaneEffect{
		collapseFx(mref("m", 2, 1), mref("m", 3, 1)),
		collapseFx(mref("m", 2, 2), mref("m", 3, 1)),
		collapseFx(mref("m", 2, 3), mref("m", 3, 1)),
		grantFx(mref("m", 3, 1)),
	}, got)
}

// TestLanesLongBacklogSignalsLinear: a backlog of 2,000 builds of one job
// with collapse off costs a number of lane messages linear in its length
// (each build hears of its place a bounded number of times), and every
// build is granted exactly once, in order.
func TestLanesLongBacklogSignalsLinear(t *testing.T) {
	t.Parallel()
	const n = 2000
	var l Lanes
	perBuild := map[BuildRef]int{}
	granted := map[BuildRef]int{}
	var order []int
	count := func(fx []LaneEffect) {
		for _, e := range fx {
			perBuild[e.Build]++
			if e.Msg.Kind == LaneGrant {
				granted[e.Build]++
				order = append(order, e.Build.Event)
			}
		}
	}
	for i := 1; i <= n; i++ {
		count(l.Enqueue(lreq(bref("j", i), noCollapse), laneT0))
	}
	for i := 1; i <= n; i++ {
		require.True(t, l.Started(bref("j", i)), "build %d granted", i)
		count(l.Evaluate(laneT0))
		count(l.Done(bref("j", i), laneT0))
	}
	total := 0
	for b, c := range perBuild {
		require.LessOrEqual(t, c, 3, "build %s got %d messages", b, c)
		total += c
	}
	require.LessOrEqual(t, total, 3*n)
	require.Len(t, granted, n)
	for b, c := range granted {
		require.Equal(t, 1, c, "build %s granted %d times", b, c)
	}
	for i, e := range order {
		require.Equal(t, i+1, e, "grant %d went to event %d", i, e)
	}
	require.Zero(t, l.Len())
}

// N17: builds waiting on blockedBy hear of it once, however many builds
// of the blocking job come and go meanwhile (blockedBySameJob off on both
// jobs, so the blocker's builds overlap and follow each other); the old
// reason named the blocker's first running build, so every hand-over
// re-signalled every waiting build.
func TestLanesBlockedBySignalsLinear(t *testing.T) {
	t.Parallel()
	const blockers, waiting = 200, 50
	var l Lanes
	perBuild := map[BuildRef]int{}
	count := func(fx []LaneEffect) {
		for _, e := range fx {
			perBuild[e.Build]++
		}
	}
	count(l.Enqueue(lreq(bref("a-test", 1), noCollapse, notSameJob), laneT0))
	require.True(t, l.Started(bref("a-test", 1)))
	for i := 1; i <= waiting; i++ {
		count(l.Enqueue(lreq(bref("deploy", i), noCollapse, notSameJob, blockedBy("a-test")), laneT0))
	}
	// Each blocker build starts before the previous one ends: the job is
	// never idle, so no deploy may start.
	for i := 2; i <= blockers; i++ {
		count(l.Enqueue(lreq(bref("a-test", i), noCollapse, notSameJob), laneT0))
		require.True(t, l.Started(bref("a-test", i)))
		count(l.Done(bref("a-test", i-1), laneT0))
		count(l.Evaluate(laneT0))
	}
	for i := 1; i <= waiting; i++ {
		require.Equal(t, 1, perBuild[bref("deploy", i)], "deploy %d was told %d times while blocked", i, perBuild[bref("deploy", i)])
	}
	count(l.Done(bref("a-test", blockers), laneT0))
	for i := 1; i <= waiting; i++ {
		require.Equal(t, 2, perBuild[bref("deploy", i)], "deploy %d: blocked once, then granted", i)
	}
}

// TestLanesWaitCodes: every wait the lanes decide carries its typed code
// beside the reason, and a grant clears it.
func TestLanesWaitCodes(t *testing.T) {
	t.Parallel()
	code := func(fx []LaneEffect, b BuildRef) WaitCode {
		t.Helper()
		for _, f := range fx {
			if f.Build == b && f.Msg.Kind == LaneStatus {
				return f.Msg.Code
			}
		}
		t.Fatalf("no status message for %s in %+v", b, fx)
		return ""
	}
	t.Run("blocked-by", func(t *testing.T) {
		var l Lanes
		l.Enqueue(lreq(bref("test", 1)), laneT0)
		fx := l.Enqueue(lreq(bref("deploy", 1), blockedBy("test")), laneT0)
		require.Equal(t, WaitBlockedBy, code(fx, bref("deploy", 1)))
		fx = l.Enqueue(lreq(bref("test", 2), noCollapse), laneT0)
		require.Equal(t, WaitBlockedBy, code(fx, bref("test", 2)), "blockedBySameJob is a blocked-by wait too")
		e, _ := l.find(bref("deploy", 1))
		require.Equal(t, WaitBlockedBy, e.Code)
		fx = l.Done(bref("test", 1), laneT0)
		require.Contains(t, fx, grantFx(bref("deploy", 1)))
	})
	t.Run("frozen", func(t *testing.T) {
		var l Lanes
		fx := l.Enqueue(lreq(bref("j", 1), frozenAtNight), nightT0)
		require.Equal(t, WaitFrozen, code(fx, bref("j", 1)))
		require.False(t, fx[0].Msg.Until.IsZero(), "a frozen wait says when it ends")
	})
	t.Run("delayed", func(t *testing.T) {
		var l Lanes
		fx := l.Enqueue(lreq(bref("j", 1), delayed(time.Minute)), laneT0)
		require.Equal(t, WaitDelayed, code(fx, bref("j", 1)))
		require.Equal(t, laneT0.Add(time.Minute), fx[0].Msg.Until)
	})
	t.Run("lane-order", func(t *testing.T) {
		var l Lanes
		l.Hold(2, laneT0.Add(time.Minute))
		fx := l.Enqueue(lreq(bref("j", 3)), laneT0)
		require.Equal(t, WaitLaneOrder, code(fx, bref("j", 3)))
	})
	t.Run("a message without a code gets one from its status", func(t *testing.T) {
		require.Equal(t, WaitFrozen, WaitCodeOf(StatusFrozen, "frozen until ..."))
		require.Equal(t, WaitBlockedBy, WaitCodeOf(StatusBlocked, "blocked by ..."))
		require.Equal(t, WaitDelayed, WaitCodeOf(StatusQueued, "delayed until ..."))
		require.Equal(t, WaitLaneOrder, WaitCodeOf(StatusQueued, "waiting for the earlier event 2 to start its jobs"))
		require.Equal(t, WaitCode(""), WaitCodeOf(StatusRunning, ""))
	})
	for _, c := range WaitCodes() {
		require.True(t, c.Valid(), c)
	}
	require.False(t, WaitCode("waiting").Valid())
}

// TestLanesLazyHoldWakesOnlyForAWaitingBuild: with lazyHolds, an event's
// hold deadline wakes the pipeline only while a later event's build waits
// behind it (a timer nobody waits for costs two history events per event);
// without, every hold's deadline does (the rule of older runs).
func TestLanesLazyHoldWakesOnlyForAWaitingBuild(t *testing.T) {
	t.Parallel()
	deadline := laneT0.Add(eventHold)
	for _, lazy := range []bool{false, true} {
		l := Lanes{lazyHolds: lazy}
		l.Hold(1, deadline)
		if lazy {
			require.True(t, l.NextWake(laneT0).IsZero(), "nothing waits behind event 1")
		} else {
			require.True(t, deadline.Equal(l.NextWake(laneT0)))
		}
		// A build of event 1 itself is not held by it.
		l.Enqueue(lreq(bref("j", 1)), laneT0)
		if lazy {
			require.True(t, l.NextWake(laneT0).IsZero(), "event 1's own build is not behind its hold")
		}
		// Event 2's build waits behind event 1's hold: its deadline wakes.
		l.Hold(2, laneT0.Add(2*eventHold))
		l.Enqueue(lreq(bref("k", 2)), laneT0)
		require.True(t, deadline.Equal(l.NextWake(laneT0)), "lazy=%v", lazy)
		// A pull request's build is held only by its pull request's events.
		p := Lanes{lazyHolds: lazy}
		p.HoldPR(3, 7, deadline)
		p.Enqueue(lreq(prref("j", 8, 4)), laneT0)
		if lazy {
			require.True(t, p.NextWake(laneT0).IsZero(), "pull request 8's build is not behind pull request 7's event")
		}
		p.Enqueue(lreq(prref("j", 7, 4)), laneT0)
		require.True(t, deadline.Equal(p.NextWake(laneT0)), "lazy=%v", lazy)
	}
}
