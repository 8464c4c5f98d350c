package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/queue"
)

var (
	admin  = queue.Identity{User: "ann", Privileges: []string{queue.PrivilegeDefineQueues, PrivilegeManageExecutors}}
	nobody = queue.Identity{User: "bob"}
)

func executor(name string, queues ...string) Heartbeat {
	return Heartbeat{Member: queue.Member{Name: name, Role: queue.RoleExecutor, Host: name + ".local", Queues: queues}}
}

func controller(name string) Heartbeat {
	return Heartbeat{Member: queue.Member{Name: name, Role: queue.RoleController, Host: name + ".local"}}
}

func gpuQueue(maxParallel int) queue.Queue {
	return queue.Queue{Name: "gpu", Description: "GPU builds", Rules: []queue.Rule{
		{RunOn: queue.RunOnExecutors, MaxParallel: maxParallel, MinGap: 5 * time.Second, Labels: map[string]string{"pool": "gpu"}},
	}}
}

// runRegistry runs the registry until end, when the test drives its history
// past the continue-as-new limit; it returns the input of the next run.
func runRegistry(t *testing.T, env *testsuite.TestWorkflowEnvironment, in RegistryInput, end time.Duration) RegistryInput {
	t.Helper()
	at(env, end, func() {
		env.SetCurrentHistoryLength(continueAsNewAfter + 1)
		env.SignalWorkflow("nudge", nil)
	})
	env.ExecuteWorkflow(RegistryWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.Equal(t, "RegistryWorkflow", can.WorkflowType.Name)
	var next RegistryInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func memberView(t *testing.T, res *updateResult) MemberView {
	t.Helper()
	require.True(t, res.Done, "heartbeat did not finish")
	require.NoError(t, res.Rejected)
	require.NoError(t, res.Err)
	v, ok := res.Value.(MemberView)
	require.True(t, ok, "heartbeat returned %T", res.Value)
	return v
}

func TestRegistryDefaultQueue(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	at(env, time.Minute, func() {
		require.Equal(t, []queue.Queue{queue.DefaultQueue()}, query[[]queue.Queue](t, env, QueryQueues))
		require.Empty(t, query[[]queue.Member](t, env, QueryMembers))
		_, err := env.QueryWorkflow(QueryMember, "exec-a")
		require.ErrorContains(t, err, "no such executor: exec-a")
	})
	next := runRegistry(t, env, RegistryInput{}, 2*time.Minute)
	require.Equal(t, 15*time.Second, next.Liveness)
	require.Equal(t, map[string]queue.Queue{"default": queue.DefaultQueue()}, next.State.Queues)
}

func TestRegistryHeartbeatGrantsSlots(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	define := updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: gpuQueue(4)})
	hbA := updateAt(env, time.Minute, UpdateHeartbeat, executor("exec-a", "*"))
	gpuHB := executor("exec-gpu", "gpu")
	gpuHB.Member.Labels = map[string]string{"pool": "gpu"}
	gpuHB.Member.Running = map[string]int{"gpu": 1}
	hbGPU := updateAt(env, time.Minute+time.Second, UpdateHeartbeat, gpuHB)
	at(env, 2*time.Minute, func() {
		members := query[[]queue.Member](t, env, QueryMembers)
		require.Len(t, members, 2)
		require.Equal(t, "exec-a", members[0].Name)
		require.Equal(t, queue.StateActive, members[0].State)
		require.Equal(t, wfT0.Add(time.Minute), members[0].LastSeen)
		m := query[queue.Member](t, env, QueryMember, "exec-gpu")
		require.Equal(t, map[string]int{"gpu": 1}, m.Running)
		require.Equal(t, "exec-gpu.local", m.Host)
	})
	runRegistry(t, env, RegistryInput{Liveness: 30 * time.Second}, 3*time.Minute)

	require.NoError(t, define.Err)
	a := memberView(t, hbA)
	require.Equal(t, queue.StateActive, a.State)
	// exec-a serves every queue: the default's executor rule gives it 2
	// slots; the gpu rule wants a label it lacks.
	require.Equal(t, []string{"default", "gpu"}, sortedKeys(a.Slots))
	require.Equal(t, 2, a.Slots["default"].Allowed)
	require.Zero(t, a.Slots["gpu"].Allowed)
	require.Contains(t, a.Slots["default"].Why, "rule 1")

	g := memberView(t, hbGPU)
	require.Equal(t, []string{"gpu"}, sortedKeys(g.Slots))
	require.Equal(t, SlotGrant{Allowed: 4, MinGap: 5 * time.Second, Why: g.Slots["gpu"].Why}, g.Slots["gpu"])
	require.Contains(t, g.Slots["gpu"].Why, "exec-gpu")
}

func TestRegistryRuleFallback(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	// The controller and an executor are live: builds go to the executor.
	updateAt(env, time.Second, UpdateHeartbeat, executor("exec-a", "default"))
	withExec := updateAt(env, 2*time.Second, UpdateHeartbeat, controller("ctl-1"))
	// The executor stops heartbeating; the controller keeps going.
	alone := updateAt(env, time.Minute, UpdateHeartbeat, controller("ctl-1"))
	// It comes back.
	updateAt(env, 2*time.Minute, UpdateHeartbeat, executor("exec-a", "default"))
	back := updateAt(env, 2*time.Minute+time.Second, UpdateHeartbeat, controller("ctl-1"))
	runRegistry(t, env, RegistryInput{Liveness: 30 * time.Second}, 3*time.Minute)

	require.Zero(t, memberView(t, withExec).Slots["default"].Allowed)
	fallback := memberView(t, alone).Slots["default"]
	require.Equal(t, 1, fallback.Allowed)
	require.Contains(t, fallback.Why, "falling back to rule 2")
	require.Contains(t, fallback.Why, "exec-a")
	require.Zero(t, memberView(t, back).Slots["default"].Allowed)
}

// TestRegistryMemberGrantQuery: between two heartbeats of a member, the
// grant query already answers with the rule active now, so a controller
// whose poll was in flight when an executor came back hands its build back.
func TestRegistryMemberGrantQuery(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	var alone, back MemberGrant
	var unknownQueue MemberGrant
	var noMember error
	updateAt(env, time.Second, UpdateHeartbeat, controller("ctl-1"))
	at(env, 2*time.Second, func() {
		alone = query[MemberGrant](t, env, QueryMemberGrant, "ctl-1", "default")
		unknownQueue = query[MemberGrant](t, env, QueryMemberGrant, "ctl-1", "nope")
		_, noMember = env.QueryWorkflow(QueryMemberGrant, "ghost", "default")
	})
	// An executor becomes live; the controller has not heartbeated since.
	updateAt(env, 3*time.Second, UpdateHeartbeat, executor("exec-a", "default"))
	at(env, 4*time.Second, func() { back = query[MemberGrant](t, env, QueryMemberGrant, "ctl-1", "default") })
	runRegistry(t, env, RegistryInput{Liveness: 30 * time.Second}, time.Minute)

	require.Equal(t, "ctl-1", alone.Member.Name)
	require.Equal(t, 1, alone.Grant.Allowed, "the controller runs builds while no executor is live: %s", alone.Grant.Why)
	require.Zero(t, back.Grant.Allowed, "an executor is live again: the controller's grant is gone before its next heartbeat")
	require.Contains(t, back.Grant.Why, "exec-a")
	require.Zero(t, unknownQueue.Grant.Allowed)
	require.Equal(t, "queue nope does not exist", unknownQueue.Grant.Why)
	require.ErrorContains(t, noMember, "no such executor: ghost")
}

func TestRegistryHeartbeatValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		hb      Heartbeat
		wantErr string
	}{
		{name: "no name", hb: Heartbeat{Member: queue.Member{Role: queue.RoleExecutor}}, wantErr: "heartbeat names no member"},
		{name: "unknown role", hb: Heartbeat{Member: queue.Member{Name: "x", Role: "robot"}}, wantErr: `member x: unknown role "robot"`},
		{name: "name taken by another role", hb: controller("exec-a"), wantErr: "member name exec-a is taken by a executor"},
		{
			name: "unknown runtime", hb: Heartbeat{Member: queue.Member{Name: "x", Role: queue.RoleExecutor, Runtime: "vm"}},
			wantErr: `member x: unknown runtime "vm" (want host or container)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, _ := newEnv(t)
			updateAt(env, time.Second, UpdateHeartbeat, executor("exec-a", "*"))
			res := updateAt(env, time.Minute, UpdateHeartbeat, tc.hb)
			runRegistry(t, env, RegistryInput{}, 2*time.Minute)
			require.True(t, res.Done)
			require.False(t, res.Accepted)
			require.ErrorContains(t, res.Rejected, tc.wantErr)
		})
	}
}

func TestRegistryDefineQueue(t *testing.T) {
	t.Parallel()
	badRule := gpuQueue(0)
	tests := []struct {
		name    string
		req     DefineQueueRequest
		wantIs  error
		wantErr string
	}{
		{name: "anonymous", req: DefineQueueRequest{Mode: DefineCreate, Queue: gpuQueue(1)}, wantIs: queue.ErrForbidden, wantErr: "anonymous user may not define queues"},
		{name: "privilege missing", req: DefineQueueRequest{Identity: nobody, Mode: DefineCreate, Queue: gpuQueue(1)}, wantIs: queue.ErrForbidden, wantErr: `user "bob" may not define queues`},
		{name: "bad rule", req: DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: badRule}, wantIs: queue.ErrInvalidRule, wantErr: `queue "gpu": rule 1: `},
		{name: "bad name", req: DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: queue.Queue{Name: " gpu", Rules: gpuQueue(1).Rules}}, wantIs: queue.ErrInvalidName, wantErr: "starts with a space"},
		{name: "no rules", req: DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: queue.Queue{Name: "gpu"}}, wantIs: queue.ErrInvalidQueue, wantErr: "needs at least one rule"},
		{name: "create existing", req: DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: queue.DefaultQueue()}, wantIs: ErrQueueExists, wantErr: "queue already exists: default"},
		{name: "update missing", req: DefineQueueRequest{Identity: admin, Mode: DefineUpdate, Queue: gpuQueue(1)}, wantIs: ErrNoSuchQueue, wantErr: "no such queue: gpu"},
		{name: "unknown mode", req: DefineQueueRequest{Identity: admin, Mode: "upsert", Queue: gpuQueue(1)}, wantErr: `unknown define mode "upsert"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, _ := newEnv(t)
			res := updateAt(env, time.Minute, UpdateDefineQueue, tc.req)
			next := runRegistry(t, env, RegistryInput{}, 2*time.Minute)
			require.True(t, res.Done)
			require.False(t, res.Accepted)
			require.ErrorContains(t, res.Rejected, tc.wantErr)
			if tc.wantIs != nil {
				require.ErrorIs(t, res.Rejected, tc.wantIs)
			}
			require.Equal(t, map[string]queue.Queue{"default": queue.DefaultQueue()}, next.State.Queues)
		})
	}
}

func TestRegistryQueueLifecycle(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	created := updateAt(env, time.Minute, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: gpuQueue(1)})
	updated := updateAt(env, 2*time.Minute, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineUpdate, Queue: gpuQueue(8)})
	at(env, 3*time.Minute, func() {
		qs := query[[]queue.Queue](t, env, QueryQueues)
		require.Equal(t, []queue.Queue{queue.DefaultQueue(), gpuQueue(8)}, qs)
	})
	delForbidden := updateAt(env, 4*time.Minute, UpdateDeleteQueue, DeleteQueueRequest{Identity: nobody, Name: "gpu"})
	delDefault := updateAt(env, 4*time.Minute, UpdateDeleteQueue, DeleteQueueRequest{Identity: admin, Name: "default"})
	delMissing := updateAt(env, 4*time.Minute, UpdateDeleteQueue, DeleteQueueRequest{Identity: admin, Name: "cpu"})
	deleted := updateAt(env, 5*time.Minute, UpdateDeleteQueue, DeleteQueueRequest{Identity: admin, Name: "gpu"})
	next := runRegistry(t, env, RegistryInput{}, 6*time.Minute)

	require.NoError(t, created.Err)
	require.Equal(t, gpuQueue(1), created.Value)
	require.Equal(t, gpuQueue(8), updated.Value)
	require.ErrorIs(t, delForbidden.Rejected, queue.ErrForbidden)
	require.ErrorContains(t, delDefault.Rejected, "the default queue cannot be deleted")
	require.ErrorIs(t, delMissing.Rejected, ErrNoSuchQueue)
	require.NoError(t, deleted.Err)
	require.Equal(t, "gpu", deleted.Value)
	require.Equal(t, map[string]queue.Queue{"default": queue.DefaultQueue()}, next.State.Queues)
}

func TestRegistryMemberStates(t *testing.T) {
	t.Parallel()
	busy := executor("exec-a", "default")
	busy.Member.Running = map[string]int{"default": 1}
	idle := executor("exec-a", "default")

	env, _ := newEnv(t)
	updateAt(env, time.Second, UpdateHeartbeat, busy)
	updateAt(env, time.Second, UpdateHeartbeat, executor("exec-b", "default"))
	forbidden := updateAt(env, 10*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: nobody, Name: "exec-a", State: queue.StateInactive})
	unknown := updateAt(env, 10*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-z", State: queue.StateInactive})
	badState := updateAt(env, 10*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-a", State: "paused"})
	// Draining with a running build stays draining until the build ends.
	drain := updateAt(env, 20*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-a", State: queue.StateDraining})
	stillBusy := updateAt(env, 25*time.Second, UpdateHeartbeat, busy)
	drained := updateAt(env, 30*time.Second, UpdateHeartbeat, idle)
	// An idle member asked to drain stays draining until its next heartbeat
	// (the running counts the registry holds may predate a build that just
	// started); exec-b's last heartbeat reported nothing running.
	drainIdle := updateAt(env, 35*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-b", State: queue.StateDraining})
	reactivate := updateAt(env, 40*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-a", State: queue.StateActive})
	active := updateAt(env, 45*time.Second, UpdateHeartbeat, idle)
	next := runRegistry(t, env, RegistryInput{Liveness: time.Minute}, time.Minute)

	require.ErrorIs(t, forbidden.Rejected, queue.ErrForbidden)
	require.ErrorContains(t, forbidden.Rejected, PrivilegeManageExecutors)
	require.ErrorIs(t, unknown.Rejected, ErrNoSuchMember)
	require.ErrorContains(t, badState.Rejected, `unknown executor state "paused"`)

	require.Equal(t, queue.StateDraining, drain.Value.(queue.Member).State)
	v := memberView(t, stillBusy)
	require.Equal(t, queue.StateDraining, v.State)
	require.Zero(t, v.Slots["default"].Allowed)
	v = memberView(t, drained)
	require.Equal(t, queue.StateInactive, v.State)
	require.Zero(t, v.Slots["default"].Allowed)
	require.Equal(t, queue.StateDraining, drainIdle.Value.(queue.Member).State)
	require.Equal(t, queue.StateActive, reactivate.Value.(queue.Member).State)
	v = memberView(t, active)
	require.Equal(t, queue.StateActive, v.State)
	require.Equal(t, 2, v.Slots["default"].Allowed)
	require.Equal(t, queue.StateDraining, next.State.Members["exec-b"].State, "no heartbeat from exec-b since the drain")
}

func TestRegistryForgetsSilentMembers(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	updateAt(env, time.Second, UpdateHeartbeat, executor("old", "*"))
	updateAt(env, 25*time.Hour, UpdateHeartbeat, executor("new", "*"))
	next := runRegistry(t, env, RegistryInput{}, 26*time.Hour)
	require.Equal(t, []string{"new"}, sortedKeys(next.State.Members))
}

func TestRegistryContinueAsNewKeepsState(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: gpuQueue(2)})
	updateAt(env, 2*time.Second, UpdateHeartbeat, executor("exec-a", "gpu"))
	updateAt(env, 3*time.Second, UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-a", State: queue.StateInactive})
	next := runRegistry(t, env, RegistryInput{Liveness: 40 * time.Second}, time.Minute)

	require.Equal(t, 40*time.Second, next.Liveness)
	require.Equal(t, map[string]queue.Queue{"default": queue.DefaultQueue(), "gpu": gpuQueue(2)}, next.State.Queues)
	require.Equal(t, queue.StateInactive, next.State.Members["exec-a"].State)

	// The next run starts from that state.
	env2, _ := newEnv(t)
	hb := updateAt(env2, time.Second, UpdateHeartbeat, executor("exec-a", "gpu"))
	at(env2, 2*time.Second, func() {
		require.Equal(t, []queue.Queue{queue.DefaultQueue(), gpuQueue(2)}, query[[]queue.Queue](t, env2, QueryQueues))
	})
	runRegistry(t, env2, next, time.Minute)
	v := memberView(t, hb)
	require.Equal(t, queue.StateInactive, v.State)
	require.Zero(t, v.Slots["gpu"].Allowed)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// An executor that loses LossesToDrain builds within LossWindow is drained
// automatically, with the reason; older losses, and controllers, do not
// count; an operator's activate clears the reason and the count.
func TestRegistryDrainsAnExecutorThatLosesBuilds(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	beat := func(d time.Duration, name string, role queue.Role) {
		updateAt(env, d, UpdateHeartbeat, Heartbeat{Member: queue.Member{Name: name, Role: role, Queues: []string{"*"}}})
	}
	lost := func(d time.Duration, member, build string) {
		at(env, d, func() { env.SignalWorkflow(SignalBuildLost, BuildLost{Member: member, Build: build}) })
	}
	beat(time.Second, "flaky", queue.RoleExecutor)
	beat(time.Second, "ctl", queue.RoleController)
	lost(2*time.Second, "flaky", "app/a/1")  // too old by the third loss
	lost(11*time.Minute, "flaky", "app/a/2") // 1 in the window
	lost(12*time.Minute, "ctl", "app/a/3")   // a controller is never drained
	lost(13*time.Minute, "flaky", "app/a/4") // 2
	at(env, 14*time.Minute, func() {
		m := query[queue.Member](t, env, QueryMember, "flaky")
		require.Equal(t, queue.StateActive, m.State, "two losses in the window")
	})
	lost(15*time.Minute, "flaky", "app/a/5") // 3: drained
	var drained queue.Member
	at(env, 16*time.Minute, func() { drained = query[queue.Member](t, env, QueryMember, "flaky") })
	activate := updateAt(env, 17*time.Minute, UpdateSetMemberState, SetMemberStateRequest{
		Identity: queue.Identity{User: "ops", Privileges: []string{PrivilegeManageExecutors}}, Name: "flaky", State: queue.StateActive,
	})
	next := runRegistry(t, env, RegistryInput{Liveness: time.Hour}, 18*time.Minute)

	require.Equal(t, queue.StateDraining, drained.State)
	require.Contains(t, drained.StateReason, "drained automatically at ")
	require.Contains(t, drained.StateReason, "lost 3 builds in 10m0s (the last: app/a/5)")
	require.NoError(t, activate.Rejected)
	require.NoError(t, activate.Err)
	m := next.State.Members["flaky"]
	require.Equal(t, queue.StateActive, m.State)
	require.Empty(t, m.StateReason, "an operator's activate clears the reason")
	require.Empty(t, next.State.Losses["flaky"], "and the count")
	require.Equal(t, queue.StateActive, next.State.Members["ctl"].State)
}

// N9: the registry remembers a deleted queue for DeletedQueueMemory and
// lists it to controllers only, which refuse the builds still sent to it;
// defining the queue again forgets it.
func TestRegistryRemembersDeletedQueues(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	ops := queue.Identity{User: "ops", Privileges: []string{queue.PrivilegeDefineQueues}}
	q := func(name string) queue.Queue {
		return queue.Queue{Name: name, Rules: queue.DefaultQueue().Rules}
	}
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: ops, Mode: DefineCreate, Queue: q("gpu")})
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: ops, Mode: DefineCreate, Queue: q("arm")})
	updateAt(env, 2*time.Second, UpdateDeleteQueue, DeleteQueueRequest{Identity: ops, Name: "gpu"})
	updateAt(env, 2*time.Second, UpdateDeleteQueue, DeleteQueueRequest{Identity: ops, Name: "arm"})
	ctl := updateAt(env, 3*time.Second, UpdateHeartbeat, Heartbeat{Member: queue.Member{Name: "controller", Role: queue.RoleController}})
	exe := updateAt(env, 3*time.Second, UpdateHeartbeat, Heartbeat{Member: queue.Member{Name: "exec", Role: queue.RoleExecutor, Queues: []string{"*"}}})
	updateAt(env, 4*time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: ops, Mode: DefineCreate, Queue: q("arm")})
	again := updateAt(env, 5*time.Second, UpdateHeartbeat, Heartbeat{Member: queue.Member{Name: "controller", Role: queue.RoleController}})
	later := updateAt(env, 2*DeletedQueueMemory, UpdateHeartbeat, Heartbeat{Member: queue.Member{Name: "controller", Role: queue.RoleController}})
	runRegistry(t, env, RegistryInput{Liveness: 100 * DeletedQueueMemory}, 3*DeletedQueueMemory)

	require.Equal(t, []string{"arm", "gpu"}, memberView(t, ctl).DeletedQueues)
	require.Empty(t, memberView(t, exe).DeletedQueues, "executors do not poll deleted queues")
	require.Equal(t, []string{"gpu"}, memberView(t, again).DeletedQueues, "a queue defined again is forgotten")
	require.Empty(t, memberView(t, later).DeletedQueues, "remembered for DeletedQueueMemory only")
}
