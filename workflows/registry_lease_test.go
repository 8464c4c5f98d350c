package workflows

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

// preferA: builds go to executors labelled pool=a while one is live, else to
// any executor.
func preferA() queue.Queue {
	return queue.Queue{Name: "build", Rules: []queue.Rule{
		{RunOn: queue.RunOnExecutors, MaxParallel: 1, Labels: map[string]string{"pool": "a"}},
		{RunOn: queue.RunOnExecutors, MaxParallel: 1},
	}}
}

func labelled(name string, labels map[string]string, queues ...string) Heartbeat {
	hb := executor(name, queues...)
	hb.Member.Labels = labels
	return hb
}

// A member that stops heartbeating while it runs a build loses its lease as
// soon as the build is lost (the build's heartbeat timeout, 20 s by default:
// the failover bound), not when its lease would run out (a minute): the
// queue's fallback rule gives the other members its builds at once. The
// lost member's own answer asks it to renew, and a renewal makes it live
// again.
func TestRegistryLostBuildEndsTheLeaseAtOnce(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: preferA()})
	updateAt(env, 2*time.Second, UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "a"}, "build"))
	updateAt(env, 2*time.Second, UpdateHeartbeat, executor("exec-b", "build"))
	var before, after, aDown, aBack, bBack MemberView
	at(env, 10*time.Second, func() { before = query[MemberView](t, env, QueryMemberView, "exec-b") })
	// exec-a dies at 3 s with a build; the build's heartbeat timeout (20 s)
	// reports the loss at 23 s. Its lease would last until 62 s.
	at(env, 23*time.Second, func() { env.SignalWorkflow(SignalBuildLost, BuildLost{Member: "exec-a", Build: "app/ci/1"}) })
	at(env, 24*time.Second, func() {
		after = query[MemberView](t, env, QueryMemberView, "exec-b")
		aDown = query[MemberView](t, env, QueryMemberView, "exec-a")
	})
	// exec-a was alive after all (the build hit its timeout): it renews.
	updateAt(env, 25*time.Second, UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "a"}, "build"))
	at(env, 26*time.Second, func() {
		aBack = query[MemberView](t, env, QueryMemberView, "exec-a")
		bBack = query[MemberView](t, env, QueryMemberView, "exec-b")
	})
	runRegistry(t, env, RegistryInput{Liveness: time.Minute}, time.Minute)

	require.Zero(t, before.Slots["build"].Allowed, "exec-a is live: rule 1")
	require.Equal(t, 1, after.Slots["build"].Allowed, "exec-a lost a build: the fallback rule at once: %s", after.Slots["build"].Why)
	require.Contains(t, after.Slots["build"].Why, "exec-a is down (lost build app/ci/1")
	require.True(t, aDown.Renew, "the lost member is asked to renew")
	require.Zero(t, aDown.Slots["build"].Allowed)
	require.False(t, aBack.Renew)
	require.Equal(t, 1, aBack.Slots["build"].Allowed, "renewed: live again")
	require.Zero(t, bBack.Slots["build"].Allowed)
	require.False(t, before.Renew)
	require.Equal(t, time.Minute, before.Lease, "members learn the lease from every answer")
}

// An idle member that stops heartbeating loses its lease when the lease
// runs out: the registry arms a timer for the earliest lease end, so that a
// query after it sees the member dead even when no other member renewed in
// between (a query sees the workflow's time as of its last task). The timer
// is armed once per lease end, not once per renewal.
func TestRegistryLeaseClock(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	var mu sync.Mutex
	var timers []time.Duration
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		timers = append(timers, d)
	})
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: preferA()})
	updateAt(env, 2*time.Second, UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "a"}, "build"))
	for _, d := range []time.Duration{2, 30, 60, 90} {
		updateAt(env, d*time.Second, UpdateHeartbeat, executor("exec-b", "build"))
	}
	var live, dead MemberView
	at(env, 61*time.Second, func() { live = query[MemberView](t, env, QueryMemberView, "exec-b") })
	at(env, 62*time.Second+10*time.Millisecond, func() { dead = query[MemberView](t, env, QueryMemberView, "exec-b") })
	runRegistry(t, env, RegistryInput{Liveness: time.Minute}, 100*time.Second)

	require.Zero(t, live.Slots["build"].Allowed, "exec-a's lease runs until 62 s")
	require.Equal(t, 1, dead.Slots["build"].Allowed, "exec-a's lease ran out: %s", dead.Slots["build"].Why)
	require.Contains(t, dead.Slots["build"].Why, "exec-a last seen 1m0s ago")
	mu.Lock()
	defer mu.Unlock()
	// exec-a's lease ends at 62 s (the timer armed at 2 s); when it fires,
	// the earliest lease is exec-b's, renewed at 60 s: it ends at 120 s.
	// One timer per lease end, none per renewal (exec-b renewed four times).
	require.Equal(t, []time.Duration{time.Minute + time.Millisecond, 58 * time.Second}, timers)
}

// A member that leaves is down at once: the fallback rule takes over, and
// its next heartbeat makes it live again.
func TestRegistryLeave(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: preferA()})
	updateAt(env, 2*time.Second, UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "a"}, "build"))
	updateAt(env, 2*time.Second, UpdateHeartbeat, executor("exec-b", "build"))
	left := updateAt(env, 5*time.Second, UpdateLeave, LeaveRequest{Member: "exec-a"})
	ghost := updateAt(env, 5*time.Second, UpdateLeave, LeaveRequest{Member: "ghost"})
	var after MemberView
	var m queue.Member
	at(env, 6*time.Second, func() {
		after = query[MemberView](t, env, QueryMemberView, "exec-b")
		m = query[queue.Member](t, env, QueryMember, "exec-a")
	})
	back := updateAt(env, 7*time.Second, UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "a"}, "build"))
	runRegistry(t, env, RegistryInput{Liveness: time.Minute}, time.Minute)

	require.NoError(t, left.Rejected)
	require.NoError(t, left.Err)
	require.ErrorContains(t, ghost.Rejected, "no such executor: ghost")
	require.Equal(t, 1, after.Slots["build"].Allowed, "exec-a left: %s", after.Slots["build"].Why)
	require.False(t, m.Live(wfT0.Add(6*time.Second), time.Minute))
	require.Contains(t, m.DownWhy, "left at ")
	require.Equal(t, 1, memberView(t, back).Slots["build"].Allowed)
}

// 500 members joining in the same workflow task (a cluster starting, or the
// registry back after an outage) are all answered: nothing the registry
// waits on costs O(members) per update.
func TestRegistryManyMembersJoinAtOnce(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	joins := make([]*updateResult, 500)
	for i := range joins {
		joins[i] = updateAt(env, time.Second, UpdateHeartbeat, executor(fmt.Sprintf("exec-%03d", i), "default"))
	}
	var members []queue.Member
	at(env, 2*time.Second, func() { members = query[[]queue.Member](t, env, QueryMembers) })
	runRegistry(t, env, RegistryInput{Liveness: time.Minute}, time.Minute)
	for _, j := range joins {
		require.Positive(t, memberView(t, j).Slots["default"].Allowed)
	}
	require.Len(t, members, 500)
}

// The registry answers its members' check-ins from plans cached between
// changes. Each kind of change shows in the next check-in, made in the
// workflow task of a check-in that filled the cache just before it
// (exec-b's heartbeat): a queue's rules, a member's state, a queue
// deleted, a member leaving, coming back, losing a build.
func TestRegistryCachedPlansFollowEveryChange(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: gpuQueue(2)})
	updateAt(env, time.Second, UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "gpu"}, "gpu", "default"))
	views := map[string][2]MemberView{}
	// Each step: exec-b checks in (filling the cache at that time) and the
	// change is made, in one workflow task; then exec-a checks in.
	step := func(name string, d time.Duration, change func()) {
		at(env, d, func() {
			sendUpdate(env, &updateResult{}, UpdateHeartbeat, executor("exec-b", "default"))
			if change != nil {
				change()
			}
		})
		at(env, d+time.Millisecond, func() {
			// Twice: the second answer is the cached one.
			views[name] = [2]MemberView{
				query[MemberView](t, env, QueryMemberView, "exec-a"),
				query[MemberView](t, env, QueryMemberView, "exec-a"),
			}
		})
	}
	update := func(name string, arg any) func() {
		return func() { sendUpdate(env, &updateResult{}, name, arg) }
	}
	step("joined", 2*time.Second, nil)
	step("rules changed", 3*time.Second, update(UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineUpdate, Queue: gpuQueue(5)}))
	step("inactive", 4*time.Second, update(UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-a", State: queue.StateInactive}))
	step("active, queue deleted", 5*time.Second, func() {
		update(UpdateSetMemberState, SetMemberStateRequest{Identity: admin, Name: "exec-a", State: queue.StateActive})()
		update(UpdateDeleteQueue, DeleteQueueRequest{Identity: admin, Name: "gpu"})()
	})
	step("left", 6*time.Second, update(UpdateLeave, LeaveRequest{Member: "exec-a"}))
	step("back", 7*time.Second, update(UpdateHeartbeat, labelled("exec-a", map[string]string{"pool": "gpu"}, "default")))
	step("lost a build", 8*time.Second, func() {
		env.SignalWorkflow(SignalBuildLost, BuildLost{Member: "exec-a", Build: "app/ci/1"})
	})
	runRegistry(t, env, RegistryInput{Liveness: time.Minute}, time.Minute)

	require.Len(t, views, 7)
	for name, v := range views {
		require.Equal(t, v[0], v[1], "%s: the cached answer is the evaluated one", name)
	}
	require.Equal(t, 2, views["joined"][0].Slots["gpu"].Allowed)
	require.Equal(t, 5, views["rules changed"][0].Slots["gpu"].Allowed)
	require.Zero(t, views["inactive"][0].Slots["gpu"].Allowed)
	require.Equal(t, queue.StateInactive, views["inactive"][0].State)
	require.Equal(t, queue.StateActive, views["active, queue deleted"][0].State)
	require.NotContains(t, views["active, queue deleted"][0].Slots, "gpu")
	require.True(t, views["left"][0].Renew, "left: down until it renews")
	require.False(t, views["back"][0].Renew)
	require.True(t, views["lost a build"][0].Renew, "lost a build: down until it renews")
}
