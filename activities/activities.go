package activities

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-ci/sluice/cache"
	"github.com/sluice-ci/sluice/internal/shared"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/scm"
)

// Activities is the receiver of every activity. Fields a role does not use
// may be nil: a pure executor has no QueueLister, a controller without a
// local executor has no Executor.
type Activities struct {
	// Logger is the process logger.
	Logger *slog.Logger
	// Repos opens pipeline repositories (mirrors cached under the data dir).
	Repos RepoOpener
	// Queues reads queue definitions from the registry.
	Queues QueueLister
	// Remote starts events in pipelines subscribed to a job.
	Remote RemoteStarter
	// Schedules reconciles periodic-build schedules.
	Schedules Scheduler
	// Pipelines sends pipeline workflows updates (nil: none can be sent,
	// and events hand their builds to the lanes by signal).
	Pipelines PipelineUpdater
	// Claimer claims a build for this executor before it runs.
	Claimer Claimer
	// Executor is this process's executor runtime (slots, identity).
	Executor Executor
	// Logs returns the sink for one build attempt's step logs; credential
	// is the attempt's credential (NewAttemptCredential), which a sink that
	// ships logs to the API presents with every write.
	Logs func(key, credential string) runner.LogSink
	// Secrets gives running builds their secrets (nil: a job that lists
	// secrets fails with that reason).
	Secrets SecretSource
	// Caches restores and saves the caches of jobs with `cache:` (nil: the
	// build log says "cache unavailable" and the build goes on).
	Caches *cache.Store
	// Metrics hears of claims and finished attempts (nil: none).
	Metrics BuildMetrics
	// WorkDir is the root of build workspaces.
	WorkDir string
	// KeepWorkspaces leaves workspaces behind after builds (debugging).
	KeepWorkspaces bool
	// Runtime runs builds: runner.RuntimeHost ("" too), RuntimeDocker or
	// RuntimePodman (one container per attempt from the job's image).
	Runtime string
	// RuntimeWhy says why Runtime was chosen, for the build log.
	RuntimeWhy string
	// RunAs, if set, is the user host builds run as
	// (SLUICE_EXECUTOR_RUN_AS).
	RunAs *runner.RunAs
	// ContainerNetwork, if set, is the network build containers join
	// (SLUICE_CONTAINER_NETWORK).
	ContainerNetwork string
	// GroupRecords is the directory where host builds record their process
	// groups while they run ("" records nothing); see runner.KillRecordedGroups.
	GroupRecords string
	// Reporter heartbeats and completes build attempts by task token (nil:
	// the activity's own client).
	Reporter Reporter
	// Statuses is how a controller posts commit statuses (no posters: none).
	Statuses *StatusSettings
	// Notify is how a controller sends email and Slack notifications
	// (nil: no mail server, Slack's public API).
	Notify *NotifySettings
	// BuildData reads the metadata builds start with and saves what they
	// end with (nil: builds start with empty metadata and it is not kept).
	BuildData BuildData
	// APIURL is the API builds reach for `meta get --external` and
	// `sluice artifact get` (SD_API_URL; "": none).
	APIURL string
	// SelfBinary is this executor's own binary, which builds run as their
	// meta and sluice commands (on the host, or mounted read-only into
	// their container; "": no commands).
	SelfBinary string
	// ArtifactMax caps the artifacts one build uploads, in bytes
	// (SLUICE_ARTIFACT_MAX; 0: no artifacts are kept).
	ArtifactMax int64
	// Outbox is the directory where finished attempts' results wait until
	// Temporal has them ("" keeps them in memory only).
	Outbox string

	// queueReads are the reads of the queue definitions, which events
	// resolved together share and which stand for queue.GrantStands
	// (sharedQueues).
	queueReads shared.Reads[struct{}, []queue.Queue]
}

// RepoOpener opens a repository location.
type RepoOpener interface {
	Open(ctx context.Context, location string) (scm.Repo, error)
}

// RepoOpenerFunc adapts a function to RepoOpener.
type RepoOpenerFunc func(ctx context.Context, location string) (scm.Repo, error)

// Open calls f.
func (f RepoOpenerFunc) Open(ctx context.Context, location string) (scm.Repo, error) {
	return f(ctx, location)
}

// CachedRepos opens repositories with their git mirrors under cacheDir.
// It also takes a pipeline's own credentials (AuthRepoOpener).
func CachedRepos(cacheDir string) RepoOpener {
	return cachedRepos{dir: cacheDir}
}

// QueueLister lists the defined queues.
type QueueLister interface {
	ListQueues(ctx context.Context) ([]queue.Queue, error)
}

// RemoteStarter starts an event in every pipeline whose spec requires the
// remote job ("sd@<pipeline>:<job>") and returns the events started.
type RemoteStarter interface {
	StartRemote(ctx context.Context, remote, fromEvent string) ([]string, error)
}

// Scheduler makes a pipeline's periodic schedules match periodic (job→cron).
type Scheduler interface {
	SyncSchedules(ctx context.Context, pipeline string, periodic map[string]string, previous []string) error
}

// Claimer asks the workflow that owns a build to let this executor run the
// given attempt of the given dispatch. An error means the build no longer
// wants to run here.
type Claimer interface {
	Claim(ctx context.Context, c Claim) error
}

// Claim is what an executor claims.
type Claim struct {
	// WorkflowID is the workflow that owns the build and takes the claim
	// (RunBuildInput.WorkflowID: the build's own workflow).
	WorkflowID string
	// Build names the build (RunBuildInput.BuildID): a build workflow
	// refuses a claim that names another build, and a workflow that owns
	// many builds (docs/option-b.md) tells them apart by it.
	Build             string
	Attempt, Dispatch int
	Executor          string
	// CredentialHash is the hash of the attempt's credential, which the
	// build records; StepHash the hash of the steps' own credential
	// (SD_BUILD_CREDENTIAL), which it records too.
	CredentialHash, StepHash string
}

// Executor is the local executor runtime: who we are and whether we may
// take builds of a queue right now.
type Executor interface {
	// Name is the executor's registry name.
	Name() string
	// Accepting reports whether a new build of the queue may start here; the
	// string says why not. untrusted: the build came from the queue's
	// untrusted task queue (a pull request from a fork).
	Accepting(queueName string, untrusted bool) (bool, string)
	// Begin counts a running build of the queue until the returned func is called.
	Begin(queueName string) (end func())
}

// LocalAcceptor is an Executor whose Accepting asks someone else (an
// agent asks the registry): AcceptingLocally answers by what it knows
// itself, and RunBuild starts the build's checkout once it passes, while
// Accepting's question is on its way. A task that AcceptingLocally
// declines checks nothing out.
type LocalAcceptor interface {
	AcceptingLocally(queueName string, untrusted bool) (bool, string)
}

// BuildMetrics records what an executor's builds do, for its metrics.
type BuildMetrics interface {
	// Claimed: a build waited wait in queue before this executor claimed it.
	Claimed(queue string, wait time.Duration)
	// Finished: an attempt ended with status ("interrupted" when the
	// executor stopped or lost it).
	Finished(queue, status string)
}
