package queue_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

var now = time.Date(2026, time.March, 4, 12, 0, 0, 0, time.UTC)

const liveness = 30 * time.Second

// executor returns an active executor of the given queues last seen age ago.
func executor(name string, age time.Duration, queues ...string) queue.Member {
	return queue.Member{Name: name, Role: queue.RoleExecutor, Host: name + ".local", Queues: queues, State: queue.StateActive, LastSeen: now.Add(-age)}
}

// controller returns an active controller last seen age ago.
func controller(name string, age time.Duration) queue.Member {
	return queue.Member{Name: name, Role: queue.RoleController, State: queue.StateActive, LastSeen: now.Add(-age)}
}

func withLabels(m queue.Member, kv ...string) queue.Member {
	m.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Labels[kv[i]] = kv[i+1]
	}
	return m
}

func withState(m queue.Member, s queue.MemberState) queue.Member {
	m.State = s
	return m
}

func withRunning(m queue.Member, q string, n int) queue.Member {
	m.Running = map[string]int{q: n}
	return m
}

func never(m queue.Member) queue.Member {
	m.LastSeen = time.Time{}
	return m
}

// flowForce is the example of FlowForce's manual: four builds on each
// worker, and when no worker is left one build at a time on the master with
// five seconds of rest.
var flowForce = queue.Queue{
	Name: "reports",
	Rules: []queue.Rule{
		{RunOn: queue.RunOnExecutors, MaxParallel: 4},
		{RunOn: queue.RunOnController, MaxParallel: 1, MinGap: 5 * time.Second},
	},
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	gpu := queue.Queue{
		Name: "gpu",
		Rules: []queue.Rule{
			{RunOn: queue.RunOnExecutors, MaxParallel: 2, Labels: map[string]string{"pool": "gpu"}},
			{RunOn: queue.RunOnController, MaxParallel: 1},
		},
	}
	tests := []struct {
		name    string
		queue   queue.Queue
		members []queue.Member
		want    queue.Plan
	}{
		{
			name:  "all four workers live",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", 0), executor("w1", time.Second, "*"), executor("w2", 0, "*"),
				executor("w3", 0, "reports"), executor("w4", 29*time.Second, "*"),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 0, Rule: flowForce.Rules[0],
				Members: []string{"w1", "w2", "w3", "w4"}, Slots: 16,
				Allowed: map[string]int{"ctl": 0, "w1": 4, "w2": 4, "w3": 4, "w4": 4},
				Why:     "rule 1 (executors, max-parallel=4): 4 live members w1, w2, w3, w4",
			},
		},
		{
			name:  "three workers live",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", 0), executor("w1", 0, "*"), executor("w2", 0, "*"),
				executor("w3", 0, "*"), executor("w4", 31*time.Second, "*"),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 0, Rule: flowForce.Rules[0],
				Members: []string{"w1", "w2", "w3"}, Slots: 12,
				Allowed: map[string]int{"ctl": 0, "w1": 4, "w2": 4, "w3": 4, "w4": 0},
				Why:     "rule 1 (executors, max-parallel=4): 3 live members w1, w2, w3",
			},
		},
		{
			name:  "no worker live falls back to the controller",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", 0), executor("w1", 42*time.Second, "*"), never(executor("w2", 0, "*")),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 1, Rule: flowForce.Rules[1],
				Members: []string{"ctl"}, Slots: 1,
				Allowed: map[string]int{"ctl": 1, "w1": 0, "w2": 0},
				Why:     "rule 1 has no live member (w1 last seen 42s ago, w2 never seen), falling back to rule 2 (controller, max-parallel=1, min-gap=5s): 1 live member ctl",
			},
		},
		{
			name:    "no executor registered falls back",
			queue:   queue.DefaultQueue(),
			members: []queue.Member{controller("ctl", 0)},
			want: queue.Plan{
				Queue: "default", RuleIndex: 1, Rule: queue.DefaultQueue().Rules[1],
				Members: []string{"ctl"}, Slots: 1, Allowed: map[string]int{"ctl": 1},
				Why: "rule 1 has no live member (no executor serves queue default), falling back to rule 2 (controller, max-parallel=1): 1 live member ctl",
			},
		},
		{
			name:  "executors of other queues do not count",
			queue: queue.DefaultQueue(),
			members: []queue.Member{
				controller("ctl", 0), executor("exec-a", 0, "gpu"),
			},
			want: queue.Plan{
				Queue: "default", RuleIndex: 1, Rule: queue.DefaultQueue().Rules[1],
				Members: []string{"ctl"}, Slots: 1, Allowed: map[string]int{"ctl": 1, "exec-a": 0},
				Why: "rule 1 has no live member (no executor serves queue default), falling back to rule 2 (controller, max-parallel=1): 1 live member ctl",
			},
		},
		{
			name:  "nobody live at all",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", time.Minute), executor("w1", 90*time.Second, "*"),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: queue.NoRule, Members: []string{},
				Allowed: map[string]int{"ctl": 0, "w1": 0},
				Why:     "no live member for any rule: rule 1 has no live member (w1 last seen 1m30s ago), rule 2 has no live member (ctl last seen 1m0s ago)",
			},
		},
		{
			name:  "empty cluster",
			queue: flowForce,
			want: queue.Plan{
				Queue: "reports", RuleIndex: queue.NoRule, Members: []string{}, Allowed: map[string]int{},
				Why: "no live member for any rule: rule 1 has no live member (no executor serves queue reports), rule 2 has no live member (no controller registered)",
			},
		},
		{
			name:    "queue without rules",
			queue:   queue.Queue{Name: "empty"},
			members: []queue.Member{controller("ctl", 0)},
			want: queue.Plan{
				Queue: "empty", RuleIndex: queue.NoRule, Members: []string{}, Allowed: map[string]int{"ctl": 0},
				Why: "no live member for any rule: the queue has no rules",
			},
		},
		{
			name:  "labels select the gpu executors only",
			queue: gpu,
			members: []queue.Member{
				controller("ctl", 0),
				withLabels(executor("gpu-1", 0, "gpu"), "pool", "gpu", "zone", "a"),
				withLabels(executor("cpu-1", 0, "gpu"), "pool", "cpu"),
				executor("plain", 0, "*"),
				withLabels(executor("gpu-2", 0, "*"), "pool", "gpu"),
			},
			want: queue.Plan{
				Queue: "gpu", RuleIndex: 0, Rule: gpu.Rules[0],
				Members: []string{"gpu-1", "gpu-2"}, Slots: 4,
				Allowed: map[string]int{"ctl": 0, "cpu-1": 0, "gpu-1": 2, "gpu-2": 2, "plain": 0},
				Why:     "rule 1 (executors, max-parallel=2, labels pool=gpu): 2 live members gpu-1, gpu-2",
			},
		},
		{
			name:  "no executor carries the labels",
			queue: gpu,
			members: []queue.Member{
				controller("ctl", 0), withLabels(executor("cpu-1", 0, "gpu"), "pool", "cpu"),
			},
			want: queue.Plan{
				Queue: "gpu", RuleIndex: 1, Rule: gpu.Rules[1],
				Members: []string{"ctl"}, Slots: 1, Allowed: map[string]int{"ctl": 1, "cpu-1": 0},
				Why: "rule 1 has no live member (no executor serves queue gpu with labels pool=gpu), falling back to rule 2 (controller, max-parallel=1): 1 live member ctl",
			},
		},
		{
			name:  "draining and inactive members do not activate a rule",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", 0),
				withState(executor("w1", 0, "*"), queue.StateDraining),
				withState(executor("w2", 0, "*"), queue.StateInactive),
				withState(executor("w3", 0, "*"), ""),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 1, Rule: flowForce.Rules[1],
				Members: []string{"ctl"}, Slots: 1,
				Allowed: map[string]int{"ctl": 1, "w1": 0, "w2": 0, "w3": 0},
				Why:     `rule 1 has no live member (w1 is draining, w2 is inactive, w3 has state ""), falling back to rule 2 (controller, max-parallel=1, min-gap=5s): 1 live member ctl`,
			},
		},
		{
			name:  "draining member next to an active one gets no new slots",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", 0),
				withRunning(withState(executor("w1", 0, "*"), queue.StateDraining), "reports", 3),
				withRunning(executor("w2", 0, "*"), "reports", 1),
				withState(executor("w3", 0, "*"), queue.StateInactive),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 0, Rule: flowForce.Rules[0],
				Members: []string{"w2"}, Draining: []string{"w1"}, Slots: 4, Busy: 4,
				Allowed: map[string]int{"ctl": 0, "w1": 0, "w2": 4, "w3": 0},
				Why:     "rule 1 (executors, max-parallel=4): 1 live member w2; draining w1",
			},
		},
		{
			name:  "dead draining member is reported as dead",
			queue: flowForce,
			members: []queue.Member{
				controller("ctl", 0), withState(executor("w1", time.Hour, "*"), queue.StateDraining),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 1, Rule: flowForce.Rules[1],
				Members: []string{"ctl"}, Slots: 1, Allowed: map[string]int{"ctl": 1, "w1": 0},
				Why: "rule 1 has no live member (w1 last seen 1h0m0s ago), falling back to rule 2 (controller, max-parallel=1, min-gap=5s): 1 live member ctl",
			},
		},
		{
			name:  "busy counts live members only",
			queue: flowForce,
			members: []queue.Member{
				withRunning(controller("ctl", 0), "reports", 1),
				withRunning(executor("w1", 0, "*"), "reports", 2),
				withRunning(executor("w2", time.Hour, "*"), "reports", 4),
				withRunning(executor("w3", 0, "*"), "other", 4),
			},
			want: queue.Plan{
				Queue: "reports", RuleIndex: 0, Rule: flowForce.Rules[0],
				Members: []string{"w1", "w3"}, Slots: 8, Busy: 3,
				Allowed: map[string]int{"ctl": 0, "w1": 4, "w2": 0, "w3": 4},
				Why:     "rule 1 (executors, max-parallel=4): 2 live members w1, w3",
			},
		},
		{
			name: "any selects controllers and executors together",
			queue: queue.Queue{Name: "mixed", Rules: []queue.Rule{
				{RunOn: queue.RunOnAny, MaxParallel: 3},
			}},
			members: []queue.Member{controller("ctl", 0), executor("w1", 0, "mixed"), executor("w2", 0, "other")},
			want: queue.Plan{
				Queue: "mixed", RuleIndex: 0, Rule: queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 3},
				Members: []string{"ctl", "w1"}, Slots: 6,
				Allowed: map[string]int{"ctl": 3, "w1": 3, "w2": 0},
				Why:     "rule 1 (any, max-parallel=3): 2 live members ctl, w1",
			},
		},
		{
			name: "controllers serve every queue whatever they list",
			queue: queue.Queue{Name: "gpu", Rules: []queue.Rule{
				{RunOn: queue.RunOnController, MaxParallel: 1},
			}},
			members: []queue.Member{func() queue.Member { m := controller("ctl", 0); m.Queues = []string{"other"}; return m }()},
			want: queue.Plan{
				Queue: "gpu", RuleIndex: 0, Rule: queue.Rule{RunOn: queue.RunOnController, MaxParallel: 1},
				Members: []string{"ctl"}, Slots: 1, Allowed: map[string]int{"ctl": 1},
				Why: "rule 1 (controller, max-parallel=1): 1 live member ctl",
			},
		},
		{
			name: "invalid max-parallel yields no slots",
			queue: queue.Queue{Name: "broken", Rules: []queue.Rule{
				{RunOn: queue.RunOnController, MaxParallel: -2},
			}},
			members: []queue.Member{controller("ctl", 0)},
			want: queue.Plan{
				Queue: "broken", RuleIndex: 0, Rule: queue.Rule{RunOn: queue.RunOnController, MaxParallel: -2},
				Members: []string{"ctl"}, Slots: 0, Allowed: map[string]int{"ctl": 0},
				Why: "rule 1 (controller, max-parallel=-2): 1 live member ctl",
			},
		},
		{
			name:  "skipping two rules",
			queue: queue.Queue{Name: "three", Rules: []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 8, Labels: map[string]string{"size": "xl"}}, {RunOn: queue.RunOnExecutors, MaxParallel: 2}, {RunOn: queue.RunOnController, MaxParallel: 1}}},
			members: []queue.Member{
				controller("ctl", 0), executor("w1", 35*time.Second, "*"),
			},
			want: queue.Plan{
				Queue: "three", RuleIndex: 2, Rule: queue.Rule{RunOn: queue.RunOnController, MaxParallel: 1},
				Members: []string{"ctl"}, Slots: 1, Allowed: map[string]int{"ctl": 1, "w1": 0},
				Why: "rule 1 has no live member (no executor serves queue three with labels size=xl), rule 2 has no live member (w1 last seen 35s ago), falling back to rule 3 (controller, max-parallel=1): 1 live member ctl",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := queue.Evaluate(tt.queue, tt.members, now, liveness)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.want.RuleIndex != queue.NoRule, got.Active())
		})
	}
}

func TestEvaluateLivenessEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		lastSeen time.Time
		liveness time.Duration
		wantRule int
	}{
		{name: "seen now", lastSeen: now, liveness: liveness, wantRule: 0},
		{name: "seen exactly the timeout ago", lastSeen: now.Add(-liveness), liveness: liveness, wantRule: 0},
		{name: "one nanosecond too old", lastSeen: now.Add(-liveness - 1), liveness: liveness, wantRule: 1},
		{name: "never seen", lastSeen: time.Time{}, liveness: liveness, wantRule: 1},
		{name: "clock skew puts last seen in the future", lastSeen: now.Add(2 * time.Second), liveness: liveness, wantRule: 0},
		{name: "zero timeout and seen now", lastSeen: now, liveness: 0, wantRule: 0},
		{name: "zero timeout and seen a moment ago", lastSeen: now.Add(-time.Millisecond), liveness: 0, wantRule: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exec := executor("w1", 0, "*")
			exec.LastSeen = tt.lastSeen
			plan := queue.Evaluate(flowForce, []queue.Member{exec, controller("ctl", 0)}, now, tt.liveness)
			require.Equal(t, tt.wantRule, plan.RuleIndex, plan.Why)
		})
	}
}

func TestMemberLive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		age     time.Duration
		never   bool
		down    bool
		timeout time.Duration
		want    bool
	}{
		{name: "fresh", age: time.Second, timeout: liveness, want: true},
		{name: "at the bound", age: liveness, timeout: liveness, want: true},
		{name: "past the bound", age: liveness + time.Nanosecond, timeout: liveness},
		{name: "never seen", never: true, timeout: time.Hour},
		{name: "future", age: -time.Minute, timeout: liveness, want: true},
		{name: "negative timeout", age: 0, timeout: -time.Second},
		{name: "fresh but down (left, or lost a build)", age: time.Second, down: true, timeout: liveness},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := executor("w1", tt.age)
			if tt.never {
				m = never(m)
			}
			if tt.down {
				m.DownSince, m.DownWhy = now, "left"
			}
			require.Equal(t, tt.want, m.Live(now, tt.timeout))
		})
	}
}

func TestMemberServes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		member queue.Member
		queue  string
		want   bool
	}{
		{name: "listed", member: executor("w", 0, "gpu", "cpu"), queue: "cpu", want: true},
		{name: "not listed", member: executor("w", 0, "gpu"), queue: "cpu"},
		{name: "wildcard", member: executor("w", 0, queue.AllQueues), queue: "anything", want: true},
		{name: "serves nothing", member: executor("w", 0), queue: "default"},
		{name: "controller serves all", member: controller("c", 0), queue: "gpu", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.member.Serves(tt.queue))
		})
	}
}

func TestEvaluateIsDeterministic(t *testing.T) {
	t.Parallel()
	var members []queue.Member
	for i := range 40 {
		m := executor(fmt.Sprintf("exec-%02d", i), time.Duration(i)*time.Second, "*")
		if i%7 == 0 {
			m.State = queue.StateDraining
		}
		members = append(members, m)
	}
	members = append(members, controller("ctl", 0))
	want := queue.Evaluate(flowForce, members, now, liveness)
	require.Equal(t, "rule 1 (executors, max-parallel=4): 26 live members exec-01, exec-02, exec-03, exec-04, exec-05 and 21 more; draining exec-00, exec-07, exec-14, exec-21, exec-28", want.Why)
	require.Equal(t, 26*4, want.Slots)

	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		shuffled := append([]queue.Member(nil), members...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, want, queue.Evaluate(flowForce, shuffled, now, liveness))
	}
	require.Equal(t, "exec-00", members[0].Name, "Evaluate must not reorder the caller's slice")
}

func TestEvaluateWhyListsAtMostFiveDeadMembers(t *testing.T) {
	t.Parallel()
	var members []queue.Member
	for i := range 8 {
		members = append(members, executor(fmt.Sprintf("w%d", i), time.Minute, "*"))
	}
	plan := queue.Evaluate(queue.Queue{Name: "q", Rules: []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 1}}}, members, now, liveness)
	require.Equal(t, "no live member for any rule: rule 1 has no live member (w0 last seen 1m0s ago, w1 last seen 1m0s ago, w2 last seen 1m0s ago, w3 last seen 1m0s ago, w4 last seen 1m0s ago and 3 more)", plan.Why)
}

func TestWaitReason(t *testing.T) {
	t.Parallel()
	gpu := queue.Queue{
		Name: "gpu",
		Rules: []queue.Rule{
			{RunOn: queue.RunOnExecutors, MaxParallel: 2, Labels: map[string]string{"pool": "gpu"}},
			{RunOn: queue.RunOnController, MaxParallel: 1},
		},
	}
	onExecutors := queue.Evaluate(gpu, []queue.Member{
		withLabels(executor("a", 0, "gpu"), "pool", "gpu"), withLabels(executor("b", 0, "gpu"), "pool", "gpu"),
	}, now, liveness)
	onController := queue.Evaluate(gpu, []queue.Member{controller("ctl", 0)}, now, liveness)
	nobody := queue.Evaluate(gpu, nil, now, liveness)
	tests := []struct {
		name  string
		queue queue.Queue
		plan  queue.Plan
		busy  int
		ahead int
		want  string
	}{
		{name: "all busy, builds ahead", queue: gpu, plan: onExecutors, busy: 4, ahead: 7, want: "waiting for a slot on queue gpu: 4/4 busy, 7 ahead"},
		{name: "all busy, next in line", queue: gpu, plan: onExecutors, busy: 4, want: "waiting for a slot on queue gpu: 4/4 busy, next in line"},
		{name: "free slots taken by builds ahead", queue: gpu, plan: onExecutors, busy: 2, ahead: 2, want: "waiting for a slot on queue gpu: 2/4 busy, 2 ahead"},
		{name: "a slot is free", queue: gpu, plan: onExecutors, busy: 2, ahead: 1, want: "a slot is free on queue gpu: 2/4 busy, 1 ahead"},
		{name: "more busy than slots after a shrink", queue: gpu, plan: onExecutors, busy: 6, want: "waiting for a slot on queue gpu: 6/4 busy, next in line"},
		{name: "negative counts", queue: gpu, plan: onExecutors, busy: -1, ahead: -5, want: "a slot is free on queue gpu: 0/4 busy, 0 ahead"},
		{
			name: "on the fallback rule", queue: gpu, plan: onController, busy: 1, ahead: 3,
			want: "waiting for a slot on queue gpu: 1/1 busy, 3 ahead (on fallback rule 2: controller, max-parallel=1)",
		},
		{
			name: "no live member", queue: gpu, plan: nobody, busy: 0, ahead: 2,
			want: "no live member of queue gpu (rules: executors labels pool=gpu; controller)",
		},
		{
			name: "no live member, name with a space", queue: queue.Queue{Name: "gpu pool", Rules: gpu.Rules[:1]},
			plan: queue.Evaluate(queue.Queue{Name: "gpu pool", Rules: gpu.Rules[:1]}, nil, now, liveness),
			want: `no live member of queue "gpu pool" (rules: executors labels pool=gpu)`,
		},
		{
			name: "queue without rules", queue: queue.Queue{Name: "empty"},
			plan: queue.Evaluate(queue.Queue{Name: "empty"}, nil, now, liveness),
			want: "no live member of queue empty (it has no rules)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.WaitReason(tt.queue, tt.plan, tt.busy, tt.ahead))
		})
	}
}
