package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/internal/histcost"
	"github.com/sluice-ci/sluice/workflows"
)

// waitEvents waits until every event ends and returns their results. It
// long-polls the event workflows (no visibility queries), a few at a time.
func waitEvents(ctx context.Context, c client.Client, ids []string) (map[string]workflows.EventState, error) {
	out := make(map[string]workflows.EventState, len(ids))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	progress := &burstProgress{}
	progress.mark()
	for _, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ref, err := workflows.ParseEventRef(id)
			var st workflows.EventState
			if err == nil {
				err = waitWorkflow(ctx, c, ref.WorkflowID(), &st, progress)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("event %s: %w", id, err)
				}
				return
			}
			out[id] = st
		})
	}
	wg.Wait()
	return out, firstErr
}

// buildState is a build's final record: from its event's result when the
// event ran it (PipelineConfig.BuildsInEvents), else from its own workflow.
func buildState(ctx context.Context, c client.Client, ref workflows.BuildRef, ev workflows.EventState) (workflows.BuildState, error) {
	for _, b := range ev.Builds {
		if b.Build == ref {
			return b, nil
		}
	}
	var bs workflows.BuildState
	if err := c.GetWorkflow(ctx, ref.WorkflowID(), "").Get(ctx, &bs); err != nil {
		return bs, fmt.Errorf("build %s: %w", ref, err)
	}
	return bs, nil
}

// burstProgress is when a burst's waiters last saw one of its workflows
// end: a workflow not started yet is waited for while others still do.
type burstProgress struct{ last atomic.Int64 }

func (p *burstProgress) mark() { p.last.Store(time.Now().UnixNano()) }

// stalled reports whether no workflow of the burst ended for a minute.
func (p *burstProgress) stalled() bool {
	return time.Since(time.Unix(0, p.last.Load())) > time.Minute
}

// waitWorkflow waits for a workflow's result. A workflow not started yet
// (an event admitted in a burst starts a moment after its number is handed
// out, up to a minute or more later behind a busy pipeline) is asked for
// again after 100 ms, then less and less often (up to every 2 s), for as
// long as other workflows of its burst keep ending (progress; a minute
// without one fails the figure, which a lost event would): a burst's
// waiters would otherwise ask the server hundreds of times a second, and
// that CPU would count as sluice's.
func waitWorkflow(ctx context.Context, c client.Client, id string, out any, progress *burstProgress) error {
	delay := 100 * time.Millisecond
	for {
		err := c.GetWorkflow(ctx, id, "").Get(ctx, out)
		var nf *serviceerror.NotFound
		if err == nil {
			progress.mark()
		}
		if !errors.As(err, &nf) || progress.stalled() {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = nextDelay(delay, 2*time.Second)
	}
}

// nextDelay doubles a retry delay up to limit.
func nextDelay(d, limit time.Duration) time.Duration { return min(2*d, limit) }

// listWorkflows lists every execution (all runs) matching a visibility query.
func listWorkflows(ctx context.Context, c client.Client, query string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		var resp *workflowservice.ListWorkflowExecutionsResponse
		var err error
		// A page on a loaded SQLite server can be slow: allow a minute and
		// try a page that timed out twice more.
		for try := 0; try < 3; try++ {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			resp, err = c.ListWorkflow(pctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: "default", Query: query, NextPageToken: token, PageSize: 1000,
			})
			cancel()
			var slow *serviceerror.DeadlineExceeded
			if err == nil || ctx.Err() != nil || (!errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &slow)) {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// listPage returns at most n executions matching query.
func listPage(ctx context.Context, c client.Client, query string, n int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := c.ListWorkflow(pctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query, PageSize: int32(n)}) //nolint:gosec // n is small
	if err != nil {
		return nil, fmt.Errorf("list workflows (%s): %w", query, err)
	}
	return resp.GetExecutions(), nil
}

// closedSpan is the first start and the last close of executions matching
// query, once want of them are closed (visibility lags the close a little).
func closedSpan(ctx context.Context, c client.Client, query string, want int) (first, last time.Time, err error) {
	closed := query + " AND ExecutionStatus != 'Running'"
	// Count first (one cheap call) and list only once every close is
	// visible: listing thousands of executions on a loaded SQLite server
	// takes seconds a page. A page that times out is tried again.
	budget := time.Minute + time.Duration(want)*20*time.Millisecond
	err = waitFor(ctx, fmt.Sprintf("%d closed executions in visibility (%s)", want, query), budget, func() (bool, error) {
		n, err := count(ctx, c, closed)
		if err != nil || n < want {
			return false, err
		}
		execs, err := listWorkflows(ctx, c, closed)
		var slow *serviceerror.DeadlineExceeded
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &slow) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(execs) < want {
			return false, nil
		}
		first, last = time.Time{}, time.Time{}
		for _, ex := range execs {
			st, ct := ex.GetStartTime().AsTime(), ex.GetCloseTime().AsTime()
			if first.IsZero() || st.Before(first) {
				first = st
			}
			if ct.After(last) {
				last = ct
			}
		}
		return true, nil
	})
	return first, last, err
}

// historyCost is a history's cost in events, workflow tasks and visibility
// writes (histcost.Cost).
type historyCost = histcost.Cost

// per divides each of h's counts by n, to one decimal.
func per(h historyCost, n int) (events, tasks, visibility float64) {
	if n == 0 {
		return 0, 0, 0
	}
	f := func(x int) float64 { return round1(float64(x) / float64(n)) }
	return f(h.Events), f(h.Tasks), f(h.Visibility)
}

// historyTotals sums the cost of every run of every execution the query
// matches, and returns the most events of a single run too.
func historyTotals(ctx context.Context, c client.Client, query string) (total historyCost, largest, runs int, err error) {
	execs, err := listWorkflows(ctx, c, query)
	if err != nil {
		return historyCost{}, 0, 0, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, ex := range execs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			h, herr := histcost.Run(ctx, c, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
			mu.Lock()
			defer mu.Unlock()
			if herr != nil {
				if err == nil {
					err = herr
				}
				return
			}
			total = total.Plus(h)
			largest = max(largest, h.Events)
			runs++
		})
	}
	wg.Wait()
	return total, largest, runs, err
}
