package api

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// eventBatchTimeout bounds one update that starts events.
const eventBatchTimeout = 2 * time.Minute

// eventBatcher coalesces event starts per pipeline. A start for a pipeline
// with nothing in flight goes out at once, as a plain UpdateStartEvent, and
// waits for nothing. Starts that arrive while an update to the same pipeline
// is in flight queue up and then go together in one UpdateStartEvents, which
// is answered once the events are numbered. Without it, a burst of webhooks
// sends one update each: Temporal refuses all but 10 in flight per workflow,
// the refused clients back off for up to 6 s at a time, and starts fail
// after a minute (docs/performance.md, collapse_storm).
type eventBatcher struct {
	mu    sync.Mutex
	lanes map[string]*startLane
}

// startLane holds one pipeline's starts queued behind the update in flight.
type startLane struct {
	waiting []*startCall
}

// startCall is one caller's event start.
type startCall struct {
	req  workflows.StartEventRequest
	res  workflows.StartEventResult
	err  error
	done chan struct{}
}

// startRefused is one request's refusal inside an UpdateStartEvents answer.
// It has an update rejection's Message(), so updateError maps both alike.
type startRefused string

func (m startRefused) Error() string   { return string(m) }
func (m startRefused) Message() string { return string(m) }

// start starts one event of pipeline through its lane.
func (b *eventBatcher) start(ctx context.Context, c client.Client, pipeline string, req workflows.StartEventRequest) (workflows.StartEventResult, error) {
	call := &startCall{req: req, done: make(chan struct{})}
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
		return call.res, call.err
	case <-ctx.Done():
		return workflows.StartEventResult{}, ctx.Err()
	}
}

// drain sends the lane's queued starts, at most MaxStartEvents per update,
// until none is left.
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
		sendStarts(ctx, c, pipeline, calls)
		for _, call := range calls {
			close(call.done)
		}
	}
}

// sendStarts sends one update for calls: UpdateStartEvent for a single call,
// UpdateStartEvents for several — or, to a controller that predates it, one
// UpdateStartEvent after another.
func sendStarts(ctx context.Context, c client.Client, pipeline string, calls []*startCall) {
	ctx, cancel := context.WithTimeout(ctx, eventBatchTimeout)
	defer cancel()
	if len(calls) > 1 {
		req := workflows.StartEventsRequest{Requests: make([]workflows.StartEventRequest, len(calls))}
		for i, call := range calls {
			req.Requests[i] = call.req
		}
		var res workflows.StartEventsResult
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: workflows.PipelineWorkflowID(pipeline), UpdateName: workflows.UpdateStartEvents,
			Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, &res)
		}
		if err == nil && len(res.Outcomes) != len(calls) {
			err = fmt.Errorf("pipeline %s answered %d outcomes for %d event starts", pipeline, len(res.Outcomes), len(calls))
		}
		switch {
		case err == nil:
			for i, call := range calls {
				call.res = res.Outcomes[i].Result
				if msg := res.Outcomes[i].Error; msg != "" {
					call.err = startRefused(msg)
				}
			}
			return
		case !strings.Contains(err.Error(), "unknown update "+workflows.UpdateStartEvents):
			for _, call := range calls {
				call.err = err
			}
			return
		}
	}
	for _, call := range calls {
		call.res, call.err = workers.StartEvent(ctx, c, pipeline, call.req)
	}
}
