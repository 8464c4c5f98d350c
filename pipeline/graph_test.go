package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

const sharedHeader = `
shared:
	image: node:20
	steps:
		- run: make
`

// specOrAnd mixes OR, AND and mixed joins.
const specOrAnd = sharedHeader + `
jobs:
	build: {requires: [~commit, ~pr]}
	lint: {requires: [~commit]}
	unit: {requires: [build]}
	package: {requires: [build, lint]}
	deploy: {requires: [~package, unit, lint]}
	notify: {requires: [~build, ~lint]}
`

// specStages has a stage with implicit setup/teardown fed by a join.
const specStages = sharedHeader + `
jobs:
	build: {requires: [~commit]}
	deploy-a: {requires: []}
	deploy-b: {requires: [deploy-a]}
	verify: {requires: [~deploy-a]}
	after: {requires: [~stage@prod]}
stages:
	prod:
		description: Production
		requires: [build]
		jobs: [deploy-a, deploy-b, verify]
`

// specTriggers uses branch, regex, tag, release and pr-closed triggers.
const specTriggers = sharedHeader + `
jobs:
	main: {requires: [~commit, ~pr]}
	feature: {requires: ["~commit:/^feature-/", "~pr:release"]}
	tagged: {requires: ["~tag:/^v\\d+/", ~release]}
	closed: {requires: [~pr-closed]}
	staging: {requires: ["~commit:staging"]}
`

// specRemote has a remote OR trigger and a remote join.
const specRemote = sharedHeader + `
jobs:
	deploy: {requires: [~sd@infra:publish]}
	integrate: {requires: [sd@lib:build, sd@api:build, local]}
	local: {requires: [~commit]}
`

// specDetached has jobs without requires.
const specDetached = sharedHeader + `
jobs:
	main: {requires: [~commit]}
	nightly:
		annotations:
			screwdriver.cd/buildPeriodically: H 2 * * *
	cleanup: {requires: []}
`

func n(name string) Node { return Node{Name: name} }

func TestWorkflowGraph(t *testing.T) {
	t.Parallel()
	// Expected graphs follow Screwdriver's workflow-parser: nodes ~pr, ~commit, every job
	// and every requires target (tilde dropped for jobs/stages, kept for events/remotes);
	// an OR edge per tilde require, a join edge per plain require.
	tests := []struct {
		name  string
		yaml  string
		nodes []Node
		edges []Edge
	}{
		{
			name:  "or, and and mixed joins",
			yaml:  specOrAnd,
			nodes: []Node{n("~pr"), n("~commit"), n("build"), n("lint"), n("unit"), n("package"), n("deploy"), n("notify")},
			edges: []Edge{
				{Src: "~commit", Dest: "build"},
				{Src: "~pr", Dest: "build"},
				{Src: "~commit", Dest: "lint"},
				{Src: "build", Dest: "unit", Join: true},
				{Src: "build", Dest: "package", Join: true},
				{Src: "lint", Dest: "package", Join: true},
				{Src: "package", Dest: "deploy"},
				{Src: "unit", Dest: "deploy", Join: true},
				{Src: "lint", Dest: "deploy", Join: true},
				{Src: "build", Dest: "notify"},
				{Src: "lint", Dest: "notify"},
			},
		},
		{
			name: "stage with implicit setup and teardown",
			yaml: specStages,
			nodes: []Node{
				n("~pr"), n("~commit"), n("build"),
				{Name: "deploy-a", StageName: "prod"},
				{Name: "stage@prod:setup", StageName: "prod", Virtual: true},
				{Name: "deploy-b", StageName: "prod"},
				{Name: "verify", StageName: "prod"},
				n("after"),
				{Name: "stage@prod:teardown", StageName: "prod", Virtual: true},
			},
			edges: []Edge{
				{Src: "~commit", Dest: "build"},
				{Src: "stage@prod:setup", Dest: "deploy-a"},
				{Src: "deploy-a", Dest: "deploy-b", Join: true},
				{Src: "deploy-a", Dest: "verify"},
				{Src: "stage@prod:teardown", Dest: "after"},
				{Src: "build", Dest: "stage@prod:setup", Join: true},
				{Src: "deploy-b", Dest: "stage@prod:teardown", Join: true},
				{Src: "verify", Dest: "stage@prod:teardown", Join: true},
			},
		},
		{
			name: "triggers with branch and regex filters",
			yaml: specTriggers,
			nodes: []Node{
				n("~pr"), n("~commit"), n("main"), n("feature"), n("~commit:/^feature-/"), n("~pr:release"),
				n("tagged"), n(`~tag:/^v\d+/`), n("~release"), n("closed"), n("~pr-closed"), n("staging"), n("~commit:staging"),
			},
			edges: []Edge{
				{Src: "~commit", Dest: "main"},
				{Src: "~pr", Dest: "main"},
				{Src: "~commit:/^feature-/", Dest: "feature"},
				{Src: "~pr:release", Dest: "feature"},
				{Src: `~tag:/^v\d+/`, Dest: "tagged"},
				{Src: "~release", Dest: "tagged"},
				{Src: "~pr-closed", Dest: "closed"},
				{Src: "~commit:staging", Dest: "staging"},
			},
		},
		{
			name:  "remote trigger and remote join",
			yaml:  specRemote,
			nodes: []Node{n("~pr"), n("~commit"), n("deploy"), n("~sd@infra:publish"), n("integrate"), n("sd@lib:build"), n("sd@api:build"), n("local")},
			edges: []Edge{
				{Src: "~sd@infra:publish", Dest: "deploy"},
				{Src: "sd@lib:build", Dest: "integrate", Join: true},
				{Src: "sd@api:build", Dest: "integrate", Join: true},
				{Src: "local", Dest: "integrate", Join: true},
				{Src: "~commit", Dest: "local"},
			},
		},
		{
			name:  "detached jobs",
			yaml:  specDetached,
			nodes: []Node{n("~pr"), n("~commit"), n("main"), n("nightly"), n("cleanup")},
			edges: []Edge{{Src: "~commit", Dest: "main"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := mustParse(t, tt.yaml)
			// Screwdriver's node order is deterministic too; sluice keeps it.
			require.Equal(t, tt.nodes, spec.Graph.Nodes)
			require.ElementsMatch(t, tt.edges, spec.Graph.Edges)
		})
	}
}

func TestGraphJSONShape(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specOrAnd)
	b, err := json.Marshal(spec.Graph)
	require.NoError(t, err)
	require.Contains(t, string(b), `{"src":"~commit","dest":"build"}`, "join omitted when false")
	require.Contains(t, string(b), `{"src":"build","dest":"unit","join":true}`)
	require.Contains(t, string(b), `{"name":"~pr"}`)
}

func TestNextJobs(t *testing.T) {
	t.Parallel()
	orAnd := mustParse(t, specOrAnd)
	stages := mustParse(t, specStages)
	tests := []struct {
		name string
		spec *Spec
		job  string
		want []Next
	}{
		{"build feeds joins and an OR", orAnd, "build", []Next{{Job: "unit", Join: true}, {Job: "package", Join: true}, {Job: "notify"}}},
		{"lint feeds joins and an OR", orAnd, "lint", []Next{{Job: "package", Join: true}, {Job: "deploy", Join: true}, {Job: "notify"}}},
		{"package is an OR parent of deploy", orAnd, "package", []Next{{Job: "deploy"}}},
		{"leaf", orAnd, "notify", nil},
		{"unknown job", orAnd, "nope", nil},
		{"stage setup starts members", stages, "stage@prod:setup", []Next{{Job: "deploy-a"}}},
		{"member into teardown", stages, "verify", []Next{{Job: "stage@prod:teardown", Join: true}}},
		{"teardown to downstream", stages, "stage@prod:teardown", []Next{{Job: "after"}}},
		{"build into stage setup", stages, "build", []Next{{Job: "stage@prod:setup", Join: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.spec.NextJobs(tt.job))
		})
	}
}

func TestNextJobsOrWinsOverJoin(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, sharedHeader+`
jobs:
	a: {requires: [~commit]}
	b: {requires: [~a, a]}
`)
	require.Equal(t, []Next{{Job: "b"}}, spec.NextJobs("a"))
}

func TestJoinParents(t *testing.T) {
	t.Parallel()
	orAnd := mustParse(t, specOrAnd)
	remote := mustParse(t, specRemote)
	tests := []struct {
		name string
		spec *Spec
		job  string
		want []string
	}{
		{"mixed: ~package alone, or unit and lint together", orAnd, "deploy", []string{"unit", "lint"}},
		{"plain join", orAnd, "package", []string{"build", "lint"}},
		{"single plain parent", orAnd, "unit", []string{"build"}},
		{"OR only", orAnd, "notify", nil},
		{"remote join parents", remote, "integrate", []string{"sd@lib:build", "sd@api:build", "local"}},
		{"unknown", orAnd, "nope", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.spec.JoinParents(tt.job))
		})
	}
}

func TestJoinSatisfied(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specOrAnd)
	require.False(t, spec.JoinSatisfied("deploy", map[string]bool{"unit": true}))
	require.True(t, spec.JoinSatisfied("deploy", map[string]bool{"unit": true, "lint": true}))
	require.False(t, spec.JoinSatisfied("notify", map[string]bool{"build": true, "lint": true}), "no join parents")
}

func TestStartJobs(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specTriggers)
	tests := []struct {
		name          string
		kind          EventKind
		ref           string
		defaultBranch string
		want          []string
	}{
		{"commit on pipeline branch", EventCommit, "main", "main", []string{"main"}},
		{"commit on regex branch", EventCommit, "feature-login", "main", []string{"feature"}},
		{"commit on literal branch", EventCommit, "staging", "main", []string{"staging"}},
		{"commit on other branch", EventCommit, "dev", "main", nil},
		{"commit without known default branch", EventCommit, "dev", "", []string{"main"}},
		{"pr into pipeline branch", EventPR, "main", "main", []string{"main"}},
		{"pr into release", EventPR, "release", "main", []string{"feature"}},
		{"pr closed on pipeline branch", EventPRClosed, "main", "main", []string{"closed"}},
		{"pr closed elsewhere", EventPRClosed, "dev", "main", nil},
		{"tag matching regex", EventTag, "v1.2.0", "main", []string{"tagged"}},
		{"tag not matching", EventTag, "nightly", "main", nil},
		{"any release", EventRelease, "whatever", "main", []string{"tagged"}},
		{"subscribe has no job", EventSubscribe, "", "main", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, spec.StartJobs(tt.kind, tt.ref, tt.defaultBranch))
		})
	}
}

func TestRemoteTriggers(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specRemote)
	require.Equal(t, []string{"sd@api:build", "sd@infra:publish", "sd@lib:build"}, spec.RemoteTriggers())
	require.Equal(t, []Next{{Job: "deploy"}}, spec.SubscribedJobs("sd@infra:publish"))
	require.Equal(t, []Next{{Job: "deploy"}}, spec.SubscribedJobs("~sd@infra:publish"))
	require.Equal(t, []Next{{Job: "integrate", Join: true}}, spec.SubscribedJobs("sd@lib:build"))
	require.Nil(t, spec.SubscribedJobs("sd@other:job"))
	require.Nil(t, mustParse(t, specOrAnd).RemoteTriggers())
}

func TestStageJobs(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specStages)
	require.Equal(t, []string{"stage@prod:setup", "deploy-a", "deploy-b", "verify", "stage@prod:teardown"}, spec.StageJobs("prod"))
	require.Nil(t, spec.StageJobs("nope"))
	st := spec.Stages["prod"]
	require.Equal(t, []string{"build"}, st.Requires)
	require.Equal(t, "Production", st.Description)
	require.Equal(t, []string{"build"}, spec.Jobs["stage@prod:setup"].Requires)
	require.Equal(t, []string{"deploy-b", "verify"}, spec.Jobs["stage@prod:teardown"].Requires)
	require.True(t, spec.Jobs["stage@prod:setup"].Settings.VirtualJob)
	require.Equal(t, []Command{{Name: "noop", Command: "echo noop"}}, spec.Jobs["stage@prod:setup"].Permutations[0].Commands)
	require.Equal(t, []string{"~stage@prod:teardown"}, spec.Jobs["after"].Requires, "stage shorthand expanded")
}

func TestDetachedAndPeriodicJobs(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specDetached)
	require.Equal(t, []string{"nightly", "cleanup"}, spec.DetachedJobs())
	require.Equal(t, []string{"nightly"}, spec.PeriodicJobs())
	require.False(t, spec.Jobs["main"].Detached())
}

func TestQueriesSurviveJSONRoundTrip(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specOrAnd)
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, spec.NextJobs("build"), back.NextJobs("build"))
	require.Equal(t, spec.JoinParents("deploy"), back.JoinParents("deploy"))
	require.Equal(t, spec.StartJobs(EventCommit, "main", "main"), back.StartJobs(EventCommit, "main", "main"))
	require.Equal(t, spec.Jobs["deploy"].Settings, back.Jobs["deploy"].Settings)
}
