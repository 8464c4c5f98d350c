package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// UpdateStartEvents starts several events of a pipeline in one update. The
// API sends it when starts for one pipeline arrive while an earlier one is
// still in flight (a burst of webhooks): the burst costs one update per
// batch instead of one each, stays clear of Temporal's limit of updates in
// flight per workflow (10 by default, whose refusals make clients back off
// for seconds and give up after a minute), and is answered as soon as the
// events are numbered, however busy the server is.
const UpdateStartEvents = "start-events"

// MaxStartEvents bounds the requests of one UpdateStartEvents.
const MaxStartEvents = 200

// StartEventsRequest is UpdateStartEvents' argument.
type StartEventsRequest struct {
	Requests []StartEventRequest `json:"requests"`
}

// StartEventsResult is UpdateStartEvents' answer: one outcome per request,
// in order.
type StartEventsResult struct {
	Outcomes []StartEventOutcome `json:"outcomes"`
}

// StartEventOutcome is one request's result, or why it was refused.
type StartEventOutcome struct {
	Result StartEventResult `json:"result"`
	Error  string           `json:"error,omitempty"`
}

func (p *pipelineRun) validateStartEvents(_ workflow.Context, req StartEventsRequest) error {
	switch {
	case p.st.Deleted:
		return fmt.Errorf("%w: %s", ErrPipelineDeleted, p.cfg.Name)
	case len(req.Requests) == 0:
		return errors.New("no events to start")
	case len(req.Requests) > MaxStartEvents:
		return fmt.Errorf("%d events in one request: at most %d", len(req.Requests), MaxStartEvents)
	}
	return nil
}

// startEvents validates and numbers the requests in order, as UpdateStartEvent
// would one by one, and asks for every event workflow's start in the same
// workflow task. Unlike UpdateStartEvent it answers without waiting for the
// workflows to start: the update records the starts durably, and a workflow
// that then fails to start (its ID is taken) lifts its event's hold and is
// logged. A request refused by validation gets its error; the others are
// not affected.
func (p *pipelineRun) startEvents(ctx workflow.Context, req StartEventsRequest) (StartEventsResult, error) {
	out := StartEventsResult{Outcomes: make([]StartEventOutcome, len(req.Requests))}
	for i, r := range req.Requests {
		if r.Admission != "" {
			// Admitted before by signal (the API's fallback when this
			// update was slow), or the other way round: started once.
			if a, ok := p.admission(r.Admission); ok {
				out.Outcomes[i] = StartEventOutcome{Error: a.Error, Result: StartEventResult{Duplicate: a.Duplicate}}
				if a.Event > 0 {
					out.Outcomes[i].Result.Event = EventRef{Pipeline: p.cfg.Name, Number: a.Event}
					out.Outcomes[i].Result.Queue = p.queueName()
				}
				continue
			}
		}
		if err := p.validateStart(ctx, r); err != nil {
			out.Outcomes[i].Error = err.Error()
			p.remember(AdmissionSeen{ID: r.Admission, Error: err.Error()})
			continue
		}
		l := p.launchEvent(ctx, r)
		p.remember(AdmissionSeen{ID: r.Admission, Event: l.res.Event.Number, Duplicate: l.res.Duplicate})
		out.Outcomes[i].Result = l.res
		if l.started == nil {
			continue
		}
		p.watchStart(ctx, l)
	}
	return out, nil
}
