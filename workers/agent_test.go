package workers

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/worker"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// fakeWorker stands in for an SDK worker the agent already runs for a
// queue; it records Stop.
type fakeWorker struct {
	worker.Worker
	stopped atomic.Int32
}

func (w *fakeWorker) Stop() { w.stopped.Add(1) }

// setupAgent returns an agent named exec-a over a Temporal client mock.
func setupAgent(t *testing.T) (*Agent, *mocks.Client) {
	t.Helper()
	tc := mocks.NewClient(t)
	acts := &activities.Activities{}
	ag := NewAgent(AgentOptions{
		Client:     tc,
		Member:     queue.Member{Name: "exec-a", Role: queue.RoleExecutor, Queues: []string{"*"}},
		Activities: acts,
		Logger:     slog.New(slog.DiscardHandler),
	})
	require.Same(t, ag, acts.Executor, "the agent is the activities' executor")
	return ag, tc
}

// withWorker gives the agent a running (fake) worker for the queue, as if
// an earlier heartbeat had granted slots.
func withWorker(t *testing.T, ag *Agent, name string, slots int) *fakeWorker {
	t.Helper()
	w := &fakeWorker{}
	qw := newQueueWorker()
	qw.pool.SetLimit(slots, 0)
	qw.trusted.gate.SetLimit(slots, 0)
	qw.trusted.worker, qw.trusted.grant = w, workflows.SlotGrant{Allowed: slots}
	ag.mu.Lock()
	ag.queues[name] = qw
	ag.mu.Unlock()
	return w
}

// encodedValue is a query answer as the SDK returns it.
type encodedValue struct{ p *commonpb.Payloads }

func (e encodedValue) HasValue() bool { return e.p != nil }
func (e encodedValue) Get(ptr any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.p, ptr)
}

// memberAnswer is the registry's answer for a member with one slot on the
// queue.
func memberAnswer(t *testing.T, m queue.Member) encodedValue {
	t.Helper()
	return grantAnswer(t, workflows.MemberGrant{Member: m, Grant: workflows.SlotGrant{Allowed: 1}})
}

func grantAnswer(t *testing.T, g workflows.MemberGrant) encodedValue {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(g)
	require.NoError(t, err)
	return encodedValue{p: p}
}

func onMemberQuery(tc *mocks.Client) *mock.Call {
	return tc.On("QueryWorkflow", mock.Anything, workflows.RegistryID, "", workflows.QueryMemberGrant, "exec-a", "gpu")
}

// poolOf returns the agent's slot pool for a queue.
func poolOf(t *testing.T, ag *Agent, name string) *queue.SlotPool {
	t.Helper()
	ag.mu.Lock()
	defer ag.mu.Unlock()
	qw := ag.queues[name]
	require.NotNil(t, qw, "no worker state for queue %s", name)
	return qw.pool
}

func TestAgentAcceptingReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		view   *workflows.MemberView // applied before asking; nil applies nothing
		worker int                   // slots of a running worker for gpu; 0: none
		member *queue.Member         // the registry's answer; nil: no query expected
		grant  *workflows.SlotGrant  // the registry's grant with member (default: one slot)
		qerr   error                 // the registry query's error
		ok     bool
		why    string
	}{
		{name: "queue not served", ok: false, why: "exec-a does not serve queue gpu"},
		{
			name: "inactive", view: &workflows.MemberView{State: queue.StateInactive, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 2}}},
			ok: false, why: "exec-a is inactive",
		},
		{
			name: "draining", view: &workflows.MemberView{State: queue.StateDraining, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 2}}},
			ok: false, why: "exec-a is draining",
		},
		{
			name: "no slots in the active rule", view: &workflows.MemberView{
				State: queue.StateActive,
				Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 0, Why: "rule 1 (run-on=controller) is active: 1 live controller"}},
			},
			ok: false, why: "exec-a is not in queue gpu's active rule: rule 1 (run-on=controller) is active: 1 live controller",
		},
		{name: "slots and the registry agrees", worker: 2, member: &queue.Member{Name: "exec-a", State: queue.StateActive}, ok: true},
		{name: "registry has no state yet", worker: 2, member: &queue.Member{Name: "exec-a"}, ok: true},
		{
			name: "registry says deactivated", worker: 2, member: &queue.Member{Name: "exec-a", State: queue.StateInactive},
			ok: false, why: "exec-a is inactive",
		},
		{
			name: "registry says draining", worker: 2, member: &queue.Member{Name: "exec-a", State: queue.StateDraining},
			ok: false, why: "exec-a is draining",
		},
		{
			name: "the active rule changed since the last heartbeat", worker: 2, member: &queue.Member{Name: "exec-a", State: queue.StateActive},
			grant: &workflows.SlotGrant{Why: "rule 1 (run-on=controller) is active: 1 live controller"},
			ok:    false, why: "exec-a is not in queue gpu's active rule: rule 1 (run-on=controller) is active: 1 live controller",
		},
		{name: "registry unreachable trusts the last heartbeat", worker: 2, qerr: errors.New("connection refused"), ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ag, tc := setupAgent(t)
			if tt.worker > 0 {
				withWorker(t, ag, "gpu", tt.worker)
			}
			if tt.view != nil {
				require.NoError(t, ag.apply(*tt.view))
			}
			switch {
			case tt.grant != nil:
				onMemberQuery(tc).Return(grantAnswer(t, workflows.MemberGrant{Member: *tt.member, Grant: *tt.grant}), nil).Once()
			case tt.member != nil:
				onMemberQuery(tc).Return(memberAnswer(t, *tt.member), nil).Once()
			case tt.qerr != nil:
				onMemberQuery(tc).Return(nil, tt.qerr).Once()
			}
			// The local part asks no registry (the mock answers one query).
			localOK, localWhy := ag.AcceptingLocally("gpu", false)
			if tt.grant != nil || tt.member != nil || tt.qerr != nil {
				require.True(t, localOK, "the last heartbeat's answer lets the registry decide")
			} else {
				require.Equal(t, tt.ok, localOK)
				require.Equal(t, tt.why, localWhy)
			}
			ok, why := ag.Accepting("gpu", false)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.why, why)
		})
	}
}

func TestAgentRegistryStateSticksUntilTheNextHeartbeat(t *testing.T) {
	t.Parallel()
	ag, tc := setupAgent(t)
	withWorker(t, ag, "gpu", 1)
	onMemberQuery(tc).Return(memberAnswer(t, queue.Member{Name: "exec-a", State: queue.StateDraining}), nil).Once()
	ok, why := ag.Accepting("gpu", false)
	require.False(t, ok)
	require.Equal(t, "exec-a is draining", why)
	// The agent remembers: no second query (the mock allows only one).
	ok, why = ag.Accepting("gpu", false)
	require.False(t, ok)
	require.Equal(t, "exec-a is draining", why)
}

func TestAgentApplySizesPools(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	w := withWorker(t, ag, "gpu", 1)

	grant := workflows.SlotGrant{Allowed: 3, MinGap: 5 * time.Second, Why: "rule 1 is active"}
	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"gpu": grant}}))
	pool := poolOf(t, ag, "gpu")
	require.Equal(t, 3, pool.Limit())
	require.Equal(t, 5*time.Second, pool.MinGap())
	ag.mu.Lock()
	require.Equal(t, grant, ag.queues["gpu"].trusted.grant)
	require.Same(t, w, ag.queues["gpu"].trusted.worker, "a running worker is kept, not replaced")
	ag.mu.Unlock()
	require.Zero(t, w.stopped.Load())

	// Deactivated: every pool closes, whatever the grant says.
	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateInactive, Slots: map[string]workflows.SlotGrant{"gpu": grant}}))
	require.Zero(t, pool.Limit())
	require.Eventually(t, func() bool { return w.stopped.Load() == 1 }, 5*time.Second, time.Millisecond,
		"an idle worker without slots stops polling")
	ag.mu.Lock()
	require.Nil(t, ag.queues["gpu"].trusted.worker)
	require.Equal(t, queue.StateInactive, ag.state)
	ag.mu.Unlock()
}

func TestAgentApplyNewQueueWithoutSlotsStartsNoWorker(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	// A worker would need a real Temporal client; the mock would panic.
	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{
		"gpu":     {Allowed: 0, Why: "not in the active rule"},
		"default": {Allowed: 0, MinGap: time.Minute},
	}}))
	for _, name := range []string{"gpu", "default"} {
		ag.mu.Lock()
		qw := ag.queues[name]
		ag.mu.Unlock()
		require.NotNil(t, qw)
		require.Nil(t, qw.trusted.worker)
		require.Nil(t, qw.untrusted.worker)
		require.Zero(t, qw.pool.Limit())
	}
	require.Equal(t, time.Minute, poolOf(t, ag, "default").MinGap())
}

func TestAgentApplyQueueGoneFromTheView(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	gpu := withWorker(t, ag, "gpu", 2)
	cpu := withWorker(t, ag, "cpu", 1)
	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"cpu": {Allowed: 1}}}))
	require.Zero(t, poolOf(t, ag, "gpu").Limit(), "a queue no longer served (or deleted) gets no slots")
	require.Equal(t, 1, poolOf(t, ag, "cpu").Limit())
	require.Eventually(t, func() bool { return gpu.stopped.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Zero(t, cpu.stopped.Load())
}

func TestAgentKeepsWorkerWhileBuildsRun(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	w := withWorker(t, ag, "gpu", 2)
	end := ag.Begin("gpu")
	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateDraining, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 2}}}))
	require.Zero(t, poolOf(t, ag, "gpu").Limit())
	// The build still heartbeats through this worker: apply keeps it (the
	// decision is made under the lock; a stop would have dropped it).
	kept := func() bool {
		ag.mu.Lock()
		defer ag.mu.Unlock()
		return ag.queues["gpu"].trusted.worker != nil
	}
	require.True(t, kept(), "a worker with a running build is kept")
	require.Zero(t, w.stopped.Load())
	end()
	require.False(t, kept(), "the last build's end drops the idle worker")
	require.Eventually(t, func() bool { return w.stopped.Load() == 1 }, 5*time.Second, time.Millisecond,
		"and stops it")
	end()
	ag.mu.Lock()
	running := ag.running["gpu"]
	ag.mu.Unlock()
	require.Zero(t, running, "ending twice counts once")
	require.EqualValues(t, 1, w.stopped.Load(), "no worker is left to stop twice")
}

func TestAgentBeginAndRunning(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	require.Empty(t, ag.Running())
	endA := ag.Begin("gpu")
	endB := ag.Begin("gpu")
	endC := ag.Begin("default")
	require.Equal(t, map[string]int{"gpu": 2, "default": 1}, ag.Running())

	snapshot := ag.Running()
	snapshot["gpu"] = 99
	require.Equal(t, 2, ag.Running()["gpu"], "Running returns a copy")

	endA()
	endA()
	require.Equal(t, map[string]int{"gpu": 1, "default": 1}, ag.Running(), "an end func counts once")
	endB()
	endC()
	require.Equal(t, map[string]int{"gpu": 0, "default": 0}, ag.Running())
	require.Equal(t, "exec-a", ag.Name())
}

func TestAgentBeginConcurrent(t *testing.T) {
	t.Parallel()
	ag, _ := setupAgent(t)
	withWorker(t, ag, "gpu", 4)
	done := make(chan struct{})
	for range 50 {
		go func() {
			defer func() { done <- struct{}{} }()
			end := ag.Begin("gpu")
			end()
		}()
	}
	for range 50 {
		<-done
	}
	require.Equal(t, map[string]int{"gpu": 0}, ag.Running())
}

// TestAgentAcceptingSharesAQuery: builds of a queue that ask whether they
// may start while a registry query for that queue is under way share its
// answer: one query for all of them, a refusal for all of them alike.
func TestAgentAcceptingSharesAQuery(t *testing.T) {
	t.Parallel()
	for _, state := range []queue.MemberState{queue.StateActive, queue.StateDraining} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			ag, tc := setupAgent(t)
			withWorker(t, ag, "gpu", 4)
			asked, release := make(chan struct{}), make(chan struct{})
			onMemberQuery(tc).Run(func(mock.Arguments) {
				close(asked)
				<-release
			}).Return(grantAnswer(t, workflows.MemberGrant{
				Member: queue.Member{Name: "exec-a", State: state}, Grant: workflows.SlotGrant{Allowed: 4},
			}), nil).Once()
			type answer struct {
				ok  bool
				why string
			}
			answers := make(chan answer, 4)
			ask := func() {
				ok, why := ag.Accepting("gpu", false)
				answers <- answer{ok, why}
			}
			go ask()
			<-asked
			for range 3 {
				go ask()
			}
			require.Eventually(t, func() bool { return ag.grantAsks.Waiting("gpu") == 4 },
				10*time.Second, time.Millisecond, "the three later builds wait for the query under way")
			close(release)
			for range 4 {
				a := <-answers
				if state == queue.StateActive {
					require.Equal(t, answer{ok: true}, a)
				} else {
					require.Equal(t, answer{why: "exec-a is draining"}, a)
				}
			}
			// The next build, after it, acts on the yes while it stands
			// and asks again once it lapsed; a draining member took that
			// to itself and refuses without asking.
			ok, why := ag.Accepting("gpu", false)
			require.Equal(t, state == queue.StateActive, ok, why)
			if state == queue.StateActive {
				onMemberQuery(tc).Return(grantAnswer(t, workflows.MemberGrant{
					Member: queue.Member{Name: "exec-a", State: queue.StateActive}, Grant: workflows.SlotGrant{Allowed: 4},
				}), nil).Once()
				later := time.Now().Add(queue.GrantStands)
				ag.grantAsks.Now = func() time.Time { return later }
			}
			ok, why = ag.Accepting("gpu", false)
			if state == queue.StateActive {
				require.True(t, ok, why)
			} else {
				require.False(t, ok)
				require.Equal(t, "exec-a is draining", why)
			}
		})
	}
}

// TestAgentActsOnAYesWhileItStands: the registry's yes stands for the
// queue's builds for queue.GrantStands after its query was sent; a no,
// or a yes for the other kind of build, is asked again.
func TestAgentActsOnAYesWhileItStands(t *testing.T) {
	t.Parallel()
	ag, tc := setupAgent(t)
	withWorker(t, ag, "gpu", 2)
	ag.mu.Lock()
	qw := ag.queues["gpu"]
	qw.untrusted.gate.SetLimit(1, 0)
	qw.untrusted.worker = &fakeWorker{}
	ag.mu.Unlock()
	var clockMu sync.Mutex
	asked := time.Unix(1_000_000, 0)
	clock := asked
	ag.grantAsks.Now = func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return clock
	}
	at := func(d time.Duration) {
		clockMu.Lock()
		clock = asked.Add(d)
		clockMu.Unlock()
	}
	active := queue.Member{Name: "exec-a", State: queue.StateActive}
	trustedOnly := workflows.MemberGrant{
		Member: active, Grant: workflows.SlotGrant{Allowed: 2},
		Untrusted: workflows.SlotGrant{Why: "no untrusted slots here"},
	}

	onMemberQuery(tc).Return(grantAnswer(t, trustedOnly), nil).Once()
	ok, why := ag.Accepting("gpu", false)
	require.True(t, ok, why)
	at(queue.GrantStands - time.Millisecond)
	ok, why = ag.Accepting("gpu", false)
	require.True(t, ok, "a yes asked less than %s ago stands (the mock answers one query): %s", queue.GrantStands, why)

	// A fork's build: the yes was not for it, so the registry is asked.
	onMemberQuery(tc).Return(grantAnswer(t, trustedOnly), nil).Once()
	ok, why = ag.Accepting("gpu", true)
	require.False(t, ok)
	require.Equal(t, "exec-a may not run pull requests from forks of queue gpu: no untrusted slots here", why)

	// That answer was asked later; once its time is up, the next build
	// asks, and a no it gets is not reused.
	at(2 * queue.GrantStands)
	notInRule := workflows.MemberGrant{Member: active, Grant: workflows.SlotGrant{Why: "rule 1 (run-on=controller) is active"}}
	onMemberQuery(tc).Return(grantAnswer(t, notInRule), nil).Once()
	ok, why = ag.Accepting("gpu", false)
	require.False(t, ok)
	require.Equal(t, "exec-a is not in queue gpu's active rule: rule 1 (run-on=controller) is active", why)
	onMemberQuery(tc).Return(grantAnswer(t, trustedOnly), nil).Once()
	ok, why = ag.Accepting("gpu", false)
	require.True(t, ok, "a no is asked again: %s", why)

	// A registry that says the member was deactivated: no build starts,
	// whatever yes came before, and the member refuses locally from then.
	at(4 * queue.GrantStands)
	onMemberQuery(tc).Return(grantAnswer(t, workflows.MemberGrant{Member: queue.Member{Name: "exec-a", State: queue.StateInactive}}), nil).Once()
	ok, why = ag.Accepting("gpu", false)
	require.False(t, ok)
	require.Equal(t, "exec-a is inactive", why)
	ok, why = ag.Accepting("gpu", false)
	require.False(t, ok)
	require.Equal(t, "exec-a is inactive", why)
}
