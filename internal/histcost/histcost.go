// Package histcost counts what a workflow run's history says the Temporal
// server did for it: its events, its workflow tasks and its visibility
// writes. The bench reports them per build (docs/performance.md) and the
// end-to-end tests hold a 1-job event to a budget of them; unlike CPU,
// they do not move with the machine.
package histcost

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// Cost is one run's (or a sum of runs') count. Tasks are workflow tasks,
// each a persistence write when it starts and one when it completes, and a
// round trip through matching. Visibility are the visibility writes: the
// run's start, its close, and one for each workflow task that upserted
// search attributes or the memo and did not also close the run. The server
// collapses a transaction's visibility tasks into one (start < upsert <
// close < delete: the highest is kept, and writes the run's whole row), so
// a task that sets both costs one write, and the upserts of the task that
// closes the run cost none.
type Cost struct {
	Events, Tasks, Visibility int
}

// Plus is c + o.
func (c Cost) Plus(o Cost) Cost {
	return Cost{Events: c.Events + o.Events, Tasks: c.Tasks + o.Tasks, Visibility: c.Visibility + o.Visibility}
}

// Minus is c − o.
func (c Cost) Minus(o Cost) Cost {
	return Cost{Events: c.Events - o.Events, Tasks: c.Tasks - o.Tasks, Visibility: c.Visibility - o.Visibility}
}

// Of counts the cost of one run's history, given its events' types in
// order.
func Of(types []enumspb.EventType) Cost {
	c := Cost{Events: len(types)}
	upserts := 0 // of the workflow task whose commands are being read
	for _, t := range types {
		switch t {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.Visibility++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.Tasks++
			c.Visibility += min(upserts, 1)
			upserts = 0
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			upserts++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			c.Visibility++ // the close; the closing task's upserts are skipped
			upserts = 0
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			c.Visibility += 1 + min(upserts, 1) // closed from outside, after its last task's upserts ran
			upserts = 0
		}
	}
	c.Visibility += min(upserts, 1) // still running
	return c
}

// Run reads one run's history ("" runID: the latest run) and counts it.
func Run(ctx context.Context, c client.Client, workflowID, runID string) (Cost, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var types []enumspb.EventType
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return Cost{}, fmt.Errorf("history of %s/%s: %w", workflowID, runID, err)
		}
		types = append(types, ev.GetEventType())
	}
	return Of(types), nil
}
