package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// waitEvents waits until every event ends and returns their results.
//
// An event the API numbered may not have started yet: its pipeline starts
// it a moment later, or a minute later behind a busy pipeline in a burst.
// waitEvents learns the events' runs from visibility (one list query a
// round for every event not seen yet, the first after 100 ms) and
// long-polls each run once it is known: one request an event, as the
// baselines make for their runs. Asking for each event until it exists
// cost the server a history read and a describe a try (2.4 tries an event
// in a quick burst), which the figures counted as sluice's CPU, and put
// those requests on the server while the latency figure's event was
// dispatched.
func waitEvents(ctx context.Context, c client.Client, ids []string) (map[string]workflows.EventState, error) {
	out := make(map[string]workflows.EventState, len(ids))
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	progress := &burstProgress{}
	progress.mark()
	wait := func(id, workflowID, runID string) {
		sem <- struct{}{}
		defer func() { <-sem }()
		var st workflows.EventState
		if err := c.GetWorkflow(ctx, workflowID, runID).Get(ctx, &st); err != nil {
			fail(fmt.Errorf("event %s: %w", id, err))
			return
		}
		progress.mark()
		mu.Lock()
		defer mu.Unlock()
		out[id] = st
	}
	byWorkflow := make(map[string]string, len(ids)) // workflow ID → event ID
	for _, id := range ids {
		ref, err := workflows.ParseEventRef(id)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", id, err)
		}
		byWorkflow[ref.WorkflowID()] = id
	}
	delay := firstLookFor
	for len(byWorkflow) > 0 && !failed() {
		select {
		case <-ctx.Done():
			fail(ctx.Err())
			continue
		case <-time.After(delay):
		}
		runs, err := startedRuns(ctx, c, slices.Collect(maps.Keys(byWorkflow)))
		if err != nil {
			fail(err)
			continue
		}
		for wid, runID := range runs {
			id := byWorkflow[wid]
			delete(byWorkflow, wid)
			wg.Go(func() { wait(id, wid, runID) })
		}
		switch {
		case len(runs) > 0:
			progress.mark()
			delay = firstLookFor
		case progress.stalled():
			fail(fmt.Errorf("%d events not started after a minute without progress (first: %s)",
				len(byWorkflow), slices.Min(slices.Collect(maps.Values(byWorkflow)))))
		default:
			delay = nextDelay(delay, time.Second)
		}
	}
	wg.Wait()
	return out, firstErr
}

// firstLookFor is how long waitEvents waits before it first asks
// visibility for the events' runs: longer than a quiet machine's 1-job
// event, so that the latency figure's event is dispatched with no request
// of the harness beside it.
const firstLookFor = 100 * time.Millisecond

// startedRuns returns the run of each of the workflows that visibility
// lists already (a workflow ID absent: not started, or not visible yet).
func startedRuns(ctx context.Context, c client.Client, workflowIDs []string) (map[string]string, error) {
	runs := make(map[string]string)
	for chunk := range slices.Chunk(workflowIDs, 100) {
		quoted := make([]string, len(chunk))
		for i, id := range chunk {
			quoted[i] = "'" + id + "'"
		}
		execs, err := listWorkflows(ctx, c, "WorkflowId IN ("+strings.Join(quoted, ", ")+")")
		if err != nil {
			return nil, err
		}
		for _, ex := range execs {
			e := ex.GetExecution()
			if _, seen := runs[e.GetWorkflowId()]; !seen {
				runs[e.GetWorkflowId()] = e.GetRunId()
			}
		}
	}
	return runs, nil
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

// burstProgress is when a burst's waiter last saw one of its workflows
// start or end: a workflow not started yet is waited for while others
// still do.
type burstProgress struct{ last atomic.Int64 }

func (p *burstProgress) mark() { p.last.Store(time.Now().UnixNano()) }

// stalled reports whether no workflow of the burst started or ended for a
// minute.
func (p *burstProgress) stalled() bool {
	return time.Since(time.Unix(0, p.last.Load())) > time.Minute
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
