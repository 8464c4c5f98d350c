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

// Enqueue adds a build request at time now and returns the messages to send:
// collapses of older waiting builds of the job, then the outcome of a fresh
// evaluation. A request for a build the lane already holds is ignored.
func (l *Lanes) Enqueue(req LaneRequest, now time.Time) []LaneEffect {
	if e, _ := l.find(req.Build); e != nil {
		return nil
	}
	ln := l.lane(req.Build.Job)
	entry := &LaneEntry{LaneRequest: req, EnqueuedAt: now, EligibleAt: now.Add(req.Delay), Status: StatusCreated}
	var out []LaneEffect

	// A newer build already waits: this one collapses into it at once.
	for _, w := range ln.Waiting {
		if w.Build.Event > req.Build.Event && (req.Collapse || w.Status == StatusFrozen) {
			into := intoFor(req.Build, w.Build)
			out = append(out, LaneEffect{Build: req.Build, Msg: LaneMessage{
				Kind: LaneCollapse, Status: StatusCollapsed, Into: into.String(),
				Reason: "collapsed into build " + into.String(),
			}})
			return append(out, l.Evaluate(now)...)
		}
	}
	// Older waiting builds of the job collapse into this one. Frozen builds
	// collapse to the newest even when collapsing is off (design.md §2).
	kept := ln.Waiting[:0]
	for _, w := range ln.Waiting {
		if w.Build.Event < req.Build.Event && (req.Collapse || w.Status == StatusFrozen) {
			into := intoFor(w.Build, req.Build)
			out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{
				Kind: LaneCollapse, Status: StatusCollapsed, Into: into.String(),
				Reason: "collapsed into build " + into.String(),
			}})
			continue
		}
		kept = append(kept, w)
	}
	ln.Waiting = kept
	// Granted builds are left alone: they are already in their queue and
	// run when a slot frees (Screwdriver: "A1 starts; A2 and A3 collapse
	// into A3 while A1 builds").
	ln.Waiting = append(ln.Waiting, entry)
	sort.SliceStable(ln.Waiting, func(i, j int) bool {
		a, b := ln.Waiting[i].Build, ln.Waiting[j].Build
		if a.Event != b.Event {
			return a.Event < b.Event
		}
		return a.Index < b.Index
	})
	return append(out, l.Evaluate(now)...)
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
	if ln, ok := l.Jobs[b.Job]; ok {
		ln.Active = slices.DeleteFunc(ln.Active, func(e *LaneEntry) bool { return e.Build == b })
		ln.Waiting = slices.DeleteFunc(ln.Waiting, func(e *LaneEntry) bool { return e.Build == b })
		if len(ln.Active) == 0 && len(ln.Waiting) == 0 {
			delete(l.Jobs, b.Job)
		}
	}
	return l.Evaluate(now)
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

// Evaluate grants every waiting build that may start at now and reports a
// changed wait reason to the others.
func (l *Lanes) Evaluate(now time.Time) []LaneEffect {
	var out []LaneEffect
	for _, job := range l.sortedJobs() {
		ln := l.Jobs[job]
		kept := ln.Waiting[:0]
		var ahead *LaneEntry // first entry of another event still waiting
		for _, w := range ln.Waiting {
			status, reason, until := l.decide(w, ln, ahead, now)
			if status == StatusRunning {
				w.GrantedAt = now
				w.Status, w.Reason = StatusQueued, ""
				ln.Active = append(ln.Active, w)
				out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: LaneGrant}})
				continue
			}
			kept = append(kept, w)
			if ahead == nil || ahead.Build.Event == w.Build.Event {
				ahead = w
			}
			if status != w.Status || reason != w.Reason {
				w.Status, w.Reason = status, reason
				out = append(out, LaneEffect{Build: w.Build, Msg: LaneMessage{Kind: LaneStatus, Status: status, Reason: reason, Until: until}})
			}
		}
		ln.Waiting = kept
	}
	return out
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
	for _, ln := range l.Jobs {
		n += len(ln.Active) + len(ln.Waiting)
	}
	return n
}
