package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

func inContainer(m queue.Member) queue.Member {
	m.Runtime = queue.RuntimeContainer
	return m
}

func onHost(m queue.Member) queue.Member {
	m.Runtime = queue.RuntimeHost
	return m
}

func TestMemberIsolated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		member queue.Member
		want   bool
	}{
		{name: "container executor", member: inContainer(executor("c", 0, "*")), want: true},
		{name: "host executor", member: onHost(executor("h", 0, "*"))},
		{name: "executor from before runtimes were reported", member: executor("old", 0, "*")},
		{name: "controller, whatever it reports", member: inContainer(controller("ctl", 0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.member.Isolated())
		})
	}
}

// Pull requests from forks run only on container executors: the default
// queue's controller fallback and host-runtime executors never take them,
// unless a rule opts in with untrusted-on-host.
func TestEvaluateUntrusted(t *testing.T) {
	t.Parallel()
	def := queue.DefaultQueue()
	optIn := queue.Queue{Name: "trusted-lab", Rules: []queue.Rule{
		{RunOn: queue.RunOnExecutors, MaxParallel: 3, UntrustedOnHost: true},
		{RunOn: queue.RunOnController, MaxParallel: 1},
	}}
	preferHost := queue.Queue{Name: "mixed", Rules: []queue.Rule{
		{RunOn: queue.RunOnExecutors, MaxParallel: 4, Labels: map[string]string{"pool": "fast"}},
		{RunOn: queue.RunOnExecutors, MaxParallel: 2},
	}}
	tests := []struct {
		name        string
		queue       queue.Queue
		members     []queue.Member
		wantRule    int
		wantMembers []string
		wantAllowed map[string]int
		wantBusy    int
		wantWhy     string
		wantReason  string
	}{
		{
			name:        "only the controller: no fallback",
			queue:       def,
			members:     []queue.Member{controller("ctl", 0)},
			wantRule:    queue.NoRule,
			wantMembers: []string{},
			wantAllowed: map[string]int{"ctl": 0},
			wantWhy:     "pull requests from forks: no live member for any rule: rule 1 has no live member (no container executor serves queue default), rule 2 has no live member (ctl is a controller)",
			wantReason:  "pull requests from forks run only on container executors: none is live on queue default (rules: executors; controller)",
		},
		{
			name:        "host executor and controller",
			queue:       def,
			members:     []queue.Member{controller("ctl", 0), withRunning(onHost(executor("host", 0, "*")), "default", 2)},
			wantRule:    queue.NoRule,
			wantMembers: []string{},
			wantAllowed: map[string]int{"ctl": 0, "host": 0},
			wantWhy:     "pull requests from forks: no live member for any rule: rule 1 has no live member (host runs builds on the host), rule 2 has no live member (ctl is a controller)",
			wantReason:  "pull requests from forks run only on container executors: none is live on queue default (rules: executors; controller)",
		},
		{
			name:  "a container executor beside them",
			queue: def,
			members: []queue.Member{
				controller("ctl", 0), withRunning(onHost(executor("host", 0, "*")), "default", 2),
				withRunning(inContainer(executor("box", 0, "default")), "default", 1),
			},
			wantRule:    0,
			wantMembers: []string{"box"},
			wantAllowed: map[string]int{"ctl": 0, "host": 0, "box": 2},
			wantBusy:    1,
			wantWhy:     "pull requests from forks: rule 1 (executors, max-parallel=2): 1 live member box",
			wantReason:  "a slot is free on queue default: 1/2 busy, 0 ahead",
		},
		{
			name:        "a dead container executor",
			queue:       def,
			members:     []queue.Member{controller("ctl", 0), never(inContainer(executor("box", 0, "default")))},
			wantRule:    queue.NoRule,
			wantMembers: []string{},
			wantAllowed: map[string]int{"ctl": 0, "box": 0},
			wantWhy:     "pull requests from forks: no live member for any rule: rule 1 has no live member (box never seen), rule 2 has no live member (ctl is a controller)",
			wantReason:  "pull requests from forks run only on container executors: none is live on queue default (rules: executors; controller)",
		},
		{
			name:        "the rule opts in to host executors",
			queue:       optIn,
			members:     []queue.Member{controller("ctl", 0), onHost(executor("host", 0, "*"))},
			wantRule:    0,
			wantMembers: []string{"host"},
			wantAllowed: map[string]int{"ctl": 0, "host": 3},
			wantWhy:     "pull requests from forks: rule 1 (executors, max-parallel=3, untrusted-on-host): 1 live member host",
			wantReason:  "a slot is free on queue trusted-lab: 0/3 busy, 0 ahead",
		},
		{
			name:        "the opt-in does not reach the controller rule",
			queue:       optIn,
			members:     []queue.Member{controller("ctl", 0)},
			wantRule:    queue.NoRule,
			wantMembers: []string{},
			wantAllowed: map[string]int{"ctl": 0},
			wantWhy:     "pull requests from forks: no live member for any rule: rule 1 has no live member (no executor serves queue trusted-lab), rule 2 has no live member (ctl is a controller)",
			wantReason:  "pull requests from forks run only on container executors and on rules with untrusted-on-host=true: none is live on queue trusted-lab (rules: executors; controller)",
		},
		{
			name:  "a preferred rule of host executors is skipped",
			queue: preferHost,
			members: []queue.Member{
				withLabels(onHost(executor("fast", 0, "mixed")), "pool", "fast"), inContainer(executor("box", 0, "mixed")),
			},
			wantRule:    1,
			wantMembers: []string{"box"},
			wantAllowed: map[string]int{"fast": 0, "box": 2},
			wantWhy:     "pull requests from forks: rule 1 has no live member (fast runs builds on the host), falling back to rule 2 (executors, max-parallel=2): 1 live member box",
			wantReason:  "a slot is free on queue mixed: 0/2 busy, 0 ahead (on fallback rule 2: executors, max-parallel=2)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := queue.EvaluateUntrusted(tt.queue, tt.members, now, liveness)
			require.True(t, plan.Untrusted)
			require.Equal(t, tt.wantRule, plan.RuleIndex)
			require.Equal(t, tt.wantMembers, plan.Members)
			require.Equal(t, tt.wantAllowed, plan.Allowed)
			require.Equal(t, tt.wantBusy, plan.Busy)
			require.Equal(t, tt.wantWhy, plan.Why)
			require.Equal(t, tt.wantReason, queue.WaitReason(tt.queue, plan, plan.Busy, 0))
		})
	}
}

// The plan of trusted builds is not changed by runtimes: the controller
// fallback still applies to them.
func TestEvaluateIgnoresRuntimeForTrustedBuilds(t *testing.T) {
	t.Parallel()
	plan := queue.Evaluate(queue.DefaultQueue(), []queue.Member{controller("ctl", 0), onHost(executor("host", time.Hour, "*"))}, now, liveness)
	require.False(t, plan.Untrusted)
	require.Equal(t, 1, plan.RuleIndex)
	require.Equal(t, []string{"ctl"}, plan.Members)
}

func TestParseRuleUntrustedOnHost(t *testing.T) {
	t.Parallel()
	r, err := queue.ParseRule("run-on=executors,untrusted-on-host=true")
	require.NoError(t, err)
	require.Equal(t, queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 1, UntrustedOnHost: true}, r)
	require.Equal(t, "run-on=executors,max-parallel=1,min-gap=0s,untrusted-on-host=true", r.String())
	back, err := queue.ParseRule(r.String())
	require.NoError(t, err)
	require.Equal(t, r, back)

	r, err = queue.ParseRule("run-on=executors,untrusted-on-host=false")
	require.NoError(t, err)
	require.False(t, r.UntrustedOnHost)
	require.Equal(t, "run-on=executors,max-parallel=1,min-gap=0s", r.String())

	for input, want := range map[string]string{
		"run-on=any,untrusted-on-host=yes": `parse rule "run-on=any,untrusted-on-host=yes": untrusted-on-host="yes" must be true or false`,
		"run-on=any,untrusted-on-host=":    `parse rule "run-on=any,untrusted-on-host=": untrusted-on-host="" must be true or false`,
		"run-on=any,untrusted-on-host=true,untrusted-on-host=false": `parse rule "run-on=any,untrusted-on-host=true,untrusted-on-host=false": ` +
			`untrusted-on-host given twice (untrusted-on-host=false again)`,
	} {
		_, err := queue.ParseRule(input)
		require.EqualError(t, err, want, input)
		require.ErrorIs(t, err, queue.ErrInvalidRule)
	}
}
