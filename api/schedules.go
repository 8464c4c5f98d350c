package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sluice-ci/sluice/workflows"
)

// maxOccurrences is how many of a schedule's latest due times `schedule
// show` accounts for.
const maxOccurrences = 20

// Occurrence outcomes.
const (
	OccurrenceStarted = "started"
	OccurrenceRunning = "running"
	OccurrenceSkipped = "skipped"
	OccurrenceMissed  = "missed"
)

// Occurrence is one due time of a periodic job and what became of it.
type Occurrence struct {
	Due time.Time `json:"due"`
	// Outcome is started (Event ran), running (the fire waits for its
	// event's job), skipped (with Reason) or missed (no run and no record).
	Outcome string `json:"outcome"`
	Event   string `json:"event,omitempty"`
	// Status is how the fire's job ended, when it started one.
	Status workflows.Status `json:"status,omitempty"`
	Reason string           `json:"reason,omitempty"`
}

// ScheduleView is GET /api/v1/pipelines/{name}/jobs/{job}/schedule.
type ScheduleView struct {
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
	Cron     string `json:"cron"`
	Paused   bool   `json:"paused"`
	Note     string `json:"note,omitempty"`
	// Occurrences are the latest due times, newest first.
	Occurrences []Occurrence `json:"occurrences"`
	// Missed, OverlapSkipped and BufferDropped are Temporal's counts since
	// the schedule was created (it keeps no list of them).
	MissedCatchupWindow int `json:"missed_catchup_window"`
	OverlapSkipped      int `json:"overlap_skipped"`
}

// periodicRun is one PeriodicWorkflow a schedule started.
type periodicRun struct {
	scheduled    time.Time
	start, close time.Time
	running      bool
	result       workflows.PeriodicResult
	resultKnown  bool
}

// pausedNotePrefix starts the note `schedule pause` leaves: the time it
// was paused follows (RFC 3339), so due times after it are accounted as
// paused.
const pausedNotePrefix = "paused with sluice at "

// accountOccurrences says what became of each due time (newest first):
// the run the schedule started for it, and its result, from sluice's own
// record; or, without a run, why: the schedule paused then, a run still
// going (the overlap policy, buffer one, skips the later fires), or no
// record at all (the server was down and came back after the catch-up
// window). Temporal keeps no list of skipped or missed fires, only counts.
func accountOccurrences(due []time.Time, runs []periodicRun, pausedSince time.Time) []Occurrence {
	byDue := map[time.Time]periodicRun{}
	for _, r := range runs {
		byDue[r.scheduled.UTC()] = r
	}
	out := make([]Occurrence, 0, len(due))
	for i := len(due) - 1; i >= 0; i-- {
		t := due[i].UTC()
		o := Occurrence{Due: t}
		if r, ok := byDue[t]; ok {
			switch {
			case r.running:
				o.Outcome, o.Reason = OccurrenceRunning, fmt.Sprintf("started %s; it waits for its event's job to end", r.start.UTC().Format(time.RFC3339))
			case !r.resultKnown:
				o.Outcome, o.Reason = OccurrenceStarted, "its run left no result"
			case r.result.Done.Event == "":
				o.Outcome, o.Reason = OccurrenceSkipped, "the pipeline started no event: "+r.result.Done.Reason
			default:
				d := r.result.Done
				o.Outcome, o.Event, o.Status, o.Reason = OccurrenceStarted, d.Event, d.Status, d.Reason
				if strings.Contains(strings.ToLower(d.Reason), "frozen") && d.Status != workflows.StatusSuccess && d.Status != workflows.StatusFailure {
					o.Outcome, o.Reason = OccurrenceSkipped, "frozen: "+d.Reason
				}
				if r.result.TimedOut {
					o.Reason = "its job still ran a day later"
				}
			}
			out = append(out, o)
			continue
		}
		switch {
		case !pausedSince.IsZero() && !t.Before(pausedSince):
			o.Outcome, o.Reason = OccurrenceSkipped, "paused: the schedule was paused at "+pausedSince.UTC().Format(time.RFC3339)
		default:
			if r, ok := runningAt(runs, t); ok {
				o.Outcome, o.Reason = OccurrenceSkipped, fmt.Sprintf("overlap policy: the fire due %s was still running (one later fire waits, the rest are skipped)",
					r.scheduled.UTC().Format(time.RFC3339))
			} else {
				o.Outcome, o.Reason = OccurrenceMissed, "no run and no record: the server was down at the due time and came back after the catch-up window"
			}
		}
		out = append(out, o)
	}
	return out
}

// runningAt returns the run that was going at t, if any.
func runningAt(runs []periodicRun, t time.Time) (periodicRun, bool) {
	for _, r := range runs {
		if !r.start.After(t) && (r.running || r.close.After(t)) {
			return r, true
		}
	}
	return periodicRun{}, false
}

// dueTimes lists the cron's due times in (from, to], the last max of them.
func dueTimes(expr string, from, to time.Time, limit int) ([]time.Time, error) {
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %w", expr, err)
	}
	var out []time.Time
	for t := sched.Next(from.UTC()); !t.IsZero() && !t.After(to); t = sched.Next(t) {
		out = append(out, t)
		if len(out) > limit {
			out = out[1:]
		}
	}
	return out, nil
}

// Schedule accounts for the latest due times of a periodic job.
func (s *Service) Schedule(ctx context.Context, pipeline, job string) (ScheduleView, error) {
	if !reJob.MatchString(job) {
		return ScheduleView{}, invalid("job %q: not a job name", job)
	}
	p, _, err := s.queryPipeline(ctx, pipeline)
	if err != nil {
		return ScheduleView{}, err
	}
	expr, ok := p.Periodic[job]
	if !ok {
		return ScheduleView{}, fmt.Errorf("%w: job %s of pipeline %s is not periodic (screwdriver.cd/buildPeriodically)", ErrNotFound, job, pipeline)
	}
	id := workflows.PeriodicScheduleID(pipeline, job)
	desc, err := s.Client.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		return ScheduleView{}, translate(err, "periodic schedule of "+pipeline+"/"+job)
	}
	v := ScheduleView{
		Pipeline: pipeline, Job: job, Cron: expr, Paused: desc.Schedule.State.Paused, Note: desc.Schedule.State.Note,
		MissedCatchupWindow: desc.Info.NumActionsMissedCatchupWindow, OverlapSkipped: desc.Info.NumActionsSkippedOverlap,
	}
	var pausedSince time.Time
	if v.Paused {
		if at, ok := strings.CutPrefix(v.Note, pausedNotePrefix); ok {
			pausedSince, _ = time.Parse(time.RFC3339, strings.Fields(at + " ")[0])
		}
	}
	now := s.now()
	due, err := dueTimes(expr, desc.Info.CreatedAt.Add(-time.Nanosecond), now, maxOccurrences)
	if err != nil {
		return ScheduleView{}, err
	}
	var runs []periodicRun
	first := now
	if len(due) > 0 {
		first = due[0]
	}
	{
		// A day before the first due time: a run that overlaps it.
		execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'PeriodicWorkflow' AND TemporalScheduledById = %s AND TemporalScheduledStartTime >= '%s'",
			quote(id), first.Add(-24*time.Hour).UTC().Format(time.RFC3339)), 4*maxOccurrences)
		if err != nil {
			return ScheduleView{}, err
		}
		for _, ex := range execs {
			r := periodicRun{start: ex.GetStartTime().AsTime(), running: ex.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
			if ex.GetCloseTime() != nil {
				r.close = ex.GetCloseTime().AsTime()
			}
			if f := ex.GetSearchAttributes().GetIndexedFields()["TemporalScheduledStartTime"]; f != nil {
				var ts time.Time
				if converter.GetDefaultDataConverter().FromPayload(f, &ts) == nil {
					r.scheduled = ts
				}
			}
			if !r.running && !r.scheduled.Before(first) {
				err := s.Client.GetWorkflow(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()).Get(ctx, &r.result)
				r.resultKnown = err == nil
			}
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].scheduled.Before(runs[j].scheduled) })
	v.Occurrences = accountOccurrences(due, runs, pausedSince)
	return v, nil
}

func (h *handler) getSchedule(w http.ResponseWriter, r *http.Request) {
	v, err := h.svc.Schedule(r.Context(), r.PathValue("name"), r.PathValue("job"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// pauseNote is the note a pause leaves (see pausedNotePrefix).
func pauseNote(now time.Time) string { return pausedNotePrefix + now.UTC().Format(time.RFC3339) }
