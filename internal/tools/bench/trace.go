package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// traceLine is one history event of one workflow.
type traceLine struct {
	at       time.Time
	workflow string
	event    string
}

// writeTrace prints the history events of the given workflows (every run)
// from t0 on, merged in time order, as offsets from t0: where an event's
// time goes, hop by hop.
func writeTrace(ctx context.Context, w io.Writer, c client.Client, t0 time.Time, workflowIDs ...string) error {
	var lines []traceLine
	for _, id := range workflowIDs {
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("history of %s: %w", id, err)
			}
			at := ev.GetEventTime().AsTime()
			if at.Before(t0) {
				continue
			}
			name := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				name += " " + a.GetSignalName()
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				name += " " + a.GetActivityType().GetName()
			}
			if a := ev.GetMarkerRecordedEventAttributes(); a != nil {
				name += " " + markerDetail(a)
			}
			if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
				name += " " + a.GetAcceptedRequest().GetInput().GetName()
			}
			if a := ev.GetWorkflowTaskScheduledEventAttributes(); a != nil && a.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
				name += " (sticky: the worker that ran the last task, no replay)"
			}
			lines = append(lines, traceLine{at: at, workflow: id, event: name})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	var b strings.Builder
	prev := t0
	for _, l := range lines {
		fmt.Fprintf(&b, "  %8.1f ms (+%6.1f)  %-28s %s\n", ms(l.at.Sub(t0)), ms(l.at.Sub(prev)), l.workflow, l.event)
		prev = l.at
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTaskStats summarises one workflow's workflow tasks (every run): how
// many, how long they waited for a worker and ran, failures and timeouts,
// and how many events of each type its history holds.
func writeTaskStats(ctx context.Context, w io.Writer, c client.Client, workflowID string) error {
	execs, err := listWorkflows(ctx, c, fmt.Sprintf("WorkflowId = '%s'", workflowID))
	if err != nil {
		return err
	}
	types := map[string]int{}
	var waits, runs []time.Duration
	for _, ex := range execs {
		it := c.GetWorkflowHistory(ctx, workflowID, ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var scheduled, started time.Time
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("history of %s: %w", workflowID, err)
			}
			name := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				name += " " + a.GetSignalName()
			}
			if a := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); a != nil {
				name += " " + a.GetSignalName() + " to " + strings.SplitN(a.GetWorkflowExecution().GetWorkflowId(), "/", 2)[0]
			}
			types[name]++
			at := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
				scheduled = at
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				started = at
				waits = append(waits, at.Sub(scheduled))
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				runs = append(runs, at.Sub(started))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d runs, %d workflow tasks; wait for a worker p50 %.1f ms max %.1f ms; run p50 %.1f ms max %.1f ms\n",
		workflowID, len(execs), len(runs), ms(percentile(waits, 50)), ms(percentile(waits, 100)), ms(percentile(runs, 50)), ms(percentile(runs, 100)))
	keys := make([]string, 0, len(types))
	for k := range types {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return types[keys[i]] > types[keys[j]] })
	for _, k := range keys {
		fmt.Fprintf(&b, "  %6d %s\n", types[k], k)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// markerDetail names a marker: its kind, and a local activity's type (the
// SDK's marker data) or a version's change ID.
func markerDetail(a *historypb.MarkerRecordedEventAttributes) string {
	name := a.GetMarkerName()
	dc := converter.GetDefaultDataConverter()
	if p := a.GetDetails()["data"]; p != nil {
		var la struct{ ActivityType string }
		if err := dc.FromPayloads(p, &la); err == nil && la.ActivityType != "" {
			name += " " + la.ActivityType
		}
	}
	if p := a.GetDetails()["change-id"]; p != nil {
		var id string
		if err := dc.FromPayloads(p, &id); err == nil {
			name += " " + id
		}
	}
	return name
}
