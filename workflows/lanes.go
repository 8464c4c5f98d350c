package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
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
	// LaneCollapse ends a waiting build COLLAPSED into a newer build. A
	// build granted its turn but not yet claimed by an executor still waits
	// and collapses too; a build an executor claimed runs (a running build is
	// never killed by collapse) and answers with SignalBuildStarted.
	LaneCollapse LaneMessageKind = "collapse"
	// LaneAbort ends a waiting build ABORTED (its pipeline was deleted, its
	// pull request closed).
	LaneAbort LaneMessageKind = "abort"
	// LaneCancel ends a build whether it waits or runs: a waiting one ends
	// COLLAPSED, a running one's processes are killed and it ends ABORTED
	// (a newer commit to its pull request replaced it).
	LaneCancel LaneMessageKind = "cancel"
	// LaneFail ends a build that no executor claimed FAILURE with the
	// reason; the API sends it to the builds of a queue it deleted.
	LaneFail LaneMessageKind = "fail"
)

// LaneMessage is the signal a lane sends to a build workflow.
type LaneMessage struct {
	Kind   LaneMessageKind `json:"kind"`
	Status Status          `json:"status,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// Code is the wait code of a LaneStatus message.
	Code WaitCode `json:"code,omitempty"`
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
	// Code is the wait code the build was last told.
	Code WaitCode `json:"code,omitempty"`
	// GrantedAt is set once the build may dispatch.
	GrantedAt time.Time `json:"granted_at,omitzero"`
	// Held is set while the build has only been held for an earlier event:
	// it still counts as a new arrival when the hold lifts.
	Held bool `json:"held,omitempty"`
	// Started is set once the build told the lane an executor claimed it:
	// it runs, and nothing collapses it any more.
	Started bool `json:"started,omitempty"`
	// Yielding is set on a granted build the lane asked to give way (collapse
	// into a newer build, or cancel): until it answers, no newer build of the
	// lane is granted, so a build never starts after a newer one.
	Yielding string `json:"yielding,omitempty"`
	// ByUpdate is set on a build whose event handed it over by
	// UpdateEnqueue (its workflow starts after the lanes answered): how it
	// came, for the pipeline's query. Messages to it while it may still be
	// starting are kept by PipelineState.Starting, which outlives the
	// build's entry here.
	ByUpdate bool `json:"by_update,omitempty"`
}

// Lane is one job's builds: those granted (dispatched or running) and those
// still waiting, oldest event first.
type Lane struct {
	Active  []*LaneEntry `json:"active,omitempty"`
	Waiting []*LaneEntry `json:"waiting,omitempty"`
}

// Lanes are a pipeline's lanes, keyed by BuildRef.LaneKey: the job name for
// the branch's builds, "PR-<n>:<job>" for a pull request's. The zero value is
// ready to use. All decisions are deterministic: lanes are visited in sorted
// order and time is passed in.
type Lanes struct {
	Jobs map[string]*Lane `json:"jobs,omitempty"`
	// Pending holds events started but not yet heard from (their first
	// enqueue batch), with a deadline. Builds of later events wait for them,
	// so a job's builds are granted in event order even when a later event
	// reads its spec faster than an earlier one.
	Pending map[int]time.Time `json:"pending,omitempty"`
	// PendingPR names the pull request of a pending pull request event: it
	// holds only that pull request's later builds (its builds go to that
	// pull request's lanes alone). Other pending events hold the branch's.
	PendingPR map[int]int `json:"pending_pr,omitempty"`
	// Latest is, per lane, the newest event's build the lane has granted.
	// A build of an older event that arrives afterwards would run out of
	// order: while collapse is on it is superseded instead. It outlives the
	// lane's builds.
	Latest map[string]BuildRef `json:"latest,omitempty"`

	// legacy keeps the rules of runs recorded before lanes kept the order of
	// granted builds (workflow.GetVersion); not serialised, every run sets it.
	legacy bool
	// blockerNamesBuild keeps the blockedBy reason of runs recorded before
	// it named the job only (N17; workflow.GetVersion, set every run).
	blockerNamesBuild bool
	// oldHolds keeps the holds of runs recorded before changeHolds (set
	// every run): every build was held for earlier events, even one its
	// lane can never keep waiting, and its reason named the oldest event
	// holding it, so it was told again whenever that one changed.
	oldHolds bool
	// lazyHolds: an event's hold deadline wakes the pipeline only while a
	// build of a later event waits behind it (changeLazyHoldTimer, set every
	// run). Runs before it armed a timer for every event's hold and
	// cancelled it when the event's first batch came: two history events
	// per event for a wait nobody was in.
	lazyHolds bool
}

// Hold makes builds of events after event wait until Release(event) or the
// deadline.
func (l *Lanes) Hold(event int, deadline time.Time) {
	if l.Pending == nil {
		l.Pending = map[int]time.Time{}
	}
	l.Pending[event] = deadline
}

// HoldPR is Hold for an event of pull request pr: it holds only that pull
// request's later builds.
func (l *Lanes) HoldPR(event, pr int, deadline time.Time) {
	l.Hold(event, deadline)
	if pr > 0 {
		if l.PendingPR == nil {
			l.PendingPR = map[int]int{}
		}
		l.PendingPR[event] = pr
	}
}

// Release lifts the hold of event.
func (l *Lanes) Release(event int) {
	delete(l.Pending, event)
	delete(l.PendingPR, event)
}

// olderPRHold reports whether an event of pull request pr older than event
// still holds the lanes.
func (l *Lanes) olderPRHold(pr, event int) bool {
	// Order-independent: any match.
	//workflowcheck:ignore
	for e, p := range l.PendingPR {
		if p == pr && e < event {
			return true
		}
	}
	return false
}

// ReleasePR lifts the holds of pull request pr's events older than event:
// a newer commit supersedes them, so their builds will collapse on arrival
// and must not hold the newer commit's builds meanwhile (N20).
func (l *Lanes) ReleasePR(pr, event int) {
	// Order-independent: every match is deleted.
	//workflowcheck:ignore
	for e, p := range l.PendingPR {
		if p == pr && e < event {
			delete(l.Pending, e)
			delete(l.PendingPR, e)
		}
	}
}

// holds is heldBy for a waiting entry whose order is kept (keepsOrder).
func (l *Lanes) holds(w *LaneEntry, now time.Time) int {
	if !l.keepsOrder(w) {
		return 0
	}
	return l.heldBy(w.Build, now)
}

// keepsOrder reports whether earlier events that have not started their
// jobs hold w: a build its lane can never keep waiting (Inert) has no
// order to keep (runs before changeHolds held every build).
func (l *Lanes) keepsOrder(w *LaneEntry) bool { return l.oldHolds || !w.Inert() }

// Inert reports whether nothing in its lane can ever make the build wait:
// it neither collapses nor waits for the job's other builds, for other
// jobs, a freeze window or a delay. Such builds of a job run side by side
// in whatever order they arrive, so they are granted at once.
func (r LaneRequest) Inert() bool {
	return !r.Collapse && !r.BlockedBySameJob && len(r.BlockedBy) == 0 && len(r.FreezeWindows) == 0 && r.Delay <= 0
}

// heldBy returns the oldest pending event before b's whose hold on b is
// still in force at now, or 0.
func (l *Lanes) heldBy(b BuildRef, now time.Time) int {
	oldest := 0
	// Order-independent: the oldest match wins.
	//workflowcheck:ignore
	for e, deadline := range l.Pending {
		if e < b.Event && now.Before(deadline) && (oldest == 0 || e < oldest) && l.PendingPR[e] == b.PR {
			oldest = e
		}
	}
	return oldest
}

func (l *Lanes) lane(key string) *Lane {
	if l.Jobs == nil {
		l.Jobs = map[string]*Lane{}
	}
	ln, ok := l.Jobs[key]
	if !ok {
		ln = &Lane{}
		l.Jobs[key] = ln
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
	ln, ok := l.Jobs[b.LaneKey()]
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
	ln := l.lane(req.Build.LaneKey())
	// Keep the list in (event, permutation) order; equal keys keep their
	// arrival order.
	b := req.Build
	i := sort.Search(len(ln.Waiting), func(i int) bool {
		w := ln.Waiting[i].Build
		return w.Event > b.Event || (w.Event == b.Event && w.Index > b.Index)
	})
	ln.Waiting = slices.Insert(ln.Waiting, i, &LaneEntry{LaneRequest: req, EnqueuedAt: now, EligibleAt: now.Add(req.Delay), Status: StatusCreated})
	return true
}

// intoFor picks the build of the newer event that replaces old: the same
// matrix permutation when the newer event has it, else the newer build.
func (ln *Lane) intoFor(old, newer BuildRef) BuildRef {
	if old.Index == 0 || newer.Index == 0 || old.Index == newer.Index {
		return newer
	}
	same := newer
	same.Index = old.Index
	for _, list := range [][]*LaneEntry{ln.Waiting, ln.Active} {
		for _, e := range list {
			if e.Build == same {
				return same
			}
		}
	}
	return newer
}

// restate is what the lanes last told build b, which they hold: its grant
// when it is active, else its last wait (nothing when it was told none).
func (l *Lanes) restate(b BuildRef) (LaneEffect, bool) {
	e, active := l.find(b)
	switch {
	case e == nil:
		return LaneEffect{}, false
	case active:
		return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneGrant}}, true
	case e.Status == StatusCreated:
		return LaneEffect{}, false
	}
	return LaneEffect{Build: b, Msg: LaneMessage{Kind: LaneStatus, Status: e.Status, Reason: e.Reason, Code: e.Code}}, true
}

// Done removes a finished (or withdrawn) build and re-evaluates every lane.
func (l *Lanes) Done(b BuildRef, now time.Time) []LaneEffect {
	l.Remove(b)
	return l.Evaluate(now)
}

// Remove forgets a build without deciding anything; call Evaluate after.
func (l *Lanes) Remove(b BuildRef) {
	key := b.LaneKey()
	if ln, ok := l.Jobs[key]; ok {
		ln.Active = slices.DeleteFunc(ln.Active, func(e *LaneEntry) bool { return e.Build == b })
		ln.Waiting = slices.DeleteFunc(ln.Waiting, func(e *LaneEntry) bool { return e.Build == b })
		if len(ln.Active) == 0 && len(ln.Waiting) == 0 {
			delete(l.Jobs, key)
		}
	}
}

// Started records that an executor claimed build b: it runs, so the lane
// stops asking it to give way. It reports whether the lane holds b.
func (l *Lanes) Started(b BuildRef) bool {
	e, active := l.find(b)
	if e == nil || !active {
		return false
	}
	e.Started, e.Yielding = true, ""
	return true
}

// AbortAll empties every lane's waiting list with LaneAbort messages; with
// granted, builds granted but not yet claimed by an executor (waiting in
// their queue for a slot) are told LaneAbort too and stay in the lane until
// they report their end (a build an executor claims meanwhile runs on).
func (l *Lanes) AbortAll(reason string, granted bool) []LaneEffect {
	var out []LaneEffect
	for _, job := range l.sortedJobs() {
		ln := l.Jobs[job]
		for _, w := range ln.Waiting {
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: reason}})
		}
		ln.Waiting = nil
		if granted {
			for _, a := range ln.Active {
				if !a.Started {
					out = append(out, LaneEffect{Build: a.Build, Msg: LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: reason}})
				}
			}
		}
	}
	return out
}

// SupersedePR ends the builds of pull request pr's events before event:
// waiting builds leave the lane with waitingKind (LaneCollapse when a newer
// commit replaced them, LaneAbort when the pull request closed), granted and
// running ones are told LaneCancel and stay until they report their end.
func (l *Lanes) SupersedePR(pr, event int, waitingKind LaneMessageKind, reason string) []LaneEffect {
	prefix := prJobPrefix + strconv.Itoa(pr) + ":"
	status := StatusCollapsed
	if waitingKind == LaneAbort {
		status = StatusAborted
	}
	var out []LaneEffect
	for _, key := range l.sortedJobs() {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		ln := l.Jobs[key]
		for _, a := range ln.Active {
			if a.Build.Event < event && a.Yielding != LaneCancelYield {
				a.Yielding = LaneCancelYield
				out = append(out, LaneEffect{Build: a.Build, Msg: LaneMessage{Kind: LaneCancel, Reason: reason}})
			}
		}
		ln.Waiting = slices.DeleteFunc(ln.Waiting, func(w *LaneEntry) bool {
			if w.Build.Event >= event {
				return false
			}
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: waitingKind, Status: status, Reason: reason}})
			return true
		})
		if len(ln.Active) == 0 && len(ln.Waiting) == 0 {
			delete(l.Jobs, key)
		}
	}
	return out
}

// LaneCancelYield marks an active entry told LaneCancel.
const LaneCancelYield = "cancel"

// ForgetPR drops what the lanes remember of pull request pr's order (its
// lanes' Latest), once the pull request is closed and its builds are gone.
func (l *Lanes) ForgetPR(pr int) {
	prefix := prJobPrefix + strconv.Itoa(pr) + ":"
	// Order-independent: deletes.
	//workflowcheck:ignore
	for key := range l.Latest {
		if strings.HasPrefix(key, prefix) {
			if _, busy := l.Jobs[key]; !busy {
				delete(l.Latest, key)
			}
		}
	}
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
//
// While collapse is on, a lane never lets a build start after a newer
// event's build was granted: a granted build no executor has claimed yet is
// asked to collapse into a newer arrival (it answers by ending, or by
// reporting that it already started), no newer build is granted until it
// answered, and an older build that arrives after a newer one was granted is
// superseded at once.
func (l *Lanes) Evaluate(now time.Time) []LaneEffect {
	// Order-independent: every expired hold goes.
	//workflowcheck:ignore
	for e, deadline := range l.Pending {
		if !now.Before(deadline) {
			l.Release(e) // the event never reported; stop waiting for it
		}
	}
	var horizons []int
	for _, job := range l.sortedJobs() {
		for _, w := range l.Jobs[job].Waiting {
			if (w.Status == StatusCreated || w.Held) && l.holds(w, now) == 0 && !slices.Contains(horizons, w.Build.Event) {
				horizons = append(horizons, w.Build.Event)
			}
		}
	}
	sort.Ints(horizons)
	var out []LaneEffect
	for _, h := range append(horizons, int(^uint(0)>>1)) {
		for _, job := range l.sortedJobs() {
			out = append(out, l.evaluateLane(job, l.Jobs[job], now, h)...)
			if ln := l.Jobs[job]; len(ln.Active) == 0 && len(ln.Waiting) == 0 {
				delete(l.Jobs, job)
			}
		}
	}
	return out
}

// laneCollapseMsg is the message that ends b COLLAPSED into into.
func laneCollapseMsg(into BuildRef, reason string) LaneMessage {
	return LaneMessage{Kind: LaneCollapse, Status: StatusCollapsed, Into: into.String(), Reason: reason}
}

// evaluateLane decides one lane, with new arrivals after event horizon not
// yet admitted.
func (l *Lanes) evaluateLane(key string, ln *Lane, now time.Time, horizon int) []LaneEffect {
	var out []LaneEffect
	admitted := func(w *LaneEntry) bool { return (w.Status != StatusCreated && !w.Held) || w.Build.Event <= horizon }
	// eligible: a waiting build that takes part now. Legacy runs admit new
	// arrivals one event at a time; now a newer arrival replaces an older
	// build at once, even in the same batch (granting the older one first
	// would only make it give way again).
	eligible := func(n *LaneEntry) bool {
		return (admitted(n) || !l.legacy) && l.holds(n, now) == 0
	}
	// newest is the last eligible build waiting (the list is in event
	// order); the entries after the one being decided are not decided yet in
	// this pass, so it stays the same throughout.
	var newest *LaneEntry
	for i := len(ln.Waiting) - 1; i >= 0; i-- {
		if eligible(ln.Waiting[i]) {
			newest = ln.Waiting[i]
			break
		}
	}
	// newestAfter is the newest eligible build waiting that belongs to an
	// event later than event.
	newestAfter := func(event int) *LaneEntry {
		if newest != nil && newest.Build.Event > event {
			return newest
		}
		return nil
	}
	// mayReplace: a newer build n may take the place of w without losing a
	// forced start: a forced build gives way only to a build that may start
	// now too (forced, or outside every freeze window).
	mayReplace := func(w, n *LaneEntry) bool {
		if !w.Force || n.Force || l.legacy {
			return true
		}
		return !frozenAt(n, now)
	}

	if !l.legacy {
		// A granted build that no executor has claimed still waits: a newer
		// arrival replaces it.
		for _, a := range ln.Active {
			if a.Started || a.Yielding != "" {
				continue
			}
			if n := newestAfter(a.Build.Event); n != nil && n.Collapse && mayReplace(a, n) {
				into := ln.intoFor(a.Build, n.Build)
				a.Yielding = into.String()
				out = append(out, LaneEffect{Build: a.Build, Msg: laneCollapseMsg(into, "collapsed into build "+into.String())})
			}
		}
	}
	latest, hasLatest := l.Latest[key]

	kept := make([]*LaneEntry, 0, len(ln.Waiting))
	// prev is the last admitted build kept waiting; blockAhead the one kept
	// before prev's event. A waiting build's reason names only the build
	// right ahead of it (not the head of the line), so a grant changes the
	// reason of the next event's builds alone: a long line costs signals in
	// proportion to its length, not to its square.
	var prev, blockAhead *LaneEntry
	var head *LaneEntry // the first admitted build kept waiting (legacy reasons)
	for _, w := range ln.Waiting {
		if !admitted(w) {
			kept = append(kept, w)
			continue
		}
		if e := l.holds(w, now); e != 0 {
			kept = append(kept, w)
			w.Held = true
			out = append(out, w.tell(StatusQueued, WaitLaneOrder, l.heldReason(e), time.Time{})...)
			continue
		}
		w.Held = false
		// An older build arriving after a newer one was granted would run
		// out of order: it is superseded.
		if !l.legacy && w.Collapse && hasLatest && latest.Event > w.Build.Event {
			out = append(out, LaneEffect{Build: w.Build, Msg: laneCollapseMsg(latest, "superseded by build "+latest.String())})
			continue
		}
		// The build right ahead of w from another event, if any.
		ahead := prev
		if prev != nil && prev.Build.Event == w.Build.Event {
			ahead = blockAhead
		}
		if l.legacy {
			ahead = nil
			if head != nil && head.Build.Event != w.Build.Event {
				ahead = head
			}
		}
		status, code, reason, until := l.decide(w, ln, ahead, now)
		// A frozen build also collapses into a newer build forced through the
		// window: it must not keep the forced one waiting behind it.
		n := newestAfter(w.Build.Event)
		if n != nil && mayReplace(w, n) && ((status == StatusRunning && (n.Collapse || w.Status == StatusFrozen)) || (status == StatusFrozen && n.Force)) {
			into := ln.intoFor(w.Build, n.Build)
			out = append(out, LaneEffect{Build: w.Build, Msg: laneCollapseMsg(into, "collapsed into build "+into.String())})
			continue
		}
		if status == StatusRunning {
			w.GrantedAt = now
			w.Status, w.Reason, w.Code = StatusQueued, "", ""
			ln.Active = append(ln.Active, w)
			if !l.legacy && (!hasLatest || w.Build.Event > latest.Event) {
				if l.Latest == nil {
					l.Latest = map[string]BuildRef{}
				}
				latest, hasLatest = w.Build, true
				l.Latest[key] = w.Build
			}
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: LaneGrant}})
			continue
		}
		kept = append(kept, w)
		if prev == nil || prev.Build.Event != w.Build.Event {
			blockAhead = prev
		}
		prev = w
		if head == nil {
			head = w
		}
		out = append(out, w.tell(status, code, reason, until)...)
	}
	ln.Waiting = kept
	return out
}

// HeldReason is the reason of a build held while an earlier event has not
// started its jobs: the same whichever event holds it, so a build held
// through a burst of events is told once.
const HeldReason = "waiting for earlier events to start their jobs"

// heldReason is the reason of a build held by the earlier event e.
func (l *Lanes) heldReason(e int) string {
	if l.oldHolds {
		return fmt.Sprintf("waiting for the earlier event %d to start its jobs", e)
	}
	return HeldReason
}

// frozenAt reports whether e may not start at now because of its freeze
// windows.
func frozenAt(e *LaneEntry, now time.Time) bool {
	if e.Force || len(e.FreezeWindows) == 0 {
		return false
	}
	next, err := pipeline.NextUnfrozen(e.FreezeWindows, now)
	return err != nil || next.After(now)
}

// tell records a waiting build's status and returns the message announcing
// it, if it changed. The code follows from the status and the reason, so
// it is not compared: an entry carried over from a run recorded before
// wait codes is not told again.
func (w *LaneEntry) tell(status Status, code WaitCode, reason string, until time.Time) []LaneEffect {
	if status == w.Status && reason == w.Reason {
		return nil
	}
	w.Status, w.Reason, w.Code = status, reason, code
	return []LaneEffect{{Build: w.Build, Msg: LaneMessage{Kind: LaneStatus, Status: status, Reason: reason, Code: code, Until: until}}}
}

// decide returns StatusRunning when w may be granted now, or the status, the
// wait code, the reason and (for timed waits) the end of the wait. ahead is the build
// waiting right before w from another event, if any.
func (l *Lanes) decide(w *LaneEntry, ln *Lane, ahead *LaneEntry, now time.Time) (Status, WaitCode, string, time.Time) {
	if !w.Force && len(w.FreezeWindows) > 0 {
		next, err := pipeline.NextUnfrozen(w.FreezeWindows, now)
		if err != nil {
			return StatusFrozen, WaitFrozen, fmt.Sprintf("frozen: freeze windows %s never open (%v); start it with --force", strings.Join(w.FreezeWindows, ", "), err), time.Time{}
		}
		if next.After(now) {
			return StatusFrozen, WaitFrozen, fmt.Sprintf("frozen until %s by freeze window `%s`", next.UTC().Format(time.RFC3339), containing(w.FreezeWindows, now)), next
		}
	}
	if now.Before(w.EligibleAt) {
		return StatusQueued, WaitDelayed, fmt.Sprintf("delayed until %s (sluice.dev/delay %s)", w.EligibleAt.UTC().Format(time.RFC3339), w.Delay), w.EligibleAt
	}
	if !l.legacy {
		// A granted build asked to give way has not answered yet: nothing
		// newer starts before it is known not to run.
		for _, a := range ln.Active {
			if a.Yielding != "" && a.Build.Event < w.Build.Event {
				return StatusQueued, WaitLaneOrder, fmt.Sprintf("waiting for build %s to give way", a.Build), time.Time{}
			}
		}
	}
	if w.BlockedBySameJob {
		// Behind another waiting build, a build names that one (not the
		// running one): a grant then changes the next build's reason only.
		if ahead != nil && !l.legacy {
			return StatusBlocked, WaitBlockedBy, fmt.Sprintf("waiting behind build %s of the same job", ahead.Build), time.Time{}
		}
		for _, a := range ln.Active {
			if a.Build.Event != w.Build.Event {
				return StatusBlocked, WaitBlockedBy, fmt.Sprintf("blocked by build %s of the same job", a.Build), time.Time{}
			}
		}
		if ahead != nil {
			return StatusBlocked, WaitBlockedBy, fmt.Sprintf("waiting behind build %s of the same job", ahead.Build), time.Time{}
		}
	}
	for _, raw := range w.BlockedBy {
		job := strings.TrimPrefix(raw, "~")
		if job == w.Build.Job || strings.HasPrefix(job, "sd@") {
			continue
		}
		// A pull request's build is blocked by the branch's builds of the
		// job and by its own pull request's.
		keys := []string{job}
		if w.Build.PR > 0 {
			keys = append(keys, BuildRef{Job: job, PR: w.Build.PR}.LaneKey())
		}
		for _, k := range keys {
			if other, ok := l.Jobs[k]; ok && len(other.Active) > 0 {
				if l.blockerNamesBuild {
					return StatusBlocked, WaitBlockedBy, fmt.Sprintf("blocked by build %s of job %s", other.Active[0].Build, job), time.Time{}
				}
				// The job, not one of its builds: the reason stays the
				// same while builds of the job come and go, so a waiting
				// build is told once, not at every build of the job (N17).
				return StatusBlocked, WaitBlockedBy, "blocked by running builds of job " + job, time.Time{}
			}
		}
	}
	return StatusRunning, "", "", time.Time{}
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
	for e, deadline := range l.Pending {
		if l.lazyHolds && !l.holdsAnyWaiting(e) {
			continue // nothing waits for it: Evaluate drops it once expired
		}
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

// holdsAnyWaiting reports whether a waiting build of an event after event
// (of the same pull request, or both of none) may be held by it.
func (l *Lanes) holdsAnyWaiting(event int) bool {
	// Order-independent: any match.
	//workflowcheck:ignore
	for _, ln := range l.Jobs {
		for _, w := range ln.Waiting {
			if w.Build.Event > event && l.PendingPR[event] == w.Build.PR && l.keepsOrder(w) {
				return true
			}
		}
	}
	return false
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
