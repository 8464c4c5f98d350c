package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/pipeline"
)

// LaneRequest asks a pipeline's lane for permission to run one build. The
// build workflow sends it when it starts; the lane answers with LaneMessages.
type LaneRequest struct {
	Build BuildRef `json:"build"`
	// Collapse lets a newer build of the job replace this one while it waits.
	Collapse bool `json:"collapse"`
	// BlockedBySameJob serialises builds of the job across events.
	BlockedBySameJob bool `json:"blocked_by_same_job"`
	// BlockedBy lists jobs of the same pipeline whose active builds block this one.
	BlockedBy []string `json:"blocked_by,omitempty"`
	// FreezeWindows are 5-field UTC crons during which the build may not start.
	FreezeWindows []string `json:"freeze_windows,omitempty"`
	// Delay keeps the build waiting this long after it was enqueued.
	Delay time.Duration `json:"delay,omitempty"`
	// Force starts the build through freeze windows.
	Force bool `json:"force,omitempty"`
}

// LaneMessageKind says what a lane tells a build.
type LaneMessageKind string

// Lane message kinds.
const (
	// LaneStatus reports why the build still waits.
	LaneStatus LaneMessageKind = "status"
	// LaneGrant lets the build dispatch to its queue.
	LaneGrant LaneMessageKind = "grant"
	// LaneCollapse ends a waiting build COLLAPSED into a newer build. Only
	// builds still held by the lane collapse: a build granted its turn is in
	// its queue and runs (a running build is never killed by collapse).
	LaneCollapse LaneMessageKind = "collapse"
	// LaneAbort ends a waiting build ABORTED (its pipeline was deleted).
	LaneAbort LaneMessageKind = "abort"
)

// LaneMessage is the signal a lane sends to a build workflow.
type LaneMessage struct {
	Kind   LaneMessageKind `json:"kind"`
	Status Status          `json:"status,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// Into is the build a collapsed build was replaced by.
	Into string `json:"into,omitempty"`
	// Until is when a FROZEN or delayed wait ends.
	Until time.Time `json:"until,omitzero"`
}

// LaneEffect is one message to send to one build.
type LaneEffect struct {
	Build BuildRef    `json:"build"`
	Msg   LaneMessage `json:"msg"`
}

// LaneEntry is one build held by a lane, waiting or active.
type LaneEntry struct {
	LaneRequest
	EnqueuedAt time.Time `json:"enqueued_at"`
	EligibleAt time.Time `json:"eligible_at"`
	// Status and Reason are what the build was last told.
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
	// GrantedAt is set once the build may dispatch.
	GrantedAt time.Time `json:"granted_at,omitzero"`
	// Held is set while the build has only been held for an earlier event:
	// it still counts as a new arrival when the hold lifts.
	Held bool `json:"held,omitempty"`
}

// Lane is one job's builds: those granted (dispatched or running) and those
// still waiting, oldest event first.
type Lane struct {
	Active  []*LaneEntry `json:"active,omitempty"`
	Waiting []*LaneEntry `json:"waiting,omitempty"`
}

// Lanes are a pipeline's lanes by job name. The zero value is ready to use.
// All decisions are deterministic: jobs are visited in sorted order and time
// is passed in.
type Lanes struct {
	Jobs map[string]*Lane `json:"jobs,omitempty"`
	// Pending holds events started but not yet heard from (their first
	// enqueue batch), with a deadline. Builds of later events wait for them,
	// so a job's builds are granted in event order even when a later event
	// reads its spec faster than an earlier one.
	Pending map[int]time.Time `json:"pending,omitempty"`
}

// Hold makes builds of events after event wait until Release(event) or the
// deadline.
func (l *Lanes) Hold(event int, deadline time.Time) {
	if l.Pending == nil {
		l.Pending = map[int]time.Time{}
	}
	l.Pending[event] = deadline
}

// Release lifts the hold of event.
func (l *Lanes) Release(event int) {
	delete(l.Pending, event)
}

// heldBy returns the oldest pending event before event whose hold is still
// in force at now, or 0.
func (l *Lanes) heldBy(event int, now time.Time) int {
	oldest := 0
	// Order-independent: the oldest match wins.
	//workflowcheck:ignore
	for e, deadline := range l.Pending {
		if e < event && now.Before(deadline) && (oldest == 0 || e < oldest) {
			oldest = e
		}
	}
	return oldest
}

func (l *Lanes) lane(job string) *Lane {
	if l.Jobs == nil {
		l.Jobs = map[string]*Lane{}
	}
	ln, ok := l.Jobs[job]
	if !ok {
		ln = &Lane{}
		l.Jobs[job] = ln
	}
	return ln
}

func (l *Lanes) sortedJobs() []string {
	jobs := make([]string, 0, len(l.Jobs))
	// Collected, then sorted.
	//workflowcheck:ignore
	for j := range l.Jobs {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	return jobs
}

// find returns the entry of build b and whether it is active.
func (l *Lanes) find(b BuildRef) (*LaneEntry, bool) {
	ln, ok := l.Jobs[b.Job]
	if !ok {
		return nil, false
	}
	for _, e := range ln.Active {
		if e.Build == b {
			return e, true
		}
	}
	for _, e := range ln.Waiting {
		if e.Build == b {
			return e, false
		}
	}
	return nil, false
}

// Enqueue adds a build request at time now and returns the messages to send
// (see Evaluate). A request for a build the lane already holds is ignored.
func (l *Lanes) Enqueue(req LaneRequest, now time.Time) []LaneEffect {
	if !l.Add(req, now) {
		return nil
	}
	return l.Evaluate(now)
}

// Add adds a build request without deciding anything; call Evaluate after a
// batch of them. It reports false for a build the lane already holds.
func (l *Lanes) Add(req LaneRequest, now time.Time) bool {
	if e, _ := l.find(req.Build); e != nil {
		return false
	}
	ln := l.lane(req.Build.Job)
	ln.Waiting = append(ln.Waiting, &LaneEntry{LaneRequest: req, EnqueuedAt: now, EligibleAt: now.Add(req.Delay), Status: StatusCreated})
	sort.SliceStable(ln.Waiting, func(i, j int) bool {
		a, b := ln.Waiting[i].Build, ln.Waiting[j].Build
		if a.Event != b.Event {
			return a.Event < b.Event
		}
		return a.Index < b.Index
	})
	return true
}

// intoFor picks the build of the newer event that replaces old: the same
// matrix permutation when there is one.
func intoFor(old, newer BuildRef) BuildRef {
	into := newer
	into.Index = old.Index
	if newer.Index == 0 || old.Index == 0 {
		into.Index = newer.Index
	}
	return into
}

// Done removes a finished (or withdrawn) build and re-evaluates every lane.
func (l *Lanes) Done(b BuildRef, now time.Time) []LaneEffect {
	l.Remove(b)
	return l.Evaluate(now)
}

// Remove forgets a build without deciding anything; call Evaluate after.
func (l *Lanes) Remove(b BuildRef) {
	if ln, ok := l.Jobs[b.Job]; ok {
		ln.Active = slices.DeleteFunc(ln.Active, func(e *LaneEntry) bool { return e.Build == b })
		ln.Waiting = slices.DeleteFunc(ln.Waiting, func(e *LaneEntry) bool { return e.Build == b })
		if len(ln.Active) == 0 && len(ln.Waiting) == 0 {
			delete(l.Jobs, b.Job)
		}
	}
}

// AbortAll empties every lane's waiting list with LaneAbort messages.
func (l *Lanes) AbortAll(reason string) []LaneEffect {
	var out []LaneEffect
	for _, job := range l.sortedJobs() {
		ln := l.Jobs[job]
		for _, w := range ln.Waiting {
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: reason}})
		}
		ln.Waiting = nil
	}
	return out
}

// Evaluate decides every lane at now and returns the messages to send.
//
// Builds are considered as if they had arrived in event order: new arrivals
// (never decided before) are admitted one event at a time, so builds of
// several events arriving together behave as if they came one after the
// other. A build that may start is granted, oldest event first, except that
// collapse is decided at that moment: when a newer build of the job also
// waits, the older one collapses into the newest instead (if the newest's job
// collapses builds, or if the older one was frozen), and the newest is the
// one that runs. So while a job is busy its waiting builds simply wait, and
// when it frees they all collapse into the latest. Builds held for an earlier
// event take no part until the hold lifts.
func (l *Lanes) Evaluate(now time.Time) []LaneEffect {
	// Order-independent: every expired hold goes.
	//workflowcheck:ignore
	for e, deadline := range l.Pending {
		if !now.Before(deadline) {
			delete(l.Pending, e) // the event never reported; stop waiting for it
		}
	}
	var horizons []int
	for _, job := range l.sortedJobs() {
		for _, w := range l.Jobs[job].Waiting {
			if (w.Status == StatusCreated || w.Held) && l.heldBy(w.Build.Event, now) == 0 && !slices.Contains(horizons, w.Build.Event) {
				horizons = append(horizons, w.Build.Event)
			}
		}
	}
	sort.Ints(horizons)
	var out []LaneEffect
	for _, h := range append(horizons, int(^uint(0)>>1)) {
		for _, job := range l.sortedJobs() {
			out = append(out, l.evaluateLane(l.Jobs[job], now, h)...)
			if ln := l.Jobs[job]; len(ln.Active) == 0 && len(ln.Waiting) == 0 {
				delete(l.Jobs, job)
			}
		}
	}
	return out
}

// evaluateLane decides one job's lane, with new arrivals after event
// horizon not yet admitted.
func (l *Lanes) evaluateLane(ln *Lane, now time.Time, horizon int) []LaneEffect {
	var out []LaneEffect
	admitted := func(w *LaneEntry) bool { return (w.Status != StatusCreated && !w.Held) || w.Build.Event <= horizon }
	// newestAfter is the newest admitted, unheld build waiting after index i
	// that belongs to a later event.
	newestAfter := func(i int) *LaneEntry {
		var newest *LaneEntry
		for _, n := range ln.Waiting[i+1:] {
			if n.Build.Event > ln.Waiting[i].Build.Event && admitted(n) && l.heldBy(n.Build.Event, now) == 0 {
				newest = n
			}
		}
		return newest
	}
	kept := make([]*LaneEntry, 0, len(ln.Waiting))
	var ahead *LaneEntry // first admitted entry still waiting
	for i, w := range ln.Waiting {
		if !admitted(w) {
			kept = append(kept, w)
			continue
		}
		if e := l.heldBy(w.Build.Event, now); e != 0 {
			kept = append(kept, w)
			w.Held = true
			out = append(out, w.tell(StatusQueued, fmt.Sprintf("waiting for the earlier event %d to start its jobs", e), time.Time{})...)
			continue
		}
		w.Held = false
		status, reason, until := l.decide(w, ln, ahead, now)
		// A frozen build also collapses into a newer build forced through the
		// window: it must not keep the forced one waiting behind it.
		n := newestAfter(i)
		if n != nil && ((status == StatusRunning && (n.Collapse || w.Status == StatusFrozen)) || (status == StatusFrozen && n.Force)) {
			into := intoFor(w.Build, n.Build)
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{
				Kind: LaneCollapse, Status: StatusCollapsed, Into: into.String(),
				Reason: "collapsed into build " + into.String(),
			}})
			continue
		}
		if status == StatusRunning {
			w.GrantedAt = now
			w.Status, w.Reason = StatusQueued, ""
			ln.Active = append(ln.Active, w)
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: LaneGrant}})
			continue
		}
		kept = append(kept, w)
		if ahead == nil {
			ahead = w
		}
		out = append(out, w.tell(status, reason, until)...)
	}
	ln.Waiting = kept
	return out
}

// tell records a waiting build's status and returns the message announcing
// it, if it changed.
func (w *LaneEntry) tell(status Status, reason string, until time.Time) []LaneEffect {
	if status == w.Status && reason == w.Reason {
		return nil
	}
	w.Status, w.Reason = status, reason
	return []LaneEffect{{Build: w.Build, Msg: LaneMessage{Kind: LaneStatus, Status: status, Reason: reason, Until: until}}}
}

// decide returns StatusRunning when w may be granted now, or the status, the
// reason and (for timed waits) the end of the wait.
func (l *Lanes) decide(w *LaneEntry, ln *Lane, ahead *LaneEntry, now time.Time) (Status, string, time.Time) {
	if !w.Force && len(w.FreezeWindows) > 0 {
		next, err := pipeline.NextUnfrozen(w.FreezeWindows, now)
		if err != nil {
			return StatusFrozen, fmt.Sprintf("frozen: freeze windows %s never open (%v); start it with --force", strings.Join(w.FreezeWindows, ", "), err), time.Time{}
		}
		if next.After(now) {
			return StatusFrozen, fmt.Sprintf("frozen until %s by freeze window `%s`", next.UTC().Format(time.RFC3339), containing(w.FreezeWindows, now)), next
		}
	}
	if now.Before(w.EligibleAt) {
		return StatusQueued, fmt.Sprintf("delayed until %s (sluice.dev/delay %s)", w.EligibleAt.UTC().Format(time.RFC3339), w.Delay), w.EligibleAt
	}
	if w.BlockedBySameJob {
		for _, a := range ln.Active {
			if a.Build.Event != w.Build.Event {
				return StatusBlocked, fmt.Sprintf("blocked by build %s of the same job", a.Build), time.Time{}
			}
		}
		if ahead != nil && ahead.Build.Event != w.Build.Event {
			return StatusBlocked, fmt.Sprintf("waiting behind build %s of the same job", ahead.Build), time.Time{}
		}
	}
	for _, raw := range w.BlockedBy {
		job := strings.TrimPrefix(raw, "~")
		if job == w.Build.Job || strings.HasPrefix(job, "sd@") {
			continue
		}
		if other, ok := l.Jobs[job]; ok && len(other.Active) > 0 {
			return StatusBlocked, fmt.Sprintf("blocked by build %s of job %s", other.Active[0].Build, job), time.Time{}
		}
	}
	return StatusRunning, "", time.Time{}
}

// containing names the first window that contains now (for the reason text).
func containing(windows []string, now time.Time) string {
	for _, expr := range windows {
		if w, err := pipeline.ParseFreezeWindow(expr); err == nil && w.Contains(now) {
			return expr
		}
	}
	return strings.Join(windows, "`, `")
}

// NextWake is the earliest end of a timed wait (freeze window or delay), or
// the zero time when nothing waits on the clock.
func (l *Lanes) NextWake(now time.Time) time.Time {
	var wake time.Time
	consider := func(t time.Time) {
		if t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	// Order-independent: the earliest wins.
	//workflowcheck:ignore
	for _, deadline := range l.Pending {
		consider(deadline)
	}
	for _, job := range l.sortedJobs() {
		for _, w := range l.Jobs[job].Waiting {
			if w.EligibleAt.After(now) {
				consider(w.EligibleAt)
			}
			if !w.Force && len(w.FreezeWindows) > 0 {
				if next, err := pipeline.NextUnfrozen(w.FreezeWindows, now); err == nil {
					consider(next)
				}
			}
		}
	}
	return wake
}

// Len counts the builds the lanes hold.
func (l *Lanes) Len() int {
	n := 0
	// Order-independent: a sum.
	//workflowcheck:ignore
	for _, ln := range l.Jobs {
		n += len(ln.Active) + len(ln.Waiting)
	}
	return n
}
