package cliout

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOneOf(t *testing.T) {
	t.Parallel()
	require.NoError(t, OneOf("--type", "pr", TriggerTypes...))
	err := OneOf("--type", "foo", TriggerTypes...)
	require.EqualError(t, err, `--type "foo": want commit, pr, pr-closed, release, tag or manual`)
}

func TestArgs(t *testing.T) {
	t.Parallel()
	use := "sluice schedule pause PIPELINE JOB"
	names := []string{"PIPELINE", "JOB"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"ok", []string{"app", "nightly"}, ""},
		{"none", nil, "missing PIPELINE JOB (usage: sluice schedule pause PIPELINE JOB)"},
		{"one missing", []string{"app"}, "missing JOB (usage: sluice schedule pause PIPELINE JOB)"},
		{"extra", []string{"app", "j", "x"}, `unexpected argument "x" (usage: sluice schedule pause PIPELINE JOB)`},
		{"empty", []string{"app", " "}, "JOB is empty (usage: sluice schedule pause PIPELINE JOB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Args(use, names, tt.args)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestParseStatusAndLimit(t *testing.T) {
	t.Parallel()
	got, err := ParseStatus("--status", "failure")
	require.NoError(t, err)
	require.Equal(t, "FAILURE", got)
	_, err = ParseStatus("--status", "done")
	require.EqualError(t, err, `--status "done": want CREATED, QUEUED, BLOCKED, FROZEN, RUNNING, SUCCESS, FAILURE, ABORTED or COLLAPSED`)
	require.NoError(t, Limit("--limit", 1, 1000))
	require.EqualError(t, Limit("--limit", 0, 1000), "--limit 0: want 1 to 1000")
	require.EqualError(t, Limit("--limit", 1001, 1000), "--limit 1001: want 1 to 1000")
}

func TestEventID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want, wantErr string
	}{
		{name: "plain", in: "app/12", want: "app/12"},
		{name: "prefixed", in: "event/app/3", want: "app/3"},
		{name: "leading zeros", in: "app/007", want: "app/7"},
		{name: "no number", in: "app", wantErr: `EVENT "app": want <pipeline>/<number>, e.g. myapp/12`},
		{name: "zero", in: "app/0", wantErr: `EVENT "app/0": want <pipeline>/<number>, e.g. myapp/12`},
		{name: "bad pipeline", in: "-x/1", wantErr: `EVENT "-x/1": want <pipeline>/<number>, e.g. myapp/12`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := EventID("EVENT", tt.in)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestEventStartValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      EventStart
		wantErr []string
	}{
		{name: "defaults", in: EventStart{}},
		{name: "full commit", in: EventStart{Type: "commit", SHA: "abc123", Branch: "main", StartFrom: "test"}},
		{name: "pr", in: EventStart{Type: "pr", PR: 4}},
		{
			name: "bad type", in: EventStart{Type: "foo"},
			wantErr: []string{`--type "foo": want commit, pr, pr-closed, release, tag or manual`},
		},
		{
			name: "everything wrong at once", in: EventStart{Type: "tag", SHA: "xyz", PR: -1, StartFrom: "a b"},
			wantErr: []string{
				`--sha "xyz": want 4 to 64 hex digits`, "--pr -1: want a pull request number (1 or more)",
				"--ref: a tag event needs the tag or release name", `--start-from "a b": not a job name`,
			},
		},
		{
			name: "pr without number", in: EventStart{Type: "pr-closed"},
			wantErr: []string{"--pr: a pr-closed event needs the pull request number"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.in.Validate()
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.wantErr {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr []string
	}{
		{
			name: "canonical form", in: []string{"run-on=executors, max-parallel=4,labels=pool=gpu", "run-on=any"},
			want: []string{"run-on=executors,max-parallel=4,min-gap=0s,labels=pool=gpu", "run-on=any,max-parallel=1,min-gap=0s"},
		},
		{
			name: "every bad rule named", in: []string{"max-parallel=2", "run-on=any", "run-on=moon,min-gap=fast"},
			wantErr: []string{
				`--rule "max-parallel=2": run-on is required`,
				`--rule "run-on=moon,min-gap=fast": run-on="moon" must be one of controller, executors, any`,
				`min-gap="fast" is not a duration`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Rules("--rule", tt.in)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, w := range tt.wantErr {
					require.Contains(t, err.Error(), w)
				}
				require.NotContains(t, err.Error(), "parse rule")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestQueueName(t *testing.T) {
	t.Parallel()
	require.NoError(t, QueueName("NAME", "gpu pool"))
	require.ErrorContains(t, QueueName("NAME", " gpu"), `NAME: queue name " gpu": starts with a space`)
}

func TestMergeQueue(t *testing.T) {
	t.Parallel()
	cur := QueueDef{Name: "gpu", Description: "GPUs", Rules: []string{"run-on=executors,max-parallel=1,min-gap=0s"}, UseRoles: []string{"ml"}}
	empty, desc := "", "fast GPUs"
	tests := []struct {
		name    string
		ch      QueueChange
		want    QueueDef
		wantErr string
	}{
		{name: "nothing", wantErr: "nothing to change: give --description, --rule or --use-role"},
		{
			name: "description only keeps rules and roles", ch: QueueChange{Description: &desc},
			want: QueueDef{Name: "gpu", Description: "fast GPUs", Rules: cur.Rules, UseRoles: cur.UseRoles},
		},
		{
			name: "clear description", ch: QueueChange{Description: &empty},
			want: QueueDef{Name: "gpu", Rules: cur.Rules, UseRoles: cur.UseRoles},
		},
		{
			name: "rules replace", ch: QueueChange{RulesSet: true, Rules: []string{"run-on=any,max-parallel=2"}},
			want: QueueDef{Name: "gpu", Description: "GPUs", Rules: []string{"run-on=any,max-parallel=2,min-gap=0s"}, UseRoles: cur.UseRoles},
		},
		{
			name: "roles cleared", ch: QueueChange{RolesSet: true, UseRoles: []string{""}},
			want: QueueDef{Name: "gpu", Description: "GPUs", Rules: cur.Rules},
		},
		{
			name: "roles replaced and deduplicated", ch: QueueChange{RolesSet: true, UseRoles: []string{"a", " b", "a"}},
			want: QueueDef{Name: "gpu", Description: "GPUs", Rules: cur.Rules, UseRoles: []string{"a", "b"}},
		},
		{name: "bad rule", ch: QueueChange{RulesSet: true, Rules: []string{"run-on=x"}}, wantErr: `--rule "run-on=x"`},
		{name: "no rules", ch: QueueChange{RulesSet: true}, wantErr: "--rule: at least one rule is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := MergeQueue(cur, tt.ch)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	_, err := MergeQueue(cur, QueueChange{})
	require.ErrorIs(t, err, ErrNothingToChange)
}

func TestRepoLocation(t *testing.T) {
	t.Parallel()
	exists := func(p string) bool { return p == "c:odd" }
	tests := []struct {
		name, in, want string
	}{
		{"https", "https://github.com/a/b.git", "https://github.com/a/b.git"},
		{"scheme case", "SSH://host/repo", "SSH://host/repo"},
		{"scp-like", "git@github.com:a/b.git", "git@github.com:a/b.git"},
		{"absolute", "/srv/repo/../repo", "/srv/repo"},
		{"relative", "repo", "/home/me/repo"},
		{"dot", ".", "/home/me"},
		{"parent", "../other", "/home/other"},
		{"existing path with a colon", "c:odd", "/home/me/c:odd"},
		{"slash before colon is a path", "dir/a:b", "/home/me/dir/a:b"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, RepoLocation(tt.in, "/home/me", exists))
		})
	}
}

func TestJobNameAndRoles(t *testing.T) {
	t.Parallel()
	require.NoError(t, JobName("--from", "stage@deploy:setup"))
	require.EqualError(t, JobName("--from", "a/b"), `--from "a/b": not a job name`)
	require.Nil(t, Roles([]string{"", " "}))
}

func TestEventOfBuild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"app/test/12", "app/12", true},
		{"build/app/test/12.3", "app/12", true},
		{"app/stage@x:setup/4", "app/4", true},
		{"app/12", "", false},
		{"app/test/x", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := EventOfBuild(tt.in)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}
