package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
)

// SpecFile is the spec's path in a repository.
const SpecFile = "screwdriver.yaml"

// Error types of non-retryable activity failures (ApplicationError.Type()).
const (
	// ErrTypeRepo: the repository or commit cannot be read.
	ErrTypeRepo = "Repo"
	// ErrTypeDeclined: the executor took the task but may not run builds of
	// its queue now; the build is dispatched again without counting an attempt.
	ErrTypeDeclined = "Declined"
	// ErrTypeSuperseded: the build refused the claim (collapsed, cancelled,
	// or another attempt is under way).
	ErrTypeSuperseded = "Superseded"
	// ErrTypeExecutorStopped: the executor shut down during the build; the
	// build is dispatched again without counting the attempt as lost.
	ErrTypeExecutorStopped = "ExecutorStopped"
	// ErrTypeQueueDeleted: the build's queue was deleted while it waited
	// for a slot (a controller refuses what is still sent there); the
	// build ends FAILURE.
	ErrTypeQueueDeleted = "QueueDeleted"
)

// ResolveEventInput names an event's repository and commit.
type ResolveEventInput struct {
	Pipeline string `json:"pipeline"`
	Repo     string `json:"repo"`
	// Ref is what to resolve when SHA is empty: a branch or tag ("" = default).
	Ref string `json:"ref,omitempty"`
	SHA string `json:"sha,omitempty"`
	// Before is the previous head of a push; changed files are diffed from it.
	Before string `json:"before,omitempty"`
	// ChangedFiles, when the trigger already knows them, are kept as they
	// are: nil means unknown, empty means nothing changed (not omitted, so
	// the difference survives serialisation).
	ChangedFiles []string `json:"changed_files"`
	// WantChanges asks for the changed files (commit events with sourcePaths).
	WantChanges bool `json:"want_changes,omitempty"`
	// Statuses is the pipeline's commit status setting ("" derives the
	// target from Repo, "off", or a target such as github:owner/repo).
	Statuses string `json:"statuses,omitempty"`
	// OnBranch, set for a commit event at an explicit SHA, is the branch
	// the commit must be on: a push names a commit of its branch, never one
	// reachable only from a pull request.
	OnBranch string `json:"on_branch,omitempty"`
	// BaseRef, set for a pull request's events, is the branch it targets:
	// the spec at that branch's head decides the security-relevant
	// settings (queues, secrets, cpu/ram, chainPR, restrictPR), never the
	// pull request's own spec (see pipeline.ApplyBase).
	BaseRef string `json:"base_ref,omitempty"`
}

// ResolveEventResult is the event's commit, its spec and the known queues.
type ResolveEventResult struct {
	SHA string `json:"sha"`
	// Spec is nil when SpecError says why it could not be read or parsed.
	Spec         *pipeline.Spec `json:"spec,omitempty"`
	SpecError    string         `json:"spec_error,omitempty"`
	ChangedFiles []string       `json:"changed_files"`
	Queues       []queue.Queue  `json:"queues,omitempty"`
	// Statuses is where the event's commit statuses go; nil when
	// StatusesOff says why none are posted.
	Statuses    *scm.StatusTarget `json:"statuses,omitempty"`
	StatusesOff string            `json:"statuses_off,omitempty"`
	// BaseSHA is the commit of BaseRef whose spec gave the settings.
	BaseSHA string `json:"base_sha,omitempty"`
	// RepoAuth says the repository was read with the pipeline's own
	// credentials (RepoAuthSecrets): its builds' checkouts ask for them.
	RepoAuth bool `json:"repo_auth,omitempty"`
	// Commit is what the event's commit says about itself (author,
	// message), when the repository has history; shown on the pages.
	Commit *scm.Commit `json:"commit,omitempty"`
}

// ResolveMaxAttempts bounds ResolveEvent's attempts (the event workflow's
// retry policy).
const ResolveMaxAttempts = 5

// ResolveHeartbeatEvery is how often ResolveEvent heartbeats; the event
// workflow's heartbeat timeout for it is a few times this.
const ResolveHeartbeatEvery = 5 * time.Second

// ResolveEvent resolves the event's commit, reads and parses its spec, lists
// the changed files and the defined queues. A spec that does not parse is not
// an activity error: the event fails with SpecError as its reason. A
// repository that cannot be read is retried (mirrors may be fetching), then
// fails the event.
func (a *Activities) ResolveEvent(ctx context.Context, in ResolveEventInput) (ResolveEventResult, error) {
	var out ResolveEventResult
	// Heartbeat while the work lasts (a first clone of a large repository
	// can take minutes), so the event's heartbeat timeout can be short: a
	// controller that dies here is noticed within it, not after minutes.
	defer keepHeartbeating(ctx, ResolveHeartbeatEvery, func() { activity.RecordHeartbeat(ctx, "resolving") })()
	// The queue definitions come from the registry (a query, several
	// milliseconds) while the repository is read: neither waits for the
	// other. An event whose spec cannot be read drops the answer.
	queues := a.listQueuesAsync(ctx)
	defer queues.cancel()
	var err error
	out.Statuses, out.StatusesOff, err = a.statusTarget(ctx, in.Pipeline, in.Statuses, in.Repo)
	if err != nil {
		// A pipeline token the API could not give now: try again, so the
		// event does not go without its statuses (a required check would
		// then wait for the next push). On the last attempt the event
		// starts without statuses and says why.
		if !lastResolveAttempt(ctx) {
			return out, err
		}
		out.StatusesOff = err.Error()
		a.Logger.WarnContext(ctx, "statuses_off", "pipeline", in.Pipeline, "error", err)
	}
	auth, err := RepoAuthOrApp(ctx, a.pipelineTokens(), a.appTokens(), in.Pipeline, in.Repo)
	if err != nil {
		return out, err // the API or GitHub did not answer: retried
	}
	out.RepoAuth = auth != nil
	repo, err := openRepo(ctx, a.Repos, in.Repo, auth)
	if err != nil {
		return out, repoError(authHint(fmt.Errorf("open repository %s: %w", scm.RedactURL(in.Repo), err), in.Pipeline, in.Repo, auth))
	}
	sha := in.SHA
	if sha == "" || len(sha) < 40 {
		ref := sha
		if ref == "" {
			ref = in.Ref
		}
		if ref != sha && scm.Kind(in.Repo) == scm.KindDir {
			ref = "" // a plain directory has no branches: use its current content
		}
		if sha, err = repo.Resolve(ctx, ref); err != nil {
			return out, repoError(authHint(fmt.Errorf("resolve %q in %s: %w", ref, scm.RedactURL(in.Repo), err), in.Pipeline, in.Repo, auth))
		}
	}
	out.SHA = sha
	data, commit, readErr := a.readCommitSpec(ctx, repo, in.Repo, sha)
	out.Commit = commit
	if bc, ok := repo.(scm.BranchChecker); ok && in.OnBranch != "" && in.SHA != "" {
		on, err := bc.OnBranch(ctx, sha, in.OnBranch)
		if err != nil {
			return out, repoError(err)
		}
		if !on {
			out.SpecError = fmt.Sprintf("commit %s is not on branch %s of %s: a commit event builds commits of its branch (one reachable only from a pull request, or force-pushed away, starts nothing)",
				short(sha), in.OnBranch, scm.RedactURL(in.Repo))
			return out, nil
		}
	}
	switch {
	case errors.Is(readErr, scm.ErrNotFound):
		out.SpecError = fmt.Sprintf("%s not found in %s at %s", SpecFile, scm.RedactURL(in.Repo), short(sha))
		return out, nil
	case readErr != nil:
		return out, repoError(fmt.Errorf("read %s at %s: %w", SpecFile, short(sha), readErr))
	}
	spec, err := pipeline.ParseWithOptions(data, pipeline.Options{Pipeline: in.Pipeline})
	if err != nil {
		out.SpecError = fmt.Sprintf("%s at %s is invalid:\n%v", SpecFile, short(sha), err)
		return out, nil
	}
	if in.BaseRef != "" {
		base, baseSHA, why, err := a.baseSpec(ctx, repo, in)
		if err != nil || why != "" {
			out.SpecError = why
			return out, err
		}
		out.BaseSHA = baseSHA
		spec = pipeline.ApplyBase(spec, base)
	}
	out.Spec = spec
	out.ChangedFiles = in.ChangedFiles
	// Only sourcePaths read the changed files: a spec without them is
	// spared the diff (a git process per event).
	if in.WantChanges && out.ChangedFiles == nil && spec.UsesSourcePaths() {
		files, err := repo.ChangedFiles(ctx, in.Before, sha)
		if err != nil {
			a.Logger.WarnContext(ctx, "changed_files_unavailable", "repo", scm.RedactURL(in.Repo), "sha", sha, "error", err)
		} else {
			out.ChangedFiles = files
		}
	}
	if out.Queues, err = queues.wait(); err != nil {
		return out, fmt.Errorf("list queues: %w", err)
	}
	return out, nil
}

// pendingQueues is a ListQueues under way.
type pendingQueues struct {
	done   chan struct{}
	cancel context.CancelFunc
	qs     []queue.Queue
	err    error
}

// listQueuesAsync starts reading the queue definitions (none without a
// QueueLister).
func (a *Activities) listQueuesAsync(ctx context.Context) *pendingQueues {
	ctx, cancel := context.WithCancel(ctx)
	p := &pendingQueues{done: make(chan struct{}), cancel: cancel}
	if a.Queues == nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		p.qs, p.err = a.sharedQueues(ctx)
	}()
	return p
}

// sharedQueues reads the queue definitions. A read sent less than
// queue.GrantStands ago stands for the events resolved meanwhile (the
// events of a burst, or one after another, resolve within it): every
// change of the queues answers only once such reads lapsed (api), so a
// privilege revoked is refused to every event that resolves after the
// change was reported done — the rule the executors' registry checks follow
// (workers.Agent.Accepting). Events resolved while a read is under way
// share it; a read every waiter gave up on is stopped.
func (a *Activities) sharedQueues(ctx context.Context) ([]queue.Queue, error) {
	if qs, ok := a.queueReads.Standing(struct{}{}, queue.GrantStands); ok {
		return qs, nil
	}
	qs, _, err := a.queueReads.DoKept(ctx, struct{}{}, a.Queues.ListQueues)
	return qs, err
}

// wait is the definitions, once read.
func (p *pendingQueues) wait() ([]queue.Queue, error) {
	<-p.done
	return p.qs, p.err
}

// readCommitSpec reads the spec file at sha and, for repositories with
// history (git: scm.CommitFileReader, which reads both in one pass), what
// the commit says of itself (nil when it cannot be read: the event goes
// on without it).
func (a *Activities) readCommitSpec(ctx context.Context, repo scm.Repo, location, sha string) ([]byte, *scm.Commit, error) {
	cf, ok := repo.(scm.CommitFileReader)
	if !ok {
		data, err := repo.ReadFile(ctx, sha, SpecFile)
		return data, nil, err
	}
	c, data, err := cf.ReadCommitFile(ctx, sha, SpecFile)
	if c == nil && err == nil {
		a.Logger.DebugContext(ctx, "commit_unreadable", "repo", scm.RedactURL(location), "sha", sha)
	}
	return data, c, err
}

// baseSpec reads and parses the spec at the head of a pull request's base
// branch. A branch or spec that cannot be found or parsed is not an activity
// error: why says why the event cannot run (it never falls back to the pull
// request's own settings).
func (a *Activities) baseSpec(ctx context.Context, repo scm.Repo, in ResolveEventInput) (*pipeline.Spec, string, string, error) {
	fail := func(format string, args ...any) (*pipeline.Spec, string, string, error) {
		return nil, "", "a pull request runs with the settings of its base branch's spec, which cannot be read: " + fmt.Sprintf(format, args...), nil
	}
	ref := in.BaseRef
	if scm.Kind(in.Repo) == scm.KindDir {
		ref = "" // a plain directory has no branches: its current content
	}
	sha, err := repo.Resolve(ctx, ref)
	switch {
	case errors.Is(err, scm.ErrNotFound) || errors.Is(err, scm.ErrInvalidArgument):
		return fail("branch %q of %s: %v", in.BaseRef, in.Repo, err)
	case err != nil:
		return nil, "", "", fmt.Errorf("resolve base branch %q in %s: %w", in.BaseRef, in.Repo, err)
	}
	data, err := repo.ReadFile(ctx, sha, SpecFile)
	switch {
	case errors.Is(err, scm.ErrNotFound):
		return fail("%s not found on branch %s at %s", SpecFile, in.BaseRef, short(sha))
	case err != nil:
		return nil, "", "", fmt.Errorf("read %s of base branch %s at %s: %w", SpecFile, in.BaseRef, short(sha), err)
	}
	base, err := pipeline.ParseWithOptions(data, pipeline.Options{Pipeline: in.Pipeline})
	if err != nil {
		return fail("%s on branch %s at %s is invalid:\n%v", SpecFile, in.BaseRef, short(sha), err)
	}
	if _, err := base.RestrictPR(); err != nil {
		return fail("%s on branch %s at %s: %v", SpecFile, in.BaseRef, short(sha), err)
	}
	return base, sha, "", nil
}

// authError is a repository that refused sluice's credentials, or wants
// some it was not given: retrying does not help.
type authError struct{ error }

func (e authError) Unwrap() error { return e.error }

// authHint says, when the remote wanted credentials, which pipeline secret
// gives them (or that the one given was refused).
func authHint(err error, pipeline, location string, auth *scm.Auth) error {
	if !scm.IsAuthError(err) {
		return err
	}
	names := repoAuthNames(location)
	switch {
	case auth != nil && auth.App:
		return authError{fmt.Errorf("%w (the repository refused the GitHub App's installation token: check that the App may read its contents, or give the pipeline its own %s secret)", err, names[0])}
	case auth != nil:
		return authError{fmt.Errorf("%w (the repository refused the pipeline's own credentials: check its %s secret)", err, names[0])}
	case len(names) == 0:
		return authError{err}
	}
	return authError{fmt.Errorf("%w (a private repository? give the pipeline its credentials: as a pipeline admin, sluice secret set %s %s)", err, pipeline, names[0]+gitlabAlso(names))}
}

func gitlabAlso(names []string) string {
	if len(names) > 1 {
		return " (" + strings.Join(names[1:], ", ") + " for GitLab)"
	}
	return ""
}

// repoError keeps transient errors retryable; a missing repository or
// commit, and credentials refused, are final.
func repoError(err error) error {
	var ae authError
	if errors.Is(err, scm.ErrNotFound) || errors.Is(err, scm.ErrInvalidArgument) || errors.As(err, &ae) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeRepo, err)
	}
	return err
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// TriggerRemoteInput names the job that succeeded.
type TriggerRemoteInput struct {
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
	Event    string `json:"event"`
}

// TriggerRemote starts events in the pipelines that require
// "sd@<pipeline>:<job>" and returns their IDs.
func (a *Activities) TriggerRemote(ctx context.Context, in TriggerRemoteInput) ([]string, error) {
	if a.Remote == nil {
		return nil, nil
	}
	started, err := a.Remote.StartRemote(ctx, "sd@"+in.Pipeline+":"+in.Job, in.Event)
	if err != nil {
		return started, fmt.Errorf("start events subscribed to sd@%s:%s: %w", in.Pipeline, in.Job, err)
	}
	return started, nil
}

// SyncSchedulesInput is a pipeline's periodic jobs (job → expanded cron).
type SyncSchedulesInput struct {
	Pipeline string            `json:"pipeline"`
	Periodic map[string]string `json:"periodic"`
	// Previous are the jobs the pipeline scheduled before (visibility may
	// not list a schedule created moments ago).
	Previous []string `json:"previous,omitempty"`
}

// SyncSchedules creates, updates and deletes the pipeline's periodic schedules.
func (a *Activities) SyncSchedules(ctx context.Context, in SyncSchedulesInput) error {
	if a.Schedules == nil {
		return nil
	}
	if err := a.Schedules.SyncSchedules(ctx, in.Pipeline, in.Periodic, in.Previous); err != nil {
		// A schedule Temporal refuses stays refused: retrying only delays the
		// error the pipeline shows.
		var invalid *serviceerror.InvalidArgument
		if errors.As(err, &invalid) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("sync schedules of %s: %v", in.Pipeline, err), "InvalidSchedule", err)
		}
		return fmt.Errorf("sync schedules of %s: %w", in.Pipeline, err)
	}
	return nil
}
