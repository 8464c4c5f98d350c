package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPipelineAdmitsEvents: admissions by signal are numbered in the order
// they arrive, together with starts by update, answered by QueryAdmissions,
// deduplicated by admission ID and by webhook delivery, and refused with
// the update's reasons.
func TestPipelineAdmitsEvents(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	push := func(admission, delivery string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, Branch: "main", DeliveryID: delivery}, Admission: admission}
	}
	h.signal(time.Minute, SignalAdmitEvents, AdmitEvents{Requests: []StartEventRequest{
		push("a-1", ""), push("a-2", "d-1"),
		{Trigger: Trigger{Kind: "push"}, Admission: "a-bad"},
		{Trigger: Trigger{Kind: TriggerManual}, Parent: 9, Admission: "a-parent"},
	}})
	byUpdate := h.startEvent(2*time.Minute, push("", ""))
	// The same admission again (a retried signal), and a redelivery.
	h.signal(3*time.Minute, SignalAdmitEvents, AdmitEvents{Requests: []StartEventRequest{push("a-1", ""), push("a-3", "d-1"), push("a-4", "")}})
	at(h.env, 4*time.Minute, func() {
		got := query[[]AdmissionSeen](t, h.env, QueryAdmissions, []string{"a-1", "a-2", "a-bad", "a-parent", "a-3", "a-4", "a-unknown"})
		require.Equal(t, []AdmissionSeen{
			{ID: "a-1", Event: 1},
			{ID: "a-2", Event: 2},
			{ID: "a-bad", Error: `unknown trigger kind "push" (want commit, pr, pr-closed, release, tag, manual, periodic or remote)`},
			{ID: "a-parent", Error: "parent event 9 does not exist in pipeline app (last event is 2)"},
			{ID: "a-3", Event: 2, Duplicate: true},
			{ID: "a-4", Event: 4},
			{ID: "a-unknown"},
		}, got)
	})
	h.deleteAt(10 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: 3}}, startResult(t, byUpdate))
	var ids []string
	for _, ev := range h.events {
		ids = append(ids, ev.WorkflowID)
	}
	require.Equal(t, []string{"event/app/1", "event/app/2", "event/app/3", "event/app/4"}, ids)
}
