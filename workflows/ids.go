package workflows

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/activities"
)

// Task queues and fixed workflow IDs.
const (
	// ControllerTaskQueue is where controllers run workflows and the
	// orchestration activities (reading specs, registry look-ups).
	ControllerTaskQueue = "sluice-controller"
	// RegistryID is the one registry workflow of a namespace.
	RegistryID = "sluice-registry"
	// queueTaskQueuePrefix prefixes a named queue's Temporal task queue.
	queueTaskQueuePrefix = "queue/"
)

// ErrBadID is wrapped by every ID parsing error.
var ErrBadID = errors.New("workflows: bad id")

var rePipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// ValidatePipelineName checks a pipeline name: letters, digits, `_ . -`, at
// most 100 characters, starting with a letter or digit. Names appear in
// workflow IDs, so they cannot contain '/'.
func ValidatePipelineName(name string) error {
	if !rePipelineName.MatchString(name) {
		return fmt.Errorf("%w: pipeline name %q: use letters, digits, '_', '.' and '-' (at most 100, starting with a letter or digit)", ErrBadID, name)
	}
	return nil
}

// QueueTaskQueue is the Temporal task queue that carries a named queue's builds.
func QueueTaskQueue(queueName string) string { return queueTaskQueuePrefix + queueName }

// UntrustedTaskQueue is the Temporal task queue that carries a named queue's
// untrusted builds (pull requests from forks): "queue/<name>@untrusted".
// Only members that may run a stranger's code poll it (container executors,
// see queue.EvaluateUntrusted). '@' cannot appear in a queue name, so the two
// task queues of a queue never collide with another queue's.
func UntrustedTaskQueue(queueName string) string {
	return queueTaskQueuePrefix + queueName + activities.UntrustedSuffix
}

// QueueFromTaskQueue reverses QueueTaskQueue and UntrustedTaskQueue: the
// queue's name and whether tq carries its untrusted builds.
func QueueFromTaskQueue(tq string) (name string, untrusted, ok bool) {
	return activities.SplitTaskQueue(tq)
}

// PipelineWorkflowID is the pipeline entity's workflow ID.
func PipelineWorkflowID(pipeline string) string { return "pipeline/" + pipeline }

// EventRef names one event of a pipeline.
type EventRef struct {
	Pipeline string `json:"pipeline"`
	Number   int    `json:"number"`
}

// String is the event's short ID, "<pipeline>/<n>".
func (e EventRef) String() string { return e.Pipeline + "/" + strconv.Itoa(e.Number) }

// WorkflowID is the event workflow's ID, "event/<pipeline>/<n>".
func (e EventRef) WorkflowID() string { return "event/" + e.String() }

// ParseEventRef reads "<pipeline>/<n>" (an optional "event/" prefix is accepted).
func ParseEventRef(s string) (EventRef, error) {
	s = strings.TrimPrefix(s, "event/")
	p, n, ok := strings.Cut(s, "/")
	num, err := strconv.Atoi(n)
	if !ok || err != nil || num < 1 || ValidatePipelineName(p) != nil {
		return EventRef{}, fmt.Errorf("%w: event %q: want <pipeline>/<number>, e.g. myapp/12", ErrBadID, s)
	}
	return EventRef{Pipeline: p, Number: num}, nil
}

// BuildRef names one build: one job (one matrix permutation) of one event.
type BuildRef struct {
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
	Event    int    `json:"event"`
	// Index is the matrix permutation, 1-based; 0 for a job without a matrix.
	Index int `json:"index,omitempty"`
	// PR is the pull request a build runs for (pr and pr-closed events); 0
	// for the branch's builds. A PR's builds have their own lanes and IDs,
	// named as Screwdriver names PR jobs: "PR-<n>:<job>".
	PR int `json:"pr,omitempty"`
}

// prJobPrefix starts the lane and ID name of a pull request's job.
const prJobPrefix = "PR-"

// LaneKey names the lane the build waits in: the job for the branch's
// builds, "PR-<n>:<job>" for a pull request's.
func (b BuildRef) LaneKey() string {
	if b.PR > 0 {
		return prJobPrefix + strconv.Itoa(b.PR) + ":" + b.Job
	}
	return b.Job
}

// String is the build's short ID: "<pipeline>/<job>/<event>" or, for matrix
// permutation k, "<pipeline>/<job>/<event>.<k>"; a pull request's builds
// read "<pipeline>/PR-<n>:<job>/<event>".
func (b BuildRef) String() string {
	s := b.Pipeline + "/" + b.LaneKey() + "/" + strconv.Itoa(b.Event)
	if b.Index > 0 {
		s += "." + strconv.Itoa(b.Index)
	}
	return s
}

// WorkflowID is the build workflow's ID, "build/<short id>".
func (b BuildRef) WorkflowID() string { return "build/" + b.String() }

// EventRef is the event the build belongs to.
func (b BuildRef) EventRef() EventRef { return EventRef{Pipeline: b.Pipeline, Number: b.Event} }

// ParseBuildRef reads a build's short ID (an optional "build/" prefix is accepted).
func ParseBuildRef(s string) (BuildRef, error) {
	orig := s
	s = strings.TrimPrefix(s, "build/")
	bad := fmt.Errorf("%w: build %q: want <pipeline>/<job>/<event>[.<permutation>], e.g. myapp/test/12 or myapp/PR-3:test/14", ErrBadID, orig)
	p, rest, ok := strings.Cut(s, "/")
	if !ok || ValidatePipelineName(p) != nil {
		return BuildRef{}, bad
	}
	i := strings.LastIndex(rest, "/")
	if i <= 0 {
		return BuildRef{}, bad
	}
	job, num := rest[:i], rest[i+1:]
	ev, idx, hasIdx := strings.Cut(num, ".")
	e, err := strconv.Atoi(ev)
	if err != nil || e < 1 {
		return BuildRef{}, bad
	}
	ref := BuildRef{Pipeline: p, Job: job, Event: e}
	if pr, j, ok := ParsePRJob(job); ok {
		ref.PR, ref.Job = pr, j
	}
	if hasIdx {
		k, err := strconv.Atoi(idx)
		if err != nil || k < 1 {
			return BuildRef{}, bad
		}
		ref.Index = k
	}
	return ref, nil
}

// ParsePRJob splits a pull request's job name "PR-<n>:<job>" into the
// number and the job. Job names cannot start with "pr-" (the spec rejects
// them), so the form is unambiguous.
func ParsePRJob(name string) (pr int, job string, ok bool) {
	rest, found := strings.CutPrefix(name, prJobPrefix)
	if !found {
		return 0, "", false
	}
	num, job, found := strings.Cut(rest, ":")
	n, err := strconv.Atoi(num)
	if !found || err != nil || n < 1 || job == "" {
		return 0, "", false
	}
	return n, job, true
}

// PeriodicScheduleID is the Temporal Schedule of a periodic job.
func PeriodicScheduleID(pipeline, job string) string { return "periodic/" + pipeline + "/" + job }

// WorkflowRegistry is where workflows are registered (a worker or a replayer).
type WorkflowRegistry interface {
	RegisterWorkflow(w any)
}

// Register registers every sluice workflow.
func Register(r WorkflowRegistry) {
	r.RegisterWorkflow(RegistryWorkflow)
	r.RegisterWorkflow(PipelineWorkflow)
	r.RegisterWorkflow(EventWorkflow)
	r.RegisterWorkflow(BuildWorkflow)
	r.RegisterWorkflow(PeriodicWorkflow)
	r.RegisterWorkflow(StatusWorkflow)
	r.RegisterWorkflow(NotifyWorkflow)
}
