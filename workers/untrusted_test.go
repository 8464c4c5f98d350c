package workers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// withBothWorkers gives the agent running (fake) workers for both task
// queues of a queue, as if an earlier heartbeat had granted both.
func withBothWorkers(t *testing.T, ag *Agent, name string, trusted, untrusted int) (*fakeWorker, *fakeWorker) {
	t.Helper()
	tw := withWorker(t, ag, name, max(trusted, untrusted))
	uw := &fakeWorker{}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	qw := ag.queues[name]
	qw.trusted.gate.SetLimit(trusted, 0)
	qw.untrusted.gate.SetLimit(untrusted, 0)
	qw.untrusted.worker, qw.untrusted.grant = uw, workflows.SlotGrant{Allowed: untrusted}
	return tw, uw
}

// sides returns suppliers of a queue's two task queues sharing limit slots,
// with their own allowances.
func sides(limit, trusted, untrusted int) (t, u *poolSupplier, pool *queue.SlotPool) {
	pool = queue.NewSlotPool(nil)
	pool.SetLimit(limit, 0)
	tg, ug := queue.NewSlotPool(nil), queue.NewSlotPool(nil)
	tg.SetLimit(trusted, 0)
	ug.SetLimit(untrusted, 0)
	tr := newTurns()
	return &poolSupplier{pool: pool, gate: tg, turns: tr}, &poolSupplier{pool: pool, gate: ug, turns: tr, side: 1}, pool
}

// The two task queues of a queue never hold more than the member's slots
// together, and each stays within its own allowance.
func TestPoolSupplierSharedBudget(t *testing.T) {
	t.Parallel()
	tr, un, pool := sides(2, 2, 1)
	ctx := context.Background()
	a, err := tr.ReserveSlot(ctx, nil)
	require.NoError(t, err)
	b, err := un.ReserveSlot(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 2, pool.Used())
	require.Nil(t, tr.TryReserveSlot(nil), "the shared slots are all held")
	require.Nil(t, un.TryReserveSlot(nil), "the untrusted allowance is 1")

	moreTrusted := reserveAsync(ctx, tr)
	waitBlocked(t, pool, 1)
	moreUntrusted := reserveAsync(ctx, un)
	requireNotDone(t, moreUntrusted)
	require.Equal(t, 1, pool.Waiting(), "the second untrusted poll waits for its own allowance, not for a shared slot")

	// The untrusted build ends: its shared slot goes to one of the two
	// waiting polls (the untrusted one is within its allowance again); the
	// other waits until a slot is free again.
	un.MarkSlotUsed(markUsed{permit: b})
	un.ReleaseSlot(release{permit: b})
	var first, second <-chan reserved
	var firstSide *poolSupplier
	select {
	case r := <-moreTrusted:
		require.NoError(t, r.err)
		firstSide, first, second = tr, oneShot(r), moreUntrusted
	case r := <-moreUntrusted:
		require.NoError(t, r.err)
		firstSide, first, second = un, oneShot(r), moreTrusted
	case <-time.After(5 * time.Second):
		t.Fatal("no waiting poll got the freed slot")
	}
	require.Equal(t, 2, pool.Used())
	waitBlocked(t, pool, 1)
	requireNotDone(t, second)

	r := <-first
	firstSide.ReleaseSlot(release{permit: r.permit}) // a poll that brought nothing
	r = requireDone(t, second)
	require.NoError(t, r.err)
	require.Equal(t, 2, pool.Used())
	tr.ReleaseSlot(release{permit: a})
}

func oneShot(r reserved) <-chan reserved {
	ch := make(chan reserved, 1)
	ch <- r
	return ch
}

// A task queue whose poll came back empty lets the other one, waiting for
// the last free slot, poll next, instead of taking the slot again at once.
func TestPoolSupplierTakesTurnsForTheLastSlot(t *testing.T) {
	t.Parallel()
	tr, un, pool := sides(1, 1, 1)
	ctx := context.Background()
	for range 3 {
		p, err := tr.ReserveSlot(ctx, nil)
		require.NoError(t, err)
		waiting := reserveAsync(ctx, un)
		waitBlocked(t, pool, 1)
		tr.ReleaseSlot(release{permit: p}) // idle: the long poll brought nothing
		again := reserveAsync(ctx, tr)
		r := requireDone(t, waiting)
		require.NoError(t, r.err)
		requireNotDone(t, again)
		un.ReleaseSlot(release{permit: r.permit})
		r = requireDone(t, again)
		require.NoError(t, r.err)
		tr.MarkSlotUsed(markUsed{permit: r.permit})
		tr.ReleaseSlot(release{permit: r.permit})
		require.Zero(t, pool.Used())
	}
}

func TestAgentApplyUntrustedGrant(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	_, uw := withBothWorkers(t, ag, "gpu", 2, 2)
	require.NoError(t, ag.apply(workflows.MemberView{
		State:     queue.StateActive,
		Slots:     map[string]workflows.SlotGrant{"gpu": {Allowed: 0, Why: "rule 1 has host members only"}},
		Untrusted: map[string]workflows.SlotGrant{"gpu": {Allowed: 3, Why: "pull requests from forks: rule 2"}},
	}))
	ag.mu.Lock()
	qw := ag.queues["gpu"]
	require.Equal(t, 3, qw.pool.Limit(), "the member's slots for the queue are the larger allowance")
	require.Zero(t, qw.trusted.gate.Limit())
	require.Equal(t, 3, qw.untrusted.gate.Limit())
	ag.mu.Unlock()
	require.Zero(t, uw.stopped.Load())

	// The registry stops granting forks' builds: the untrusted worker stops.
	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 0}}}))
	require.Eventually(t, func() bool { return uw.stopped.Load() == 1 }, 5*time.Second, time.Millisecond)
	ag.mu.Lock()
	require.Zero(t, ag.queues["gpu"].untrusted.gate.Limit())
	require.Nil(t, ag.queues["gpu"].untrusted.worker)
	ag.mu.Unlock()
}

func TestAgentAcceptingUntrusted(t *testing.T) {
	t.Parallel()
	active := queue.Member{Name: "exec-a", State: queue.StateActive}
	tests := []struct {
		name      string
		untrusted int                  // the member's untrusted allowance
		registry  *workflows.SlotGrant // the registry's untrusted grant now; nil: not asked
		ok        bool
		why       string
	}{
		{name: "no untrusted allowance", why: "exec-a may not run pull requests from forks of queue gpu: "},
		{name: "allowed", untrusted: 1, registry: &workflows.SlotGrant{Allowed: 1}, ok: true},
		{
			name: "the registry withdrew it", untrusted: 1, registry: &workflows.SlotGrant{Why: "pull requests from forks: no live member for any rule"},
			why: "exec-a may not run pull requests from forks of queue gpu: pull requests from forks: no live member for any rule",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ag, tc := setupAgent(t)
			withBothWorkers(t, ag, "gpu", 2, tt.untrusted)
			if tt.registry != nil {
				onMemberQuery(tc).Return(grantAnswer(t, workflows.MemberGrant{
					Member: active, Grant: workflows.SlotGrant{Allowed: 2}, Untrusted: *tt.registry,
				}), nil).Once()
			}
			// A fork's pull request without untrusted slots here is
			// refused before its checkout starts (AcceptingLocally); one
			// the registry decides passes the local part.
			localOK, localWhy := ag.AcceptingLocally("gpu", true)
			if tt.registry == nil {
				require.Equal(t, tt.ok, localOK)
				require.Equal(t, tt.why, localWhy)
			} else {
				require.True(t, localOK)
			}
			ok, why := ag.Accepting("gpu", true)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.why, why)
		})
	}
}
