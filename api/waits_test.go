package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// waitT0 is a fixed instant: estimates never depend on today's date.
var waitT0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func TestQueueWaitCode(t *testing.T) {
	t.Parallel()
	gpu := queue.Queue{Name: "gpu", Rules: []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 2, Labels: map[string]string{"pool": "gpu"}}}}
	spaced := gpu
	spaced.Rules = []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 2, MinGap: time.Minute, Labels: map[string]string{"pool": "gpu"}}}
	live := queue.Member{Name: "e1", Role: queue.RoleExecutor, Queues: []string{queue.AllQueues}, Labels: map[string]string{"pool": "gpu"}, State: queue.StateActive, LastSeen: waitT0, Runtime: queue.RuntimeHost}
	dead := live
	dead.LastSeen = waitT0.Add(-time.Hour)
	cpu := live
	cpu.Labels = map[string]string{"pool": "cpu"}
	busy := live
	busy.Running = map[string]int{"gpu": 2}
	plan := func(q queue.Queue, ms ...queue.Member) queue.Plan { return queue.Evaluate(q, ms, waitT0, time.Minute) }
	tests := []struct {
		name    string
		q       queue.Queue
		members []queue.Member
		fork    bool
		ahead   int
		want    workflows.WaitCode
	}{
		{"no member with the labels ever registered", gpu, []queue.Member{cpu}, false, 0, workflows.WaitNeverServed},
		{"one registered but is dead", gpu, []queue.Member{dead, cpu}, false, 0, workflows.WaitNoMember},
		{"a fork needs a container executor: a host one never served it", gpu, []queue.Member{live}, true, 0, workflows.WaitNeverServed},
		{"every slot busy", gpu, []queue.Member{busy}, false, 0, workflows.WaitSlotBusy},
		{"builds ahead take the free slots", gpu, []queue.Member{live}, false, 2, workflows.WaitSlotBusy},
		{"a slot is free but min-gap spaces the starts", spaced, []queue.Member{live}, false, 0, workflows.WaitMinGap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := plan(tc.q, tc.members...)
			if tc.fork {
				p = queue.EvaluateUntrusted(tc.q, tc.members, waitT0, time.Minute)
			}
			require.Equal(t, tc.want, queueWaitCode(tc.q, p, tc.members, tc.fork, tc.ahead))
		})
	}
}

// TestEstimateStart: every wait code gets an estimate where one can be
// made, and a note saying why where none can.
func TestEstimateStart(t *testing.T) {
	t.Parallel()
	tenMin := 10 * time.Minute
	tests := []struct {
		name string
		p    waitPicture
		want time.Time
		note string
	}{
		{"slot-busy: next in line on full slots waits one build", waitPicture{code: workflows.WaitSlotBusy, position: 1, busy: 2, slots: 2, typical: tenMin}, waitT0.Add(tenMin), ""},
		{"slot-busy: fifth in line on two slots waits three waves", waitPicture{code: workflows.WaitSlotBusy, position: 5, busy: 2, slots: 2, typical: tenMin}, waitT0.Add(3 * tenMin), ""},
		{"slot-busy: a free slot starts it now", waitPicture{code: workflows.WaitSlotBusy, position: 1, busy: 1, slots: 2, typical: tenMin}, waitT0, ""},
		{"slot-busy: no ended build, no estimate", waitPicture{code: workflows.WaitSlotBusy, position: 1, busy: 2, slots: 2}, time.Time{}, "no build on the queue has ended yet"},
		{"min-gap: after the gap", waitPicture{code: workflows.WaitMinGap, position: 1, slots: 2, minGap: time.Minute, typical: tenMin}, waitT0.Add(time.Minute), ""},
		{"blocked-by: one build of the blocker", waitPicture{code: workflows.WaitBlockedBy, position: 1, typical: tenMin}, waitT0.Add(tenMin), ""},
		{"lane-order: the builds ahead in its lane", waitPicture{code: workflows.WaitLaneOrder, position: 3, typical: tenMin}, waitT0.Add(3 * tenMin), ""},
		{"frozen: the window's end", waitPicture{code: workflows.WaitFrozen, waitUntil: waitT0.Add(4 * time.Hour)}, waitT0.Add(4 * time.Hour), ""},
		{"frozen: windows that never open", waitPicture{code: workflows.WaitFrozen}, time.Time{}, "the freeze windows never open"},
		{"delayed: the delay's end", waitPicture{code: workflows.WaitDelayed, waitUntil: waitT0.Add(time.Minute)}, waitT0.Add(time.Minute), ""},
		{"approval: a person decides", waitPicture{code: workflows.WaitApproval, typical: tenMin}, time.Time{}, "a pipeline admin must approve the event first"},
		{"no-member: nobody runs it", waitPicture{code: workflows.WaitNoMember, typical: tenMin}, time.Time{}, "no live member serves the queue"},
		{"never-served", waitPicture{code: workflows.WaitNeverServed, typical: tenMin}, time.Time{}, "no executor that serves the queue has ever registered"},
	}
	covered := map[workflows.WaitCode]bool{}
	for _, tc := range tests {
		covered[tc.p.code] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.p.now = waitT0
			got, note := estimateStart(tc.p)
			require.True(t, tc.want.Equal(got), "estimate %s, want %s", got, tc.want)
			require.Equal(t, tc.note, note)
		})
	}
	for _, c := range workflows.WaitCodes() {
		require.True(t, covered[c], "wait code %s has no estimate case", c)
	}
}
