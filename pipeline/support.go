package pipeline

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Warning is one non-fatal finding about a spec: a field sluice accepts but
// does not act on (and what it does instead), or a value that can never take
// effect (a blockedBy naming a missing job).
type Warning struct {
	// Field is the dotted path of what the warning is about, as written:
	// "cache", "jobs.main.provider", "shared.settings",
	// "annotations.screwdriver.cd/buildCluster" ("" for the whole spec).
	Field string `json:"field"`
	// Message says what is wrong and what sluice does instead.
	Message string `json:"message"`
}

// String is "FIELD: MESSAGE" (or just the message without a field).
func (w Warning) String() string {
	if w.Field == "" {
		return w.Message
	}
	return w.Field + ": " + w.Message
}

// UnmarshalJSON also accepts a plain string, the form warnings had before
// they were structured (specs recorded in older workflow histories).
func (w *Warning) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*w = Warning{Message: s}
		return nil
	}
	type plain Warning
	return json.Unmarshal(b, (*plain)(w))
}

// WarningTexts renders warnings as "FIELD: MESSAGE" lines.
func WarningTexts(ws []Warning) []string {
	if len(ws) == 0 {
		return nil
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// Support says whether sluice acts on a screwdriver.yaml field.
type Support struct {
	// Acted: sluice acts on the field (as Screwdriver does, or as
	// docs/semantics.md describes).
	Acted bool
	// Instead is the warning given when the field is written and Acted is
	// false: that the field is ignored and what sluice does instead.
	Instead string
}

// acted marks a field sluice acts on.
var acted = Support{Acted: true}

// Fields is THE table of the screwdriver.yaml fields and whether sluice acts
// on them. A field written in a spec whose entry is not Acted draws a
// validation warning (its Instead text); flipping a field to acted is a
// one-line change here. Keys are generic paths: "jobs.*.X" covers every
// job, "shared" and the setup/teardown jobs of stages; "stages.*.X" every
// stage. A written field without an entry of its own is covered by its
// parent's entry (an entry's children are only looked at when the entry is
// Acted). Annotations have their own table, Annotations. The parser rejects
// fields that are not in Screwdriver's schema, and "template" outright.
// TestSchemaFieldsImplementedOrWarned walks Screwdriver's fixtures and
// fails for a field that is neither Acted nor warned about.
var Fields = map[string]Support{
	"version":     acted, // picks the document of a multi-document file
	"annotations": acted, // each key: see Annotations
	"parameters":  acted, // event start -p, SD_PARAM_*, docs/semantics.md "Parameters"
	"jobs":        acted,
	"shared":      acted, // merged into every job like jobs.*
	"stages":      acted,

	"cache":        acted, // cache/ (paths outside the workspace warn: warnUncachable)
	"jobs.*.cache": acted,

	"childPipelines": {Instead: "child pipelines are not created, updated or started by sluice; create each one with `sluice pipeline create` (it then runs on its own repository's events)"},
	"subscribe":      {Instead: "events of the subscribed repositories do not start this pipeline: only the pipeline's own repository's webhooks and `sluice event start` do (~subscribe never fires)"},

	"jobs.*.annotations":   acted, // each key: see Annotations
	"jobs.*.blockedBy":     acted, // ~sd@ entries warn on their own (checkBlockedBy)
	"jobs.*.description":   acted, // documentation: no effect on a run, as in Screwdriver
	"jobs.*.environment":   acted,
	"jobs.*.freezeWindows": acted,
	"jobs.*.image":         acted,
	"jobs.*.matrix":        acted,
	"jobs.*.requires":      acted,
	"jobs.*.secrets":       acted,
	"jobs.*.sourcePaths":   acted,
	"jobs.*.steps":         acted,
	"jobs.*.order":         {Instead: "sluice has no templates, so \"order\" is ignored: the job's steps run in the order written"},
	"jobs.*.parameters":    {Instead: "job-level parameters are ignored: declare parameters at the top level (pipeline parameters reach every job as SD_PARAM_<NAME>)"},
	"jobs.*.provider":      {Instead: "providers (cloud build services) are not supported: the job runs on a sluice executor, on the queue named by screwdriver.cd/executor or the pipeline's default queue"},
	"jobs.*.settings":      acted, // email and slack notifications (pipeline/notify.go)

	"stages.*.description": acted, // documentation
	"stages.*.jobs":        acted,
	"stages.*.requires":    acted,
	"stages.*.sourcePaths": acted,
	"stages.*.setup":       acted, // a job: jobs.*
	"stages.*.teardown":    acted, // a job: jobs.*
	"stages.*.color":       {Instead: "stage colours are not drawn: sluice's pages draw every stage alike"},
}

// AnnotationSupport says where sluice acts on an annotation.
type AnnotationSupport struct {
	// Job: sluice acts on it in a job's (or shared's) annotations.
	Job bool
	// Pipeline: sluice acts on it in the top-level annotations.
	Pipeline bool
	// Instead is the warning where it is written but not acted on ("" for
	// the default: it is a job (or pipeline) annotation; move it).
	Instead string
}

// Annotations is the table of the screwdriver.cd/* and sluice.dev/*
// annotations sluice knows. Any other annotation with one of those prefixes
// draws a warning; annotations with other prefixes are the user's own data
// and are kept as written.
var Annotations = map[string]AnnotationSupport{
	AnnotationCollapseBuilds:     {Job: true},
	AnnotationBuildPeriodically:  {Job: true},
	AnnotationTimeout:            {Job: true},
	AnnotationBlockedBySameJob:   {Job: true},
	AnnotationManualStartEnabled: {Job: true},
	AnnotationVirtualJob:         {Job: true},
	AnnotationExecutor:           {Job: true},
	AnnotationCPU:                {Job: true},
	AnnotationRAM:                {Job: true},
	AnnotationDelay:              {Job: true},
	AnnotationPriority:           {Job: true},
	AnnotationRetryOnLoss:        {Job: true},
	AnnotationChainPR:            {Pipeline: true},
	AnnotationRestrictPR:         {Pipeline: true},

	AnnotationBlockedBySameJobWaitTime: {Instead: "has no effect: a build blocked by its own job starts the moment the blocking build ends, without polling"},
	"screwdriver.cd/buildCluster":      {Instead: "sluice has no build clusters: builds go to the queue named by screwdriver.cd/executor (or the pipeline's default queue); see `sluice queue`"},
	"screwdriver.cd/disk":              {Instead: "disk tiers are not supported: a build uses the executor's disk as it is"},
	"screwdriver.cd/dockerEnabled":     {Instead: "Docker-in-Docker is not provided: a build runs a single container (or on the host) with no Docker daemon of its own"},
	"screwdriver.cd/dockerCpu":         {Instead: "Docker-in-Docker is not provided, so its CPU setting is ignored"},
	"screwdriver.cd/dockerRam":         {Instead: "Docker-in-Docker is not provided, so its memory setting is ignored"},
	"screwdriver.cd/repoManifest":      {Instead: "repo manifests are not checked out: only the pipeline's own repository is"},
	"screwdriver.cd/mergeSharedSteps":  {Instead: "shared steps are not merged: a job that lists steps runs only its own"},
	"screwdriver.cd/coverageScope":     {Instead: "there is no coverage plugin: nothing reads the scope"},
	"screwdriver.cd/displayName":       {Instead: "jobs are shown under their names; display names are not used"},
	"screwdriver.cd/useDeployKey":      {Instead: "deploy keys are not used: checkouts use the executor host's git credentials"},
	"screwdriver.cd/terminationGracePeriodSeconds": {
		Instead: "a cancelled build gets SIGTERM, then SIGKILL after sluice's fixed grace period; the setting is ignored",
	},
}

// annotationScoped reports whether key is an annotation sluice must either
// act on or warn about.
func annotationScoped(key string) bool {
	return strings.HasPrefix(key, "screwdriver.cd/") || strings.HasPrefix(key, "beta.screwdriver.cd/") || strings.HasPrefix(key, "sluice.dev/")
}

// AnnotationWarning is the warning an annotation draws where it is written
// (pipeline level or in a job), or "" when sluice acts on it there.
func AnnotationWarning(key string, pipelineLevel bool) string {
	if !annotationScoped(key) {
		return ""
	}
	a, known := Annotations[key]
	switch {
	case !known && strings.HasPrefix(key, "sluice.dev/"):
		return "is not a known sluice.dev annotation; it is ignored"
	case !known:
		return "is not a screwdriver.cd annotation sluice acts on; it is ignored"
	case pipelineLevel && a.Pipeline, !pipelineLevel && a.Job:
		return ""
	case a.Instead != "":
		return a.Instead
	case pipelineLevel:
		return "is a job annotation: at the top level it is ignored; put it under shared.annotations (every job) or a job's annotations"
	default:
		return "is a pipeline annotation: in a job it is ignored; put it under the top-level annotations"
	}
}

// lookupSupport returns the table entry for generic, or for its nearest
// parent that has one.
func lookupSupport(generic string) (Support, bool) {
	for p := generic; ; {
		if s, ok := Fields[p]; ok {
			return s, true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return Support{}, false
		}
		p = p[:i]
	}
}

// hasChildren reports whether the table has entries below generic.
func hasChildren(generic string) bool {
	for k := range Fields {
		if strings.HasPrefix(k, generic+".") {
			return true
		}
	}
	return false
}

// checkSupport warns about every written field (and annotation) sluice does
// not act on, walking the spec as written.
func (p *parser) checkSupport(root *value) {
	if root == nil || root.kind != kMap {
		return
	}
	for i, k := range root.keys {
		generic := k
		if k == "shared" {
			generic = "jobs.*" // merged into every job
		}
		p.walkSupport(generic, k, "", root.vals[i])
	}
}

// walkSupport checks one written field: concrete is its path as written,
// generic its table key, job the job's name when inside a named job.
func (p *parser) walkSupport(generic, concrete, job string, v *value) {
	if v == nil || v.kind == kNull || (v.kind == kMap && len(v.keys) == 0) {
		return // nothing written: nothing is ignored
	}
	if generic == "annotations" || generic == "jobs.*.annotations" {
		p.checkAnnotationSupport(concrete, v, generic == "annotations")
		return
	}
	s, ok := lookupSupport(generic)
	if ok && !s.Acted {
		msg := s.Instead
		if generic == "jobs.*.order" && job != "" {
			// Screwdriver's own warning, then sluice's.
			msg = fmt.Sprintf("\"order\" in %s job cannot be used without \"template\"; %s", job, msg)
		}
		p.warn(concrete, "%s", msg)
		return
	}
	if v.kind != kMap || !hasChildren(generic) {
		return
	}
	for i, k := range v.keys {
		childGeneric, childJob := generic+"."+k, job
		switch generic {
		case "jobs":
			childGeneric, childJob = "jobs.*", k
		case "stages":
			childGeneric = "stages.*"
		case "stages.*":
			if k == "setup" || k == "teardown" {
				childGeneric = "jobs.*"
			}
		}
		p.walkSupport(childGeneric, concrete+"."+k, childJob, v.vals[i])
	}
}

// checkAnnotationSupport warns about the annotations of one annotations
// mapping (path is where it is written) that sluice does not act on there.
func (p *parser) checkAnnotationSupport(path string, v *value, pipelineLevel bool) {
	if v.kind != kMap {
		return
	}
	keys := append([]string(nil), v.keys...)
	sort.Strings(keys)
	for _, k := range keys {
		if msg := AnnotationWarning(k, pipelineLevel); msg != "" {
			p.warn(path+"."+k, "%s", msg)
		}
	}
}
