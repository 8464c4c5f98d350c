package histcost

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

func TestOfCountsTasksAndVisibilityWrites(t *testing.T) {
	const (
		started   = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
		scheduled = enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
		taskStart = enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED
		completed = enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
		upsert    = enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
		memo      = enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
		activity  = enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
		done      = enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
		closed    = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	)
	task := []enumspb.EventType{scheduled, taskStart, completed}
	// A build: its first task schedules the run, the claim's task upserts
	// twice (one write: the server collapses a transaction's visibility
	// tasks), the last task upserts twice and closes it.
	var build []enumspb.EventType
	build = append(build, started)
	build = append(append(build, task...), activity)
	build = append(append(build, task...), upsert, memo)
	build = append(append(build, done), task...)
	build = append(build, upsert, memo, closed)
	got := Of(build)
	want := Cost{Events: len(build), Tasks: 3, Visibility: 3} // start, the claim's upserts, close
	if got != want {
		t.Fatalf("closed run: cost %+v, want %+v", got, want)
	}
	// Still running after a task that upserted: its upserts were written.
	running := append(append([]enumspb.EventType{started}, task...), upsert, memo)
	if got, want := Of(running), (Cost{Events: 6, Tasks: 1, Visibility: 2}); got != want {
		t.Fatalf("running run: cost %+v, want %+v", got, want)
	}
	// Terminated from outside: its last task's upserts ran before.
	terminated := append(append([]enumspb.EventType{}, running...), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED)
	if got, want := Of(terminated), (Cost{Events: 7, Tasks: 1, Visibility: 3}); got != want {
		t.Fatalf("terminated run: cost %+v, want %+v", got, want)
	}
}
