package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
)

// maxBuildsPerEvent bounds one event's builds so its history stays far from
// Temporal's limits without continue-as-new (each build costs ~10 events).
const maxBuildsPerEvent = 2000

type eventRun struct {
	// restartByHand: this restart or re-run of a periodic event was
	// started by a person (N8), so manualStartEnabled applies.
	restartByHand bool
	in            EventInput
	state         EventState
	spec          *pipeline.Spec
	jobs          map[string]*jobRun
	// succeeded holds the jobs that succeeded in this event (and, for a
	// restart, in its parent).
	succeeded map[string]bool
	sel       workflow.Selector
	running   int
	builds    int
	cancelled bool
	// remoteErrs collects failures to trigger subscribed pipelines.
	remoteErrs []string
	// toEnqueue are builds started but not yet handed to the lanes.
	toEnqueue []startedBuild
	// toStart are builds to hand to the lanes by UpdateEnqueue, then start
	// with the lanes' answer (EventInput.EnqueueUpdate).
	toStart []pendingBuild
	// updates numbers the event's UpdateEnqueue (their update IDs).
	updates int
	// releasedHold is set once the first batch went to the pipeline.
	releasedHold bool
	// legacy: a run recorded before changeLaneOrder.
	legacy bool
	// lean: EventInput.Lean (no version markers; the spec sync rides on
	// the first enqueue; one upsert for the commit and the queues).
	lean bool
	// shaPending: the SHA search attribute waits for the next upsert (lean).
	shaPending bool
	// pendingSync is the spec sync the first enqueue carries (lean runs).
	pendingSync *SpecSync
	// pendingDone are ended builds whose lane places the next enqueue
	// gives back (Slim runs: BuildState.LaneRelease).
	pendingDone []BuildRef
	// notified is set once a periodic fire's PeriodicWorkflow was told.
	notified bool
	// statuses is the event's commit status reporter (nil: none).
	statuses *eventStatuses
	// prBase: a pull request's event that takes its settings from the
	// base branch's spec and may wait for approval (changePRBase).
	prBase bool
	// repoAuth: the repository was read with the pipeline's own credentials.
	repoAuth bool
	// notifies are the notification workflows started, until they are
	// known started (notify.go).
	notifies []workflow.Future
	// maxWait is each reachable queue's max-wait (BuildInput.MaxWait).
	maxWait map[string]time.Duration
	// handBack receives SignalHandBack (EventInput.DoneInResult).
	handBack workflow.ReceiveChannel
	// owned are the builds the event runs itself (EventInput.OwnsBuilds;
	// nil: it starts a BuildWorkflow per build).
	owned *ownedBuilds
	// pendingSA and pendingMemo are an owned event's upserts before its
	// first builds: they ride on the builds' own (ownedBuilds.recordStarted)
	// or on the event's end, in the same workflow task.
	pendingSA   []temporal.SearchAttributeUpdate
	pendingMemo map[string]any
	// settling: the main loop handles an owned build's end (the jobs that
	// follow, the next batch); SAOpenBuilds waits for it (ownBuilds).
	settling bool
}

type startedBuild struct {
	req     LaneRequest
	started workflow.Future
}

// pendingBuild is a build whose workflow starts once the lanes answered.
type pendingBuild struct {
	opts workflow.ChildWorkflowOptions
	// sas are opts' search attributes, to add to.
	sas []temporal.SearchAttributeUpdate
	in  BuildInput
	jr  *jobRun
}

type jobRun struct {
	name    string
	status  Status
	reason  string
	builds  []BuildRef
	results []BuildState
	left    int
}

// EventWorkflow runs one event: it resolves the commit and reads the spec
// there, picks the start jobs for the trigger, and walks the job graph,
// starting a BuildWorkflow per job permutation when the job's OR edge fires
// or its join is satisfied within the event. A failed, aborted or collapsed
// job stops its downstream jobs, and each of them says why.
func EventWorkflow(ctx workflow.Context, in EventInput) (EventState, error) {
	e := &eventRun{in: in, jobs: map[string]*jobRun{}, succeeded: map[string]bool{}}
	if in.DoneInResult {
		e.handBack = workflow.GetSignalChannel(ctx, SignalHandBack)
	}
	if e.lean = in.Lean; !e.lean {
		e.legacy = workflow.GetVersion(ctx, changeLaneOrder, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	}
	e.state = EventState{
		Event: in.Event, Status: StatusRunning, Trigger: in.Trigger, StartFrom: in.StartFrom,
		StartJobs: in.StartJobs, Rerun: in.Rerun, Parent: in.Parent, StartTime: workflow.Now(ctx), SHA: in.Trigger.SHA,
		ActsFor: e.identity().User,
	}
	if err := workflow.SetQueryHandler(ctx, QueryEvent, func() (EventState, error) { return e.snapshot(), nil }); err != nil {
		return e.state, fmt.Errorf("register event query: %w", err)
	}
	if err := e.registerApprove(ctx); err != nil {
		return e.state, fmt.Errorf("register approve update: %w", err)
	}
	if in.OwnsBuilds && in.Lean && in.EnqueueUpdate {
		if err := e.ownBuilds(ctx); err != nil {
			return e.state, err
		}
	}
	for _, j := range in.ParentSucceeded {
		e.succeeded[j] = true
	}
	if e.prEvent() {
		e.prBase = e.lean || workflow.GetVersion(ctx, changePRBase, workflow.DefaultVersion, 1) >= 1
	}
	if in.Trigger.SkipCI != "" {
		// The pushed head commit asks to skip CI: the event is the
		// pipeline's record of it, and nothing runs.
		return e.end(ctx, StatusSkipped, fmt.Sprintf("skipped: the head commit's message says %s", in.Trigger.SkipCI)), nil
	}

	res, err := e.resolve(ctx)
	if err != nil {
		if ctx.Err() != nil && !e.legacy {
			e.cancelled = true
			return e.end(ctx, StatusAborted, "event cancelled while reading its spec"), nil
		}
		return e.end(ctx, StatusFailure, fmt.Sprintf("cannot read the pipeline's repository: %s", rootMessage(err))), nil
	}
	e.state.SHA, e.state.BaseSHA = res.SHA, res.BaseSHA
	e.state.Commit = res.Commit
	e.repoAuth = res.RepoAuth
	if e.lean {
		e.shaPending = true // with the queues', or the end's, upsert
	} else {
		_ = workflow.UpsertTypedSearchAttributes(ctx, SASHA.ValueSet(res.SHA))
	}
	if e.lean || workflow.GetVersion(ctx, changeCommitStatuses, workflow.DefaultVersion, 1) >= 1 {
		e.statusesResolved(ctx, res)
	}
	if res.SpecError != "" {
		e.reportEventFailure(ctx, res.SpecError)
		return e.end(ctx, StatusFailure, res.SpecError), nil
	}
	e.spec = res.Spec
	e.state.Warnings = pipeline.WarningTexts(res.Spec.Warnings)
	params, perr := res.Spec.ResolveParameters(in.Parameters)
	if perr != nil {
		// Checked before the event started too; the spec at the event's
		// commit may differ from the one checked. No build starts.
		why := "parameters: " + perr.Error()
		e.reportEventFailure(ctx, why)
		return e.end(ctx, StatusFailure, why), nil
	}
	e.state.Parameters = params
	e.syncSpec(ctx, res.Queues)

	if !e.legacy && e.in.Trigger.Kind == TriggerPeriodic && e.in.Parent > 0 {
		e.restartByHand = e.lean || workflow.GetVersion(ctx, changeRestartIsByHand, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	}
	starts, why := e.startJobs(res.ChangedFiles)
	if why != "" {
		e.reportEventFailure(ctx, why)
		return e.end(ctx, StatusFailure, why), nil
	}
	if len(starts) == 0 {
		return e.end(ctx, StatusSuccess, fmt.Sprintf("no job starts on %s", describeTrigger(in.Trigger, in.StartFrom))), nil
	}
	reach, problems := e.checkQueues(starts, res.Queues)
	if len(problems) > 0 {
		e.reportEventFailure(ctx, "cannot start: "+strings.Join(problems, "; "))
		return e.end(ctx, StatusFailure, "cannot start: "+strings.Join(problems, "; ")), nil
	}
	if !e.legacy {
		// Deleting a queue is refused while a running event can reach it.
		if e.owned != nil && !e.prBase {
			// Upserted with its first builds, before any is dispatched.
			e.pendingSA = append(e.pendingSA, SAQueues.ValueSet(reach))
		} else {
			_ = workflow.UpsertTypedSearchAttributes(ctx, e.withSHA(SAQueues.ValueSet(reach))...)
		}
	}
	if e.prBase {
		if ok, st := e.awaitApproval(ctx); !ok {
			return st, nil
		}
	}
	e.startStatuses(ctx, starts)

	e.sel = workflow.NewSelector(ctx)
	for _, j := range starts {
		e.start(ctx, j)
	}
	e.enqueue(ctx)
	for e.running > 0 {
		e.sel.Select(ctx)
		if e.running == 0 && e.handBack != nil && len(e.toEnqueue) == 0 {
			break // the end decides where the last places go (DoneInResult)
		}
		e.enqueue(ctx)
		e.settling = false
	}
	if ctx.Err() != nil {
		e.cancelled = true
	}
	return e.finish(ctx), nil
}

func (e *eventRun) resolve(ctx workflow.Context) (activities.ResolveEventResult, error) {
	t := e.in.Trigger
	ref := t.Branch
	switch t.Kind {
	case TriggerTag, TriggerRelease:
		ref = t.Ref
	case TriggerPR, TriggerPRClosed:
		if t.SHA == "" && t.PR > 0 {
			ref = fmt.Sprintf("refs/pull/%d/head", t.PR)
		}
	}
	if ref == "" {
		ref = e.in.Config.Branch
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           ControllerTaskQueue,
		StartToCloseTimeout: 10 * time.Minute,
		// The activity heartbeats while it works: a controller lost in the
		// middle is noticed after 30 s.
		HeartbeatTimeout: 6 * activities.ResolveHeartbeatEvery,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: activities.ResolveMaxAttempts,
			NonRetryableErrorTypes: []string{activities.ErrTypeRepo},
		},
		Summary: "read screwdriver.yaml at the event's commit",
	})
	var res activities.ResolveEventResult
	in := activities.ResolveEventInput{
		Pipeline: e.in.Event.Pipeline, Repo: e.in.Config.Repo, Ref: ref, SHA: t.SHA, Before: t.Before,
		ChangedFiles: t.ChangedFiles, WantChanges: t.Kind == TriggerCommit, Statuses: e.in.Config.Statuses,
	}
	if e.prBase {
		// The pull request's steps come from its head; where and with
		// what they run comes from the branch it targets.
		in.BaseRef = eventBranch(e.in.Config, t)
	}
	if t.Kind == TriggerCommit && t.SHA != "" && t.DeliveryID != "" && e.in.Parent == 0 {
		// A push names a commit of its branch: never one reachable only
		// from a pull request (a fork's head sent as a push).
		in.OnBranch = t.Branch
		if in.OnBranch == "" {
			in.OnBranch = e.in.Config.Branch
		}
	}
	if e.in.Slim {
		var err error
		if res, err = e.resolveLocal(ctx, in); err == nil || ctx.Err() != nil || isRepoError(err) {
			return res, err
		}
		workflow.GetLogger(ctx).Info("resolve_local_fell_back", "event", e.in.Event.String(), "error", err)
		res = activities.ResolveEventResult{}
	}
	err := workflow.ExecuteActivity(actx, a.ResolveEvent, in).Get(ctx, &res)
	return res, err
}

// resolveLocalFor bounds the local ResolveEvent of a Slim event: a fetch
// that takes longer (a large repository's first clone) goes on as the
// regular activity, which heartbeats and survives a lost controller.
const resolveLocalFor = 5 * time.Second

// resolveLocal runs ResolveEvent as a local activity: one marker in the
// event's first workflow task instead of the activity's three events and
// a workflow task of its own (and one round trip less before the builds).
// Its attempts all fall within resolveLocalFor, far below
// ResolveMaxAttempts, so a transient failure never counts as the last
// attempt (which would start the event without commit statuses): the
// regular activity then takes over with all its attempts.
func (e *eventRun) resolveLocal(ctx workflow.Context, in activities.ResolveEventInput) (activities.ResolveEventResult, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: resolveLocalFor,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2,
			NonRetryableErrorTypes: []string{activities.ErrTypeRepo},
		},
		Summary: "read screwdriver.yaml at the event's commit",
	})
	var res activities.ResolveEventResult
	err := workflow.ExecuteLocalActivity(lctx, a.ResolveEvent, in).Get(ctx, &res)
	return res, err
}

// isRepoError reports whether err is ResolveEvent's "the repository cannot
// be read" (not retried: the regular activity would fail alike).
func isRepoError(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTypeRepo
}

// syncSpec tells the pipeline what its default branch's spec subscribes to
// and which periodic jobs to schedule: the event's identity sets the
// schedules up, so a periodic job whose queue it may not use is left out,
// with the reason.
func (e *eventRun) syncSpec(ctx workflow.Context, defined []queue.Queue) {
	t := e.in.Trigger
	if t.Kind != TriggerCommit || eventBranch(e.in.Config, t) != e.in.Config.Branch {
		return
	}
	var sync SpecSync
	if !e.legacy && (e.lean || workflow.GetVersion(ctx, changeScheduleSetBy, workflow.DefaultVersion, 1) != workflow.DefaultVersion) {
		id := e.identity()
		sync.SetBy = &id
		sync.Periodic, sync.Refused = SchedulesFor(e.spec, id, defined, e.in.Config.Queue)
	} else {
		sync.Periodic = map[string]string{}
		for _, j := range e.spec.PeriodicJobs() {
			sync.Periodic[j] = e.spec.Jobs[j].Settings.PeriodicCron
		}
	}
	sync.SHA, sync.Subscriptions = e.state.SHA, e.spec.RemoteTriggers()
	sync.Warnings, sync.Parameters = e.spec.Warnings, e.spec.ParameterList()
	if !e.legacy {
		sync.Event = e.in.Event.Number
	}
	if e.lean {
		// The first enqueue (always sent, at the latest when the event
		// ends) carries it: no signal, ack and workflow task of its own.
		e.pendingSync = &sync
		return
	}
	if err := workflow.SignalExternalWorkflow(ctx, PipelineWorkflowID(e.in.Event.Pipeline), "", SignalSpecSynced, sync).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("spec_sync_failed", "event", e.in.Event.String(), "error", err)
	}
}

// changeScheduleSetBy: a spec sync names who it acts for and leaves out
// the periodic jobs whose queue they may not use.
const changeScheduleSetBy = "schedule-set-by"

// SchedulesFor returns the periodic jobs of spec that id may schedule
// (job → expanded cron), and why each other one is left out: a job whose
// queue id may not use is not scheduled for it. A queue that does not
// exist is the events' concern (they fail, saying so), not the schedule's.
func SchedulesFor(spec *pipeline.Spec, id queue.Identity, defined []queue.Queue, pipelineQueue string) (map[string]string, []string) {
	byName := map[string]queue.Queue{}
	for _, q := range defined {
		byName[q.Name] = q
	}
	periodic := map[string]string{}
	var refused []string
	for _, j := range spec.PeriodicJobs() {
		name := spec.Jobs[j].Settings.Executor
		if name == "" {
			name = cmp.Or(pipelineQueue, queue.DefaultQueueName)
		}
		if q, ok := byName[name]; ok {
			if err := queue.CanUse(id, q); err != nil {
				refused = append(refused, fmt.Sprintf("job %s: %v", j, err))
				continue
			}
		}
		periodic[j] = spec.Jobs[j].Settings.PeriodicCron
	}
	return periodic, refused
}

// startJobs picks the jobs the trigger starts, or says why the event cannot run.
func (e *eventRun) startJobs(changed []string) ([]string, string) {
	t, spec := e.in.Trigger, e.spec
	if from := e.fromJobs(); len(from) > 0 {
		var starts []string
		for _, name := range from {
			job := name
			if st, ok := spec.Stages[strings.TrimPrefix(name, "stage@")]; ok {
				job = st.Setup
			}
			j, ok := spec.Jobs[job]
			if !ok {
				return nil, fmt.Sprintf("no job %q in %s at %s (jobs: %s)", name, activities.SpecFile, short(e.state.SHA), strings.Join(spec.JobOrder, ", "))
			}
			// Every path a person takes to start a job (start-from, restart,
			// re-run) respects manualStartEnabled; schedules do not.
			byHand := t.Kind == TriggerManual || (!e.legacy && t.Kind != TriggerPeriodic)
			if e.restartByHand {
				// N8: a restart or re-run of a scheduled event is a person's.
				byHand = true
			}
			if byHand && !j.Settings.ManualStartEnabled {
				return nil, fmt.Sprintf("job %s cannot be started by hand (%s: false)", job, pipeline.AnnotationManualStartEnabled)
			}
			if !slices.Contains(starts, job) {
				starts = append(starts, job)
			}
		}
		return starts, ""
	}
	var starts []string
	switch t.Kind {
	case TriggerRemote:
		for _, n := range spec.SubscribedJobs(t.Remote) {
			// A remote join parent counts as satisfied by the remote success;
			// the job starts when it has no local join parents.
			if !n.Join || !slices.ContainsFunc(spec.JoinParents(n.Job), func(p string) bool { return !strings.HasPrefix(p, "sd@") }) {
				starts = append(starts, n.Job)
			}
		}
		return starts, ""
	case TriggerPeriodic:
		return nil, "a periodic event needs the job to start"
	case TriggerManual:
		return spec.StartJobs(pipeline.EventCommit, eventBranch(e.in.Config, t), e.in.Config.Branch), ""
	case TriggerTag, TriggerRelease:
		return spec.StartJobs(pipeline.EventKind(t.Kind), t.Ref, e.in.Config.Branch), ""
	default:
		starts = spec.StartJobs(pipeline.EventKind(t.Kind), eventBranch(e.in.Config, t), e.in.Config.Branch)
		if t.Kind == TriggerCommit || t.Kind == TriggerPR {
			starts = spec.FilterBySourcePaths(starts, changed)
		}
		return starts, ""
	}
}

// fromJobs are the jobs a restart, re-run or start-from names.
func (e *eventRun) fromJobs() []string {
	if len(e.in.StartJobs) > 0 {
		return e.in.StartJobs
	}
	if e.in.StartFrom != "" {
		return []string{e.in.StartFrom}
	}
	return nil
}

// identity is who the event acts for.
func (e *eventRun) identity() queue.Identity {
	if e.in.Identity != nil {
		return *e.in.Identity
	}
	return queue.System()
}

// prEvent reports whether the event runs a pull request's jobs: they get
// lanes of their own, run downstream jobs only with chainPR and never fire
// remote triggers.
func (e *eventRun) prEvent() bool {
	t := e.in.Trigger
	return !e.legacy && t.PR > 0 && (t.Kind == TriggerPR || t.Kind == TriggerPRClosed)
}

// queueOf is the queue a job's builds go to.
func (e *eventRun) queueOf(job string) string {
	if q := e.spec.Jobs[job].Settings.Executor; q != "" {
		return q
	}
	if e.in.Config.Queue != "" {
		return e.in.Config.Queue
	}
	return queue.DefaultQueueName
}

// checkQueues verifies every job the event may reach names a queue that
// exists and that the event's identity may use. It returns the queues the
// event may reach, sorted.
func (e *eventRun) checkQueues(starts []string, defined []queue.Queue) ([]string, []string) {
	byName := map[string]queue.Queue{}
	for _, q := range defined {
		byName[q.Name] = q
	}
	id := e.identity()
	var problems, reach []string
	for _, job := range e.reachable(starts) {
		if !e.spec.Jobs[job].Settings.VirtualJob {
			name := e.queueOf(job)
			if !slices.Contains(reach, name) {
				reach = append(reach, name)
			}
			q, ok := byName[name]
			switch {
			case !ok:
				known := make([]string, 0, len(defined))
				for _, q := range defined {
					known = append(known, q.Name)
				}
				sort.Strings(known)
				known = slices.Compact(known)
				problems = append(problems, fmt.Sprintf("job %s names queue %q, which does not exist (queues: %s)", job, name, strings.Join(known, ", ")))
			default:
				if err := queue.CanUse(id, q); err != nil {
					problems = append(problems, fmt.Sprintf("job %s: %v", job, err))
				}
				if q.MaxWait > 0 {
					if e.maxWait == nil {
						e.maxWait = map[string]time.Duration{}
					}
					e.maxWait[name] = q.MaxWait
				}
			}
		}
	}
	sort.Strings(reach)
	return reach, problems
}

// reachable lists the jobs the event may run from starts, breadth first.
func (e *eventRun) reachable(starts []string) []string {
	var out []string
	seen := map[string]bool{}
	todo := slices.Clone(starts)
	for len(todo) > 0 {
		job := todo[0]
		todo = todo[1:]
		if seen[job] {
			continue
		}
		seen[job] = true
		out = append(out, job)
		if e.prEvent() && !e.spec.ChainPR() {
			continue // a pull request runs its ~pr jobs only
		}
		for _, n := range e.spec.NextJobs(job) {
			todo = append(todo, n.Job)
		}
	}
	return out
}

// start launches one build per permutation of job.
func (e *eventRun) start(ctx workflow.Context, job string) {
	if _, ok := e.jobs[job]; ok || e.cancelled {
		return
	}
	if ctx.Err() != nil {
		e.cancelled = true
		return
	}
	spec := e.spec.Jobs[job]
	jr := &jobRun{name: job, status: StatusRunning, left: len(spec.Permutations)}
	e.jobs[job] = jr
	limit := maxBuildsPerEvent
	if e.owned != nil {
		limit = maxOwnedBuildsPerEvent
	}
	if e.builds+len(spec.Permutations) > limit {
		jr.status, jr.reason, jr.left = StatusSkipped, fmt.Sprintf("not run: the event reached its limit of %d builds", limit), 0
		e.jobStatus(ctx, jr)
		return
	}
	t := e.in.Trigger
	// The change's texts stay with the event: each build's input would
	// repeat them (up to 4.5 KiB) for nothing a build reads.
	t.Title, t.Author, t.Message = "", "", ""
	q := e.queueOf(job)
	for i, perm := range spec.Permutations {
		ref := BuildRef{Pipeline: e.in.Event.Pipeline, Job: job, Event: e.in.Event.Number}
		if len(spec.Permutations) > 1 {
			ref.Index = i + 1
		}
		if e.prEvent() {
			ref.PR = t.PR
		}
		jr.builds = append(jr.builds, ref)
		e.builds++
		e.running++
		in := BuildInput{
			Build: ref, Repo: e.in.Config.Repo, SHA: e.state.SHA, Branch: eventBranch(e.in.Config, t), Trigger: t,
			Queue: q, Priority: spec.Settings.Priority, NoRetryOnLoss: !spec.Settings.RetryOnLoss, Image: perm.Image, Steps: perm.Commands, Secrets: perm.Secrets,
			Environment: withParameters(perm.Environment, e.state.Parameters), Parameters: e.state.Parameters,
			Timeout: spec.Settings.Timeout, Virtual: spec.Settings.VirtualJob,
			CPU: annotationText(spec.Annotations, pipeline.AnnotationCPU), RAM: annotationText(spec.Annotations, pipeline.AnnotationRAM),
			Dispatch: e.in.Config.Dispatch, RepoAuth: e.repoAuth,
			Statuses: e.statusesID(), MaxWait: e.maxWait[q],
			Cache: spec.Cache,
			Lean:  e.lean,
			Slim:  e.in.Slim && (e.in.DoneInResult || e.mayStartMore(job)),
			Lane: LaneRequest{
				Build: ref, Collapse: spec.Settings.CollapseBuilds, BlockedBySameJob: spec.Settings.BlockedBySameJob,
				BlockedBy: spec.BlockedBy, FreezeWindows: spec.FreezeWindows, Delay: spec.Settings.Delay, Force: e.in.Force,
			},
		}
		if in.Statuses != "" {
			in.StatusContext = e.statusContext(job)
		}
		in.Upstream = e.upstream(job)
		sas := []temporal.SearchAttributeUpdate{
			SAPipeline.ValueSet(ref.Pipeline), SAJob.ValueSet(ref.LaneKey()), SAEvent.ValueSet(e.in.Event.String()),
			SASHA.ValueSet(e.state.SHA), SABranch.ValueSet(in.Branch), SAQueue.ValueSet(q),
			SAPriority.ValueSet(int64(spec.Settings.Priority)), SAStatus.ValueSet(string(StatusCreated)),
		}
		var memo map[string]any
		if e.lean && !in.Virtual {
			// A lean build starts QUEUED in its lane: its first workflow
			// task has no status to upsert.
			sas[len(sas)-1] = SAStatus.ValueSet(string(StatusQueued))
			memo = map[string]any{MemoBuild: BuildSummary{Reason: laneWaitReason, WaitCode: WaitLaneOrder}}
		}
		if ref.PR > 0 {
			sas = append(sas, SAPR.ValueSet(int64(ref.PR)))
		}
		opts := workflow.ChildWorkflowOptions{
			WorkflowID:            ref.WorkflowID(),
			TaskQueue:             ControllerTaskQueue,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			TypedSearchAttributes: temporal.NewSearchAttributes(sas...),
			Memo:                  memo,
			StaticSummary:         fmt.Sprintf("build %s (%s) on queue %s", ref, describeTrigger(t, ""), q),
		}
		if e.in.EnqueueUpdate && !in.Virtual {
			e.toStart = append(e.toStart, pendingBuild{opts: opts, sas: sas, in: in, jr: jr})
			continue
		}
		if e.owned != nil {
			e.launchOwned(ctx, []pendingBuild{{in: in, jr: jr}}, nil, false)
			continue
		}
		e.launch(ctx, opts, in, jr, !in.Virtual, false)
	}
}

// launch starts a build's workflow. bySignal: enqueue hands it to the
// lanes by signal once it exists. byUpdate: it is in the lanes already,
// so when its workflow cannot start its place goes back.
func (e *eventRun) launch(ctx workflow.Context, opts workflow.ChildWorkflowOptions, in BuildInput, jr *jobRun, bySignal, byUpdate bool) {
	ref := in.Build
	fut := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), BuildWorkflow, in)
	if bySignal {
		e.toEnqueue = append(e.toEnqueue, startedBuild{req: in.Lane, started: fut.GetChildWorkflowExecution()})
	}
	e.sel.AddFuture(fut, func(f workflow.Future) {
		e.running--
		var st BuildState
		if err := f.Get(ctx, &st); err != nil {
			st = BuildState{ID: ref.String(), Build: ref, Status: StatusFailure, Reason: "build workflow failed: " + rootMessage(err)}
			if temporal.IsCanceledError(err) {
				st.Status, st.Reason = StatusAborted, "cancelled"
			}
			if byUpdate && fut.GetChildWorkflowExecution().Get(ctx, nil) != nil {
				st.LaneRelease = true // it never started: nobody else gives its place back
			}
		}
		if st.LaneRelease {
			e.pendingDone = append(e.pendingDone, ref)
		}
		e.buildEnded(ctx, jr, st)
	})
}

// mayStartMore reports whether job's end may start builds of this event:
// then its builds leave their lanes through the event (BuildInput.Slim),
// whose batch handing those builds to the lanes gives their places back
// at no cost. A build whose end starts nothing signals the pipeline
// itself: the event would only send the same signal one hop later.
func (e *eventRun) mayStartMore(job string) bool {
	if pr := e.prEvent(); pr && !e.spec.ChainPR() {
		return false // a pull request runs its ~pr jobs only
	}
	if len(e.spec.NextJobs(job)) > 0 {
		return true
	}
	// A stage member's end may start the stage's teardown.
	if st := e.spec.Stages[e.spec.Jobs[job].Stage]; st != nil && job != st.Teardown {
		return true
	}
	return false
}

// upstream are the jobs among job's requires that succeeded (in this
// event or along its restart chain): the builds whose metadata job's
// builds start with, in the order the requires list them.
func (e *eventRun) upstream(job string) []string {
	var out []string
	for _, r := range e.spec.Jobs[job].Requires {
		name := strings.TrimPrefix(r, "~")
		if _, ok := e.spec.Jobs[name]; ok && e.succeeded[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// enqueue hands the builds started since the last call to the pipeline's
// lanes, once their workflows exist (a lane may signal them at once). The
// first call also releases the pipeline's ordering hold on later events.
func (e *eventRun) enqueue(ctx workflow.Context) {
	if len(e.toStart) > 0 {
		e.enqueueByUpdate(ctx)
		return
	}
	if len(e.toEnqueue) == 0 && len(e.pendingDone) == 0 && e.releasedHold {
		return
	}
	batch := EnqueueBatch{Event: e.in.Event.Number, Sync: e.pendingSync, Done: e.pendingDone}
	e.pendingSync, e.pendingDone = nil, nil
	for _, sb := range e.toEnqueue {
		if err := sb.started.Get(ctx, nil); err != nil {
			continue // the child never started; its result future reports why
		}
		batch.Requests = append(batch.Requests, sb.req)
	}
	e.toEnqueue = nil
	e.releasedHold = true
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.SignalExternalWorkflow(dctx, PipelineWorkflowID(e.in.Event.Pipeline), "", SignalEnqueue, batch).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("enqueue_failed", "event", e.in.Event.String(), "error", err)
		for _, r := range batch.Requests {
			e.abortBuild(dctx, r.Build, fmt.Sprintf("pipeline %s is not running (deleted?): %v", e.in.Event.Pipeline, rootMessage(err)))
		}
	}
}

// enqueueByUpdate hands the builds in toStart to the lanes with
// UpdateEnqueue, then starts their workflows with the lanes' answer: a
// build granted at once dispatches in its first workflow task. When the
// update cannot be sent (the pipeline is too busy to answer within
// enqueueUpdateFor, or gone), the builds start and go by signal, as
// before; the lanes restate what they told a build they already hold.
func (e *eventRun) enqueueByUpdate(ctx workflow.Context) {
	batch := EnqueueBatch{Event: e.in.Event.Number, Sync: e.pendingSync, Done: e.pendingDone}
	for _, pb := range e.toStart {
		batch.Requests = append(batch.Requests, pb.in.Lane)
	}
	toStart := e.toStart
	e.toStart = nil
	ans, err := e.updateLanes(ctx, batch)
	if err != nil {
		workflow.GetLogger(ctx).Warn("enqueue_update_failed", "event", e.in.Event.String(), "error", err)
		if e.owned != nil {
			e.launchOwned(ctx, toStart, nil, true)
			e.enqueue(ctx)
			return
		}
		for _, pb := range toStart {
			// The update may have reached the lanes all the same (its
			// answer was lost, or the event was cancelled meanwhile): a
			// build that never starts gives back a place it may hold.
			e.launch(ctx, pb.opts, pb.in, pb.jr, true, true)
		}
		e.enqueue(ctx)
		return
	}
	e.pendingSync, e.pendingDone = nil, nil
	e.releasedHold = true
	if e.owned != nil {
		e.launchOwned(ctx, toStart, ans.Messages, false)
		return
	}
	now := workflow.Now(ctx)
	for _, pb := range toStart {
		pb.in.Initial = ans.Messages[pb.in.Build.String()]
		if pb.in.Lean && len(pb.in.Initial) == 1 && pb.in.Initial[0].Kind == LaneGrant {
			// Granted at once: it starts as dispatched (BuildInput.DispatchedAt).
			pb.in.DispatchedAt = now
			pb.opts.TypedSearchAttributes = temporal.NewSearchAttributes(append(pb.sas, SADispatchedAt.ValueSet(now))...)
			pb.opts.Memo = map[string]any{MemoBuild: BuildSummary{
				Reason: slotWaitReason(pb.in.Queue), WaitCode: WaitSlotBusy, QueuedTime: now, Fork: pb.in.Trigger.Fork && pb.in.Build.PR > 0,
			}}
		}
		e.launch(ctx, pb.opts, pb.in, pb.jr, false, true)
	}
}

// launchOwned starts builds the event owns, with the lanes' first answer
// to each (answers; nil: none yet). bySignal: enqueue hands them to the
// lanes by signal. Their summaries go to the event's memo in one upsert.
func (e *eventRun) launchOwned(ctx workflow.Context, pbs []pendingBuild, answers map[string][]LaneMessage, bySignal bool) {
	now := workflow.Now(ctx)
	started := make([]*ownedBuild, 0, len(pbs))
	for _, pb := range pbs {
		in := pb.in
		in.Initial = answers[in.Build.String()]
		if len(in.Initial) == 1 && in.Initial[0].Kind == LaneGrant {
			in.DispatchedAt = now // granted at once: it starts dispatched
		}
		ob, fut := e.owned.start(ctx, in)
		started = append(started, ob)
		if bySignal {
			ready, set := workflow.NewFuture(ctx)
			set.Set(nil, nil)
			e.toEnqueue = append(e.toEnqueue, startedBuild{req: in.Lane, started: ready})
		}
		e.sel.AddFuture(fut, func(f workflow.Future) {
			e.running--
			e.settling = true
			var st BuildState
			_ = f.Get(ctx, &st)
			e.buildEnded(ctx, pb.jr, st)
		})
	}
	e.owned.recordStarted(ctx, started)
}

// enqueueUpdateFor bounds an UpdateEnqueue, with its retries.
const enqueueUpdateFor = 10 * time.Second

// updateLanes sends the pipeline UpdateEnqueue from a local activity.
func (e *eventRun) updateLanes(ctx workflow.Context, batch EnqueueBatch) (EnqueueAnswer, error) {
	var ans EnqueueAnswer
	e.updates++
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: enqueueUpdateFor,
		StartToCloseTimeout:    enqueueUpdateFor / 2,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 2 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeNoUpdater},
		},
		Summary: "hand the builds to the pipeline's lanes",
	})
	err := workflow.ExecuteLocalActivity(lctx, a.UpdatePipeline, activities.UpdatePipelineInput{
		Pipeline: e.in.Event.Pipeline, Name: UpdateEnqueue, Arg: batch,
		UpdateID: fmt.Sprintf("%s/enqueue/%d", e.in.Event, e.updates),
	}).Get(ctx, &ans)
	return ans, err
}

// abortBuild tells a build its lane will never answer.
func (e *eventRun) abortBuild(ctx workflow.Context, b BuildRef, reason string) {
	msg := LaneMessage{Kind: LaneAbort, Status: StatusAborted, Reason: reason}
	if e.owned != nil {
		e.owned.deliver(ctx, b.String(), msg)
		return
	}
	_ = workflow.SignalExternalWorkflow(ctx, b.WorkflowID(), "", SignalLane, msg).Get(ctx, nil)
}

// buildEnded records one build's end and, when the job's last permutation
// ends, moves the graph on.
func (e *eventRun) buildEnded(ctx workflow.Context, jr *jobRun, st BuildState) {
	e.notifyBuild(ctx, jr.name, st)
	jr.results = append(jr.results, st)
	jr.left--
	if jr.left > 0 {
		return
	}
	jr.status, jr.reason = jobStatus(jr.results)
	e.jobStatus(ctx, jr)
	e.notifyPeriodic(ctx, jr)
	if jr.status == StatusSuccess {
		e.succeeded[jr.name] = true
		if e.prEvent() {
			// A pull request never fires remote triggers, and runs the jobs
			// downstream of its ~pr jobs only with chainPR.
			if !e.spec.ChainPR() {
				e.maybeTeardown(ctx, jr.name)
				return
			}
		} else {
			e.triggerRemote(ctx, jr.name)
		}
		for _, n := range e.spec.NextJobs(jr.name) {
			if e.blockedByStage(n.Job) {
				continue
			}
			if !n.Join || e.spec.JoinSatisfied(n.Job, e.succeeded) {
				e.start(ctx, n.Job)
			}
		}
	}
	e.maybeTeardown(ctx, jr.name)
}

// statusRank orders final statuses from best to worst: a job's or an
// event's status is its worst part's (FAILURE > ABORTED > COLLAPSED >
// SUCCESS = SKIPPED).
var statusRank = map[Status]int{StatusSuccess: 0, StatusSkipped: 0, StatusCollapsed: 1, StatusAborted: 2, StatusFailure: 3}

// worse reports whether a ranks below b.
func worse(a, b Status) bool { return statusRank[a] > statusRank[b] }

// jobStatus folds a job's builds: the worst status wins
// (FAILURE > ABORTED > COLLAPSED > SUCCESS).
func jobStatus(results []BuildState) (Status, string) {
	worst := results[0]
	for _, r := range results[1:] {
		if worse(r.Status, worst.Status) {
			worst = r
		}
	}
	if len(results) > 1 && worst.Status != StatusSuccess {
		return worst.Status, fmt.Sprintf("build %s: %s", worst.ID, worst.Reason)
	}
	return worst.Status, worst.Reason
}

// blockedByStage: downstream of a stage's teardown runs only when every
// build of the stage succeeded in this event.
func (e *eventRun) blockedByStage(job string) bool {
	for _, r := range e.spec.Jobs[job].Requires {
		req, err := pipeline.ParseRequire(r)
		if err != nil || req.Kind != pipeline.RequireStage || req.StagePhase != "teardown" {
			continue
		}
		for _, member := range e.spec.StageJobs(req.Stage) {
			if jr, ok := e.jobs[member]; ok && jr.status != StatusSuccess {
				return true
			}
		}
	}
	return false
}

// maybeTeardown starts a stage's teardown once the stage has nothing left
// running, even when a member failed: teardown always runs after setup
// (Screwdriver's stage semantics).
func (e *eventRun) maybeTeardown(ctx workflow.Context, job string) {
	stage := e.spec.Jobs[job].Stage
	if stage == "" {
		return
	}
	st := e.spec.Stages[stage]
	if st == nil || job == st.Teardown {
		return
	}
	if _, started := e.jobs[st.Teardown]; started {
		return
	}
	if setup, ok := e.jobs[st.Setup]; !ok || setup.status != StatusSuccess {
		return
	}
	failed := false
	for _, m := range st.Jobs {
		jr, ok := e.jobs[m]
		if ok && !jr.status.Final() {
			return // still running
		}
		if ok && jr.status != StatusSuccess {
			failed = true
		}
	}
	if failed {
		e.start(ctx, st.Teardown)
	}
}

// triggerRemote starts events in pipelines subscribed to this job.
func (e *eventRun) triggerRemote(ctx workflow.Context, job string) {
	if ctx.Err() != nil {
		return // a cancelled event triggers nothing downstream
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var started []string
	err := workflow.ExecuteLocalActivity(lctx, a.TriggerRemote, activities.TriggerRemoteInput{
		Pipeline: e.in.Event.Pipeline, Job: job, Event: e.in.Event.String(),
	}).Get(ctx, &started)
	if err != nil {
		e.remoteErrs = append(e.remoteErrs, fmt.Sprintf("remote trigger sd@%s:%s: %s", e.in.Event.Pipeline, job, rootMessage(err)))
	}
}

// finish computes the event's outcome, including the jobs that did not run.
func (e *eventRun) finish(ctx workflow.Context) EventState {
	status := StatusSuccess
	var reasons []string
	for _, name := range e.spec.JobOrder {
		jr, ok := e.jobs[name]
		if !ok {
			continue
		}
		if worse(jr.status, status) {
			status = jr.status
		}
		if jr.status != StatusSuccess {
			reasons = append(reasons, fmt.Sprintf("%s %s", name, jr.status))
		}
	}
	reason := strings.Join(reasons, ", ")
	if e.cancelled {
		status, reason = StatusAborted, "event cancelled"
	}
	if len(e.remoteErrs) > 0 {
		e.state.Warnings = append(e.state.Warnings, e.remoteErrs...)
	}
	return e.end(ctx, status, reason)
}

func (e *eventRun) end(ctx workflow.Context, s Status, reason string) EventState {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	if e.handBack != nil && e.releasedHold && len(e.pendingDone) > 0 && !e.handBack.ReceiveAsync(nil) {
		// The pipeline run that started the event still runs: its result,
		// which that run receives anyway, gives the places back.
		e.state.LaneDone, e.pendingDone = e.pendingDone, nil
	}
	if !e.releasedHold || len(e.pendingDone) > 0 {
		e.enqueue(ctx)
	}
	e.state.Status, e.state.Reason, e.state.EndTime, e.state.WaitCode = s, reason, workflow.Now(ctx), ""
	e.state.Jobs = e.outcomes()
	e.state.Succeeded = e.succeededJobs()
	e.notifiesStarted(ctx)
	e.statusesDone(ctx)
	final := []temporal.SearchAttributeUpdate{SAStatus.ValueSet(string(s))}
	if memo := e.takeMemo(nil); len(memo) > 0 {
		_ = workflow.UpsertMemo(ctx, memo)
	}
	if e.owned != nil {
		// Let an executor's claim that raced a build's end see its final state.
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		e.state.Builds = e.owned.states()
		if u, changed := e.owned.openUpdate(); changed {
			final = append(final, u)
		}
	}
	if !e.notified && e.in.Notify != "" {
		e.notified = true
		_ = workflow.SignalExternalWorkflow(ctx, e.in.Notify, "", SignalPeriodicDone,
			PeriodicDone{Event: e.in.Event.String(), Status: s, Reason: reason}).Get(ctx, nil)
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, e.withSHA(final...)...)
	return e.state
}

// withSHA adds the SHA search attribute to an upsert when it is still
// pending (lean runs upsert it with the next one instead of on its own),
// and an owned event's other pending attributes.
func (e *eventRun) withSHA(u ...temporal.SearchAttributeUpdate) []temporal.SearchAttributeUpdate {
	if e.shaPending {
		e.shaPending = false
		u = append(u, SASHA.ValueSet(e.state.SHA))
	}
	u = append(u, e.pendingSA...)
	e.pendingSA = nil
	return u
}

// upsertMemo upserts memo fields of the event, or keeps them for the next
// memo upsert of an owned event (pendingMemo).
func (e *eventRun) upsertMemo(ctx workflow.Context, memo map[string]any) {
	if e.owned == nil || e.prBase { // a pull request's event may wait for approval first
		_ = workflow.UpsertMemo(ctx, memo)
		return
	}
	if e.pendingMemo == nil {
		e.pendingMemo = map[string]any{}
	}
	// Order-independent: the result is a map.
	//workflowcheck:ignore
	for k, v := range memo {
		e.pendingMemo[k] = v
	}
}

// takeMemo returns the pending memo fields, with more.
func (e *eventRun) takeMemo(more map[string]any) map[string]any {
	if len(e.pendingMemo) == 0 {
		return more
	}
	out := e.pendingMemo
	e.pendingMemo = nil
	// Order-independent: the result is a map.
	//workflowcheck:ignore
	for k, v := range more {
		out[k] = v
	}
	return out
}

func (e *eventRun) snapshot() EventState {
	st := e.state
	st.Jobs = e.outcomes()
	st.Succeeded = e.succeededJobs()
	if e.owned != nil {
		st.Builds = e.owned.states()
	}
	return st
}

// succeededJobs lists, in the spec's order, the jobs that succeeded in this
// event or that it inherited from its restart chain.
func (e *eventRun) succeededJobs() []string {
	var out []string
	if e.spec != nil {
		for _, name := range e.spec.JobOrder {
			if e.succeeded[name] {
				out = append(out, name)
			}
		}
		return out
	}
	// The spec was never read: pass the inherited successes on as they came.
	return slices.Clone(e.in.ParentSucceeded)
}

// notifyPeriodic tells a schedule's PeriodicWorkflow that the job it fired
// has ended, so the schedule's next fire may start.
func (e *eventRun) notifyPeriodic(ctx workflow.Context, jr *jobRun) {
	if e.notified || e.in.Notify == "" || e.in.Trigger.Kind != TriggerPeriodic || !slices.Contains(e.fromJobs(), jr.name) {
		return
	}
	e.notified = true
	_ = workflow.SignalExternalWorkflow(ctx, e.in.Notify, "", SignalPeriodicDone,
		PeriodicDone{Event: e.in.Event.String(), Status: jr.status, Reason: jr.reason}).Get(ctx, nil)
}

// outcomes lists the jobs that ran, then the reachable jobs that did not and
// why: "not run: requires C, which ended FAILURE".
func (e *eventRun) outcomes() []JobOutcome {
	if e.spec == nil {
		return nil
	}
	var out []JobOutcome
	for _, name := range e.spec.JobOrder {
		if jr, ok := e.jobs[name]; ok {
			o := JobOutcome{Job: name, Status: jr.status, Reason: jr.reason}
			for _, b := range jr.builds {
				o.Builds = append(o.Builds, b.String())
			}
			out = append(out, o)
			continue
		}
		if why := e.notRun(name); why != "" {
			out = append(out, JobOutcome{Job: name, Status: StatusSkipped, Reason: why})
		}
	}
	return out
}

// notRun explains why a job that did not run was left out, or returns ""
// when no upstream job of it ran in this event.
func (e *eventRun) notRun(job string) string {
	var waiting, parents []string
	for _, r := range e.spec.Jobs[job].Requires {
		parent := strings.TrimPrefix(r, "~")
		parents = append(parents, parent)
		if req, err := pipeline.ParseRequire(r); err == nil && req.Kind == pipeline.RequireStage {
			parent = pipeline.StageJobName(req.Stage, req.StagePhase)
			if req.StagePhase == "teardown" {
				for _, m := range e.spec.StageJobs(req.Stage) {
					if jr, ok := e.jobs[m]; ok && jr.status.Final() && jr.status != StatusSuccess {
						return fmt.Sprintf("not run: stage %s did not succeed (%s ended %s)", req.Stage, m, jr.status)
					}
				}
			}
		}
		jr, ok := e.jobs[parent]
		if !ok {
			if !strings.HasPrefix(r, "~") && !strings.HasPrefix(parent, "sd@") {
				waiting = append(waiting, parent)
			}
			continue
		}
		switch {
		case jr.status == StatusCollapsed:
			return fmt.Sprintf("not run: requires %s, which was %s", parent, jr.reason)
		case jr.status.Final() && jr.status != StatusSuccess:
			return fmt.Sprintf("not run: requires %s, which ended %s", parent, jr.status)
		}
	}
	if e.cancelled && e.anyRan(parents) {
		return "not run: event cancelled"
	}
	if len(waiting) > 0 && e.anyRan(e.spec.JoinParents(job)) {
		if e.state.Status == StatusRunning {
			return ""
		}
		return fmt.Sprintf("not run: join parents %s did not run in this event", strings.Join(waiting, ", "))
	}
	return ""
}

func (e *eventRun) anyRan(jobs []string) bool {
	for _, j := range jobs {
		if _, ok := e.jobs[j]; ok {
			return true
		}
	}
	return false
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// annotationText is an annotation's value as written ("" when absent).
func annotationText(annotations map[string]any, key string) string {
	v, ok := annotations[key]
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// withParameters is a job's environment plus the event's parameters as
// SD_PARAM_<NAME> (a parameter wins over a job variable of the same name).
func withParameters(env, params map[string]string) map[string]string {
	if len(params) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(params))
	// Order-independent: the result is a map.
	//workflowcheck:ignore
	for k, v := range env {
		out[k] = v
	}
	// Order-independent: the result is a map.
	//workflowcheck:ignore
	for k, v := range params {
		out[pipeline.ParamEnvName(k)] = v
	}
	return out
}
