package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// SignalAdmitEvents admits event starts durably without waiting for the
// pipeline workflow: Temporal acknowledges a signal once it is in the
// pipeline's history, whatever the workflow is doing (a long workflow task,
// a burst, a controller restarting). The pipeline numbers and starts the
// admitted events in the order their signals arrived, as it would updates;
// each carries an admission ID (StartEventRequest.Admission) that
// QueryAdmissions answers with the event's number (or why it was refused),
// and that deduplicates a signal sent twice, or a start that came by
// UpdateStartEvents too. The API sends it when its UpdateStartEvents was not
// answered within its admit wait (api/batch.go), and answers pending.
const SignalAdmitEvents = "admit-events"

// QueryAdmissions answers, for admission IDs, what the pipeline made of them.
// A query is answered after the workflow task that handles the signals
// before it, so an admission signalled before the query is known to it
// unless the pipeline has not handled it yet.
const QueryAdmissions = "admissions"

// maxAdmissions is how many admissions a pipeline remembers (for the
// answers and deduplication).
const maxAdmissions = 1000

// AdmitEvents is SignalAdmitEvents' argument.
type AdmitEvents struct {
	Requests []StartEventRequest `json:"requests"`
}

// AdmissionSeen is one admission the pipeline handled.
type AdmissionSeen struct {
	ID        string `json:"id"`
	Event     int    `json:"event,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Error is why the start was refused (Event is 0 then).
	Error string `json:"error,omitempty"`
}

// admitLoop handles SignalAdmitEvents in a coroutine of its own, so that
// admissions are numbered even while the main loop waits (for a schedule
// activity, say).
func (p *pipelineRun) admitLoop(ctx workflow.Context, ch workflow.ReceiveChannel) {
	for {
		var batch AdmitEvents
		ch.Receive(ctx, &batch)
		p.admit(ctx, batch)
	}
}

// admit numbers and starts a batch of admitted events, as startEvents does
// for an update, remembering each admission's outcome.
func (p *pipelineRun) admit(ctx workflow.Context, batch AdmitEvents) {
	for _, r := range batch.Requests {
		if r.Admission != "" {
			if _, ok := p.admission(r.Admission); ok {
				continue // the same admission signalled again
			}
		}
		seen := AdmissionSeen{ID: r.Admission}
		if err := p.validateStart(ctx, r); err != nil {
			seen.Error = err.Error()
			workflow.GetLogger(ctx).Warn("admitted_event_refused", "pipeline", p.cfg.Name, "admission", r.Admission, "error", err)
			p.remember(seen)
			continue
		}
		l := p.launchEvent(ctx, r)
		seen.Event, seen.Duplicate = l.res.Event.Number, l.res.Duplicate
		p.remember(seen)
		if l.started == nil {
			continue
		}
		p.watchStart(ctx, l)
	}
	p.wake.SendAsync(true)
}

func (p *pipelineRun) remember(a AdmissionSeen) {
	if a.ID == "" {
		return
	}
	p.st.Admissions = append(p.st.Admissions, a)
	if len(p.st.Admissions) > maxAdmissions {
		p.st.Admissions = p.st.Admissions[len(p.st.Admissions)-maxAdmissions:]
	}
}

func (p *pipelineRun) admission(id string) (AdmissionSeen, bool) {
	for i := len(p.st.Admissions) - 1; i >= 0; i-- {
		if p.st.Admissions[i].ID == id {
			return p.st.Admissions[i], true
		}
	}
	return AdmissionSeen{}, false
}

// admissions answers QueryAdmissions: the outcome of each ID, in order;
// an ID the pipeline has not handled (yet) has only its ID.
func (p *pipelineRun) admissions(ids []string) ([]AdmissionSeen, error) {
	out := make([]AdmissionSeen, len(ids))
	for i, id := range ids {
		out[i] = AdmissionSeen{ID: id}
		if a, ok := p.admission(id); ok {
			out[i] = a
		}
	}
	return out, nil
}
