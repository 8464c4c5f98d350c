package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// eventBatchTimeout bounds one update that starts events.
const eventBatchTimeout = 2 * time.Minute

// DefaultAdmitWait is how long an event start waits for the pipeline to
// number an admitted event before it answers without the number (202,
// "pending"): far under a webhook sender's timeout (GitHub: 10 s), and
// long enough for a pipeline that is not in a burst to answer with the
// number (tens of milliseconds). The CLI waits on for the number.
const DefaultAdmitWait = 100 * time.Millisecond

// eventBatcher admits event starts per pipeline (docs/performance.md,
// "Admission"). Starts that arrive while one to the same pipeline is in
// flight queue and go together. A batch is first sent as one
// UpdateStartEvents, answered once the pipeline numbered the events, but
// only until the earliest caller's admit wait (admitWait from its arrival)
// runs out: then the batch is admitted by SignalAdmitEvents, which Temporal
// acknowledges once it is in the pipeline's history — durably, whatever the
// pipeline workflow is doing — and the callers get pending with their
// admission IDs. Each start carries its admission ID in both, so the
// pipeline starts it once whichever it handles first (an update that timed
// out for the client may still be applied).
type eventBatcher struct {
	mu sync.Mutex
	// admitWait bounds the wait for the number (0: DefaultAdmitWait).
	admitWait time.Duration
	// queued holds each pipeline's starts queued behind the one in flight.
	queued callQueues[*startCall]
	// numbering counts the UpdateStartEvents in flight, across pipelines.
	numbering atomic.Int32
}

// maxNumbering is how many pipelines' UpdateStartEvents may be in flight
// at once before further batches are admitted by signal straight away: a
// burst that reaches many pipelines at once (a push to a monorepo watched
// by many of them) gets its pending answers without first waiting out the
// admit wait, and the pipelines number its events from the signals alone
// instead of from an update each as well.
const maxNumbering = 4

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

// validAdmissionID reports whether id has admissionID's form.
func validAdmissionID(id string) bool {
	h, ok := strings.CutPrefix(id, "adm-")
	if !ok || len(h) != 24 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
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
	if b.queued.join(pipeline, call) {
		// The first caller sends for everyone queued behind it, so the
		// sending outlives its own request.
		go b.drain(context.WithoutCancel(ctx), c, pipeline)
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

// drain sends the lane's queued starts, at most MaxStartEvents at a time,
// until none is left: a batch first by UpdateStartEvents until its wait
// runs out, then by SignalAdmitEvents. A batch that queued past its wait
// (behind a slow update, in a burst) is signalled at once, beside the
// batches after it, so that a burst of n starts is answered within about
// one wait and one signal, not n/MaxStartEvents of them.
func (b *eventBatcher) drain(ctx context.Context, c client.Client, pipeline string) {
	for {
		calls := b.queued.take(pipeline, workflows.MaxStartEvents, nil)
		if calls == nil {
			return
		}
		if !time.Now().Before(earliestDeadline(calls)) {
			go admitPending(ctx, c, pipeline, calls)
			continue
		}
		if b.numbering.Add(1) > maxNumbering {
			// Many pipelines are numbering at once: a burst.
			b.numbering.Add(-1)
			admitPending(ctx, c, pipeline, calls)
			continue
		}
		numbered := numberStarts(ctx, c, pipeline, calls)
		b.numbering.Add(-1)
		if numbered {
			continue // answered by the pipeline within the wait
		}
		admitPending(ctx, c, pipeline, calls)
	}
}

// admitPending admits calls by signal and answers them pending (or each
// with the signal's error).
func admitPending(ctx context.Context, c client.Client, pipeline string, calls []*startCall) {
	if !admitStarts(ctx, c, pipeline, calls) {
		return // every call has its answer (an error)
	}
	for _, call := range calls {
		call.pending = true
		close(call.done)
	}
}

// earliestDeadline is when the first of calls stops waiting for a number.
func earliestDeadline(calls []*startCall) time.Time {
	d := calls[0].deadline
	for _, call := range calls[1:] {
		if call.deadline.Before(d) {
			d = call.deadline
		}
	}
	return d
}

// numberStarts asks the pipeline to number calls by one UpdateStartEvents,
// until the earliest caller's deadline. It reports whether every call got
// its answer (numbers or refusals): false when the update did not complete
// in time or could not be sent, and the calls are to be admitted by signal
// (the same admission IDs: the pipeline starts each once, whichever of the
// update and the signal it handles first).
func numberStarts(ctx context.Context, c client.Client, pipeline string, calls []*startCall) bool {
	deadline := earliestDeadline(calls)
	req := workflows.StartEventsRequest{Requests: make([]workflows.StartEventRequest, len(calls))}
	for i, call := range calls {
		req.Requests[i] = call.req
	}
	if !time.Now().Before(deadline) {
		return false // queued past its wait behind a slow update: admit at once
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var res workflows.StartEventsResult
	h, err := c.UpdateWorkflow(dctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.PipelineWorkflowID(pipeline), UpdateName: workflows.UpdateStartEvents,
		Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(dctx, &res)
	}
	var rejected *temporal.ApplicationError
	switch {
	case err != nil && strings.Contains(err.Error(), "unknown update "+workflows.UpdateStartEvents):
		// A controller from before start-events (and admit-events): one
		// update each, as then; unbounded, as then.
		ctx, cancel := context.WithTimeout(ctx, eventBatchTimeout)
		defer cancel()
		for _, call := range calls {
			call.res, call.err = workers.StartEvent(ctx, c, pipeline, call.req)
			close(call.done)
		}
		return true
	case err == nil && len(res.Outcomes) == len(calls):
		for i, call := range calls {
			call.res = res.Outcomes[i].Result
			if msg := res.Outcomes[i].Error; msg != "" {
				call.err = startRefused(msg)
			}
			close(call.done)
		}
		return true
	case err != nil && errors.As(err, &rejected):
		// Refused as a whole (a deleted pipeline): the signal would be too.
		for _, call := range calls {
			call.err = err
			close(call.done)
		}
		return true
	}
	return false
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
