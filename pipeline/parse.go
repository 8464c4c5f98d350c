package pipeline

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Options tunes ParseWithOptions.
type Options struct {
	// Pipeline names the pipeline. It seeds the H hash of buildPeriodically
	// (see PeriodicSeed); empty is allowed and seeds with the job name alone.
	Pipeline string
}

// Parse parses a screwdriver.yaml-compatible pipeline spec. See ParseWithOptions.
func Parse(data []byte) (*Spec, error) {
	return ParseWithOptions(data, Options{})
}

// ParseWithOptions parses, validates and flattens a pipeline spec. A file with several
// YAML documents uses its only document, or else the one with "version: 4" (as
// Screwdriver does). Every problem found is reported at once in a *ValidationError
// (errors.Is(err, ErrInvalidSpec) holds); warnings go to Spec.Warnings.
func ParseWithOptions(data []byte, opts Options) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, &ValidationError{Problems: []Problem{{Message: fmt.Sprintf(
			"pipeline spec is %d bytes; the limit is %d (1 MiB)", len(data), MaxSpecBytes)}}}
	}
	p := &parser{opts: opts, conv: &converter{budget: maxValueNodes, bytes: expansionBudget(len(data))}}
	root := p.load(data)
	var spec *Spec
	if root != nil {
		spec = p.build(root)
	}
	if len(p.problems) > 0 {
		for i := range p.problems {
			if v := locate(root, p.problems[i].Job, p.problems[i].Field); v != nil {
				p.problems[i].Line, p.problems[i].Column = v.line, v.col
			}
		}
		return nil, &ValidationError{Problems: p.problems}
	}
	spec.Warnings = p.warnings
	return spec, nil
}

// Limits Screwdriver imposes (and sluice keeps).
const (
	MaxEnvironmentVars = 100
	MaxPermutations    = 25
	MaxJobNameLength   = 100
)

var (
	reEnvName   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	reStepName  = regexp.MustCompile(`^[\w-]+$`)
	reImage     = regexp.MustCompile("^[^;&|><*?`$()!#'\" ]+$")
	reTemplated = regexp.MustCompile(`{{\s*([\w.]+)\s*}}`)
	// reSCMURL is Screwdriver's checkout URL pattern for childPipelines and subscribe.
	reSCMURL = regexp.MustCompile("^(?:(?:https:\\/\\/(?:[^@/:\\s]+@)?)|git@|org-\\d+@)+([^/:\\s]+)(?:\\/|:)([^/:\\s]+)\\/([^\\s]+?)(?:\\.git)(#[^:\u3000\\s]*\u3000[^:\u3000\\s]*|#[^:\u3000\\s]+)?(:[^:\u3000\\s]*\u3000[^:\u3000\\s]*|:[^:\u3000\\s]+)?$")
)

const (
	imagePatternText  = "/^[^;&|><*?`$()!#'\" ]+$/"
	scmURLPatternText = "/^(?:(?:https:\\/\\/(?:[^@/:\\s]+@)?)|git@|org-\\d+@)+([^/:\\s]+)(?:\\/|:)([^/:\\s]+)\\/([^\\s]+?)(?:\\.git)(#[^:\u3000\\s]*\u3000[^:\u3000\\s]*|#[^:\u3000\\s]+)?(:[^:\u3000\\s]*\u3000[^:\u3000\\s]*|:[^:\u3000\\s]+)?$/"
	envNameMessage    = "only supports uppercase letters, digits, and underscore (cannot start with digit)"
)

type parser struct {
	opts     Options
	conv     *converter
	problems []Problem
	warnings []Warning
}

func (p *parser) add(job, field, format string, args ...any) {
	p.problems = append(p.problems, Problem{Job: job, Field: field, Message: fmt.Sprintf(format, args...)})
}

// warn records a warning about field (its dotted path as written).
func (p *parser) warn(field, format string, args ...any) {
	p.warnings = append(p.warnings, Warning{Field: field, Message: fmt.Sprintf(format, args...)})
}

// load decodes the YAML and picks the document to use.
func (p *parser) load(data []byte) *value {
	if !utf8.Valid(data) {
		p.add("", "", "pipeline spec is not valid UTF-8 text")
		return nil
	}
	docs, err := loadDocuments(data)
	if err != nil {
		p.add("", "", "cannot parse YAML: %v", err)
		return nil
	}
	if len(docs) == 0 {
		p.add("", "jobs", "pipeline spec is empty: \"jobs\" is required")
		return nil
	}
	vals := make([]*value, 0, len(docs))
	for _, d := range docs {
		v, err := p.conv.convert(d, 0)
		if err != nil {
			p.add("", "", "cannot parse YAML: %v", err)
			return nil
		}
		vals = append(vals, v)
	}
	if len(vals) == 1 {
		return vals[0]
	}
	for _, v := range vals {
		if ver, ok := v.get("version"); ok && ((ver.kind == kInt && ver.i == 4) || (ver.kind == kFloat && ver.f == 4)) {
			return v
		}
	}
	p.add("", "version", "Configuration is too ambigious - contains multiple documents without a version hint")
	return nil
}

// reservedEnvName says why a job may not set the variable name (it steers
// the dynamic loader, character conversion, the container runtime's client
// or outgoing proxies of the executor's own processes), or "".
func reservedEnvName(name string) string {
	switch {
	case strings.HasPrefix(name, "LD_"), name == "GCONV_PATH":
		return "variables of the dynamic loader (LD_*, GCONV_PATH) are reserved"
	case strings.HasPrefix(name, "DOCKER_"), strings.HasPrefix(name, "CONTAINERS_"), strings.HasPrefix(name, "PODMAN_"):
		return "variables of the container runtime (DOCKER_*, CONTAINERS_*, PODMAN_*) are reserved"
	case strings.HasSuffix(name, "_PROXY"):
		return "proxy variables (*_PROXY) are reserved for the executor"
	}
	return ""
}

// rawStep is one written step.
type rawStep struct {
	name    string
	command string
}

// matrixAxis is one matrix variable and its values (stringified).
type matrixAxis struct {
	key    string
	values []string
}

// rawJob is a job-like mapping (a job, shared, or a stage setup/teardown) after
// structural validation, keeping what Screwdriver's merge rules need to know.
type rawJob struct {
	name   string // job name, "" for shared
	path   string // "jobs.main", "shared", "stages.x.setup"
	truthy map[string]bool
	set    map[string]bool

	image         string
	steps         []rawStep
	env           map[string]string
	matrix        []matrixAxis
	secrets       []string
	settings      map[string]any
	settingsEmpty bool
	annotations   map[string]any
	requires      []string
	blockedBy     []string
	freezeWindows []string
	sourcePaths   []string
	description   string
	parameters    map[string]any
	cache         *bool
	provider      any
	order         []string
	template      string
	stage         string
	stepsReported bool // a structural steps problem was already reported
	isStageJob    bool // a stage setup/teardown job
}

func newRawJob(name, path string) *rawJob {
	return &rawJob{name: name, path: path, truthy: map[string]bool{}, set: map[string]bool{}, env: map[string]string{}}
}

// defaultStageJob is the implicit setup/teardown job of a stage.
func defaultStageJob(name, path string) *rawJob {
	j := newRawJob(name, path)
	j.image = "node:18"
	j.steps = []rawStep{{name: "noop", command: "echo noop"}}
	j.annotations = map[string]any{AnnotationVirtualJob: true}
	for _, k := range []string{"image", "steps", "annotations"} {
		j.truthy[k], j.set[k] = true, true
	}
	return j
}

// stageDef is a parsed stage.
type stageDef struct {
	name        string
	description string
	jobs        []string
	requires    []string
	hasRequires bool
	sourcePaths []string
	hasPaths    bool
	setup       *rawJob
	teardown    *rawJob
}

func (p *parser) build(root *value) *Spec {
	spec := &Spec{Jobs: map[string]*Job{}}
	if root.kind != kMap {
		p.add("", "", "pipeline spec must be of type object (a YAML mapping), got %s", root.kind.typeName())
		return spec
	}
	for i, k := range root.keys {
		v := root.vals[i]
		switch k {
		case "annotations":
			if m := p.mapping(v, "annotations", ""); m != nil {
				spec.Annotations = m.toAny().(map[string]any)
			}
		case "parameters":
			if m := p.mapping(v, "parameters", ""); m != nil {
				p.parseParameters(m)
				spec.Parameters = m.toAny().(map[string]any)
			}
		case "version":
			switch v.kind {
			case kInt:
				spec.Version = float64(v.i)
			case kFloat:
				spec.Version = v.f
			default:
				p.add("", "version", "\"version\" must be a number")
			}
		case "childPipelines":
			if m := p.mapping(v, "childPipelines", ""); m != nil {
				p.checkSCMBlock(m, "childPipelines", map[string]bool{"scmUrls": true, "startAll": true})
				spec.ChildPipelines = m.toAny().(map[string]any)
			}
		case "subscribe":
			if m := p.mapping(v, "subscribe", ""); m != nil {
				p.checkSCMBlock(m, "subscribe", map[string]bool{"scmUrls": true})
				spec.Subscribe = m.toAny().(map[string]any)
			}
		case "template":
			p.add("", "template", "\"template\" is not supported by sluice: pipeline templates are not available; write the jobs in the file")
		case "jobs", "shared", "cache", "stages":
			// handled below, in dependency order
		default:
			p.add("", k, "%q is not allowed", k)
		}
	}

	shared := newRawJob("", "shared")
	if v, ok := root.get("shared"); ok && v.kind != kNull {
		if p.mapping(v, "shared", "") != nil {
			shared = p.jobLike(v, "", "shared")
		}
	}

	var jobs []*rawJob
	jobsVal, ok := root.get("jobs")
	switch {
	case !ok || jobsVal.kind == kNull:
		p.add("", "jobs", "\"jobs\" is required")
	case jobsVal.kind != kMap:
		p.add("", "jobs", "\"jobs\" must be of type object")
	case len(jobsVal.keys) == 0:
		p.add("", "jobs", "\"jobs\" must have at least 1 key")
	default:
		for i, name := range jobsVal.keys {
			jv := jobsVal.vals[i]
			path := "jobs." + name
			if !reJobName.MatchString(name) {
				p.add(name, "", "%q is not allowed (job names only support A-Z,a-z,0-9,-,_)", path)
				continue
			}
			if len(name) > MaxJobNameLength {
				p.add(name, "", "Job %q: name cannot be longer than %d characters", name, MaxJobNameLength)
			}
			if strings.HasPrefix(strings.ToLower(name), "pr-") {
				p.add(name, "", "Job %q: cannot use a restricted prefix \"pr-\"", name)
			}
			if jv.kind != kMap {
				p.add(name, "", "%q must be of type object", path)
				continue
			}
			jobs = append(jobs, p.jobLike(jv, name, path))
		}
	}

	stages := p.parseStages(root)
	jobs = p.flattenStages(jobs, stages)

	// Merge shared into every job, in order.
	merged := make([]*rawJob, len(jobs))
	for i, j := range jobs {
		merged[i] = mergeShared(shared, j)
	}

	cacheVal, hasCache := root.get("cache")
	if hasCache && cacheVal.kind == kNull {
		hasCache = false
	}
	var cache *cacheDef
	if hasCache {
		cache = p.parseCache(cacheVal, merged)
	}

	for _, j := range merged {
		job := p.finishJob(j, cache)
		spec.Jobs[job.Name] = job
		spec.JobOrder = append(spec.JobOrder, job.Name)
	}

	spec.Stages = map[string]*Stage{}
	for _, s := range stages {
		spec.Stages[s.name] = &Stage{
			Name:        s.name,
			Description: s.description,
			Jobs:        s.jobs,
			Requires:    s.requires,
			SourcePaths: s.sourcePaths,
			Setup:       StageJobName(s.name, "setup"),
			Teardown:    StageJobName(s.name, "teardown"),
		}
		spec.StageOrder = append(spec.StageOrder, s.name)
	}
	if len(spec.Stages) == 0 {
		spec.Stages = nil
	}

	p.checkStages(spec, stages)
	p.checkRequires(spec, stages)
	spec.Graph = buildGraph(spec)
	if cycle := findCycle(spec.Graph); cycle != nil {
		p.add(cycle[0], "requires", "Jobs: should not have circular dependency in jobs (%s)", strings.Join(cycle, " -> "))
	}
	for _, name := range spec.JobOrder {
		p.checkNotifications(spec.Jobs[name])
	}
	p.checkBlockedBy(spec)
	p.checkSupport(root)
	return spec
}

// mapping returns v when it is a mapping, reporting a type problem otherwise.
func (p *parser) mapping(v *value, path, job string) *value {
	if v.kind != kMap {
		p.add(job, path, "%q must be of type object", path)
		return nil
	}
	return v
}

// stringList accepts a string or an array of strings.
func (p *parser) stringList(v *value, path, job string) ([]string, bool) {
	switch v.kind {
	case kString:
		return []string{v.str}, true
	case kSeq:
		out := make([]string, 0, len(v.items))
		ok := true
		for i, it := range v.items {
			if it.kind != kString {
				p.add(job, fmt.Sprintf("%s[%d]", path, i), "\"%s[%d]\" must be a string", path, i)
				ok = false
				continue
			}
			out = append(out, it.str)
		}
		return out, ok
	case kNull:
		return nil, true
	default:
		p.add(job, path, "%q must be a string or an array of strings", path)
		return nil, false
	}
}

var jobKeys = map[string]bool{
	"annotations": true, "blockedBy": true, "cache": true, "description": true, "environment": true,
	"freezeWindows": true, "image": true, "matrix": true, "order": true, "parameters": true,
	"provider": true, "requires": true, "secrets": true, "settings": true, "sourcePaths": true,
	"steps": true, "template": true,
}

// jobLike validates a job-shaped mapping (job, shared, stage setup/teardown).
func (p *parser) jobLike(v *value, name, path string) *rawJob {
	j := newRawJob(name, path)
	jobRef := name
	if jobRef == "" {
		jobRef = path
	}
	for i, k := range v.keys {
		val := v.vals[i]
		field := path + "." + k
		if !jobKeys[k] {
			p.add(jobRef, k, "%q is not allowed", field)
			continue
		}
		j.set[k] = true
		j.truthy[k] = val.truthy()
		switch k {
		case "image":
			if val.kind != kString {
				p.add(jobRef, k, "%q must be a string", field)
				j.truthy[k] = false
				continue
			}
			j.image = val.str
		case "steps":
			p.parseSteps(j, val, jobRef, field)
		case "environment":
			if p.mapping(val, field, jobRef) == nil {
				j.truthy[k] = false
				continue
			}
			for ei, ek := range val.keys {
				if !reEnvName.MatchString(ek) {
					p.add(jobRef, "environment."+ek, "\"%s.%s\" %s", field, ek, envNameMessage)
					continue
				}
				if why := reservedEnvName(ek); why != "" {
					p.add(jobRef, "environment."+ek, "\"%s.%s\" is not allowed: %s", field, ek, why)
					continue
				}
				j.env[ek] = val.vals[ei].jsString()
			}
		case "matrix":
			if p.mapping(val, field, jobRef) == nil {
				j.truthy[k] = false
				continue
			}
			for mi, mk := range val.keys {
				if !reEnvName.MatchString(mk) {
					p.add(jobRef, "matrix."+mk, "\"%s.%s\" %s", field, mk, envNameMessage)
					continue
				}
				if why := reservedEnvName(mk); why != "" {
					p.add(jobRef, "matrix."+mk, "\"%s.%s\" is not allowed: %s", field, mk, why)
					continue
				}
				mv := val.vals[mi]
				if mv.kind != kSeq {
					p.add(jobRef, "matrix."+mk, "\"%s.%s\" must be an array", field, mk)
					continue
				}
				if len(mv.items) == 0 {
					p.add(jobRef, "matrix."+mk, "\"%s.%s\" must contain at least 1 items", field, mk)
					continue
				}
				axis := matrixAxis{key: mk}
				for _, it := range mv.items {
					axis.values = append(axis.values, it.jsString())
				}
				j.matrix = append(j.matrix, axis)
			}
		case "secrets":
			list, _ := p.stringList(val, field, jobRef)
			for si, s := range list {
				if !reEnvName.MatchString(s) {
					p.add(jobRef, fmt.Sprintf("secrets[%d]", si), "\"%s[%d]\" with value %q fails to match the required pattern: /^[A-Z_][A-Z0-9_]*$/", field, si, s)
					continue
				}
				if why := reservedEnvName(s); why != "" {
					p.add(jobRef, fmt.Sprintf("secrets[%d]", si), "\"%s[%d]\" %q is not allowed: %s", field, si, s, why)
					continue
				}
				j.secrets = append(j.secrets, s)
			}
		case "settings":
			if p.mapping(val, field, jobRef) == nil {
				j.truthy[k] = false
				continue
			}
			j.settings = val.toAny().(map[string]any)
			j.settingsEmpty = len(val.keys) == 0
		case "annotations":
			if p.mapping(val, field, jobRef) == nil {
				j.truthy[k] = false
				continue
			}
			j.annotations = val.toAny().(map[string]any)
		case "requires":
			list, _ := p.stringList(val, field, jobRef)
			j.requires = []string{}
			for ri, r := range list {
				if _, err := ParseRequire(r); err != nil {
					p.add(jobRef, fmt.Sprintf("requires[%d]", ri), "\"%s[%d]\": %v", field, ri, err)
					continue
				}
				j.requires = append(j.requires, r)
			}
		case "blockedBy":
			list, _ := p.stringList(val, field, jobRef)
			j.blockedBy = []string{}
			for bi, b := range list {
				r, err := ParseRequire(b)
				switch {
				case err == nil && r.Kind != RequireJob && r.Kind != RequireRemote:
					err = fmt.Errorf("%q is not a job (~job) or a remote job (~sd@pipeline:job)", b)
				case err == nil && !r.OR:
					// Screwdriver's parser accepts only ~job and ~sd@pipeline:job.
					err = fmt.Errorf("%q must start with ~ (write ~%s), as Screwdriver requires", b, b)
				}
				if err != nil {
					p.add(jobRef, fmt.Sprintf("blockedBy[%d]", bi), "\"%s[%d]\": %v", field, bi, err)
					continue
				}
				j.blockedBy = append(j.blockedBy, b)
			}
		case "freezeWindows":
			list, _ := p.stringList(val, field, jobRef)
			j.freezeWindows = []string{}
			for fi, f := range list {
				if _, err := ParseFreezeWindow(f); err != nil {
					p.add(jobRef, fmt.Sprintf("freezeWindows[%d]", fi), "\"%s[%d]\" with value %q is not a valid freeze window: %v", field, fi, f, err)
					continue
				}
				j.freezeWindows = append(j.freezeWindows, f)
			}
		case "sourcePaths":
			list, _ := p.stringList(val, field, jobRef)
			j.sourcePaths = list
		case "description":
			if val.kind != kString {
				p.add(jobRef, k, "%q must be a string", field)
				j.truthy[k] = false
				continue
			}
			j.description = val.str
		case "parameters":
			if p.mapping(val, field, jobRef) == nil {
				j.truthy[k] = false
				continue
			}
			j.parameters = val.toAny().(map[string]any)
		case "cache":
			if val.kind != kBool {
				p.add(jobRef, k, "%q must be a boolean", field)
				delete(j.set, k)
				continue
			}
			b := val.b
			j.cache = &b
		case "provider":
			if val.kind != kString && val.kind != kMap {
				p.add(jobRef, k, "%q must be a string or an object", field)
				j.truthy[k] = false
				continue
			}
			j.provider = val.toAny()
		case "order":
			list, _ := p.stringList(val, field, jobRef)
			j.order = list
		case "template":
			p.add(jobRef, k, "%s: \"template\" is not supported by sluice: job templates are not available; inline the image and steps", jobLabel(name, path))
			if val.kind == kString {
				j.template = val.str
			}
		}
	}
	return j
}

func jobLabel(name, path string) string {
	if name != "" {
		return fmt.Sprintf("Job %q", name)
	}
	return fmt.Sprintf("%q", path)
}

func (p *parser) parseSteps(j *rawJob, val *value, jobRef, field string) {
	if val.kind != kSeq {
		p.add(jobRef, "steps", "%q must be an array", field)
		j.stepsReported = true
		j.truthy["steps"] = false
		return
	}
	if len(val.items) == 0 {
		p.add(jobRef, "steps", "%q must contain at least 1 items", field)
		j.stepsReported = true
		return
	}
	j.steps = []rawStep{}
	firstTeardown := -1
	teardownReported := false
	for i, it := range val.items {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch it.kind {
		case kString, kInt, kFloat, kBool:
			j.steps = append(j.steps, rawStep{name: fmt.Sprintf("step-%d", i+1), command: it.jsString()})
		case kMap:
			if len(it.keys) != 1 {
				p.add(jobRef, fmt.Sprintf("steps[%d]", i), "%q must have exactly one key (the step name), got %d", at, len(it.keys))
				j.stepsReported = true
				continue
			}
			name, cmdVal := it.keys[0], it.vals[0]
			if !reStepName.MatchString(name) {
				p.add(jobRef, fmt.Sprintf("steps[%d]", i), "\"%s.%s\" only supports the following characters A-Z,a-z,0-9,-,_", at, name)
				j.stepsReported = true
				continue
			}
			var cmd string
			switch cmdVal.kind {
			case kString, kInt, kFloat, kBool:
				cmd = cmdVal.jsString()
			case kMap:
				c, ok := cmdVal.get("command")
				if !ok || (c.kind != kString && c.kind != kInt && c.kind != kFloat && c.kind != kBool) {
					p.add(jobRef, fmt.Sprintf("steps[%d]", i), "\"%s.%s.command\" is required and must be a string", at, name)
					j.stepsReported = true
					continue
				}
				cmd = c.jsString()
			default:
				p.add(jobRef, fmt.Sprintf("steps[%d]", i), "\"%s.%s\" must be a string (the command)", at, name)
				j.stepsReported = true
				continue
			}
			isTeardown := strings.HasPrefix(name, "teardown-")
			if firstTeardown >= 0 && !isTeardown && !teardownReported {
				p.add(jobRef, "steps", "%s: User teardown steps need to be at the end (step %q comes after %q)", jobLabel(j.name, j.path), name, j.steps[firstTeardown].name)
				teardownReported = true
			}
			if firstTeardown < 0 && isTeardown {
				firstTeardown = len(j.steps)
			}
			j.steps = append(j.steps, rawStep{name: name, command: cmd})
		default:
			p.add(jobRef, fmt.Sprintf("steps[%d]", i), "%q must be a string or an object", at)
			j.stepsReported = true
		}
	}
}

// checkSCMBlock validates childPipelines/subscribe.
func (p *parser) checkSCMBlock(m *value, path string, allowed map[string]bool) {
	for i, k := range m.keys {
		v := m.vals[i]
		if !allowed[k] {
			p.add("", path+"."+k, "\"%s.%s\" is not allowed", path, k)
			continue
		}
		switch k {
		case "startAll":
			if v.kind != kBool {
				p.add("", path+"."+k, "\"%s.%s\" must be a boolean", path, k)
			}
		case "scmUrls":
			if v.kind != kSeq {
				p.add("", path+"."+k, "\"%s.%s\" must be an array", path, k)
				continue
			}
			for ui, u := range v.items {
				url := ""
				switch u.kind {
				case kString:
					url = u.str
				case kMap:
					if len(u.keys) == 1 {
						url = u.keys[0]
					}
				}
				if !reSCMURL.MatchString(url) {
					shown := url
					if u.kind != kString && u.kind != kMap {
						shown = u.jsString()
					}
					p.add("", fmt.Sprintf("%s.scmUrls[%d]", path, ui), "\"%s.scmUrls[%d]\" with value %q fails to match the required pattern: %s", path, ui, shown, scmURLPatternText)
				}
			}
		}
	}
}

func (p *parser) parseStages(root *value) []*stageDef {
	v, ok := root.get("stages")
	if !ok || v.kind == kNull {
		return nil
	}
	if p.mapping(v, "stages", "") == nil {
		return nil
	}
	var out []*stageDef
	for i, name := range v.keys {
		sv := v.vals[i]
		path := "stages." + name
		if sv.kind != kMap {
			p.add("stages."+name, "", "%q must be of type object", path)
			continue
		}
		if !reJobName.MatchString(name) {
			p.add("stages."+name, "", "%q is not allowed (stage names only support A-Z,a-z,0-9,-,_)", path)
			continue
		}
		s := &stageDef{name: name}
		hasJobs := false
		for ki, k := range sv.keys {
			val := sv.vals[ki]
			field := path + "." + k
			switch k {
			case "jobs":
				hasJobs = true
				list, _ := p.stringList(val, field, path)
				s.jobs = list
			case "description":
				if val.kind != kString {
					p.add(path, k, "%q must be a string", field)
					continue
				}
				s.description = val.str
			case "color":
				if val.kind != kString {
					p.add(path, k, "%q must be a string", field)
				}
			case "requires":
				list, _ := p.stringList(val, field, path)
				s.requires = []string{}
				s.hasRequires = true
				for ri, r := range list {
					if _, err := ParseRequire(r); err != nil {
						p.add(path, fmt.Sprintf("requires[%d]", ri), "\"%s[%d]\": %v", field, ri, err)
						continue
					}
					s.requires = append(s.requires, r)
				}
			case "sourcePaths":
				list, _ := p.stringList(val, field, path)
				s.sourcePaths, s.hasPaths = list, true
			case "setup", "teardown":
				if val.kind == kNull {
					continue
				}
				if p.mapping(val, field, path) == nil {
					continue
				}
				jobName := StageJobName(name, k)
				if len(val.keys) == 0 {
					continue
				}
				rj := p.jobLike(val, jobName, field)
				if k == "setup" {
					s.setup = rj
				} else {
					s.teardown = rj
				}
			default:
				p.add(path, k, "%q is not allowed", field)
			}
		}
		if !hasJobs {
			p.add(path, "jobs", "\"%s.jobs\" is required", path)
		}
		out = append(out, s)
	}
	return out
}

// flattenStages assigns stage membership, defaults member requires to the stage setup,
// expands stage shorthands and appends each stage's setup and teardown jobs.
func (p *parser) flattenStages(jobs []*rawJob, stages []*stageDef) []*rawJob {
	if len(stages) == 0 {
		return jobs
	}
	member := map[string]string{}
	for _, s := range stages {
		for _, jn := range s.jobs {
			if _, dup := member[jn]; !dup {
				member[jn] = s.name
			}
		}
	}
	for _, j := range jobs {
		for i, r := range j.requires {
			j.requires[i] = expandStageShorthand(r)
		}
		if st, ok := member[j.name]; ok {
			j.stage = st
			if len(j.requires) == 0 {
				j.requires = []string{"~" + StageJobName(st, "setup")}
				j.set["requires"], j.truthy["requires"] = true, true
			}
		}
	}
	for _, s := range stages {
		for i, r := range s.requires {
			s.requires[i] = expandStageShorthand(r)
		}
	}
	for _, s := range stages {
		setupName, teardownName := StageJobName(s.name, "setup"), StageJobName(s.name, "teardown")
		setup := s.setup
		if setup == nil {
			setup = defaultStageJob(setupName, "stages."+s.name+".setup")
		}
		setup.stage, setup.isStageJob = s.name, true
		setup.requires = append([]string{}, s.requires...)
		setup.set["requires"], setup.truthy["requires"] = true, true
		if !setup.set["sourcePaths"] {
			setup.sourcePaths = s.sourcePaths
			setup.set["sourcePaths"] = true
		}

		teardown := s.teardown
		if teardown == nil {
			teardown = defaultStageJob(teardownName, "stages."+s.name+".teardown")
		}
		teardown.stage, teardown.isStageJob = s.name, true
		teardown.requires = terminalJobs(jobs, s.name)
		teardown.set["requires"], teardown.truthy["requires"] = true, true
		jobs = append(jobs, setup, teardown)
	}
	return jobs
}

// terminalJobs returns the stage's member jobs (in job order) that no other member requires.
func terminalJobs(jobs []*rawJob, stage string) []string {
	required := map[string]bool{}
	var members []string
	for _, j := range jobs {
		if j.stage != stage || j.isStageJob {
			continue
		}
		members = append(members, j.name)
		for _, r := range j.requires {
			required[strings.TrimPrefix(r, "~")] = true
		}
	}
	out := []string{}
	for _, m := range members {
		if !required[m] {
			out = append(out, m)
		}
	}
	return out
}

// mergeShared overlays job on shared following Screwdriver's flattenSharedIntoJobs:
// image/matrix/steps/description/cache/parameters/provider replace; annotations,
// environment and settings merge (job wins; an explicit empty settings {} replaces);
// requires/blockedBy/freezeWindows/order come from the job when it has them; secrets and
// sourcePaths are unioned (shared first).
func mergeShared(shared, job *rawJob) *rawJob {
	m := newRawJob(job.name, job.path)
	m.stage, m.isStageJob = job.stage, job.isStageJob
	m.stepsReported = job.stepsReported || (!job.truthy["steps"] && shared.stepsReported)
	m.template = job.template

	pick := func(key string) *rawJob {
		if job.truthy[key] {
			return job
		}
		return shared
	}
	m.image = pick("image").image
	if job.truthy["steps"] || job.set["steps"] {
		m.steps = job.steps
	} else {
		m.steps = shared.steps
	}
	if job.truthy["matrix"] {
		m.matrix = job.matrix
	} else {
		m.matrix = shared.matrix
	}
	m.description = pick("description").description
	m.parameters = pick("parameters").parameters
	m.provider = pick("provider").provider

	m.annotations = mergeAny(shared.annotations, job.annotations)
	for k, v := range shared.env {
		m.env[k] = v
	}
	for k, v := range job.env {
		m.env[k] = v
	}
	if job.set["settings"] && job.settingsEmpty {
		m.settings = map[string]any{}
	} else {
		m.settings = mergeAny(shared.settings, job.settings)
	}

	if job.truthy["requires"] {
		m.requires = job.requires
		m.set["requires"] = true
	} else if shared.truthy["requires"] {
		m.requires = shared.requires
		m.set["requires"] = true
	}
	m.blockedBy = pick("blockedBy").blockedBy
	m.freezeWindows = pick("freezeWindows").freezeWindows
	m.order = pick("order").order
	switch {
	case job.cache != nil:
		m.cache = job.cache
	case shared.cache != nil && *shared.cache:
		m.cache = shared.cache
	}
	m.secrets = union(shared.secrets, job.secrets)
	m.sourcePaths = union(shared.sourcePaths, job.sourcePaths)
	return m
}

func mergeAny(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func union(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	seen := map[string]bool{}
	for _, s := range append(append([]string{}, a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

type cacheDef struct {
	pipeline []string
	event    []string
	job      map[string][]string
}

func (p *parser) parseCache(v *value, jobs []*rawJob) *cacheDef {
	if p.mapping(v, "cache", "") == nil {
		return nil
	}
	c := &cacheDef{pipeline: []string{}, event: []string{}, job: map[string][]string{}}
	names := map[string]bool{}
	for _, j := range jobs {
		names[j.name] = true
	}
	for i, k := range v.keys {
		val := v.vals[i]
		switch k {
		case "pipeline", "event":
			list, _ := p.stringList(val, "cache."+k, "")
			if list == nil {
				list = []string{}
			}
			p.warnUncachable("cache."+k, list)
			if k == "pipeline" {
				c.pipeline = list
			} else {
				c.event = list
			}
		case "job":
			if p.mapping(val, "cache.job", "") == nil {
				continue
			}
			for ji, jn := range val.keys {
				list, _ := p.stringList(val.vals[ji], "cache.job."+jn, "")
				if list == nil {
					list = []string{}
				}
				c.job[jn] = list
				p.warnUncachable("cache.job."+jn, list)
				if !names[jn] {
					p.add(jn, "cache.job."+jn, "Cache is set for non-existing job: %s", jn)
				}
			}
		default:
			p.add("", "cache."+k, "\"cache.%s\" is not allowed", k)
		}
	}
	return c
}

// warnUncachable warns about cache paths the executor skips at run time
// (cache.checkPath): only paths inside the workspace are cached.
func (p *parser) warnUncachable(field string, paths []string) {
	for _, c := range paths {
		cl := path.Clean(filepath.ToSlash(c))
		switch {
		case c == "~" || strings.HasPrefix(c, "~/"):
			p.warn(field, "%q is not cached: ~ paths are not supported; cache a path inside the workspace (for example MAVEN_OPTS=-Dmaven.repo.local=.m2 and cache .m2)", c)
		case path.IsAbs(cl) || filepath.IsAbs(c):
			p.warn(field, "%q is not cached: absolute paths are not supported; cache a path inside the workspace", c)
		case cl == "." || cl == ".." || strings.HasPrefix(cl, "../"):
			p.warn(field, "%q is not cached: the path leaves the workspace (or is the whole workspace)", c)
		}
	}
}

// finishJob runs the functional checks on a merged job and builds its permutations.
func (p *parser) finishJob(j *rawJob, cache *cacheDef) *Job {
	label := fmt.Sprintf("Job %q", j.name)
	job := &Job{
		Name:          j.name,
		Description:   j.description,
		Stage:         j.stage,
		Requires:      j.requires,
		BlockedBy:     j.blockedBy,
		FreezeWindows: j.freezeWindows,
		SourcePaths:   j.sourcePaths,
		Annotations:   j.annotations,
		Notifications: j.settings,
		Parameters:    j.parameters,
		Provider:      j.provider,
	}
	if job.Requires == nil && j.set["requires"] {
		job.Requires = []string{}
	}

	switch {
	case cache != nil && (j.cache == nil || *j.cache):
		jc := cache.job[j.name]
		if jc == nil {
			jc = []string{}
		}
		job.Cache = &JobCache{Pipeline: cache.pipeline, Event: cache.event, Job: jc}
	case cache == nil && j.cache != nil:
		p.add(j.name, "cache", "%s: Cache disable/enable is set without the cache setting itself.", label)
	}

	// Commands: teardown-* steps are already required to be last by the structural check.
	commands := make([]Command, 0, len(j.steps))
	seen := map[string]bool{}
	for _, s := range j.steps {
		if strings.HasPrefix(strings.ToLower(s.name), "sd-") {
			p.add(j.name, "steps", "%s: Step %q: cannot use a restricted prefix \"sd-\"", label, s.name)
		}
		if seen[s.name] {
			p.add(j.name, "steps", "Job %s has duplicate step: %s", j.name, s.name)
		}
		seen[s.name] = true
		commands = append(commands, Command{Name: s.name, Command: s.command})
	}
	if j.template == "" {
		if len(commands) == 0 && !j.stepsReported {
			p.add(j.name, "steps", "%s: \"steps\" is required (a job needs at least one step)", label)
		}
	}

	userEnv := len(j.env)
	if userEnv > MaxEnvironmentVars {
		p.add(j.name, "environment", "%s: \"environment\" can only have %d environment variables defined", label, MaxEnvironmentVars)
	}
	matrixKeys := map[string]bool{}
	for _, a := range j.matrix {
		matrixKeys[a.key] = true
	}
	if combined := len(matrixKeys) + userEnv; combined > MaxEnvironmentVars {
		p.add(j.name, "environment", "%s: \"environment\" and \"matrix\" can only have a combined  maxiumum of %d environment variables defined (currently %d)", label, MaxEnvironmentVars, combined)
	}
	size := 1
	for _, a := range j.matrix {
		size *= len(a.values)
		if size > 1_000_000 {
			break
		}
	}
	tooBig := size > MaxPermutations
	if tooBig {
		p.add(j.name, "matrix", "%s: \"matrix\" cannot contain >%d permutations (currently %d)", label, MaxPermutations, size)
	}

	for k := range job.Annotations {
		if strings.HasPrefix(k, "screwdriver.cd/sdAdmin") {
			p.add(j.name, "annotations."+k, "%s: Annotations starting with screwdriver.cd/sdAdmin are reserved for system use only (%q)", label, k)
		}
	}
	job.Settings = p.jobSettings(job)

	if !tooBig {
		job.Permutations = p.permutations(j, commands)
	}
	return job
}

// permutations expands the matrix: one permutation per combination, the first matrix key
// varying slowest (Screwdriver's order), with {{VAR}} image placeholders substituted.
func (p *parser) permutations(j *rawJob, commands []Command) []Permutation {
	combos := []map[string]string{nil}
	for _, a := range j.matrix {
		var next []map[string]string
		for _, c := range combos {
			for _, v := range a.values {
				m := make(map[string]string, len(c)+1)
				for k, cv := range c {
					m[k] = cv
				}
				m[a.key] = v
				next = append(next, m)
			}
		}
		combos = next
	}
	secrets := j.secrets
	if j.image == "" {
		// Screwdriver requires an image; sluice's executors run the job in it
		// (or say that the host runtime does not).
		p.add(j.name, "image", "\"jobs.%s.image\" is required (set it in the job or in \"shared\"), as Screwdriver requires", j.name)
	}
	reported := map[string]bool{}
	out := make([]Permutation, 0, len(combos))
	for _, c := range combos {
		env := make(map[string]string, len(j.env)+len(c))
		for k, v := range j.env {
			env[k] = v
		}
		for k, v := range c {
			env[k] = v
		}
		image := substitute(j.image, env)
		if j.image != "" && !reImage.MatchString(image) && !reported[image] {
			reported[image] = true
			p.add(j.name, "image", "\"jobs.%s.image\" with value %q fails to match the required pattern: %s", j.name, image, imagePatternText)
		}
		out = append(out, Permutation{
			Image:       image,
			Commands:    slices.Clone(commands),
			Environment: env,
			Matrix:      c,
			Secrets:     slices.Clone(secrets),
		})
	}
	return out
}

// substitute replaces {{NAME}} in s with env[NAME]; unknown names are left as written.
func substitute(s string, env map[string]string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return reTemplated.ReplaceAllStringFunc(s, func(m string) string {
		name := reTemplated.FindStringSubmatch(m)[1]
		if v, ok := env[name]; ok {
			return v
		}
		return m
	})
}
