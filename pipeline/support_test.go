package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// screwdriverAnnotations are the screwdriver.cd annotations Screwdriver's
// guide documents (user-guide/configuration/annotations); the fixtures use
// only a few of them.
var screwdriverAnnotations = []string{
	"screwdriver.cd/buildPeriodically", "screwdriver.cd/cpu", "screwdriver.cd/ram", "screwdriver.cd/disk",
	"screwdriver.cd/timeout", "screwdriver.cd/executor", "screwdriver.cd/repoManifest",
	"screwdriver.cd/collapseBuilds", "screwdriver.cd/blockedBySameJob", "screwdriver.cd/blockedBySameJobWaitTime",
	"screwdriver.cd/mergeSharedSteps", "screwdriver.cd/manualStartEnabled", "screwdriver.cd/restrictPR",
	"screwdriver.cd/chainPR", "screwdriver.cd/buildCluster", "screwdriver.cd/dockerEnabled",
	"screwdriver.cd/dockerCpu", "screwdriver.cd/dockerRam", "screwdriver.cd/coverageScope",
	"screwdriver.cd/virtualJob", "screwdriver.cd/displayName", "screwdriver.cd/terminationGracePeriodSeconds",
	"screwdriver.cd/useDeployKey",
}

// hasWarning reports whether ws holds a warning about field.
func hasWarning(ws []Warning, field string) bool {
	return slices.ContainsFunc(ws, func(w Warning) bool { return w.Field == field })
}

// requireActedOrWarned walks a written value the way Screwdriver's schema
// nests it and fails for a field that has no entry in Fields, or an entry
// that is not acted on without a warning naming the field.
func requireActedOrWarned(t *testing.T, file, generic, concrete string, v *value, ws []Warning) {
	t.Helper()
	if v == nil || v.kind == kNull || (v.kind == kMap && len(v.keys) == 0) {
		return
	}
	if generic == "annotations" || generic == "jobs.*.annotations" {
		if v.kind != kMap {
			return
		}
		for _, k := range v.keys {
			if AnnotationWarning(k, generic == "annotations") != "" {
				require.True(t, hasWarning(ws, concrete+"."+k), "%s: annotation %s is not acted on and draws no warning: %v", file, concrete+"."+k, ws)
			}
		}
		return
	}
	s, ok := lookupSupport(generic)
	require.True(t, ok, "%s: field %s (%s) is neither implemented nor warned about: add it to pipeline.Fields", file, concrete, generic)
	if !s.Acted {
		require.NotEmpty(t, s.Instead, "%s: %s is not acted on and has no Instead text", generic)
		require.True(t, hasWarning(ws, concrete), "%s: %s is not acted on and draws no warning: %v", file, concrete, ws)
		return
	}
	if v.kind != kMap || !hasChildren(generic) {
		return
	}
	for i, k := range v.keys {
		child := generic + "." + k
		switch {
		case generic == "jobs":
			child = "jobs.*"
		case generic == "stages":
			child = "stages.*"
		case generic == "stages.*" && (k == "setup" || k == "teardown"):
			child = "jobs.*"
		}
		requireActedOrWarned(t, file, child, concrete+"."+k, v.vals[i], ws)
	}
}

// TestSchemaFieldsImplementedOrWarned walks every field Screwdriver's
// fixtures write (its data-schema's fields: top level, jobs, shared, stages,
// cache, settings, provider, annotations) and fails for any field sluice
// neither acts on nor warns about.
func TestSchemaFieldsImplementedOrWarned(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, file := range conformanceFiles(t, "valid") {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		raw, err := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".json")
		require.NoError(t, err)
		var want sdOutput
		require.NoError(t, json.Unmarshal(raw, &want))
		spec, err := Parse(data)
		if len(want.Errors) > 0 {
			continue // rejected (an error, not a silent ignore)
		}
		require.NoError(t, err, file)
		p := &parser{conv: &converter{budget: maxValueNodes, bytes: expansionBudget(len(data))}}
		root := p.load(data)
		require.NotNil(t, root, file)
		name := filepath.Base(file)
		for i, k := range root.keys {
			seen[k] = true
			generic := k
			if k == "shared" {
				generic = "jobs.*"
			}
			requireActedOrWarned(t, name, generic, k, root.vals[i], spec.Warnings)
		}
	}
	// The fixtures cover the fields the issue names.
	for _, k := range []string{"cache", "childPipelines", "subscribe", "parameters", "annotations", "stages", "shared"} {
		require.True(t, seen[k], "fixtures write top-level %q", k)
	}

	// Every documented screwdriver.cd annotation, at both levels.
	var sb strings.Builder
	sb.WriteString("annotations:\n")
	for _, a := range screwdriverAnnotations {
		sb.WriteString("  " + a + ": x\n")
	}
	sb.WriteString("jobs:\n  main:\n    image: alpine\n    steps: [a: echo]\n    annotations:\n")
	for _, a := range screwdriverAnnotations {
		sb.WriteString("      " + a + ": x\n")
	}
	p := &parser{conv: &converter{budget: maxValueNodes, bytes: 1 << 20}}
	root := p.load([]byte(sb.String()))
	p.checkSupport(root)
	for _, a := range screwdriverAnnotations {
		for _, pipelineLevel := range []bool{true, false} {
			field := "jobs.main.annotations." + a
			if pipelineLevel {
				field = "annotations." + a
			}
			sup, known := Annotations[a]
			acts := known && ((pipelineLevel && sup.Pipeline) || (!pipelineLevel && sup.Job))
			require.Equal(t, !acts, hasWarning(p.warnings, field), "%s: acted on (%v) or warned about", field, acts)
		}
	}
}

func TestUnsupportedFieldsWarn(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, `
annotations:
	screwdriver.cd/buildCluster: aws
	screwdriver.cd/chainPR: true
	screwdriver.cd/timeout: 5
	sluice.dev/priority: 1
	example.com/owner: team-a
childPipelines:
	scmUrls: [git@github.com:org/repo.git]
subscribe:
	scmUrls: [{git@github.com:org/repo.git: [~commit]}]
cache:
	pipeline: [node_modules]
shared:
	image: alpine
	settings:
		email: a@example.com
jobs:
	main:
		steps: [a: echo]
		provider: git@github.com:org/provider.git#main:provider.yaml
		parameters: {x: y}
		annotations:
			screwdriver.cd/chainPR: true
			screwdriver.cd/disk: HIGH
			screwdriver.cd/madeUp: 1
			screwdriver.cd/timeout: 5
	empty:
		steps: [a: echo]
		settings: {}
stages:
	ship:
		jobs: [main]
		color: red
`)
	got := map[string]string{}
	for _, w := range spec.Warnings {
		require.NotContains(t, got, w.Field, "one warning per field")
		got[w.Field] = w.Message
	}
	require.Equal(t, []string{
		"annotations.screwdriver.cd/buildCluster",
		"annotations.screwdriver.cd/timeout",
		"annotations.sluice.dev/priority",
		"childPipelines",
		"jobs.main.annotations.screwdriver.cd/chainPR",
		"jobs.main.annotations.screwdriver.cd/disk",
		"jobs.main.annotations.screwdriver.cd/madeUp",
		"jobs.main.parameters",
		"jobs.main.provider",
		"stages.ship.color",
		"subscribe",
	}, slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	}))
	require.Contains(t, got["annotations.screwdriver.cd/buildCluster"], "screwdriver.cd/executor")
	require.Contains(t, got["annotations.screwdriver.cd/timeout"], "shared.annotations")
	require.Contains(t, got["jobs.main.annotations.screwdriver.cd/chainPR"], "top-level annotations")
	require.Contains(t, got["jobs.main.annotations.screwdriver.cd/madeUp"], "ignored")
	require.Contains(t, got["childPipelines"], "sluice pipeline create")
	require.Contains(t, got["jobs.main.provider"], "sluice executor")
	require.NotContains(t, got, "shared.settings", "notifications are acted on (pipeline/notify.go)")
}

// TestFieldTableFlips shows the table is the single switch: a field marked
// acted draws no warning.
func TestFieldTableFlips(t *testing.T) { //nolint:paralleltest // changes the package table
	yaml := sharedHeader + "childPipelines:\n\tscmUrls: [git@github.com:org/child.git]\njobs:\n\tmain:\n\t\trequires: [~commit]\n\t\tprovider: git@github.com:org/p.git#main:p.yaml\n"
	spec := mustParse(t, yaml)
	require.True(t, hasWarning(spec.Warnings, "childPipelines"))
	require.True(t, hasWarning(spec.Warnings, "jobs.main.provider"))
	saved := Fields["childPipelines"]
	savedJob := Fields["jobs.*.provider"]
	Fields["childPipelines"], Fields["jobs.*.provider"] = acted, acted
	defer func() { Fields["childPipelines"], Fields["jobs.*.provider"] = saved, savedJob }()
	spec = mustParse(t, yaml)
	require.Empty(t, spec.Warnings)
}

// TestCachePathsOutsideTheWorkspaceWarn: the executor skips ~, absolute
// and escaping cache paths, so validation says so.
func TestCachePathsOutsideTheWorkspaceWarn(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, sharedHeader+"cache:\n\tpipeline: [node_modules, ~/.m2]\n\tevent: [/tmp/x]\n\tjob: {main: [../up]}\njobs:\n\tmain:\n\t\trequires: [~commit]\n")
	got := WarningTexts(spec.Warnings)
	require.Len(t, got, 3, got)
	require.Contains(t, got[0]+got[1]+got[2], `cache.pipeline: "~/.m2" is not cached: ~ paths are not supported`)
	require.Contains(t, got[0]+got[1]+got[2], `cache.event: "/tmp/x" is not cached: absolute paths`)
	require.Contains(t, got[0]+got[1]+got[2], `cache.job.main: "../up" is not cached: the path leaves the workspace`)
}

func TestWarningDecodesLegacyString(t *testing.T) {
	t.Parallel()
	var s Spec
	require.NoError(t, json.Unmarshal([]byte(`{"jobs":{},"warnings":["old text",{"field":"cache","message":"m"}]}`), &s))
	require.Equal(t, []Warning{{Message: "old text"}, {Field: "cache", Message: "m"}}, s.Warnings)
	require.Equal(t, []string{"old text", "cache: m"}, WarningTexts(s.Warnings))
}
