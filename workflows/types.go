package workflows

import (
	"slices"
	"time"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
)

// Signal, query and update names.
const (
	// SignalLane carries LaneMessages from a pipeline to a build.
	SignalLane = "lane"
	// SignalEnqueue carries an EnqueueBatch from an event to its pipeline.
	SignalEnqueue = "enqueue"
	// SignalBuildDone carries a BuildDone from a build to its pipeline.
	SignalBuildDone = "build-done"
	// SignalHandBack tells an event (EventInput.DoneInResult) that the
	// pipeline run that started it continues as new: the lane places of its
	// last builds go back by an enqueue batch, not in its result.
	SignalHandBack = "hand-back"
	// SignalSpecSynced carries a SpecSync from an event to its pipeline.
	SignalSpecSynced = "spec-synced"
	// SignalStartEvent asks a pipeline to start an event without waiting for
	// an answer (schedules use it); clients use UpdateStartEvent.
	SignalStartEvent = "start-event"
	// SignalBuildStarted carries a BuildStarted from a build to its pipeline
	// when the build, already claimed by an executor, refuses a collapse.
	SignalBuildStarted = "build-started"
	// SignalPeriodicDone tells a PeriodicWorkflow that the build its fire
	// started has ended (so the schedule's overlap policy applies to it).
	SignalPeriodicDone = "periodic-done"

	// SignalCancelledBy carries a CancelledBy to a build the API is about
	// to cancel, so its end cause names who cancelled it.
	SignalCancelledBy = "cancelled-by"

	// SignalBuildLanes carries BuildLanes — the lanes' messages to builds
	// an event owns (EventInput.OwnsBuilds) — to that event.
	SignalBuildLanes = "build-lanes"
	// SignalQueueDeleted carries a QueueDeleted to an event that owns its
	// builds: those not yet running on the queue end FAILURE.
	SignalQueueDeleted = "queue-deleted"
	// UpdateCancelBuild cancels one build an event owns (CancelBuildRequest).
	UpdateCancelBuild = "cancel-build"

	// UpdateStartEvent starts an event and returns its number.
	UpdateStartEvent = "start-event"
	// UpdateConfigure changes a pipeline's settings.
	UpdateConfigure = "configure"
	// UpdateDelete deletes a pipeline.
	UpdateDelete = "delete"

	// QueryPipeline returns a PipelineInfo.
	QueryPipeline = "pipeline"
	// QueryEvent returns an EventState.
	QueryEvent = "event"
	// QueryBuild returns a BuildState: a build workflow's own, or, on an
	// event that owns its builds, the one named by the query's argument
	// (its ID).
	QueryBuild = "build"
)

// Trigger is what started an event.
type Trigger struct {
	// Kind is commit, pr, pr-closed, release, tag, manual, periodic or remote.
	Kind TriggerKind `json:"kind"`
	// Branch is the branch pushed, or a PR's target branch.
	Branch string `json:"branch,omitempty"`
	// Ref is a tag or release name, or a PR's head branch.
	Ref string `json:"ref,omitempty"`
	// SHA is the commit; empty means the head of Branch when the event starts.
	SHA string `json:"sha,omitempty"`
	// Before is the previous head for pushes (changed files are computed from it).
	Before string `json:"before,omitempty"`
	// PR is the pull request number.
	PR int `json:"pr,omitempty"`
	// ChangedFiles are the files the webhook said changed (sourcePaths): nil
	// when unknown (every job runs), empty when nothing changed. The field
	// is not omitted when empty, so an empty list survives serialisation.
	ChangedFiles []string `json:"changed_files"`
	// Remote is the remote job whose success started this event ("sd@p:j").
	Remote string `json:"remote,omitempty"`
	// Sender is who caused it (a user, "schedule", a webhook sender).
	Sender string `json:"sender,omitempty"`
	// DeliveryID deduplicates webhook redeliveries.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Fork marks a pull request from another repository (a fork): its code
	// is a stranger's, so its builds get no secret unless the pipeline
	// allows that secret in fork pull requests.
	Fork bool `json:"fork,omitempty"`
	// MetaRef names the metadata the event starts with (`event start
	// --meta`), kept in sluice's store, not in Temporal ("": none). A
	// restart carries it on with the trigger.
	MetaRef string `json:"meta_ref,omitempty"`
	// SkipCI is the marker ("[skip ci]", "[ci skip]") the pushed head
	// commit's message carries: the event starts no job and says why.
	SkipCI string `json:"skip_ci,omitempty"`
	// Title is a pull request's title; Author the head commit's author
	// (login or name) and Message its message, as the webhook said
	// (bounded: see ClipChange). Shown on the pages; none acts on them.
	Title   string `json:"title,omitempty"`
	Author  string `json:"author,omitempty"`
	Message string `json:"message,omitempty"`
}

// TriggerKind is the kind of an event's trigger.
type TriggerKind string

// Trigger kinds.
const (
	TriggerCommit   TriggerKind = "commit"
	TriggerPR       TriggerKind = "pr"
	TriggerPRClosed TriggerKind = "pr-closed"
	TriggerRelease  TriggerKind = "release"
	TriggerTag      TriggerKind = "tag"
	TriggerManual   TriggerKind = "manual"
	TriggerPeriodic TriggerKind = "periodic"
	TriggerRemote   TriggerKind = "remote"
)

// Valid reports whether k is a known trigger kind.
func (k TriggerKind) Valid() bool {
	switch k {
	case TriggerCommit, TriggerPR, TriggerPRClosed, TriggerRelease, TriggerTag, TriggerManual, TriggerPeriodic, TriggerRemote:
		return true
	}
	return false
}

// Dispatch holds the dispatch settings that travel with every build.
type Dispatch struct {
	// HeartbeatTimeout: a running build silent this long is dispatched again.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// MaxAttempts bounds dispatches after executor loss.
	MaxAttempts int `json:"max_attempts"`
}

// DefaultDispatch is used when a caller leaves Dispatch empty.
func DefaultDispatch() Dispatch {
	return Dispatch{HeartbeatTimeout: 20 * time.Second, MaxAttempts: 3}
}

func (d Dispatch) orDefault() Dispatch {
	def := DefaultDispatch()
	if d.HeartbeatTimeout <= 0 {
		d.HeartbeatTimeout = def.HeartbeatTimeout
	}
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = def.MaxAttempts
	}
	return d
}

// PipelineConfig is a pipeline's settings.
type PipelineConfig struct {
	Name string `json:"name"`
	// Repo is a git URL, a local git repository or a plain directory.
	Repo string `json:"repo"`
	// Branch is the default branch: unfiltered commit triggers fire on it.
	Branch string `json:"branch"`
	// Queue is the default queue of jobs without screwdriver.cd/executor.
	Queue string `json:"queue,omitempty"`
	// Dispatch settings for this pipeline's builds.
	Dispatch Dispatch `json:"dispatch"`
	// Creator is who created the pipeline.
	Creator   string    `json:"creator,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Statuses is where the pipeline's commit statuses go: "" derives it
	// from Repo (github.com, gitlab.com or the configured hosts), "off", or
	// github:<owner>/<repo> / gitlab:<group>/<project>.
	Statuses string `json:"statuses,omitempty"`
	// Owner is the identity that created or last updated the pipeline. Events
	// that no person starts (webhooks, schedules, remote triggers) act for
	// it: its roles decide which queues they may use. Nil on pipelines
	// created before owners were recorded (they act as the system).
	Owner *queue.Identity `json:"owner,omitempty"`
	// Admins may administer the pipeline besides its owner: user names, or
	// role:<name> for everyone with that role.
	Admins []string `json:"admins,omitempty"`
	// Public lets anyone, without a token, read the pipeline's status
	// badges (GET /api/v1/pipelines/{name}/badge.svg). Nothing else of
	// the pipeline becomes public.
	Public bool `json:"public,omitempty"`
	// BuildsInEvents: the pipeline's events run their builds themselves
	// (EventInput.OwnsBuilds) instead of a BuildWorkflow each
	// (docs/option-b.md); the API stamps it from SLUICE_BUILDS_IN_EVENTS.
	BuildsInEvents bool `json:"builds_in_events,omitempty"`
}

// PipelineInput starts a PipelineWorkflow; State carries over continue-as-new.
type PipelineInput struct {
	Config PipelineConfig `json:"config"`
	State  *PipelineState `json:"state,omitempty"`
}

// EventRange is the event numbers from From up to To (excluded).
type EventRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// ownsBuildsOf reports whether event n runs its builds itself.
func (s *PipelineState) ownsBuildsOf(n int) bool {
	for _, r := range s.OwnedEvents {
		if n >= r.From && n < r.To {
			return true
		}
	}
	return false
}

// markOwned records that event n runs its builds itself.
func (s *PipelineState) markOwned(n int) {
	if k := len(s.OwnedEvents); k > 0 && s.OwnedEvents[k-1].To == n {
		s.OwnedEvents[k-1].To++
		return
	}
	s.OwnedEvents = append(s.OwnedEvents, EventRange{From: n, To: n + 1})
}

// PipelineState is the part of a pipeline that survives continue-as-new.
type PipelineState struct {
	NextEvent  int            `json:"next_event"`
	Lanes      Lanes          `json:"lanes"`
	Deliveries []DeliverySeen `json:"deliveries,omitempty"`
	// Admissions are the last starts admitted by SignalAdmitEvents, with
	// their outcomes (QueryAdmissions).
	Admissions []AdmissionSeen `json:"admissions,omitempty"`
	// Starting are the builds handed to the lanes by UpdateEnqueue whose
	// workflows may not exist yet, until when a lane message that finds no
	// workflow for one goes again (their outboxes): kept even once the
	// lanes dropped the build (a collapse of a waiting build), until the
	// lanes hear of its end or the grace ends.
	Starting []StartingBuild `json:"starting,omitempty"`
	// OwnedEvents are the events started to run their builds themselves
	// (EventInput.OwnsBuilds): the lanes' messages to their builds go to
	// the event (SignalBuildLanes).
	OwnedEvents []EventRange `json:"owned_events,omitempty"`
	// Subscriptions are the remote jobs this pipeline's spec requires.
	Subscriptions []string `json:"subscriptions,omitempty"`
	// Periodic maps periodic jobs to their expanded cron.
	Periodic map[string]string `json:"periodic,omitempty"`
	// LastSHA is the default branch commit last synced.
	LastSHA string `json:"last_sha,omitempty"`
	// SyncedAt is when the last spec sync was applied; SpecWarnings and
	// SpecParameters are what that sync's spec said.
	SyncedAt       time.Time            `json:"synced_at,omitzero"`
	SpecWarnings   []pipeline.Warning   `json:"spec_warnings,omitempty"`
	SpecParameters []pipeline.Parameter `json:"spec_parameters,omitempty"`
	// SyncedEvent is the event whose spec sync was applied last: an older
	// event's sync that arrives later is ignored.
	SyncedEvent int `json:"synced_event,omitempty"`
	// ScheduleError says why the periodic schedules could not be created or
	// updated at the last sync ("" when they are in step with the spec).
	ScheduleError string `json:"schedule_error,omitempty"`
	// ScheduleBy is who set the periodic schedules up (the identity of the
	// event, or the pipeline's creator, whose spec sync made them): the
	// events they start act for it. Nil: the pipeline's owner.
	ScheduleBy *queue.Identity `json:"schedule_by,omitempty"`
	// PRs are the open pull requests' newest events: builds of older events
	// of a pull request are superseded by a newer commit or its close.
	PRs map[int]PRState `json:"prs,omitempty"`
	// Deleted marks a pipeline deleted while builds were still in its
	// lanes: it refuses every update and ends once they drain, across
	// continue-as-new (N1: it used to come back to life).
	Deleted bool `json:"deleted,omitempty"`
}

// PRState is what a pipeline remembers of one pull request.
type PRState struct {
	// Event is the pull request's newest event.
	Event int `json:"event"`
	// SHA is that event's commit, when known.
	SHA string `json:"sha,omitempty"`
	// Closed is set once a pr-closed event arrived.
	Closed bool `json:"closed,omitempty"`
}

// DeliverySeen remembers which event a webhook delivery started.
type DeliverySeen struct {
	ID    string `json:"id"`
	Event int    `json:"event"`
}

// PipelineInfo is what QueryPipeline returns.
type PipelineInfo struct {
	Config        PipelineConfig    `json:"config"`
	Events        int               `json:"events"`
	Lanes         Lanes             `json:"lanes"`
	Subscriptions []string          `json:"subscriptions,omitempty"`
	Periodic      map[string]string `json:"periodic,omitempty"`
	LastSHA       string            `json:"last_sha,omitempty"`
	// ScheduleError says why the periodic schedules are not in step.
	ScheduleError string `json:"schedule_error,omitempty"`
	// SyncedAt is when the spec at LastSHA was synced (zero: never);
	// Warnings and Parameters are that spec's.
	SyncedAt   time.Time            `json:"synced_at,omitzero"`
	Warnings   []pipeline.Warning   `json:"warnings,omitempty"`
	Parameters []pipeline.Parameter `json:"parameters,omitempty"`
}

// StartEventRequest is UpdateStartEvent's argument.
type StartEventRequest struct {
	Trigger Trigger `json:"trigger"`
	// StartFrom starts the event at this job (restart, manual start).
	StartFrom string `json:"start_from,omitempty"`
	// StartJobs starts the event at several jobs at once (a restart from
	// several jobs, a re-run of an event's failed jobs); StartFrom is then
	// the first of them.
	StartJobs []string `json:"start_jobs,omitempty"`
	// Rerun marks a re-run of Parent's failed jobs (for display).
	Rerun bool `json:"rerun,omitempty"`
	// Notify is a workflow to signal SignalPeriodicDone once the start job's
	// builds ended (a schedule's PeriodicWorkflow).
	Notify string `json:"notify,omitempty"`
	// Force starts builds through freeze windows.
	Force bool `json:"force,omitempty"`
	// Parent is the event a restart comes from: its commit is reused and its
	// successful jobs count for joins.
	Parent int `json:"parent,omitempty"`
	// ParentSucceeded are the jobs that succeeded in Parent, including the
	// successes Parent itself inherited along its restart chain.
	ParentSucceeded []string `json:"parent_succeeded,omitempty"`
	// Creator is who asked.
	Creator string `json:"creator,omitempty"`
	// Identity is checked for `use` on every queue the event's jobs name;
	// nil means the pipeline's owner (webhooks, schedules, remote triggers)
	// or, without one, the system.
	Identity *queue.Identity `json:"identity,omitempty"`
	// Parameters are the pipeline parameters the event is given (name to
	// value); the spec's defaults fill the others.
	Parameters map[string]string `json:"parameters,omitempty"`
	// Admission identifies a start admitted by SignalAdmitEvents: the
	// pipeline answers QueryAdmissions for it and starts it once.
	Admission string `json:"admission,omitempty"`
}

// StartEventResult is UpdateStartEvent's answer.
type StartEventResult struct {
	Event EventRef `json:"event"`
	// Duplicate is true when the webhook delivery was seen before.
	Duplicate bool `json:"duplicate,omitempty"`
	// Queue is the pipeline's queue when the event started (the default
	// queue's name when it names none): the API warns from it, without a
	// query of the (possibly busy) pipeline, when no executor ever served
	// it. "": the answer predates it.
	Queue string `json:"queue,omitempty"`
}

// SpecSync tells a pipeline what its default branch's spec subscribes to.
type SpecSync struct {
	// Event is the event that read the spec (0: the pipeline's creation).
	Event         int               `json:"event,omitempty"`
	SHA           string            `json:"sha"`
	Subscriptions []string          `json:"subscriptions"`
	Periodic      map[string]string `json:"periodic"`
	// SetBy is who the sync acts for: the schedules it sets up start
	// events that act for it. Refused are the periodic jobs left out
	// because SetBy may not use their queue ("job nightly: …").
	SetBy   *queue.Identity `json:"set_by,omitempty"`
	Refused []string        `json:"refused,omitempty"`
	// Warnings and Parameters are the spec's, which the pipeline keeps
	// for its readers (GET /pipelines/{name} answers without reading git).
	Warnings   []pipeline.Warning   `json:"warnings,omitempty"`
	Parameters []pipeline.Parameter `json:"parameters,omitempty"`
}

// EnqueueBatch hands a pipeline's lanes the builds an event just started.
// An event's first batch (possibly empty) also releases the ordering hold on
// later events.
type EnqueueBatch struct {
	Event    int           `json:"event"`
	Requests []LaneRequest `json:"requests,omitempty"`
	// Sync is the event's spec sync, carried by its first batch (events
	// at leanVersion) instead of a SignalSpecSynced of its own.
	Sync *SpecSync `json:"sync,omitempty"`
	// Done are builds of the event that ended and leave their lanes (Slim
	// builds, BuildState.LaneRelease): the event tells the pipeline with
	// its next batch (or a batch of its own when no build starts then)
	// instead of each build sending SignalBuildDone and waiting for it.
	Done []BuildRef `json:"done,omitempty"`
}

// StartingBuild is a build handed over by UpdateEnqueue, and the end of its
// grace (its enqueue + startGrace).
type StartingBuild struct {
	Build BuildRef  `json:"build"`
	Until time.Time `json:"until"`
}

// EnqueueAnswer is UpdateEnqueue's answer: the lanes' messages to the
// batch's builds (by BuildRef.String), in order. A build it names no
// message for waits for signals.
type EnqueueAnswer struct {
	Messages map[string][]LaneMessage `json:"messages,omitempty"`
}

// BuildStarted tells a pipeline that a build an executor claimed runs.
type BuildStarted struct {
	Build BuildRef `json:"build"`
}

// BuildDone tells a pipeline that one of its builds left its lane.
type BuildDone struct {
	Build  BuildRef `json:"build"`
	Status Status   `json:"status"`
}

// EventInput starts an EventWorkflow.
type EventInput struct {
	Event     EventRef       `json:"event"`
	Config    PipelineConfig `json:"config"`
	Trigger   Trigger        `json:"trigger"`
	StartFrom string         `json:"start_from,omitempty"`
	// StartJobs are several start jobs (see StartEventRequest.StartJobs).
	StartJobs []string `json:"start_jobs,omitempty"`
	Rerun     bool     `json:"rerun,omitempty"`
	// Notify is signalled SignalPeriodicDone when the start job's builds end.
	Notify string `json:"notify,omitempty"`
	Force  bool   `json:"force,omitempty"`
	Parent int    `json:"parent,omitempty"`
	// ParentSucceeded are the jobs that succeeded in Parent (they count for joins).
	ParentSucceeded []string        `json:"parent_succeeded,omitempty"`
	Creator         string          `json:"creator,omitempty"`
	Identity        *queue.Identity `json:"identity,omitempty"`
	// Parameters are the parameters given (see StartEventRequest).
	Parameters map[string]string `json:"parameters,omitempty"`
	// Lean versions the event by its input instead of markers: the
	// features versioned separately before it (lane order, commit
	// statuses, schedules set by, restarts by hand, pull requests' base
	// settings) are on; its spec sync rides on its first enqueue signal
	// instead of a signal of its own; its SHA goes with the next upsert;
	// and its builds start lean (BuildInput.Lean). Each version marker
	// costs two history events and a visibility task; events recorded
	// without Lean replay with the markers they have.
	Lean bool `json:"lean,omitempty"`
	// Slim (with Lean; set by pipelines since 2026-11-26) versions the
	// event's cuts in history events by its input: ResolveEvent runs as a
	// local activity first (a marker in the workflow task that started the
	// event, instead of an activity's three events and a workflow task of
	// its own), falling back to the activity when that does not finish in
	// resolveLocalFor; and its builds start Slim (BuildInput.Slim). Events
	// recorded without it replay as they ran.
	Slim bool `json:"slim,omitempty"`
	// DoneInResult (with Slim; set by pipeline runs at eventResultDone):
	// the pipeline run that started the event takes the lane places its
	// builds still hold when it ends from its result (EventState.LaneDone),
	// which it receives anyway, instead of a last enqueue batch — until it
	// sends SignalHandBack before it continues as new.
	DoneInResult bool `json:"done_in_result,omitempty"`
	// EnqueueUpdate (set by pipeline runs at changeEnqueueUpdate): the event
	// hands its builds to the lanes with UpdateEnqueue, from a local
	// activity, before it starts their workflows, and starts each with the
	// lanes' first answer (BuildInput.Initial): a build the lanes grant at
	// once dispatches in its first workflow task, without a grant signal.
	// When the update cannot be sent it falls back to the signal.
	EnqueueUpdate bool `json:"enqueue_update,omitempty"`
	// OwnsBuilds (with Lean and EnqueueUpdate): the event runs each build
	// itself — its RunBuild activities, claims (UpdateClaim naming the
	// build), lane messages (SignalBuildLanes), queries (QueryBuild with
	// the build's ID) and cancels (UpdateCancelBuild) — instead of starting
	// a BuildWorkflow per build: one workflow's start, close and tasks
	// fewer per build (docs/option-b.md). Data, not a marker: events
	// started without it replay as they ran.
	OwnsBuilds bool `json:"owns_builds,omitempty"`
}

// JobOutcome is one job's part in an event.
type JobOutcome struct {
	Job    string   `json:"job"`
	Status Status   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	Builds []string `json:"builds,omitempty"`
}

// EventState is an event's progress (QueryEvent) and, once closed, its result.
type EventState struct {
	Event  EventRef `json:"event"`
	Status Status   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	// WaitCode is WaitApproval while the event waits for approval.
	WaitCode  WaitCode `json:"wait_code,omitempty"`
	SHA       string   `json:"sha,omitempty"`
	Trigger   Trigger  `json:"trigger"`
	StartFrom string   `json:"start_from,omitempty"`
	StartJobs []string `json:"start_jobs,omitempty"`
	Rerun     bool     `json:"rerun,omitempty"`
	Parent    int      `json:"parent,omitempty"`
	// ActsFor is the user whose permissions the event acts with.
	ActsFor string `json:"acts_for,omitempty"`
	// Succeeded are the jobs that succeeded in this event or, for a
	// restart, anywhere along its restart chain: a restart of this event
	// inherits them.
	Succeeded []string     `json:"succeeded,omitempty"`
	Jobs      []JobOutcome `json:"jobs,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	StartTime time.Time    `json:"start_time,omitzero"`
	EndTime   time.Time    `json:"end_time,omitzero"`
	// Statuses is where the event's commit statuses go ("github:o/r"), or
	// why it posts none ("off: ...").
	Statuses string `json:"statuses,omitempty"`
	// BaseSHA is, for a pull request's event, the commit of its base
	// branch whose spec gave the security-relevant settings.
	BaseSHA string `json:"base_sha,omitempty"`
	// Approval is set when the event had to wait for approval
	// (screwdriver.cd/restrictPR): why, and who approved it.
	Approval *Approval `json:"approval,omitempty"`
	// Parameters are the event's pipeline parameters, resolved against the
	// spec (given values, else the defaults): every build sees each as
	// SD_PARAM_<NAME>, and a restart of the event is given them again.
	Parameters map[string]string `json:"parameters,omitempty"`
	// LaneDone are the builds whose lane places the event's result gives
	// back to the pipeline that started it (EventInput.DoneInResult).
	LaneDone []BuildRef `json:"lane_done,omitempty"`
	// Commit is what the event's commit says about itself (author,
	// message, time), read where the event read its spec (data of the
	// resolve activity's result: no command).
	Commit *scm.Commit `json:"commit,omitempty"`
	// Builds are the records of the builds the event owns
	// (EventInput.OwnsBuilds), in the order it created them.
	Builds []BuildState `json:"builds,omitempty"`
}

// BuildInput starts a BuildWorkflow: everything an executor needs to run it.
type BuildInput struct {
	// Lean (set by a lean event, EventInput.Lean): no version markers (lane
	// order, reports of lost attempts and untrusted queues are on); the
	// build starts QUEUED with its memo set by its start options, and its
	// claim upserts the executor and the status together.
	Lean bool `json:"lean,omitempty"`
	// Slim (set by a Slim event, EventInput.Slim): a build that ends other
	// than cancelled leaves its lane through its event (BuildState.
	// LaneRelease, EnqueueBatch.Done) instead of signalling SignalBuildDone
	// and waiting for the signal's acknowledgement (five history events and
	// a workflow task of the build's, four of the pipeline's). A cancelled
	// build still signals itself: its event may have been terminated.
	Slim bool `json:"slim,omitempty"`
	// Initial are the lane's messages to the build sent in the answer to
	// its event's UpdateEnqueue (EventInput.EnqueueUpdate), before the
	// build's workflow existed: it takes them before any signal.
	Initial []LaneMessage `json:"initial,omitempty"`
	// DispatchedAt (Lean builds): the lanes granted the build before its
	// workflow started, and its event started it with the search
	// attribute (SADispatchedAt) and memo of its first dispatch at this
	// time, so that dispatch upserts neither.
	DispatchedAt time.Time `json:"dispatched_at,omitzero"`

	// NoRetryOnLoss (sluice.dev/retryOnLoss: false) ends the build at its
	// first lost attempt instead of dispatching it again.
	NoRetryOnLoss bool `json:"no_retry_on_loss,omitempty"`

	Build   BuildRef `json:"build"`
	Repo    string   `json:"repo"`
	SHA     string   `json:"sha"`
	Branch  string   `json:"branch,omitempty"`
	Trigger Trigger  `json:"trigger"`
	Queue   string   `json:"queue"`
	// Priority is 1 (highest) to 5 (lowest).
	Priority    int                `json:"priority"`
	Image       string             `json:"image,omitempty"`
	Steps       []pipeline.Command `json:"steps"`
	Environment map[string]string  `json:"environment,omitempty"`
	// Secrets names the secrets the job lists (values never travel through
	// Temporal: the executor fetches them from the API when it claims).
	Secrets []string      `json:"secrets,omitempty"`
	Timeout time.Duration `json:"timeout"`
	Virtual bool          `json:"virtual,omitempty"`
	// CPU and RAM are the job's screwdriver.cd/cpu and screwdriver.cd/ram
	// annotations as written (a tier or a number), for container runtimes.
	CPU      string      `json:"cpu,omitempty"`
	RAM      string      `json:"ram,omitempty"`
	Lane     LaneRequest `json:"lane"`
	Dispatch Dispatch    `json:"dispatch"`
	// Statuses is the event's StatusWorkflow ("": no commit statuses);
	// the build tells it when it waits and when it runs, in StatusContext.
	Statuses      string `json:"statuses,omitempty"`
	StatusContext string `json:"status_context,omitempty"`
	// Parameters are the event's resolved pipeline parameters (also in
	// Environment as SD_PARAM_<NAME>), for the build's meta
	// (parameters.NAME.value).
	Parameters map[string]string `json:"parameters,omitempty"`

	// RepoAuth: the event read the repository with the pipeline's own
	// credentials, which the build's checkout asks for too.
	RepoAuth bool `json:"repo_auth,omitempty"`
	// Cache is the job's `cache:` paths per scope (nil: none).
	Cache *pipeline.JobCache `json:"cache,omitempty"`
	// Upstream are the jobs whose success started this build (its
	// requires that had succeeded in the event, or along its restart
	// chain, when it started): the build's metadata starts as theirs.
	Upstream []string `json:"upstream,omitempty"`
	// MaxWait is the queue's max-wait when the event started (0: none): a
	// build no executor claimed that long after its dispatch ends FAILURE
	// with cause refused.
	MaxWait time.Duration `json:"max_wait,omitempty"`
}

// Attempt is one dispatch of a build to an executor.
type Attempt struct {
	Number   int       `json:"number"`
	Executor string    `json:"executor,omitempty"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	Outcome  string    `json:"outcome,omitempty"`
	// CredentialHash is the hash of the claiming executor's credential for
	// this attempt (ClaimRequest.CredentialHash; "" for older executors).
	// The API never shows it.
	CredentialHash string `json:"credential_hash,omitempty"`
	// StepCredentialHash is ClaimRequest.StepCredentialHash, never shown.
	StepCredentialHash string `json:"step_credential_hash,omitempty"`
}

// StepOutcome is one step's result as the build records it.
type StepOutcome struct {
	Name     string    `json:"name"`
	ExitCode int       `json:"exit_code"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	Skipped  bool      `json:"skipped,omitempty"`
}

// BuildState is a build's record (QueryBuild) and, once closed, its result.
type BuildState struct {
	// LaneRelease (Slim builds): the build ended holding its place in its
	// lane; its event tells the pipeline (EnqueueBatch.Done).
	LaneRelease bool `json:"lane_release,omitempty"`

	ID     string   `json:"id"`
	Build  BuildRef `json:"build"`
	Status Status   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	// WaitCode says, for machines, why the build waits (empty while it
	// runs or once it ended).
	WaitCode      WaitCode      `json:"wait_code,omitempty"`
	Queue         string        `json:"queue"`
	Priority      int           `json:"priority"`
	SHA           string        `json:"sha"`
	Executor      string        `json:"executor,omitempty"`
	Attempts      []Attempt     `json:"attempts,omitempty"`
	Steps         []StepOutcome `json:"steps,omitempty"`
	CreateTime    time.Time     `json:"create_time,omitzero"`
	QueuedTime    time.Time     `json:"queued_time,omitzero"`
	StartTime     time.Time     `json:"start_time,omitzero"`
	EndTime       time.Time     `json:"end_time,omitzero"`
	WaitUntil     time.Time     `json:"wait_until,omitzero"`
	CollapsedInto string        `json:"collapsed_into,omitempty"`
	// Fork marks a build of a pull request from a fork (untrusted code).
	Fork bool `json:"fork,omitempty"`
	// Secrets are the names of the secrets the build's job lists: the only
	// ones the API gives out for it. SecretsListed tells an empty list from
	// a build started before the names were recorded.
	Secrets       []string `json:"secrets,omitempty"`
	SecretsListed bool     `json:"secrets_listed,omitempty"`
	// Cause says, for machines, why the build ended (with Reason for
	// people); CauseInfo holds its details. Empty while the build runs, and
	// on builds that ended before causes were recorded.
	Cause     Cause      `json:"cause,omitempty"`
	CauseInfo *CauseInfo `json:"cause_info,omitempty"`
	// Upstream is BuildInput.Upstream: the jobs whose builds' metadata the
	// build starts with.
	Upstream []string `json:"upstream,omitempty"`
	// Branch is BuildInput.Branch (also the SluiceBranch search
	// attribute), so that one query answers for the whole record. Empty on
	// builds started before it was recorded.
	Branch string `json:"branch,omitempty"`
}

// CancelledBy names the person who cancelled a build.
type CancelledBy struct {
	User string `json:"user"`
}

// Cause is the machine-readable reason a build ended.
type Cause string

// Causes. Only CauseExecutorLost is retried automatically (a new attempt on
// another dispatch); every other cause is final.
const (
	// CauseSucceeded: every step passed (or a virtual job had none).
	CauseSucceeded Cause = "succeeded"
	// CauseFailed: a step failed (CauseInfo.Step, CauseInfo.ExitCode) or
	// could not start.
	CauseFailed Cause = "failed"
	// CauseCancelled: a person cancelled it or its event (CauseInfo.By
	// when known), or sluice ended it (its pipeline deleted, its pull
	// request closed).
	CauseCancelled Cause = "cancelled"
	// CauseSuperseded: a newer build of the job took its place
	// (CauseInfo.Build): collapsed while waiting, or a newer commit of its
	// pull request.
	CauseSuperseded Cause = "superseded"
	// CauseExecutorLost: the executors that took it were lost too many
	// times (CauseInfo.Executor and CauseInfo.Attempt: the last one).
	CauseExecutorLost Cause = "executor-lost"
	// CauseTimedOut: the job's timeout expired (CauseInfo.Step).
	CauseTimedOut Cause = "timed-out"
	// CauseRefused: sluice would not run it: its queue was deleted, its
	// lane was full, its event may not use the queue, or no executor took
	// it within its queue's max-wait.
	CauseRefused Cause = "refused"
)

// Causes lists every cause, for validation and metrics.
func Causes() []Cause {
	return []Cause{CauseSucceeded, CauseFailed, CauseCancelled, CauseSuperseded, CauseExecutorLost, CauseTimedOut, CauseRefused}
}

// Valid reports whether c is a known cause.
func (c Cause) Valid() bool { return slices.Contains(Causes(), c) }

// CauseInfo holds a cause's details; each field is set only for the
// causes that name it.
type CauseInfo struct {
	// Step is the step that failed or timed out; ExitCode its exit code.
	Step     string `json:"step,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	// By is who cancelled the build, when known.
	By string `json:"by,omitempty"`
	// Build is the build that superseded this one.
	Build string `json:"build,omitempty"`
	// Executor and Attempt are the last lost attempt's.
	Executor string `json:"executor,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
}

// MemoNextEvent is the memo key, on a deleted pipeline's last run, of the
// number its next event would have had: a pipeline created again under the
// same name continues from it, so event and build IDs stay unique.
const MemoNextEvent = "next_event"

// MemoBuild is the memo key of a build workflow's BuildSummary.
const MemoBuild = "build"

// BuildSummary is the part of a build's record kept in its memo.
type BuildSummary struct {
	Reason        string    `json:"reason,omitempty"`
	WaitCode      WaitCode  `json:"wait_code,omitempty"`
	Executor      string    `json:"executor,omitempty"`
	Attempts      int       `json:"attempts,omitempty"`
	QueuedTime    time.Time `json:"queued_time,omitzero"`
	StartTime     time.Time `json:"start_time,omitzero"`
	EndTime       time.Time `json:"end_time,omitzero"`
	WaitUntil     time.Time `json:"wait_until,omitzero"`
	CollapsedInto string    `json:"collapsed_into,omitempty"`
	// Fork marks a pull request from a fork, so list views can explain
	// where it may run (see queue.EvaluateUntrusted).
	Fork bool `json:"fork,omitempty"`

	// A build its event owns has no search attributes of its own: its
	// summary in the event's memo (OwnedBuildMemo) carries what they say.
	// A build workflow leaves them empty.
	Status     Status    `json:"status,omitempty"`
	Queue      string    `json:"queue,omitempty"`
	Priority   int       `json:"priority,omitempty"`
	Cause      Cause     `json:"cause,omitempty"`
	CreateTime time.Time `json:"create_time,omitzero"`
}

// OwnedBuildMemo is the memo key, on an event that owns its builds, of one
// build's BuildSummary.
func OwnedBuildMemo(build string) string { return MemoBuild + ":" + build }

// BuildLanes is SignalBuildLanes' argument.
type BuildLanes struct {
	Effects []LaneEffect `json:"effects"`
}

// QueueDeleted is SignalQueueDeleted's argument.
type QueueDeleted struct {
	Queue  string `json:"queue"`
	Reason string `json:"reason"`
}

// CancelBuildRequest is UpdateCancelBuild's argument.
type CancelBuildRequest struct {
	// Build is the build's ID ("<pipeline>/<job>/<event>").
	Build string `json:"build"`
	// By is who cancels it (its end cause names them).
	By string `json:"by,omitempty"`
}
