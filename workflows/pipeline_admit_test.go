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

	require.Equal(t, StartEventResult{Event: EventRef{Pipeline: "app", Number: 3}, Queue: "default"}, startResult(t, byUpdate))
	var ids []string
	for _, ev := range h.events {
		ids = append(ids, ev.WorkflowID)
	}
	// Each event started once (the test environment runs children started
	// in one workflow task in any order; their numbers are checked above).
	require.ElementsMatch(t, []string{"event/app/1", "event/app/2", "event/app/3", "event/app/4"}, ids)
}

// TestPipelineUpdateAndSignalOfOneAdmission: the API sends a start by
// update and, when the update is slow, the same start (same admission ID)
// by signal; whichever the pipeline handles first starts it, the other
// answers with the same event.
func TestPipelineUpdateAndSignalOfOneAdmission(t *testing.T) {
	t.Parallel()
	h := newPipelineHarness(t)
	push := func(admission string) StartEventRequest {
		return StartEventRequest{Trigger: Trigger{Kind: TriggerCommit, Branch: "main"}, Admission: admission}
	}
	// a-1: signal first, then the update; a-2: update first, then the signal.
	h.signal(time.Minute, SignalAdmitEvents, AdmitEvents{Requests: []StartEventRequest{push("a-1")}})
	first := updateAt(h.env, 2*time.Minute, UpdateStartEvents, StartEventsRequest{Requests: []StartEventRequest{push("a-1"), push("a-2")}})
	h.signal(3*time.Minute, SignalAdmitEvents, AdmitEvents{Requests: []StartEventRequest{push("a-2")}})
	at(h.env, 4*time.Minute, func() {
		got := query[[]AdmissionSeen](t, h.env, QueryAdmissions, []string{"a-1", "a-2"})
		require.Equal(t, []AdmissionSeen{{ID: "a-1", Event: 1}, {ID: "a-2", Event: 2}}, got)
	})
	h.deleteAt(10 * time.Minute)
	h.run(PipelineInput{Config: appConfig})

	ev := func(n int) EventRef { return EventRef{Pipeline: "app", Number: n} }
	require.Equal(t, StartEventsResult{Outcomes: []StartEventOutcome{
		{Result: StartEventResult{Event: ev(1), Queue: "default"}},
		{Result: StartEventResult{Event: ev(2), Queue: "default"}},
	}}, startEventsResult(t, first))
	require.Len(t, h.events, 2, "each admission started once")
}
