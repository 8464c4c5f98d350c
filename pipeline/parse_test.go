package pipeline

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		wantJob string
		wantErr string
	}{
		{name: "single document", yaml: "jobs: {main: {image: a, steps: [x]}}", wantJob: "main"},
		{name: "version 4 document wins", yaml: "jobs: {old: {image: a, steps: [x]}}\n---\nversion: 4\njobs: {new: {image: a, steps: [x]}}", wantJob: "new"},
		{name: "ambiguous documents", yaml: "jobs: {a: {image: a, steps: [x]}}\n---\njobs: {b: {image: a, steps: [x]}}", wantErr: "Configuration is too ambigious - contains multiple documents without a version hint"},
		{name: "empty", yaml: "", wantErr: `pipeline spec is empty: "jobs" is required`},
		{name: "comment only", yaml: "# nothing\n", wantErr: `"jobs" is required`},
		{name: "null document", yaml: "---\n", wantErr: "must be of type object"},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "pipeline spec must be of type object (a YAML mapping), got array"},
		{name: "syntax error", yaml: "jobs: {main: [}", wantErr: "cannot parse YAML"},
		{name: "not utf-8", yaml: "jobs: \xff", wantErr: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorIs(t, err, ErrInvalidSpec)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{tt.wantJob}, spec.JobOrder)
		})
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(strings.ReplaceAll(`
jobs:
	build:
		image: node:20
		steps: [{make: make}]
		requires: [~commit, tset]
		freezeWindows: ["* * * * *"]
		annotations:
			screwdriver.cd/timeout: soon
	deploy:
		image: node:20
		steps: [{sd-deploy: ./deploy}]
		requires: [build, stage@nope]
		blockedBy: [~ghost]
	pr-7:
		image: node:20
		steps: [{x: y}]
`, "\t", "    ")))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	msgs := err.Error()
	for _, want := range []string{
		`"jobs.build.freezeWindows[0]" with value "* * * * *" is not a valid freeze window`,
		`Job "build": annotation "screwdriver.cd/timeout" must be a whole number of minutes`,
		`build job has invalid requires: tset. Cannot find job tset in jobs.`,
		`deploy job has invalid requires: stage@nope. Cannot find stage nope in stages.`,
		`Job "deploy": Step "sd-deploy": cannot use a restricted prefix "sd-"`,
		`Job "pr-7": cannot use a restricted prefix "pr-"`,
	} {
		require.Contains(t, msgs, want)
	}
	require.Len(t, verr.Problems, 6)
	for _, p := range verr.Problems {
		require.NotEmpty(t, p.Job, "problem %q names its job", p.Message)
		require.Contains(t, p.Message, p.Job, "the message itself names the job")
	}
	require.Len(t, verr.Problems, strings.Count(msgs, "\n")+1, "one line per problem")
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		wants []string
	}{
		{name: "job template", yaml: "jobs: {main: {template: foo/bar@1, requires: [~commit]}}", wants: []string{`Job "main": "template" is not supported by sluice`}},
		{name: "pipeline template", yaml: "template: foo/bar@1\njobs: {main: {image: a, steps: [x]}}", wants: []string{`"template" is not supported by sluice: pipeline templates`}},
		{name: "unknown top-level key", yaml: "foo: 1\njobs: {main: {image: a, steps: [x]}}", wants: []string{`"foo" is not allowed`}},
		{name: "unknown job key", yaml: "jobs: {main: {image: a, steps: [x], needs: [a]}}", wants: []string{`"jobs.main.needs" is not allowed`}},
		{name: "empty jobs", yaml: "jobs: {}", wants: []string{`"jobs" must have at least 1 key`}},
		{name: "bad job name", yaml: "jobs: {\"a b\": {image: a, steps: [x]}}", wants: []string{`"jobs.a b" is not allowed`}},
		{name: "long job name", yaml: fmt.Sprintf("jobs: {%s: {image: a, steps: [x]}}", strings.Repeat("j", 101)), wants: []string{"name cannot be longer than 100 characters"}},
		{name: "bad requires syntax", yaml: "jobs: {main: {image: a, steps: [x], requires: [\"~commit:\", \"a b\"]}}", wants: []string{`"jobs.main.requires[0]"`, `"jobs.main.requires[1]": "a b" is not a job`}},
		{name: "bad trigger regex", yaml: "jobs: {main: {image: a, steps: [x], requires: [\"~commit:/(/\"]}}", wants: []string{`"jobs.main.requires[0]": invalid regular expression /(/`}},
		{name: "requires a misspelt job", yaml: "jobs: {build: {image: a, steps: [x]}, test: {image: a, steps: [x], requires: [~commit, biuld]}}", wants: []string{"test job has invalid requires: biuld. Cannot find job biuld in jobs. Did you mean build?"}},
		{name: "duplicate key", yaml: "shared: {annotations: {screwdriver.cd/collapseBuilds: false}}\nshared: {image: a}\njobs: {main: {steps: [x]}}", wants: []string{`line 2: mapping key "shared" already defined at line 1`}},
		{name: "duplicate job", yaml: "jobs:\n  main: {image: a, steps: [x]}\n  main: {image: b, steps: [y]}\n", wants: []string{`line 3: mapping key "main" already defined at line 2`}},
		{name: "no image", yaml: "jobs: {main: {steps: [x]}, other: {image: a, steps: [x]}}", wants: []string{`"jobs.main.image" is required (set it in the job or in "shared"), as Screwdriver requires`}},
		{name: "bare blockedBy job", yaml: "jobs: {main: {image: a, steps: [x], blockedBy: [other]}, other: {image: a, steps: [x]}}", wants: []string{`"jobs.main.blockedBy[0]": "other" must start with ~ (write ~other), as Screwdriver requires`}},
		{name: "bare blockedBy remote", yaml: "jobs: {main: {image: a, steps: [x], blockedBy: [sd@p:j]}}", wants: []string{`"jobs.main.blockedBy[0]": "sd@p:j" must start with ~`}},
		{name: "bad blockedBy", yaml: "jobs: {main: {image: a, steps: [x], blockedBy: [~commit]}}", wants: []string{`"jobs.main.blockedBy[0]": "~commit" is not a job`}},
		{name: "self cycle", yaml: "jobs: {main: {image: a, steps: [x], requires: [main]}}", wants: []string{"Jobs: should not have circular dependency in jobs (main -> main)"}},
		{name: "or cycle", yaml: "jobs: {a: {image: a, steps: [x], requires: [~b]}, b: {image: a, steps: [x], requires: [~a]}}", wants: []string{"Jobs: should not have circular dependency in jobs (a -> b -> a)"}},
		{name: "step with two keys", yaml: "jobs: {main: {image: a, steps: [{a: x, b: y}]}}", wants: []string{`"jobs.main.steps[0]" must have exactly one key`}},
		{name: "step without command", yaml: "jobs: {main: {image: a, steps: [{a: {locked: true}}]}}", wants: []string{`"jobs.main.steps[0].a.command" is required`}},
		{name: "matrix not an array", yaml: "jobs: {main: {image: a, steps: [x], matrix: {A: 1}}}", wants: []string{`"jobs.main.matrix.A" must be an array`}},
		{name: "empty matrix axis", yaml: "jobs: {main: {image: a, steps: [x], matrix: {A: []}}}", wants: []string{`"jobs.main.matrix.A" must contain at least 1 items`}},
		{name: "bad secret", yaml: "jobs: {main: {image: a, steps: [x], secrets: [npm-token]}}", wants: []string{`"jobs.main.secrets[0]" with value "npm-token" fails to match`}},
		{name: "duplicate stage job", yaml: "jobs: {a: {image: a, steps: [x]}}\nstages: {s1: {jobs: [a]}, s2: {jobs: [a]}}", wants: []string{"Cannot have duplicate job in multiple stages: a"}},
		{name: "nonexistent stage job", yaml: "jobs: {a: {image: a, steps: [x]}}\nstages: {s1: {jobs: [a, b, c]}}", wants: []string{"Cannot have nonexistent job in stages: b,c"}},
		{name: "stage job triggered from outside", yaml: "jobs: {a: {image: a, steps: [x], requires: [~commit]}, b: {image: a, steps: [x], requires: [a]}}\nstages: {s: {jobs: [b]}}", wants: []string{"b job has invalid requires: a. Triggers must be jobs from s stage."}},
		{name: "stage requires nonexistent job", yaml: "jobs: {a: {image: a, steps: [x]}}\nstages: {s: {jobs: [a], requires: [ghost]}}", wants: []string{"s stage has invalid requires: ghost. Cannot find job ghost in jobs."}},
		{name: "stage without jobs", yaml: "jobs: {a: {image: a, steps: [x]}}\nstages: {s: {description: x}}", wants: []string{`"stages.s.jobs" is required`}},
		{name: "scm url", yaml: "subscribe: {scmUrls: [nope]}\njobs: {a: {image: a, steps: [x]}}", wants: []string{`"subscribe.scmUrls[0]" with value "nope" fails to match the required pattern`}},
		{name: "multi-error order: env then combined", yaml: "jobs: {a: {image: a, steps: [x], environment: {" + envVars(101) + "}}}", wants: []string{
			"1:47: Job \"a\": \"environment\" can only have 100 environment variables defined\n1:47: Job \"a\": \"environment\" and \"matrix\" can only have a combined  maxiumum of 100 environment variables defined (currently 101)",
		}},
		{name: "alias bomb", yaml: aliasBomb(), wants: []string{"cannot parse YAML"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := parseErr(t, tt.yaml)
			for _, w := range tt.wants {
				require.Contains(t, msg, w)
			}
		})
	}
}

func envVars(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("V%d: x", i)
	}
	return strings.Join(parts, ", ")
}

// aliasBomb is a "billion laughs" document: nine levels of ten-fold aliases.
func aliasBomb() string {
	var sb strings.Builder
	sb.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&sb, "a%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "*a%d", i-1)
		}
		sb.WriteString("]\n")
	}
	sb.WriteString("jobs: {main: {image: a, steps: *a8}}\n")
	return sb.String()
}

func TestParseWarnings(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, sharedHeader+`
jobs:
	main:
		requires: [~commit]
		blockedBy: [~ghost, ~sd@other:deploy, ~main, ~sd@other:stage@ship:teardown]
		order: [a]
`)
	require.Equal(t, []Warning{
		{Field: "jobs.main.blockedBy", Message: `names job "ghost", which does not exist; it can never block`},
		{Field: "jobs.main.blockedBy", Message: `~sd@other:deploy is ignored: blocking by another pipeline's job is not supported; only jobs of this pipeline block`},
		{Field: "jobs.main.blockedBy", Message: `~sd@other:stage@ship:teardown is ignored: blocking by another pipeline's job is not supported; only jobs of this pipeline block`},
		{Field: "jobs.main.order", Message: `"order" in main job cannot be used without "template"; sluice has no templates, so "order" is ignored: the job's steps run in the order written`},
	}, spec.Warnings)
	require.Equal(t, []string{"~ghost", "~sd@other:deploy", "~main", "~sd@other:stage@ship:teardown"}, spec.Jobs["main"].BlockedBy)
}

func TestSteps(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
jobs:
	main:
		image: node:20
		steps:
			- echo first
			- named: echo named
			- full:
				command: echo full
			- 42
			- teardown-clean: rm -rf tmp
`)
	require.Equal(t, []Command{
		{Name: "step-1", Command: "echo first"},
		{Name: "named", Command: "echo named"},
		{Name: "full", Command: "echo full"},
		{Name: "step-4", Command: "42"},
		{Name: "teardown-clean", Command: "rm -rf tmp"},
	}, spec.Jobs["main"].Permutations[0].Commands)
}

func TestMatrixPermutations(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
jobs:
	main:
		image: "node:{{ NODE }}-{{OS}}-{{UNKNOWN}}"
		steps: [test]
		environment: {OS: linux, KEEP: "1"}
		matrix:
			NODE: [18, 20]
			OS: [alpine, debian, true]
`)
	perms := spec.Jobs["main"].Permutations
	require.Len(t, perms, 6)
	var images []string
	for _, p := range perms {
		images = append(images, p.Image)
	}
	require.Equal(t, []string{
		"node:18-alpine-{{UNKNOWN}}", "node:18-debian-{{UNKNOWN}}", "node:18-true-{{UNKNOWN}}",
		"node:20-alpine-{{UNKNOWN}}", "node:20-debian-{{UNKNOWN}}", "node:20-true-{{UNKNOWN}}",
	}, images)
	require.Equal(t, map[string]string{"NODE": "20", "OS": "debian"}, perms[4].Matrix)
	require.Equal(t, map[string]string{"NODE": "20", "OS": "debian", "KEEP": "1"}, perms[4].Environment, "matrix overrides environment")
}

func TestComplexEnvironment(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
jobs:
	main:
		image: a
		steps: [x]
		environment:
			OBJ: {z: 1, a: [true, null, 1.5e-7, "q\"<"]}
			BIG: 1e21
			SMALL: 0.000001
			INT: -7
			STR: "007"
`)
	env := spec.Jobs["main"].Permutations[0].Environment
	require.Equal(t, `{"z":1,"a":[true,null,1.5e-7,"q\"<"]}`, env["OBJ"], "JSON.stringify: key order kept, no HTML escaping") //nolint:testifylint // the exact bytes are the point: JSONEq would ignore key order and escaping

	require.Equal(t, "1e+21", env["BIG"])
	require.Equal(t, "0.000001", env["SMALL"])
	require.Equal(t, "-7", env["INT"])
	require.Equal(t, "007", env["STR"])
}

func TestSharedMerge(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
shared:
	image: node:20
	steps: [{build: make}]
	requires: [~commit]
	blockedBy: [~other]
	freezeWindows: ["* 0-6 ? * *"]
	secrets: [A, B]
	sourcePaths: [src/]
	environment: {X: shared, Y: shared}
	settings: {email: a@b.c}
	matrix: {M: [1, 2]}
jobs:
	inherit: {}
	override:
		image: node:22
		steps: [{test: make test}]
		requires: [inherit]
		blockedBy: []
		secrets: [B, C]
		sourcePaths: [docs/]
		environment: {Y: job}
		settings: {}
		matrix: {N: [a]}
	other: {requires: []}
`)
	in, ov, other := spec.Jobs["inherit"], spec.Jobs["override"], spec.Jobs["other"]
	require.Equal(t, []string{"~commit"}, in.Requires)
	require.Equal(t, []string{"~other"}, in.BlockedBy)
	require.Equal(t, []string{"* 0-6 ? * *"}, in.FreezeWindows)
	require.Len(t, in.Permutations, 2)
	require.Equal(t, "node:20", in.Permutations[0].Image)

	require.Equal(t, []string{"inherit"}, ov.Requires)
	require.Empty(t, ov.BlockedBy)
	require.Equal(t, []string{"A", "B", "C"}, ov.Permutations[0].Secrets)
	require.Equal(t, []string{"src/", "docs/"}, ov.SourcePaths)
	require.Equal(t, map[string]string{"X": "shared", "Y": "job", "N": "a"}, ov.Permutations[0].Environment)
	require.Empty(t, ov.Notifications, "an explicit empty settings replaces shared's")
	require.Equal(t, "node:22", ov.Permutations[0].Image)
	require.Equal(t, []Command{{Name: "test", Command: "make test"}}, ov.Permutations[0].Commands)

	require.Equal(t, []string{}, other.Requires, "requires: [] stays detached")
	require.True(t, other.Detached())
	require.Equal(t, map[string]any{"email": "a@b.c"}, other.Notifications)
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
jobs:
	base: &base
		image: node:20
		steps:
			- test: make test
		environment: &env {A: "1", B: "2"}
		requires: [~commit]
	derived:
		<<: *base
		environment:
			<<: *env
			B: "3"
		requires: [base]
`)
	d := spec.Jobs["derived"]
	require.Equal(t, "node:20", d.Permutations[0].Image)
	require.Equal(t, map[string]string{"A": "1", "B": "3"}, d.Permutations[0].Environment)
	require.Equal(t, []string{"base"}, d.Requires)
}

func TestStageSetupAndTeardown(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
shared:
	image: node:20
	steps: [{run: make}]
	annotations: {screwdriver.cd/timeout: 5}
jobs:
	a: {}
	b: {requires: [~a]}
stages:
	s:
		jobs: [a, b]
		requires: ~commit
		sourcePaths: [app/]
		setup:
			steps: [{prepare: ./prepare}]
			sourcePaths: [config/]
		teardown:
			image: alpine
			steps: [{clean: ./clean}]
`)
	setup, teardown := spec.Jobs["stage@s:setup"], spec.Jobs["stage@s:teardown"]
	require.Equal(t, []string{"~commit"}, setup.Requires)
	require.Equal(t, []string{"config/"}, setup.SourcePaths, "the setup job's own sourcePaths win over the stage's")
	require.False(t, setup.Settings.VirtualJob)
	require.Equal(t, "node:20", setup.Permutations[0].Image, "shared merges into explicit setup jobs")
	require.Equal(t, []string{"b"}, teardown.Requires)
	require.Equal(t, "alpine", teardown.Permutations[0].Image)
	require.Equal(t, []string{"~stage@s:setup"}, spec.Jobs["a"].Requires)
	require.Equal(t, "s", spec.Jobs["a"].Stage)
	require.Equal(t, []string{"app/"}, spec.Stages["s"].SourcePaths)
	require.Equal(t, []string{"stage@s:setup", "a", "b", "stage@s:teardown"}, spec.StageJobs("s"))
	require.Equal(t, []string{"a", "b", "stage@s:setup", "stage@s:teardown"}, spec.JobOrder)
}

func TestSubscribeAndChildPipelines(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
childPipelines:
	scmUrls: [git@github.com:org/child.git]
	startAll: true
subscribe:
	scmUrls:
		- git@github.com:org/lib.git#main: [~commit, ~release]
jobs:
	main: {image: a, steps: [x], requires: [~subscribe]}
`)
	require.Equal(t, []Edge{{Src: "~subscribe", Dest: "main"}}, spec.Graph.Edges)
	require.Equal(t, []string{"main"}, spec.StartJobs(EventSubscribe, "", "main"))
	require.Equal(t, true, spec.ChildPipelines["startAll"])
	require.NotNil(t, spec.Subscribe["scmUrls"])
}

func TestParseRequire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Require
		wantErr bool
	}{
		{in: "~commit", want: Require{Raw: "~commit", Kind: RequireEvent, OR: true, Event: EventCommit}},
		{in: "~pr:main", want: Require{Raw: "~pr:main", Kind: RequireEvent, OR: true, Event: EventPR, Branch: "main"}},
		{in: "~pr-closed", want: Require{Raw: "~pr-closed", Kind: RequireEvent, OR: true, Event: EventPRClosed}},
		{in: "~tag:/^v/", want: Require{Raw: "~tag:/^v/", Kind: RequireEvent, OR: true, Event: EventTag, Regex: "^v"}},
		{in: "~release:/", want: Require{Raw: "~release:/", Kind: RequireEvent, OR: true, Event: EventRelease, Branch: "/"}},
		{in: "~sd@123:publish", want: Require{Raw: "~sd@123:publish", Kind: RequireRemote, OR: true, Pipeline: "123", Job: "publish"}},
		{in: "sd@org/repo.main:build", want: Require{Raw: "sd@org/repo.main:build", Kind: RequireRemote, Pipeline: "org/repo.main", Job: "build"}},
		{in: "~sd@p:stage@ship:setup", want: Require{Raw: "~sd@p:stage@ship:setup", Kind: RequireRemote, OR: true, Pipeline: "p", Job: "stage@ship:setup"}},
		{in: "sd@p:stage@ship:teardown", want: Require{Raw: "sd@p:stage@ship:teardown", Kind: RequireRemote, Pipeline: "p", Job: "stage@ship:teardown"}},
		{in: "~sd@org/repo:main:build", want: Require{Raw: "~sd@org/repo:main:build", Kind: RequireRemote, OR: true, Pipeline: "org/repo:main", Job: "build"}},
		{in: "stage@canary", want: Require{Raw: "stage@canary", Kind: RequireStage, Stage: "canary"}},
		{in: "~stage@canary:setup", want: Require{Raw: "~stage@canary:setup", Kind: RequireStage, OR: true, Stage: "canary", StagePhase: "setup"}},
		{in: "~build", want: Require{Raw: "~build", Kind: RequireJob, OR: true, Job: "build"}},
		{in: "build", want: Require{Raw: "build", Kind: RequireJob, Job: "build"}},
		{in: "commit", want: Require{Raw: "commit", Kind: RequireJob, Job: "commit"}},
		{in: "~commit:a b", wantErr: true},
		{in: "~stage@x:middle", wantErr: true},
		{in: "", wantErr: true},
		{in: "~", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRequire(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestProblemLocations: every problem names the line and column of the YAML
// node it is about, through aliases, dotted annotation keys, list items,
// stages and shared; a far-off name gets no suggestion.
func TestProblemLocations(t *testing.T) {
	t.Parallel()
	src := `shared:
  image: 3
stages:
  ship:
    jobs: [deploy]
    requires: [~sd@x:y, tset]
jobs:
  build:
    image: a
    steps: [make]
  test:
    image: a
    requires: [~commit, biuld]
    steps: [go test]
    annotations:
      screwdriver.cd/buildPeriodically: nope
  deploy:
    image: a
    steps: [x]
    requires: [ghostly]
`
	_, err := Parse([]byte(src))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	got := map[string][2]int{}
	for _, p := range verr.Problems {
		got[p.Message] = [2]int{p.Line, p.Column}
	}
	want := map[string][2]int{
		`"shared.image" must be a string`: {2, 10},
		`test job has invalid requires: biuld. Cannot find job biuld in jobs. Did you mean build?`:                                      {13, 25},
		`Job "test": annotation "screwdriver.cd/buildPeriodically" is not a valid cron expression: nope does not have exactly 5 fields`: {16, 41},
		`ship stage has invalid requires: tset. Cannot find job tset in jobs. Did you mean test?`:                                       {6, 25},
		`deploy job has invalid requires: ghostly. Cannot find job ghostly in jobs.`:                                                    {20, 16},
	}
	for msg, at := range want {
		require.Contains(t, got, msg, "problems: %v", verr.Problems)
		require.Equal(t, at, got[msg], msg)
	}
	require.Contains(t, err.Error(), "13:25: test job has invalid requires: biuld.")
}

// TestImageFromShared: an image in shared satisfies every job.
func TestImageFromShared(t *testing.T) {
	t.Parallel()
	spec, err := Parse([]byte("shared: {image: node:22}\njobs: {main: {steps: [x]}}\n"))
	require.NoError(t, err)
	require.Equal(t, "node:22", spec.Jobs["main"].Permutations[0].Image)
}

// Hostile specs (review finding 10; a fork's pull request is enough to send
// one) are refused quickly with an error that says why.
func TestHostileSpecsRefused(t *testing.T) {
	t.Parallel()
	// Billion laughs: each level multiplies the one before by ten.
	var b strings.Builder
	b.WriteString("a0: &a0 [\"lol\"]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("jobs: {main: {image: alpine, requires: [~commit], steps: [{x: *a9}]}}\n")
	_, err := Parse([]byte(b.String()))
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.Contains(t, err.Error(), "expand")

	// One big anchored command referenced by many steps: few nodes, many bytes.
	big := strings.Repeat("x", 64<<10)
	var s strings.Builder
	fmt.Fprintf(&s, "shared: {image: alpine}\ncmd: &c %q\njobs:\n  main:\n    requires: [~commit]\n    steps:\n", big)
	for i := range 2000 {
		fmt.Fprintf(&s, "      - s%d: *c\n", i)
	}
	_, err = Parse([]byte(s.String()))
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.Contains(t, err.Error(), "aliases expand the document past its limit")

	// A spec file over 1 MiB.
	huge := "jobs: {main: {image: alpine, requires: [~commit], steps: [{x: " + strconv.Quote(strings.Repeat("y", MaxSpecBytes)) + "}]}}\n"
	_, err = Parse([]byte(huge))
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.Contains(t, err.Error(), "the limit is 1048576 (1 MiB)")

	// Anchors as teams use them still parse: a step list shared by 30 jobs.
	var ok strings.Builder
	ok.WriteString("shared: {image: alpine}\njobs:\n  j0: {requires: [~commit], steps: &steps [{build: make build}, {test: make test}, {lint: make lint}]}\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&ok, "  j%d: {requires: [~commit], steps: *steps}\n", i)
	}
	spec, err := Parse([]byte(ok.String()))
	require.NoError(t, err)
	require.Len(t, spec.Jobs, 30)
}

// Variables that steer the executor's own processes (the container
// runtime's client, the dynamic loader, proxies) are not a job's to set
// (review finding 6).
func TestReservedVariableNamesRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ field, name string }{
		{"environment", "LD_PRELOAD"},
		{"environment", "LD_LIBRARY_PATH"},
		{"environment", "GCONV_PATH"},
		{"environment", "DOCKER_HOST"},
		{"environment", "CONTAINERS_CONF"},
		{"environment", "HTTPS_PROXY"},
		{"matrix", "LD_AUDIT"},
	} {
		value := "x"
		if tc.field == "matrix" {
			value = "[x]"
		}
		spec := fmt.Sprintf("jobs: {main: {image: alpine, requires: [~commit], %s: {%s: %s}, steps: [{a: true}]}}\n", tc.field, tc.name, value)
		_, err := Parse([]byte(spec))
		require.ErrorIs(t, err, ErrInvalidSpec, tc.name)
		require.Contains(t, err.Error(), tc.name+"\" is not allowed", tc.name)
	}
	_, err := Parse([]byte("jobs: {main: {image: alpine, requires: [~commit], secrets: [LD_PRELOAD], steps: [{a: true}]}}\n"))
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.Contains(t, err.Error(), "dynamic loader")
}
