package pipeline

import (
	"fmt"
	"regexp"
	"strings"
)

// EventKind is the kind of SCM event that can start a pipeline's jobs.
type EventKind string

// Event kinds usable as "~<kind>" triggers in requires.
const (
	EventCommit    EventKind = "commit"
	EventPR        EventKind = "pr"
	EventPRClosed  EventKind = "pr-closed"
	EventRelease   EventKind = "release"
	EventTag       EventKind = "tag"
	EventSubscribe EventKind = "subscribe"
)

// RequireKind says what a requires entry refers to.
type RequireKind string

// Require kinds.
const (
	// RequireEvent is an SCM trigger: ~commit, ~pr, ~pr-closed, ~release, ~tag, ~subscribe.
	RequireEvent RequireKind = "event"
	// RequireJob is another job of the same pipeline: ~job (OR) or job (AND).
	RequireJob RequireKind = "job"
	// RequireStage is a stage's setup or teardown job: [~]stage@name[:setup|:teardown].
	RequireStage RequireKind = "stage"
	// RequireRemote is a job of another pipeline: ~sd@pipeline:job or sd@pipeline:job.
	RequireRemote RequireKind = "remote"
)

// Require is one parsed entry of a job's (or stage's) requires.
type Require struct {
	// Raw is the entry as written (after stage shorthand expansion).
	Raw string `json:"raw"`
	// Kind says what the entry refers to.
	Kind RequireKind `json:"kind"`
	// OR is true for a tilde entry: it alone starts the job. False means an AND join.
	OR bool `json:"or,omitempty"`
	// Event is the SCM event kind for RequireEvent.
	Event EventKind `json:"event,omitempty"`
	// Branch is a literal ":branch" (or tag/release name) filter of an event trigger.
	Branch string `json:"branch,omitempty"`
	// Regex is a ":/regex/" filter of an event trigger, without the slashes.
	Regex string `json:"regex,omitempty"`
	// Job is the job name for RequireJob and RequireRemote.
	Job string `json:"job,omitempty"`
	// Pipeline is the remote pipeline for RequireRemote.
	Pipeline string `json:"pipeline,omitempty"`
	// Stage is the stage name for RequireStage.
	Stage string `json:"stage,omitempty"`
	// StagePhase is "setup", "teardown" or "" (shorthand, meaning teardown) for RequireStage.
	StagePhase string `json:"stagePhase,omitempty"`
}

var (
	reJobName      = regexp.MustCompile(`^[\w-]+$`)
	reEventTrigger = regexp.MustCompile(`^~(commit|pr|pr-closed|release|tag)(?::(.+))?$`)
	// reRemote's job may be a stage's setup or teardown job of the other
	// pipeline (~sd@pipeline:stage@name:setup), as Screwdriver allows.
	reRemote   = regexp.MustCompile(`^(~?)sd@([^\s~@]+):([\w-]+|stage@[\w-]+:(?:setup|teardown))$`)
	reStage    = regexp.MustCompile(`^(~?)stage@([\w-]+)(?::(setup|teardown))?$`)
	reLocalJob = regexp.MustCompile(`^(~?)([\w-]+)$`)
)

// ParseRequire parses one requires entry:
//
//	~commit ~pr ~pr-closed ~release ~tag   SCM events, optionally ":branch" or ":/regex/"
//	~subscribe                            events of subscribed repositories
//	~sd@<pipeline>:<job>, sd@<pipeline>:<job>   remote trigger (OR) or remote join (AND);
//	                                      the job is what follows the last ":"
//	~stage@<name>[:setup|:teardown], stage@...  a stage's setup/teardown job
//	~<job>, <job>                          OR edge, AND (join) edge
func ParseRequire(s string) (Require, error) {
	r := Require{Raw: s}
	if s == "~subscribe" {
		r.Kind, r.OR, r.Event = RequireEvent, true, EventSubscribe
		return r, nil
	}
	if m := reEventTrigger.FindStringSubmatch(s); m != nil {
		r.Kind, r.OR, r.Event = RequireEvent, true, EventKind(m[1])
		filter := m[2]
		switch {
		case filter == "":
		case len(filter) >= 2 && strings.HasPrefix(filter, "/") && strings.HasSuffix(filter, "/"):
			r.Regex = filter[1 : len(filter)-1]
			if _, err := regexp.Compile(r.Regex); err != nil {
				return r, fmt.Errorf("invalid regular expression /%s/: %w", r.Regex, err)
			}
		case strings.ContainsAny(filter, " \t\r\n"):
			return r, fmt.Errorf("branch filter %q contains whitespace", filter)
		default:
			r.Branch = filter
		}
		return r, nil
	}
	if m := reRemote.FindStringSubmatch(s); m != nil {
		r.Kind, r.OR, r.Pipeline, r.Job = RequireRemote, m[1] == "~", m[2], m[3]
		return r, nil
	}
	if m := reStage.FindStringSubmatch(s); m != nil {
		r.Kind, r.OR, r.Stage, r.StagePhase = RequireStage, m[1] == "~", m[2], m[3]
		return r, nil
	}
	if m := reLocalJob.FindStringSubmatch(s); m != nil {
		r.Kind, r.OR, r.Job = RequireJob, m[1] == "~", m[2]
		return r, nil
	}
	return r, fmt.Errorf("%q is not a job, stage, remote (sd@pipeline:job) or event (~commit, ~pr, ~pr-closed, ~release, ~tag, ~subscribe) trigger", s)
}

// StageJobName returns the name of a stage's setup or teardown job.
func StageJobName(stage, phase string) string {
	return "stage@" + stage + ":" + phase
}

// expandStageShorthand turns "stage@x" into "stage@x:teardown" (and "~stage@x" likewise),
// as Screwdriver does when a pipeline has stages.
func expandStageShorthand(s string) string {
	if m := reStage.FindStringSubmatch(s); m != nil && m[3] == "" {
		return s + ":teardown"
	}
	return s
}

// nodeName is the workflow-graph node a requires entry points at: the tilde is kept for
// SCM events and remote triggers, dropped for jobs and stages (Screwdriver's rule).
func nodeName(req string) string {
	if !strings.HasPrefix(req, "~") {
		return req
	}
	r, err := ParseRequire(req)
	if err == nil && (r.Kind == RequireEvent || r.Kind == RequireRemote) {
		return req
	}
	return req[1:]
}

// matches reports whether an event trigger fires for an event of kind on ref, where
// defaultBranch is the pipeline's own branch (see Spec.StartJobs).
func (r Require) matches(kind EventKind, ref, defaultBranch string) bool {
	if r.Kind != RequireEvent || r.Event != kind {
		return false
	}
	switch {
	case r.Regex != "":
		re, err := regexp.Compile(r.Regex)
		return err == nil && re.MatchString(ref)
	case r.Branch != "":
		return r.Branch == ref
	}
	switch kind {
	case EventCommit, EventPR, EventPRClosed:
		return defaultBranch == "" || ref == defaultBranch
	default:
		return true
	}
}
