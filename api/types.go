package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"time"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

// CreatePipelineRequest is the body of POST /api/v1/pipelines.
type CreatePipelineRequest struct {
	Name   string `json:"name"`
	Repo   string `json:"repo"`
	Branch string `json:"branch,omitempty"`
	Queue  string `json:"queue,omitempty"`
	// Admins may administer the pipeline besides its owner (the creator):
	// user names, or role:<name>.
	Admins []string `json:"admins,omitempty"`
	// Statuses is where commit statuses go: "" derives it from the repo
	// URL, "off", github:<owner>/<repo> or gitlab:<group>/<project>.
	Statuses string `json:"statuses,omitempty"`
	// Private: the repository is read with the pipeline's own credentials
	// (its secret SLUICE_GITHUB_TOKEN, SLUICE_GITLAB_TOKEN or
	// SLUICE_DEPLOY_KEY, set once it exists), so it is not read at create.
	Private bool `json:"private,omitempty"`
	// Public makes the pipeline's status badges readable without a token.
	Public bool `json:"public,omitempty"`
}

// UpdatePipelineRequest is the body of PATCH /api/v1/pipelines/{name}.
type UpdatePipelineRequest struct {
	Repo   *string `json:"repo,omitempty"`
	Branch *string `json:"branch,omitempty"`
	Queue  *string `json:"queue,omitempty"`
	// Admins replaces the pipeline's admins (an empty list clears them).
	Admins *[]string `json:"admins,omitempty"`
	// Statuses: see CreatePipelineRequest.
	Statuses *string `json:"statuses,omitempty"`
	// Public: see CreatePipelineRequest.
	Public *bool `json:"public,omitempty"`
}

// Pipeline is a pipeline as the API shows it.
type Pipeline struct {
	Name          string            `json:"name"`
	Repo          string            `json:"repo"`
	RepoKind      string            `json:"repo_kind"`
	Branch        string            `json:"branch"`
	Queue         string            `json:"queue,omitempty"`
	Events        int               `json:"events"`
	LastSHA       string            `json:"last_sha,omitempty"`
	Subscriptions []string          `json:"subscriptions,omitempty"`
	Periodic      map[string]string `json:"periodic,omitempty"`
	// ScheduleError says why the periodic jobs are not scheduled.
	ScheduleError string    `json:"schedule_error,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
	// Owner is the user that created or last updated the pipeline: events
	// that no person starts (webhooks, schedules, remote triggers) act for
	// it.
	Owner string `json:"owner,omitempty"`
	// Admins may administer the pipeline besides its owner.
	Admins []string `json:"admins,omitempty"`
	// Statuses is the pipeline's commit status setting ("" derives the
	// target from the repository URL).
	Statuses string `json:"statuses,omitempty"`
	// StatusesNote is where the latest event's statuses went, or why it
	// posted none (show only).
	StatusesNote string `json:"statuses_note,omitempty"`
	// Public: anyone may read the pipeline's status badges.
	Public bool `json:"public,omitempty"`
	// Lanes lists the builds each job's lane holds (show only).
	Lanes []LaneView `json:"lanes,omitempty"`
	// Warnings are the spec's warnings: fields sluice does not act on and
	// what it does instead (create and update read the spec at the
	// default branch; show answers with the last spec sync's).
	Warnings []pipeline.Warning `json:"warnings,omitempty"`
	// Parameters are the spec's pipeline parameters (create, update, show).
	Parameters []pipeline.Parameter `json:"parameters,omitempty"`
	// SpecSyncedAt is when the spec at LastSHA was last synced (a commit
	// event of the default branch, or the create): show's Warnings and
	// Parameters are that spec's, kept by the pipeline, not read from the
	// repository at each request. Absent: no sync recorded yet.
	SpecSyncedAt time.Time `json:"spec_synced_at,omitzero"`
}

// LaneView is one job's lane.
type LaneView struct {
	Job     string   `json:"job"`
	Active  []string `json:"active,omitempty"`
	Waiting []string `json:"waiting,omitempty"`
}

// StartEventRequest is the body of POST /api/v1/pipelines/{name}/events.
type StartEventRequest struct {
	SHA       string `json:"sha,omitempty"`
	Branch    string `json:"branch,omitempty"`
	Type      string `json:"type,omitempty"`
	Ref       string `json:"ref,omitempty"`
	PR        int    `json:"pr,omitempty"`
	StartFrom string `json:"start_from,omitempty"`
	Force     bool   `json:"force,omitempty"`
	// Parameters give pipeline parameters (name to value); the spec's
	// defaults fill the others. An unknown name or a value outside a
	// parameter's choices is refused and starts nothing.
	Parameters map[string]string `json:"parameters,omitempty"`
	// Meta is metadata every build of the event starts with: dotted keys,
	// values kept as JSON when they parse as JSON, else as strings.
	Meta map[string]string `json:"meta,omitempty"`
}

// RestartEventRequest is the body of POST /api/v1/events/{pipeline}/{n}/restart.
type RestartEventRequest struct {
	// From names the job(s) to restart from: a string or a list.
	From  JobList `json:"from"`
	Force bool    `json:"force,omitempty"`
}

// RerunEventRequest asks to re-run an event's failed, aborted and collapsed
// jobs.
type RerunEventRequest struct {
	Force bool `json:"force,omitempty"`
}

// JobList is a list of job names that also reads a single string.
type JobList []string

// UnmarshalJSON reads a string or a list of strings.
func (l *JobList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = nil
		if one != "" {
			*l = JobList{one}
		}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			// The decoder adds the field's name to a type error.
			return &json.UnmarshalTypeError{Value: typ.Value, Type: reflect.TypeFor[string](), Offset: typ.Offset}
		}
		return err
	}
	*l = many
	return nil
}

// EventStarted answers an event start.
type EventStarted struct {
	ID        string `json:"id"`
	Pipeline  string `json:"pipeline"`
	Number    int    `json:"number"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Admission and Pending: the start is admitted (durably: it will
	// start) but the pipeline had not numbered it within the API's admit
	// wait; ID and Number are empty then (202 Accepted).
	Admission string `json:"admission,omitempty"`
	Pending   bool   `json:"pending,omitempty"`
	// Warnings say what will keep the event's builds waiting: its
	// pipeline's queue has never been served by any executor.
	Warnings []string `json:"warnings,omitempty"`
	// queue is the pipeline's default queue, as the pipeline said when it
	// numbered the event ("" when it did not say): startWarnings reads it.
	queue string
}

// Approval is an event's approval (screwdriver.cd/restrictPR): why it
// waits, and who approved it.
type Approval = workflows.Approval

// Event is an event with its builds.
type Event struct {
	ID       string           `json:"id"`
	Pipeline string           `json:"pipeline"`
	Number   int              `json:"number"`
	SHA      string           `json:"sha"`
	Status   workflows.Status `json:"status"`
	Reason   string           `json:"reason,omitempty"`
	// WaitCode is "approval" while the event waits for approval.
	WaitCode  workflows.WaitCode `json:"wait_code,omitempty"`
	Trigger   workflows.Trigger  `json:"trigger"`
	StartFrom string             `json:"start_from,omitempty"`
	StartJobs []string           `json:"start_jobs,omitempty"`
	Rerun     bool               `json:"rerun,omitempty"`
	Parent    int                `json:"parent,omitempty"`
	// ActsFor is the user whose permissions the event acts with.
	ActsFor string `json:"acts_for,omitempty"`
	// Succeeded are the jobs that succeeded in the event or along its
	// restart chain.
	Succeeded []string               `json:"succeeded,omitempty"`
	Jobs      []workflows.JobOutcome `json:"jobs,omitempty"`
	Builds    []Build                `json:"builds"`
	Warnings  []string               `json:"warnings,omitempty"`
	StartTime time.Time              `json:"start_time,omitzero"`
	EndTime   time.Time              `json:"end_time,omitzero"`
	// Statuses is where the event's commit statuses go, or why none
	// ("off: ...").
	Statuses string `json:"statuses,omitempty"`
	// BaseSHA is, for a pull request's event, the base branch commit whose
	// spec gave the security-relevant settings.
	BaseSHA string `json:"base_sha,omitempty"`
	// Approval is set when the event waits, or waited, for approval
	// (screwdriver.cd/restrictPR): why, and who approved it.
	Approval *Approval `json:"approval,omitempty"`
	// Parameters are the event's pipeline parameters (given, else default);
	// builds see each as SD_PARAM_<NAME>.
	Parameters map[string]string `json:"parameters,omitempty"`
	// Commit is what the event's commit says about itself (author,
	// message), read when the event started.
	Commit *scm.Commit `json:"commit,omitempty"`
}

// Build is a build as lists and events show it.
type Build struct {
	ID       string `json:"id"`
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
	Event    string `json:"event"`
	// Workflow is the Temporal workflow that runs the build: its own
	// (build/<id>), or its event's when the event runs its builds
	// (SLUICE_BUILDS_IN_EVENTS).
	Workflow string `json:"workflow,omitempty"`
	// PR is the pull request a build runs for (its lane is PR-<n>:<job>).
	PR     int              `json:"pr,omitempty"`
	Status workflows.Status `json:"status"`
	Reason string           `json:"reason,omitempty"`
	// WaitCode says, for machines, why a waiting build waits (see
	// workflows.WaitCodes); Position is its place in line (1: next; in its
	// queue once dispatched, in its job's lane before) and EstimatedStart
	// when it is likely to start, from the queue's recent build durations,
	// or EstimateNote why there is no estimate.
	WaitCode       workflows.WaitCode      `json:"wait_code,omitempty"`
	Position       int                     `json:"position,omitempty"`
	EstimatedStart time.Time               `json:"estimated_start,omitzero"`
	EstimateNote   string                  `json:"estimate_note,omitempty"`
	Queue          string                  `json:"queue"`
	Priority       int                     `json:"priority,omitempty"`
	Executor       string                  `json:"executor,omitempty"`
	SHA            string                  `json:"sha,omitempty"`
	Attempts       int                     `json:"attempts,omitempty"`
	CreateTime     time.Time               `json:"create_time,omitzero"`
	QueuedTime     time.Time               `json:"queued_time,omitzero"`
	StartTime      time.Time               `json:"start_time,omitzero"`
	EndTime        time.Time               `json:"end_time,omitzero"`
	WaitUntil      time.Time               `json:"wait_until,omitzero"`
	CollapsedInto  string                  `json:"collapsed_into,omitempty"`
	AttemptList    []workflows.Attempt     `json:"attempt_list,omitempty"`
	Steps          []workflows.StepOutcome `json:"steps,omitempty"`
	// LogKey is the log store key of the latest attempt's logs.
	LogKey string `json:"log_key,omitempty"`
	// Fork marks a build of a pull request from a fork (untrusted code).
	Fork bool `json:"fork,omitempty"`
	// Branch is the branch the build runs for (a pull request's: its target).
	Branch string `json:"branch,omitempty"`
	// Secrets are the names of the secrets its job lists (SecretsListed:
	// recorded; builds started before sluice recorded them have none).
	Secrets       []string `json:"secrets,omitempty"`
	SecretsListed bool     `json:"-"`
	// Cause says, for machines, why an ended build ended (succeeded,
	// failed, cancelled, superseded, executor-lost, timed-out, refused);
	// CauseInfo its details (the full record only).
	Cause     workflows.Cause      `json:"cause,omitempty"`
	CauseInfo *workflows.CauseInfo `json:"cause_info,omitempty"`
	// Upstream are the jobs whose builds' metadata it starts with (the
	// full record only).
	Upstream []string `json:"upstream,omitempty"`
	// Meta is the build's metadata (GET /api/v1/builds/{id} only): what it
	// ended with once saved, else what it starts with.
	Meta json.RawMessage `json:"meta,omitempty"`
	// stepCredentials are the step credential hashes of AttemptList's
	// attempts, in its order; never shown.
	stepCredentials []string
	// credentials are the credential hashes of AttemptList's attempts, in
	// its order ("" or missing: claimed by an older executor); never shown.
	credentials []string
}

// QueueRequest is the body of POST /api/v1/queues and PUT /api/v1/queues/{name}.
// Rules use the CLI form: "run-on=executors,max-parallel=4,min-gap=0s,labels=pool=gpu".
type QueueRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Rules       []string `json:"rules"`
	UseRoles    []string `json:"use_roles,omitempty"`
	// MaxWait is how long a build may wait on the queue for an executor
	// before it ends refused, as a Go duration ("30m"); "" or "0" for no
	// limit.
	MaxWait string `json:"max_wait,omitempty"`
}

// Queue is a queue with its current plan.
type Queue struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Rules       []string `json:"rules"`
	UseRoles    []string `json:"use_roles,omitempty"`
	// MaxWait: see QueueRequest ("" when there is no limit).
	MaxWait    string `json:"max_wait,omitempty"`
	ActiveRule int    `json:"active_rule"`
	Why        string `json:"why"`
	Slots      int    `json:"slots"`
	Busy       int    `json:"busy"`
	// UntrustedWhy says where pull requests from forks run now (see
	// queue.EvaluateUntrusted): only on container executors, unless a
	// rule has untrusted-on-host=true.
	UntrustedWhy string `json:"untrusted_why"`
}

// QueueStatus is GET /api/v1/queues/{name}/status.
type QueueStatus struct {
	Queue
	Members []QueueMember `json:"members"`
	// Backlog counts builds dispatched to the queue and not started.
	Backlog int `json:"backlog"`
	// Waiting counts the queue's builds still held by their lanes.
	Waiting int `json:"waiting"`
	// Oldest is the longest-waiting dispatched build.
	Oldest     string        `json:"oldest,omitempty"`
	OldestWait time.Duration `json:"oldest_wait,omitempty"`
}

// QueueMember is a member of a queue's active rule with its slots.
type QueueMember struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	State string `json:"state"`
	Live  bool   `json:"live"`
	Used  int    `json:"used"`
	Free  int    `json:"free"`
	Slots int    `json:"slots"`
}

// Executor is a registered member.
type Executor struct {
	Name     string            `json:"name"`
	Role     string            `json:"role"`
	Host     string            `json:"host,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Queues   []string          `json:"queues,omitempty"`
	State    string            `json:"state"`
	Live     bool              `json:"live"`
	LastSeen time.Time         `json:"last_seen"`
	Running  map[string]int    `json:"running,omitempty"`
	// Runtime is where the member's builds run: "host" or "container" (see
	// queue.Member.Runtime); pull requests from forks go only to container
	// executors.
	Runtime string `json:"runtime"`
	// StateReason says why sluice changed State on its own: an executor
	// drained automatically for losing builds.
	StateReason string `json:"state_reason,omitempty"`
}

func executorOf(m queue.Member, now time.Time, liveness time.Duration) Executor {
	rt := m.Runtime
	if rt == "" {
		rt = queue.RuntimeHost // a member from before runtimes were reported
	}
	return Executor{
		Name: m.Name, Role: string(m.Role), Host: m.Host, Labels: m.Labels, Queues: m.Queues,
		State: string(m.State), Live: m.Live(now, liveness), LastSeen: m.LastSeen, Running: m.Running, Runtime: rt,
		StateReason: m.StateReason,
	}
}

// WebhookResult answers a webhook delivery.
type WebhookResult struct {
	Events  []EventStarted `json:"events,omitempty"`
	Ignored string         `json:"ignored,omitempty"`
	// Skipped says, per event, that it starts no job because the pushed
	// head commit's message asks to skip CI ([skip ci], [ci skip]).
	Skipped []string `json:"skipped,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// ErrorBody is every error response.
type ErrorBody struct {
	Error string `json:"error"`
}
