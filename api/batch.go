package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/workflows"
)

// eventBatchTimeout bounds one update that starts events.
const eventBatchTimeout = 2 * time.Minute

// DefaultAdmitWait is how long an event start waits for the pipeline to
// number an admitted event before it answers without the number (202,
// "pending"): well under a webhook sender's timeout (GitHub: 10 s).
const DefaultAdmitWait = 2 * time.Second

// eventBatcher admits event starts per pipeline (docs/performance.md,
// "Admission"). A start is admitted by SignalAdmitEvents, which Temporal
// acknowledges once it is in the pipeline's history — durably, and without
// waiting for the pipeline workflow, whatever it is doing. The starts that
// arrive while a signal to the same pipeline is in flight go together in
// the next one. Then each caller waits, at most admitWait from its arrival,
// for the pipeline to answer QueryAdmissions with its event's number (a
// query is answered after the workflow task that handled the signal); past
// that it answers pending, with the admission ID, and the event still
// starts.
type eventBatcher struct {
	mu    sync.Mutex
	lanes map[string]*startLane
	// admitWait bounds the wait for the number (0: DefaultAdmitWait).
	admitWait time.Duration
}

// startLane holds one pipeline's starts queued behind the signal in flight.
type startLane struct {
	waiting []*startCall
}

// startCall is one caller's event start.
type startCall struct {
	req workflows.StartEventRequest
	res workflows.StartEventResult
	// pending: admitted, not numbered within admitWait (req.Admission).
	pending bool
	err     error
	done    chan struct{}
	// deadline is when the caller stops waiting for the number.
	deadline time.Time
}

// startRefused is one request's refusal inside an UpdateStartEvents answer.
// It has an update rejection's Message(), so updateError maps both alike.
type startRefused string

func (m startRefused) Error() string   { return string(m) }
func (m startRefused) Message() string { return string(m) }

// setWait sets admitWait (0: DefaultAdmitWait).
func (b *eventBatcher) setWait(d time.Duration) {
	b.mu.Lock()
	b.admitWait = d
	b.mu.Unlock()
}

// admissionID is a fresh admission ID.
func admissionID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "adm-" + hex.EncodeToString(b[:])
}

// admit admits one start and waits, within admitWait, for its number; it
// returns the admission ID when the number did not come in time.
func (b *eventBatcher) admit(ctx context.Context, c client.Client, pipeline string, req workflows.StartEventRequest) (workflows.StartEventResult, string, error) {
	b.mu.Lock()
	wait := b.admitWait
	b.mu.Unlock()
	if wait <= 0 {
		wait = DefaultAdmitWait
	}
	if req.Admission == "" {
		req.Admission = admissionID()
	}
	call := &startCall{req: req, done: make(chan struct{}), deadline: time.Now().Add(wait)}
	b.mu.Lock()
	if b.lanes == nil {
		b.lanes = map[string]*startLane{}
	}
	lane, busy := b.lanes[pipeline]
	if !busy {
		lane = &startLane{}
		b.lanes[pipeline] = lane
	}
	lane.waiting = append(lane.waiting, call)
	b.mu.Unlock()
	if !busy {
		// The first caller sends for everyone queued behind it, so the
		// sending outlives its own request.
		go b.drain(context.WithoutCancel(ctx), c, pipeline, lane)
	}
	select {
	case <-call.done:
		if call.pending {
			return workflows.StartEventResult{}, req.Admission, nil
		}
		return call.res, "", call.err
	case <-ctx.Done():
		return workflows.StartEventResult{}, "", ctx.Err()
	}
}

// drain signals the lane's queued starts, at most MaxStartEvents per signal,
// until none is left; each batch then waits for its numbers on its own.
func (b *eventBatcher) drain(ctx context.Context, c client.Client, pipeline string, lane *startLane) {
	for {
		b.mu.Lock()
		if len(lane.waiting) == 0 {
			delete(b.lanes, pipeline)
			b.mu.Unlock()
			return
		}
		n := min(len(lane.waiting), workflows.MaxStartEvents)
		calls := lane.waiting[:n:n]
		lane.waiting = lane.waiting[n:]
		b.mu.Unlock()
		if !admitStarts(ctx, c, pipeline, calls) {
			continue // every call has its answer (an error)
		}
		go awaitNumbers(ctx, c, pipeline, calls)
	}
}

// admitStarts signals calls to the pipeline; on failure every call gets the
// error and is done (false).
func admitStarts(ctx context.Context, c client.Client, pipeline string, calls []*startCall) bool {
	ctx, cancel := context.WithTimeout(ctx, eventBatchTimeout)
	defer cancel()
	batch := workflows.AdmitEvents{Requests: make([]workflows.StartEventRequest, len(calls))}
	for i, call := range calls {
		batch.Requests[i] = call.req
	}
	err := c.SignalWorkflow(ctx, workflows.PipelineWorkflowID(pipeline), "", workflows.SignalAdmitEvents, batch)
	if err == nil {
		return true
	}
	for _, call := range calls {
		call.err = err
		close(call.done)
	}
	return false
}

// awaitNumbers asks the pipeline for the calls' outcomes until each is
// known or past its deadline; those past it are pending.
func awaitNumbers(ctx context.Context, c client.Client, pipeline string, calls []*startCall) {
	for len(calls) > 0 {
		deadline := calls[0].deadline
		ids := make([]string, len(calls))
		for i, call := range calls {
			ids[i] = call.req.Admission
			if call.deadline.Before(deadline) {
				deadline = call.deadline
			}
		}
		qctx, cancel := context.WithDeadline(ctx, deadline)
		var seen []workflows.AdmissionSeen
		v, err := c.QueryWorkflow(qctx, workflows.PipelineWorkflowID(pipeline), "", workflows.QueryAdmissions, ids)
		if err == nil {
			err = v.Get(&seen)
		}
		cancel()
		now := time.Now()
		left := calls[:0:0]
		for i, call := range calls {
			switch {
			case err == nil && i < len(seen) && seen[i].Error != "":
				call.err = startRefused(seen[i].Error)
			case err == nil && i < len(seen) && seen[i].Event > 0:
				call.res = workflows.StartEventResult{Event: workflows.EventRef{Pipeline: pipeline, Number: seen[i].Event}, Duplicate: seen[i].Duplicate}
			case !now.Before(call.deadline):
				call.pending = true
			default:
				left = append(left, call)
				continue
			}
			close(call.done)
		}
		calls = left
		if len(calls) > 0 {
			time.Sleep(20 * time.Millisecond) // the pipeline's worker is away: ask again
		}
	}
}
