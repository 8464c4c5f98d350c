package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

func TestParseRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  queue.Rule
	}{
		{
			name:  "defaults",
			input: "run-on=executors",
			want:  queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 1},
		},
		{
			name:  "full",
			input: "run-on=executors,max-parallel=4,min-gap=0s",
			want:  queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 4},
		},
		{
			name:  "controller with gap",
			input: "run-on=controller,max-parallel=1,min-gap=5s",
			want:  queue.Rule{RunOn: queue.RunOnController, MaxParallel: 1, MinGap: 5 * time.Second},
		},
		{
			name:  "any",
			input: "run-on=any,min-gap=1m30s",
			want:  queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 1, MinGap: 90 * time.Second},
		},
		{
			name:  "labels repeat",
			input: "run-on=executors,max-parallel=4,min-gap=0s,labels=pool=gpu,labels=zone=a",
			want: queue.Rule{
				RunOn: queue.RunOnExecutors, MaxParallel: 4,
				Labels: map[string]string{"pool": "gpu", "zone": "a"},
			},
		},
		{
			name:  "keys in any order",
			input: "labels=pool=gpu,min-gap=2s,max-parallel=3,run-on=any",
			want: queue.Rule{
				RunOn: queue.RunOnAny, MaxParallel: 3, MinGap: 2 * time.Second,
				Labels: map[string]string{"pool": "gpu"},
			},
		},
		{
			name:  "spaces around entries",
			input: " run-on = executors , max-parallel = 2 ",
			want:  queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 2},
		},
		{
			name:  "label with slash and dots",
			input: "run-on=executors,labels=sluice.dev/arch=arm64",
			want: queue.Rule{
				RunOn: queue.RunOnExecutors, MaxParallel: 1,
				Labels: map[string]string{"sluice.dev/arch": "arm64"},
			},
		},
		{
			name:  "upper bound",
			input: "run-on=any,max-parallel=1000",
			want:  queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 1000},
		},
		{
			name:  "bare zero gap",
			input: "run-on=any,min-gap=0",
			want:  queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := queue.ParseRule(tt.input)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.NoError(t, got.Validate())

			again, err := queue.ParseRule(got.String())
			require.NoError(t, err, "round trip of %q", got.String())
			require.Equal(t, got, again)
		})
	}
}

func TestParseRuleErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{
			name: "empty", input: "",
			wantErr: `parse rule "": rule is empty; want run-on=controller|executors|any[,max-parallel=N][,min-gap=DURATION][,labels=KEY=VALUE]...[,untrusted-on-host=true]`,
		},
		{
			name: "blank", input: "  ",
			wantErr: `parse rule "  ": rule is empty; want run-on=controller|executors|any[,max-parallel=N][,min-gap=DURATION][,labels=KEY=VALUE]...[,untrusted-on-host=true]`,
		},
		{name: "missing run-on", input: "max-parallel=2", wantErr: `parse rule "max-parallel=2": run-on is required (controller, executors or any)`},
		{
			name: "bad run-on", input: "run-on=master",
			wantErr: `parse rule "run-on=master": run-on="master" must be one of controller, executors, any`,
		},
		{
			name: "empty run-on", input: "run-on=",
			wantErr: `parse rule "run-on=": run-on="" must be one of controller, executors, any`,
		},
		{
			name: "run-on twice", input: "run-on=any,run-on=controller",
			wantErr: `parse rule "run-on=any,run-on=controller": run-on given twice (run-on=controller again)`,
		},
		{
			name: "max-parallel not a number", input: "run-on=any,max-parallel=four",
			wantErr: `parse rule "run-on=any,max-parallel=four": max-parallel="four" is not a whole number`,
		},
		{
			name: "max-parallel zero", input: "run-on=any,max-parallel=0",
			wantErr: `parse rule "run-on=any,max-parallel=0": max-parallel must be ≥ 1 (got 0)`,
		},
		{
			name: "max-parallel negative", input: "run-on=any,max-parallel=-3",
			wantErr: `parse rule "run-on=any,max-parallel=-3": max-parallel must be ≥ 1 (got -3)`,
		},
		{
			name: "max-parallel too big", input: "run-on=any,max-parallel=1001",
			wantErr: `parse rule "run-on=any,max-parallel=1001": max-parallel must be ≤ 1000 (got 1001)`,
		},
		{
			name: "max-parallel overflows", input: "run-on=any,max-parallel=99999999999999999999",
			wantErr: `parse rule "run-on=any,max-parallel=99999999999999999999": max-parallel="99999999999999999999" is not a whole number`,
		},
		{
			name: "max-parallel twice", input: "run-on=any,max-parallel=1,max-parallel=2",
			wantErr: `parse rule "run-on=any,max-parallel=1,max-parallel=2": max-parallel given twice (max-parallel=2 again)`,
		},
		{
			name: "min-gap without unit", input: "run-on=any,min-gap=5",
			wantErr: `parse rule "run-on=any,min-gap=5": min-gap="5" is not a duration (write it with a unit, like 0s, 5s or 2m)`,
		},
		{
			name: "min-gap negative", input: "run-on=any,min-gap=-5s",
			wantErr: `parse rule "run-on=any,min-gap=-5s": min-gap must not be negative (got -5s)`,
		},
		{
			name: "min-gap twice", input: "run-on=any,min-gap=1s,min-gap=2s",
			wantErr: `parse rule "run-on=any,min-gap=1s,min-gap=2s": min-gap given twice (min-gap=2s again)`,
		},
		{
			name: "label without value", input: "run-on=any,labels=gpu",
			wantErr: `parse rule "run-on=any,labels=gpu": labels="gpu" must be KEY=VALUE`,
		},
		{
			name: "label empty key", input: "run-on=any,labels==gpu",
			wantErr: `parse rule "run-on=any,labels==gpu": labels="=gpu": key must not be empty`,
		},
		{
			name: "label empty value", input: "run-on=any,labels=pool=",
			wantErr: `parse rule "run-on=any,labels=pool=": labels="pool=": value must not be empty`,
		},
		{
			name: "label bad character", input: "run-on=any,labels=pool=g=pu",
			wantErr: `parse rule "run-on=any,labels=pool=g=pu": labels="pool=g=pu": value has '=' at position 2 (use letters, digits, '_', '-', '.', '/')`,
		},
		{
			name: "label twice", input: "run-on=any,labels=pool=gpu,labels=pool=cpu",
			wantErr: `parse rule "run-on=any,labels=pool=gpu,labels=pool=cpu": label "pool" given twice (labels=pool=cpu again)`,
		},
		{
			name: "unknown key", input: "run-on=any,maxparallel=2",
			wantErr: `parse rule "run-on=any,maxparallel=2": unknown key "maxparallel" in "maxparallel=2" (known keys: run-on, max-parallel, min-gap, labels, untrusted-on-host)`,
		},
		{
			name: "unknown key twice", input: "run-on=any,color=red,color=blue",
			wantErr: `parse rule "run-on=any,color=red,color=blue": unknown key "color" in "color=red" (known keys: run-on, max-parallel, min-gap, labels, untrusted-on-host); ` +
				`unknown key "color" in "color=blue" (known keys: run-on, max-parallel, min-gap, labels, untrusted-on-host)`,
		},
		{
			name: "entry without value", input: "run-on",
			wantErr: `parse rule "run-on": entry "run-on" has no value; want key=value; run-on is required (controller, executors or any)`,
		},
		{
			name: "empty entry", input: "run-on=any,,max-parallel=2",
			wantErr: `parse rule "run-on=any,,max-parallel=2": entry 2 is empty`,
		},
		{
			name: "trailing comma", input: "run-on=any,",
			wantErr: `parse rule "run-on=any,": entry 2 is empty`,
		},
		{
			name: "every problem at once", input: "run-on=master,max-parallel=0,min-gap=-1s,color=red",
			wantErr: `parse rule "run-on=master,max-parallel=0,min-gap=-1s,color=red": ` +
				`run-on="master" must be one of controller, executors, any; ` +
				`max-parallel must be ≥ 1 (got 0); ` +
				`min-gap must not be negative (got -1s); ` +
				`unknown key "color" in "color=red" (known keys: run-on, max-parallel, min-gap, labels, untrusted-on-host)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := queue.ParseRule(tt.input)
			require.ErrorIs(t, err, queue.ErrInvalidRule)
			require.EqualError(t, err, tt.wantErr)
			require.Zero(t, got)
		})
	}
}

func TestRuleString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rule queue.Rule
		want string
	}{
		{
			name: "minimal",
			rule: queue.Rule{RunOn: queue.RunOnController, MaxParallel: 1},
			want: "run-on=controller,max-parallel=1,min-gap=0s",
		},
		{
			name: "labels sorted by key",
			rule: queue.Rule{
				RunOn: queue.RunOnExecutors, MaxParallel: 4, MinGap: 1500 * time.Millisecond,
				Labels: map[string]string{"zone": "a", "pool": "gpu"},
			},
			want: "run-on=executors,max-parallel=4,min-gap=1.5s,labels=pool=gpu,labels=zone=a",
		},
		{
			name: "empty labels map writes nothing",
			rule: queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 2, MinGap: time.Hour, Labels: map[string]string{}},
			want: "run-on=any,max-parallel=2,min-gap=1h0m0s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.rule.String())
			back, err := queue.ParseRule(tt.rule.String())
			require.NoError(t, err)
			require.Equal(t, tt.rule.RunOn, back.RunOn)
			require.Equal(t, tt.rule.MaxParallel, back.MaxParallel)
			require.Equal(t, tt.rule.MinGap, back.MinGap)
			require.Len(t, back.Labels, len(tt.rule.Labels))
			for k, v := range tt.rule.Labels {
				require.Equal(t, v, back.Labels[k])
			}
		})
	}
}

func TestRuleValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rule    queue.Rule
		wantErr string
	}{
		{name: "valid", rule: queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 4, Labels: map[string]string{"pool": "gpu"}}},
		{name: "zero value", rule: queue.Rule{}, wantErr: "run-on is required (controller, executors or any); max-parallel must be ≥ 1 (got 0)"},
		{name: "unknown run-on", rule: queue.Rule{RunOn: "workers", MaxParallel: 1}, wantErr: `run-on="workers" must be one of controller, executors, any`},
		{name: "too many", rule: queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 5000}, wantErr: "max-parallel must be ≤ 1000 (got 5000)"},
		{name: "negative gap", rule: queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 1, MinGap: -time.Second}, wantErr: "min-gap must not be negative (got -1s)"},
		{
			name:    "label with a comma would break the CLI form",
			rule:    queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 1, Labels: map[string]string{"pool": "a,b"}},
			wantErr: `label "pool"="a,b": value has ',' at position 2 (use letters, digits, '_', '-', '.', '/')`,
		},
		{
			name:    "label key too long",
			rule:    queue.Rule{RunOn: queue.RunOnAny, MaxParallel: 1, Labels: map[string]string{"k234567890123456789012345678901234567890123456789012345678901234": "v"}},
			wantErr: `label "k234567890123456789012345678901234567890123456789012345678901234"="v": key is 64 characters long, the limit is 63`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.rule.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, queue.ErrInvalidRule)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestRuleJSON(t *testing.T) {
	t.Parallel()
	rule := queue.Rule{RunOn: queue.RunOnExecutors, MaxParallel: 4, MinGap: 5 * time.Second, Labels: map[string]string{"pool": "gpu"}}
	data, err := json.Marshal(rule)
	require.NoError(t, err)
	require.JSONEq(t, `{"run_on":"executors","max_parallel":4,"min_gap":5000000000,"labels":{"pool":"gpu"}}`, string(data))
	var back queue.Rule
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, rule, back)
}

func TestRuleSelects(t *testing.T) {
	t.Parallel()
	executor := queue.Member{Name: "exec-a", Role: queue.RoleExecutor, Queues: []string{"gpu"}, Labels: map[string]string{"pool": "gpu", "zone": "a"}}
	wildcard := queue.Member{Name: "exec-b", Role: queue.RoleExecutor, Queues: []string{queue.AllQueues}}
	controller := queue.Member{Name: "ctl", Role: queue.RoleController}
	stranger := queue.Member{Name: "odd", Role: "observer", Queues: []string{queue.AllQueues}}
	tests := []struct {
		name   string
		rule   queue.Rule
		member queue.Member
		queue  string
		want   bool
	}{
		{name: "executors selects a serving executor", rule: queue.Rule{RunOn: queue.RunOnExecutors}, member: executor, queue: "gpu", want: true},
		{name: "executor not serving the queue", rule: queue.Rule{RunOn: queue.RunOnExecutors}, member: executor, queue: "cpu"},
		{name: "executor serving every queue", rule: queue.Rule{RunOn: queue.RunOnExecutors}, member: wildcard, queue: "cpu", want: true},
		{name: "executors skips controllers", rule: queue.Rule{RunOn: queue.RunOnExecutors}, member: controller, queue: "gpu"},
		{name: "controller selects controllers", rule: queue.Rule{RunOn: queue.RunOnController}, member: controller, queue: "gpu", want: true},
		{name: "controller skips executors", rule: queue.Rule{RunOn: queue.RunOnController}, member: executor, queue: "gpu"},
		{name: "any selects executors", rule: queue.Rule{RunOn: queue.RunOnAny}, member: executor, queue: "gpu", want: true},
		{name: "any selects controllers", rule: queue.Rule{RunOn: queue.RunOnAny}, member: controller, queue: "gpu", want: true},
		{name: "unknown role is never selected", rule: queue.Rule{RunOn: queue.RunOnAny}, member: stranger, queue: "gpu"},
		{name: "unknown run-on selects nobody", rule: queue.Rule{RunOn: "both"}, member: executor, queue: "gpu"},
		{
			name: "all labels carried", rule: queue.Rule{RunOn: queue.RunOnExecutors, Labels: map[string]string{"pool": "gpu", "zone": "a"}},
			member: executor, queue: "gpu", want: true,
		},
		{
			name: "one label missing", rule: queue.Rule{RunOn: queue.RunOnExecutors, Labels: map[string]string{"pool": "gpu", "arch": "arm64"}},
			member: executor, queue: "gpu",
		},
		{
			name: "label value differs", rule: queue.Rule{RunOn: queue.RunOnExecutors, Labels: map[string]string{"zone": "b"}},
			member: executor, queue: "gpu",
		},
		{
			name: "controller without the label", rule: queue.Rule{RunOn: queue.RunOnAny, Labels: map[string]string{"pool": "gpu"}},
			member: controller, queue: "gpu",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.rule.Selects(tt.member, tt.queue))
		})
	}
}

func FuzzParseRule(f *testing.F) {
	for _, seed := range []string{
		"run-on=executors,max-parallel=4,min-gap=0s",
		"run-on=executors,max-parallel=4,min-gap=0s,labels=pool=gpu,labels=zone=a",
		"run-on=controller,min-gap=5s",
		"run-on=any, max-parallel = +7 ,min-gap=1.5h",
		"run-on=master,max-parallel=0,min-gap=-1s,color=red",
		"labels==,labels=a=b=c,,",
		"",
		"=",
		"run-on=any,min-gap=9223372036854775807ns",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rule, err := queue.ParseRule(s)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrInvalidRule)
			require.Zero(t, rule)
			return
		}
		require.NoError(t, rule.Validate())
		again, err := queue.ParseRule(rule.String())
		require.NoError(t, err, "String of a parsed rule must parse: %q", rule.String())
		require.Equal(t, rule, again)
	})
}
