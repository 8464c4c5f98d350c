package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

const prBaseSpec = `
shared: {image: golang:1.22}
annotations:
	screwdriver.cd/restrictPR: fork
jobs:
	test:
		requires: [~pr, ~commit]
		image: golang:1.22
		annotations:
			screwdriver.cd/executor: pr-pool
			screwdriver.cd/cpu: LOW
		secrets: [NPM_TOKEN]
		steps: [{run: go test ./...}]
	deploy:
		requires: [test]
		annotations: {screwdriver.cd/executor: release-q}
		secrets: [DEPLOY_KEY]
		steps: [{run: ./deploy}]
`

// The pull request's head asks for a restricted queue, more resources, a
// secret its job is not given, chainPR and no restriction: none of it
// holds; its steps, image and graph do.
const prHeadSpec = `
shared: {image: golang:1.22}
annotations:
	screwdriver.cd/chainPR: true
	screwdriver.cd/restrictPR: none
jobs:
	test:
		requires: [~pr, ~commit]
		image: alpine:3
		annotations:
			screwdriver.cd/executor: release-q
			screwdriver.cd/ram: TURBO
		secrets: [NPM_TOKEN, DEPLOY_KEY]
		matrix: {GO: ["1.21", "1.22"]}
		steps: [{pwn: cat /proc/$PPID/environ}]
	deploy:
		requires: [test]
		steps: [{run: ./deploy}]
	extra:
		requires: [~pr]
		annotations: {screwdriver.cd/executor: release-q, screwdriver.cd/cpu: HIGH}
		secrets: [DEPLOY_KEY]
		steps: [{x: env}]
`

func TestApplyBaseTakesSecurityFromBase(t *testing.T) {
	base := mustParse(t, prBaseSpec)
	head := ApplyBase(mustParse(t, prHeadSpec), base)

	require.False(t, head.ChainPR(), "chainPR comes from the base (absent there)")
	restrict, err := head.RestrictPR()
	require.NoError(t, err)
	require.Equal(t, RestrictPRFork, restrict)

	test := head.Jobs["test"]
	require.Equal(t, "pr-pool", test.Settings.Executor)
	require.Equal(t, "pr-pool", test.Annotations[AnnotationExecutor])
	require.Equal(t, "LOW", test.Annotations[AnnotationCPU])
	require.NotContains(t, test.Annotations, AnnotationRAM)
	require.Len(t, test.Permutations, 2, "the head's matrix stays")
	for _, p := range test.Permutations {
		require.Equal(t, []string{"NPM_TOKEN"}, p.Secrets)
		require.Equal(t, "alpine:3", p.Image, "the image and steps come from the head")
		require.Equal(t, "pwn", p.Commands[0].Name)
	}

	deploy := head.Jobs["deploy"]
	require.Equal(t, "release-q", deploy.Settings.Executor, "the base's queue holds even where the head names none")
	require.Equal(t, []string{"DEPLOY_KEY"}, deploy.Permutations[0].Secrets)

	extra := head.Jobs["extra"]
	require.Empty(t, extra.Settings.Executor, "a job only in the head gets the pipeline's queue")
	require.Empty(t, extra.Annotations[AnnotationExecutor])
	require.NotContains(t, extra.Annotations, AnnotationCPU)
	require.Empty(t, extra.Permutations[0].Secrets)

	require.Contains(t, WarningTexts(head.Warnings), `jobs.test.secrets: secrets DEPLOY_KEY are not given to the pull request: the base branch's spec does not list them for this job`)
	require.Contains(t, WarningTexts(head.Warnings), `jobs.extra.annotations.screwdriver.cd/executor: the pull request's value "release-q" is ignored; the base branch's default (unset) applies`)
	require.Contains(t, WarningTexts(head.Warnings), `annotations.screwdriver.cd/chainPR: the pull request's value true is ignored; the base branch's default (unset) applies`)

	// The spec travels through Temporal: the merge survives a JSON round trip.
	data, err := json.Marshal(head)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, "pr-pool", back.Jobs["test"].Settings.Executor)
	require.Empty(t, back.Jobs["extra"].Permutations[0].Secrets)
}

func TestApplyBaseKeepsBaseChainPR(t *testing.T) {
	base := mustParse(t, "annotations: {screwdriver.cd/chainPR: true}\nshared: {image: a}\njobs: {a: {requires: [~pr], steps: [{s: x}]}}")
	head := ApplyBase(mustParse(t, "shared: {image: a}\njobs: {a: {requires: [~pr], steps: [{s: y}]}}"), base)
	require.True(t, head.ChainPR())
	require.Empty(t, head.Warnings, "a head that changes nothing of the base's settings draws no warning")
}

func TestApplyBaseDoesNotChangeBase(t *testing.T) {
	base := mustParse(t, prBaseSpec)
	ApplyBase(mustParse(t, prHeadSpec), base)
	head := ApplyBase(mustParse(t, prHeadSpec), base)
	head.Jobs["test"].Permutations[0].Secrets[0] = "CHANGED"
	head.Jobs["test"].Annotations[AnnotationCPU] = "CHANGED"
	require.Equal(t, []string{"NPM_TOKEN"}, base.Jobs["test"].Permutations[0].Secrets)
	require.Equal(t, "LOW", base.Jobs["test"].Annotations[AnnotationCPU])
}

func TestRestrictPR(t *testing.T) {
	for _, tc := range []struct {
		yaml, want, err string
	}{
		{yaml: "shared: {image: a}\njobs: {a: {steps: [{s: x}]}}", want: RestrictPRNone},
		{yaml: "annotations: {screwdriver.cd/restrictPR: Fork}\nshared: {image: a}\njobs: {a: {steps: [{s: x}]}}", want: RestrictPRFork},
		{yaml: "annotations: {screwdriver.cd/restrictPR: all}\nshared: {image: a}\njobs: {a: {steps: [{s: x}]}}", want: RestrictPRAll},
		{yaml: "annotations: {screwdriver.cd/restrictPR: branch}\nshared: {image: a}\njobs: {a: {steps: [{s: x}]}}", want: RestrictPRBranch},
		{yaml: "annotations: {screwdriver.cd/restrictPR: forks}\nshared: {image: a}\njobs: {a: {steps: [{s: x}]}}", err: `pipeline annotation "screwdriver.cd/restrictPR" must be none, all, fork or branch, got "forks"`},
		{yaml: "annotations: {screwdriver.cd/restrictPR: true}\nshared: {image: a}\njobs: {a: {steps: [{s: x}]}}", err: `must be none, all, fork or branch, got true`},
	} {
		got, err := mustParse(t, tc.yaml).RestrictPR()
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	for _, tc := range []struct {
		restrict string
		fork     bool
		want     bool
	}{
		{RestrictPRNone, true, false},
		{RestrictPRNone, false, false},
		{RestrictPRAll, true, true},
		{RestrictPRAll, false, true},
		{RestrictPRFork, true, true},
		{RestrictPRFork, false, false},
		{RestrictPRBranch, true, false},
		{RestrictPRBranch, false, true},
	} {
		require.Equal(t, tc.want, RestrictsPR(tc.restrict, tc.fork), "%s fork=%v", tc.restrict, tc.fork)
	}
}
