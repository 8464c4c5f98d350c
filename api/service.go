package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

// Errors the handler maps to HTTP statuses. Each is wrapped with a message
// that names what is wrong.
var (
	ErrInvalid   = errors.New("invalid request")
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrForbidden = queue.ErrForbidden
)

// Service is sluice's operations over a Temporal client. The HTTP handler
// is a thin layer on it.
type Service struct {
	Client    client.Client
	Namespace string
	// Liveness is the executor liveness timeout (for "live" in views).
	Liveness time.Duration
	// Dispatch is stamped on pipelines created through this API.
	Dispatch workflows.Dispatch
	// Repos opens repositories to validate new pipelines.
	Repos  activities.RepoOpener
	Logger *slog.Logger
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// HasSecrets reports whether a pipeline has secrets (nil: no secret
	// store): repointing such a pipeline needs manage-secrets.
	HasSecrets func(pipeline string) (bool, error)
	// LocalRepos are the path prefixes under which a pipeline may use a
	// repository on this machine (SLUICE_LOCAL_REPOS); none allows none.
	LocalRepos []string

	idx pipelineIndex
	// batches coalesces concurrent event starts per pipeline (batch.go).
	batches eventBatcher
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

var (
	reJob    = regexp.MustCompile(`^[\w@:.-]{1,200}$`)
	reSHA    = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)
	reBranch = regexp.MustCompile(`^[\w./@+-]{1,250}$`)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// translate maps Temporal errors to the API's error kinds.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	case errors.As(err, &started):
		return fmt.Errorf("%w: %s already exists", ErrConflict, what)
	case errors.Is(err, queue.ErrForbidden):
		return err
	}
	var rejected *serviceerror.InvalidArgument
	if errors.As(err, &rejected) {
		return fmt.Errorf("%w: %s", ErrInvalid, rejected.Message)
	}
	// Update validators reject with an application error carrying the reason.
	msg := err.Error()
	if strings.Contains(msg, "forbidden") {
		return fmt.Errorf("%w: %s", ErrForbidden, msg)
	}
	return err
}

// updateError turns an update's rejection into an invalid-request error
// while keeping transport failures as they are.
func updateError(err error, what string) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	var app interface{ Message() string }
	if errors.As(err, &app) {
		m := app.Message()
		switch {
		case strings.Contains(m, "forbidden"):
			return fmt.Errorf("%w: %s", ErrForbidden, m)
		case strings.Contains(m, "already exists"):
			return fmt.Errorf("%w: %s", ErrConflict, m)
		case strings.Contains(m, "no such"):
			return fmt.Errorf("%w: %s", ErrNotFound, m)
		}
		return fmt.Errorf("%w: %s", ErrInvalid, m)
	}
	return err
}

func (s *Service) update(ctx context.Context, workflowID, name string, arg, out any) error {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// ---- pipelines ----------------------------------------------------------

// CreatePipeline validates the repository and starts the pipeline entity.
func (s *Service) CreatePipeline(ctx context.Context, id queue.Identity, req CreatePipelineRequest) (Pipeline, error) {
	if err := workflows.ValidatePipelineName(req.Name); err != nil {
		return Pipeline{}, fmt.Errorf("%w: name: %w", ErrInvalid, err)
	}
	if strings.TrimSpace(req.Repo) == "" {
		return Pipeline{}, invalid("repo: required (a git URL, a local git repository or a directory)")
	}
	if err := s.checkLocalRepo(req.Repo); err != nil {
		return Pipeline{}, err
	}
	if req.Branch == "" {
		req.Branch = "main"
	}
	if !reBranch.MatchString(req.Branch) {
		return Pipeline{}, invalid("branch %q: not a valid branch name", req.Branch)
	}
	if err := validAdmins(req.Admins); err != nil {
		return Pipeline{}, err
	}
	if req.Queue != "" {
		if err := s.requireUsableQueue(ctx, id, req.Queue); err != nil {
			return Pipeline{}, err
		}
	}
	if err := validStatuses(req.Statuses); err != nil {
		return Pipeline{}, err
	}
	repo, err := s.Repos.Open(ctx, req.Repo)
	if err != nil {
		return Pipeline{}, invalid("repo %s: %v", scm.RedactURL(req.Repo), err)
	}
	ref := req.Branch
	if scm.Kind(req.Repo) == scm.KindDir {
		ref = ""
	}
	sha, err := repo.Resolve(ctx, ref)
	if err != nil {
		return Pipeline{}, invalid("repo %s: cannot resolve branch %s: %v", scm.RedactURL(req.Repo), req.Branch, err)
	}
	next, err := s.nextEventNumber(ctx, req.Name)
	if err != nil {
		return Pipeline{}, err
	}
	owner := id
	cfg := workflows.PipelineConfig{
		Name: req.Name, Repo: req.Repo, Branch: req.Branch, Queue: req.Queue, Statuses: req.Statuses,
		Dispatch: s.Dispatch, Creator: id.User, CreatedAt: s.now().UTC(), Owner: &owner, Admins: req.Admins,
	}
	_, err = s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.PipelineWorkflowID(req.Name),
		TaskQueue:                workflows.ControllerTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SAPipeline.ValueSet(req.Name), workflows.SABranch.ValueSet(req.Branch)),
		StaticSummary:            fmt.Sprintf("pipeline %s: %s@%s", req.Name, scm.RedactURL(req.Repo), req.Branch),
	}, workflows.PipelineWorkflow, workflows.PipelineInput{Config: cfg, State: &workflows.PipelineState{NextEvent: next}})
	if err != nil {
		return Pipeline{}, translate(err, "pipeline "+req.Name)
	}
	s.forgetPipelines()
	// Subscriptions and schedules exist before the first commit event.
	if data, err := repo.ReadFile(ctx, sha, activities.SpecFile); err == nil {
		if spec, err := pipeline.ParseWithOptions(data, pipeline.Options{Pipeline: req.Name}); err == nil {
			periodic := map[string]string{}
			for _, j := range spec.PeriodicJobs() {
				periodic[j] = spec.Jobs[j].Settings.PeriodicCron
			}
			sync := workflows.SpecSync{SHA: sha, Subscriptions: spec.RemoteTriggers(), Periodic: periodic}
			if err := s.Client.SignalWorkflow(ctx, workflows.PipelineWorkflowID(req.Name), "", workflows.SignalSpecSynced, sync); err != nil {
				s.Logger.WarnContext(ctx, "spec_sync_failed", "pipeline", req.Name, "error", err)
			}
		}
	}
	return s.GetPipeline(ctx, req.Name)
}

// nextEventNumber continues numbering after an earlier pipeline of the same
// name, so event and build IDs stay unique. The deleted pipeline's last run
// records its next number in its memo (read from the history service, so
// it is exact); events found in visibility (every page) cover runs that
// ended before the memo existed.
func (s *Service) nextEventNumber(ctx context.Context, name string) (int, error) {
	next := 1
	desc, err := s.Client.DescribeWorkflowExecution(ctx, workflows.PipelineWorkflowID(name), "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return 0, fmt.Errorf("look up an earlier pipeline %s: %w", name, err)
	default:
		if f := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.MemoNextEvent]; f != nil {
			var n int
			if converter.GetDefaultDataConverter().FromPayload(f, &n) == nil && n > next {
				next = n
			}
		}
	}
	execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND %s = '%s'", workflows.SAPipeline.GetName(), name), 1<<30)
	if err != nil {
		return 0, fmt.Errorf("look up earlier events of %s: %w", name, err)
	}
	for _, ex := range execs {
		if ref, err := workflows.ParseEventRef(ex.GetExecution().GetWorkflowId()); err == nil && ref.Number >= next {
			next = ref.Number + 1
		}
	}
	return next, nil
}

// GetPipeline queries a pipeline. Its Repo is for display: credentials in
// the repository URL are redacted (scm.RedactURL).
func (s *Service) GetPipeline(ctx context.Context, name string) (Pipeline, error) {
	p, _, err := s.getPipeline(ctx, name)
	return p, err
}

// getPipeline is GetPipeline, also returning the repository location as
// configured (credentials included), for the API's own use: opening it,
// keeping it on update.
func (s *Service) getPipeline(ctx context.Context, name string) (Pipeline, string, error) {
	p, info, err := s.queryPipeline(ctx, name)
	return p, info.Config.Repo, err
}

func (s *Service) queryPipeline(ctx context.Context, name string) (Pipeline, workflows.PipelineInfo, error) {
	var info workflows.PipelineInfo
	if err := workflows.ValidatePipelineName(name); err != nil {
		return Pipeline{}, info, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	v, err := s.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID(name), "", workflows.QueryPipeline)
	if err != nil {
		return Pipeline{}, info, translate(err, "pipeline "+name)
	}
	if err := v.Get(&info); err != nil {
		return Pipeline{}, info, fmt.Errorf("decode pipeline %s: %w", name, err)
	}
	p := Pipeline{
		Name: info.Config.Name, Repo: scm.RedactURL(info.Config.Repo), RepoKind: scm.Kind(info.Config.Repo), Branch: info.Config.Branch,
		Queue: info.Config.Queue, Events: info.Events, LastSHA: info.LastSHA, Subscriptions: info.Subscriptions,
		Periodic: info.Periodic, ScheduleError: info.ScheduleError, CreatedAt: info.Config.CreatedAt,
		Statuses: info.Config.Statuses, Admins: info.Config.Admins,
	}
	if info.Config.Owner != nil {
		p.Owner = info.Config.Owner.User
	}
	jobs := make([]string, 0, len(info.Lanes.Jobs))
	for j := range info.Lanes.Jobs {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		lv := LaneView{Job: j}
		for _, e := range info.Lanes.Jobs[j].Active {
			lv.Active = append(lv.Active, e.Build.String())
		}
		for _, e := range info.Lanes.Jobs[j].Waiting {
			lv.Waiting = append(lv.Waiting, e.Build.String())
		}
		p.Lanes = append(p.Lanes, lv)
	}
	return p, info, nil
}

// ShowPipeline is GetPipeline plus where the latest event's commit
// statuses went, or why it posted none.
func (s *Service) ShowPipeline(ctx context.Context, name string) (Pipeline, error) {
	p, err := s.GetPipeline(ctx, name)
	if err != nil {
		return p, err
	}
	if evs, err := s.ListEvents(ctx, name, 1); err == nil && len(evs) > 0 && evs[0].Statuses != "" {
		p.StatusesNote = fmt.Sprintf("%s (event %s)", evs[0].Statuses, evs[0].ID)
	}
	return p, nil
}

// validStatuses checks a pipeline's commit status setting.
func validStatuses(v string) error {
	if v == "" || v == activities.StatusesOff {
		return nil
	}
	if _, err := scm.ParseStatusTarget(v); err != nil {
		return invalid("statuses: %v (or \"off\", or empty to follow the repository URL)", err)
	}
	return nil
}

// ListPipelines lists running pipelines.
func (s *Service) ListPipelines(ctx context.Context) ([]Pipeline, error) {
	execs, err := s.list(ctx, "WorkflowType = 'PipelineWorkflow' AND ExecutionStatus = 'Running'", 10000)
	if err != nil {
		return nil, err
	}
	out := make([]Pipeline, len(execs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 8)
	for i, ex := range execs {
		name := strings.TrimPrefix(ex.GetExecution().GetWorkflowId(), "pipeline/")
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := s.GetPipeline(ctx, name)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			p.Lanes = nil
			out[i] = p
		})
	}
	wg.Wait()
	out = slices.DeleteFunc(out, func(p Pipeline) bool { return p.Name == "" })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// UpdatePipeline changes a pipeline's repo, branch or default queue. The
// caller becomes the pipeline's owner: unattended events act for them.
func (s *Service) UpdatePipeline(ctx context.Context, id queue.Identity, name string, req UpdatePipelineRequest) (Pipeline, error) {
	cur, curRepo, err := s.getPipeline(ctx, name)
	if err != nil {
		return Pipeline{}, err
	}
	if req.Repo != nil && (*req.Repo == curRepo || *req.Repo == cur.Repo) {
		// The repository as configured, or as GetPipeline shows it (its
		// credentials redacted): unchanged.
		req.Repo = nil
	}
	owner := id
	cfg := workflows.PipelineConfig{Name: name, Repo: curRepo, Branch: cur.Branch, Queue: cur.Queue, Statuses: cur.Statuses, Owner: &owner}
	if req.Admins != nil {
		if err := validAdmins(*req.Admins); err != nil {
			return Pipeline{}, err
		}
		cfg.Admins = append([]string{}, *req.Admins...)
	}
	if req.Statuses != nil {
		if err := validStatuses(*req.Statuses); err != nil {
			return Pipeline{}, err
		}
		cfg.Statuses = *req.Statuses
	}
	if req.Repo != nil && s.HasSecrets != nil && !id.Has("manage-secrets") {
		// The new repository's code would read this pipeline's secrets.
		if has, err := s.HasSecrets(name); err != nil {
			return Pipeline{}, err
		} else if has {
			return Pipeline{}, fmt.Errorf("%w: pipeline %s has secrets: changing its repository needs the manage-secrets privilege (or delete its secrets first), since the new repository's code would read them",
				queue.ErrForbidden, name)
		}
	}
	if req.Repo != nil {
		if err := s.checkLocalRepo(*req.Repo); err != nil {
			return Pipeline{}, err
		}
		cfg.Repo = *req.Repo
		if _, err := s.Repos.Open(ctx, cfg.Repo); err != nil {
			return Pipeline{}, invalid("repo %s: %v", scm.RedactURL(cfg.Repo), err)
		}
	}
	if req.Branch != nil {
		if !reBranch.MatchString(*req.Branch) {
			return Pipeline{}, invalid("branch %q: not a valid branch name", *req.Branch)
		}
		cfg.Branch = *req.Branch
	}
	if req.Queue != nil {
		if *req.Queue != "" {
			if err := s.requireUsableQueue(ctx, id, *req.Queue); err != nil {
				return Pipeline{}, err
			}
		}
		cfg.Queue = *req.Queue
	}
	if err := s.update(ctx, workflows.PipelineWorkflowID(name), workflows.UpdateConfigure, cfg, nil); err != nil {
		return Pipeline{}, updateError(err, "pipeline "+name)
	}
	s.forgetPipelines()
	return s.GetPipeline(ctx, name)
}

// DeletePipeline deletes a pipeline: waiting builds end ABORTED, running
// builds finish, schedules are removed.
func (s *Service) DeletePipeline(ctx context.Context, name string) error {
	if err := workflows.ValidatePipelineName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var aborted int
	defer s.forgetPipelines()
	return updateError(s.update(ctx, workflows.PipelineWorkflowID(name), workflows.UpdateDelete, "", &aborted), "pipeline "+name)
}

// ---- events -------------------------------------------------------------

// StartEvent validates a request and starts an event.
func (s *Service) StartEvent(ctx context.Context, id queue.Identity, name string, req StartEventRequest) (EventStarted, error) {
	if err := workflows.ValidatePipelineName(name); err != nil {
		return EventStarted{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	kind := workflows.TriggerKind(req.Type)
	if req.Type == "" {
		kind = workflows.TriggerManual
		if req.StartFrom == "" && (req.SHA != "" || req.Branch != "") {
			kind = workflows.TriggerCommit
		}
	}
	switch kind {
	case workflows.TriggerCommit, workflows.TriggerPR, workflows.TriggerPRClosed, workflows.TriggerRelease, workflows.TriggerTag, workflows.TriggerManual:
	default:
		return EventStarted{}, invalid("type %q: want commit, pr, pr-closed, release, tag or manual", req.Type)
	}
	if req.SHA != "" && !reSHA.MatchString(req.SHA) {
		return EventStarted{}, invalid("sha %q: want 4 to 64 hex digits", req.SHA)
	}
	if req.Branch != "" && !reBranch.MatchString(req.Branch) {
		return EventStarted{}, invalid("branch %q: not a valid branch name", req.Branch)
	}
	if req.StartFrom != "" && !reJob.MatchString(req.StartFrom) {
		return EventStarted{}, invalid("start_from %q: not a job name", req.StartFrom)
	}
	if req.PR < 0 {
		return EventStarted{}, invalid("pr %d: must be positive", req.PR)
	}
	if (kind == workflows.TriggerPR || kind == workflows.TriggerPRClosed) && req.PR == 0 {
		return EventStarted{}, invalid("pr: a %s event needs the pull request number", kind)
	}
	if (kind == workflows.TriggerTag || kind == workflows.TriggerRelease) && req.Ref == "" {
		return EventStarted{}, invalid("ref: a %s event needs the tag or release name", kind)
	}
	if req.Ref != "" && !reBranch.MatchString(req.Ref) {
		return EventStarted{}, invalid("ref %q: not a valid tag or branch name", req.Ref)
	}
	ident := id
	r := workflows.StartEventRequest{
		Trigger:   workflows.Trigger{Kind: kind, Branch: req.Branch, Ref: req.Ref, SHA: req.SHA, PR: req.PR, Sender: id.User},
		StartFrom: req.StartFrom, Force: req.Force, Creator: id.User, Identity: &ident,
	}
	return s.startEvent(ctx, name, r)
}

func (s *Service) startEvent(ctx context.Context, name string, r workflows.StartEventRequest) (EventStarted, error) {
	res, err := s.batches.start(ctx, s.Client, name, r)
	if err != nil {
		return EventStarted{}, updateError(err, "pipeline "+name)
	}
	return EventStarted{ID: res.Event.String(), Pipeline: name, Number: res.Event.Number, Duplicate: res.Duplicate}, nil
}

// inherited are the jobs an event's restart counts as succeeded: those that
// succeeded in it or along its own restart chain.
func inherited(st workflows.EventState) []string {
	if st.Succeeded != nil {
		return st.Succeeded
	}
	var out []string // an event recorded before Succeeded existed
	for _, j := range st.Jobs {
		if j.Status == workflows.StatusSuccess {
			out = append(out, j.Job)
		}
	}
	return out
}

// eventState reads a running event's progress or a closed event's result.
func (s *Service) eventState(ctx context.Context, ref workflows.EventRef) (workflows.EventState, error) {
	var st workflows.EventState
	desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && s.eventNumbered(ctx, ref) {
		// Admitted in a burst (UpdateStartEvents): numbered, workflow not
		// started yet.
		return workflows.EventState{Event: ref, Status: workflows.StatusCreated, Reason: "starting: admitted in a burst, its workflow starts in a moment"}, nil
	}
	if err != nil {
		return st, translate(err, "event "+ref.String())
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := s.Client.QueryWorkflow(ctx, ref.WorkflowID(), "", workflows.QueryEvent)
		if err != nil {
			return st, translate(err, "event "+ref.String())
		}
		return st, v.Get(&st)
	}
	if err := s.Client.GetWorkflow(ctx, ref.WorkflowID(), "").Get(ctx, &st); err != nil {
		st = workflows.EventState{Event: ref, Status: workflows.StatusAborted, Reason: "event workflow ended without a result: " + err.Error()}
	}
	return st, nil
}

// eventNumbered reports whether the pipeline has handed out ref's number.
func (s *Service) eventNumbered(ctx context.Context, ref workflows.EventRef) bool {
	v, err := s.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID(ref.Pipeline), "", workflows.QueryPipeline)
	if err != nil {
		return false
	}
	var info workflows.PipelineInfo
	return v.Get(&info) == nil && ref.Number <= info.Events
}

// GetEvent returns an event with its builds.
func (s *Service) GetEvent(ctx context.Context, ref workflows.EventRef) (Event, error) {
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return Event{}, err
	}
	builds, err := s.ListBuilds(ctx, BuildFilter{Event: ref.String(), Limit: 5000})
	if err != nil {
		return Event{}, err
	}
	builds = s.freshBuilds(ctx, st, builds)
	sort.Slice(builds, func(i, j int) bool {
		if !builds[i].CreateTime.Equal(builds[j].CreateTime) {
			return builds[i].CreateTime.Before(builds[j].CreateTime)
		}
		return builds[i].ID < builds[j].ID
	})
	// Waiting builds get the same detailed reason as `build show`.
	ptrs := make([]*Build, len(builds))
	for i := range builds {
		ptrs[i] = &builds[i]
	}
	if err := s.liveReasons(ctx, ptrs); err != nil {
		s.Logger.DebugContext(ctx, "live_reason_failed", "event", ref.String(), "error", err)
	}
	return Event{
		ID: ref.String(), Pipeline: ref.Pipeline, Number: ref.Number, SHA: st.SHA, Status: st.Status, Reason: st.Reason,
		Trigger: st.Trigger, StartFrom: st.StartFrom, StartJobs: st.StartJobs, Rerun: st.Rerun, Parent: st.Parent,
		ActsFor: st.ActsFor, Succeeded: st.Succeeded, Jobs: st.Jobs, Builds: builds,
		Warnings: st.Warnings, StartTime: st.StartTime, EndTime: st.EndTime, Statuses: st.Statuses,
		BaseSHA: st.BaseSHA, Approval: st.Approval,
	}, nil
}

// maxFreshBuilds bounds the builds one GetEvent reads from their workflows
// rather than from visibility.
const maxFreshBuilds = 64

// freshBuilds corrects what visibility, which trails the workflows by up to
// a second or more on a busy server, says about an event's builds: a build
// the event names but visibility does not list yet is added, and a build
// visibility still shows waiting or running is read from its workflow (its
// search attributes and memo as of now). Otherwise an event that has ended
// could show a build still QUEUED that was collapsed a moment before.
// Builds that visibility shows ended are final and need no second look.
func (s *Service) freshBuilds(ctx context.Context, st workflows.EventState, builds []Build) []Build {
	listed := make(map[string]int, len(builds))
	for i, b := range builds {
		listed[b.ID] = i
	}
	var stale []string
	for _, b := range builds {
		if !b.Status.Final() {
			stale = append(stale, b.ID)
		}
	}
	for _, j := range st.Jobs {
		for _, id := range j.Builds {
			if _, ok := listed[id]; !ok {
				stale = append(stale, id)
				listed[id] = -1
			}
		}
	}
	if len(stale) > maxFreshBuilds {
		stale = stale[:maxFreshBuilds]
	}
	fresh := make([]*Build, len(stale))
	var g errgroup.Group
	g.SetLimit(8)
	for i, id := range stale {
		g.Go(func() error {
			ref, err := workflows.ParseBuildRef(id)
			if err != nil {
				return nil
			}
			desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
			if err != nil {
				s.Logger.DebugContext(ctx, "describe_build_failed", "build", id, "error", err)
				return nil
			}
			if b, ok := buildFromVisibility(desc.GetWorkflowExecutionInfo()); ok {
				fresh[i] = &b
			}
			return nil
		})
	}
	_ = g.Wait()
	for i, b := range fresh {
		if b == nil {
			continue
		}
		if at := listed[stale[i]]; at >= 0 {
			builds[at] = *b
		} else {
			builds = append(builds, *b)
		}
	}
	return builds
}

// ListEvents lists a pipeline's most recent events.
func (s *Service) ListEvents(ctx context.Context, name string, limit int) ([]Event, error) {
	if limit <= 0 || limit > 1000 {
		limit = 20
	}
	execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND %s = '%s'", workflows.SAPipeline.GetName(), name), limit)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(execs))
	for _, ex := range execs {
		ref, err := workflows.ParseEventRef(ex.GetExecution().GetWorkflowId())
		if err != nil {
			continue
		}
		sa := ex.GetSearchAttributes()
		ev := Event{
			ID: ref.String(), Pipeline: ref.Pipeline, Number: ref.Number,
			SHA: saString(sa, workflows.SASHA.GetName()), Status: workflows.Status(saString(sa, workflows.SAStatus.GetName())),
			StartTime: ex.GetStartTime().AsTime(), EndTime: closeTime(ex),
		}
		if f := ex.GetMemo().GetFields()[workflows.MemoStatuses]; f != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(f, &ev.Statuses)
		}
		out = append(out, ev)
	}
	// Visibility trails the workflows: an event it still shows running may
	// have ended. Its workflow's own search attributes say (as GetEvent and
	// freshBuilds do), so a page never shows RUNNING for an event that ended.
	var g errgroup.Group
	g.SetLimit(8)
	for i := range out {
		if out[i].Status.Final() {
			continue
		}
		g.Go(func() error {
			ref := workflows.EventRef{Pipeline: out[i].Pipeline, Number: out[i].Number}
			desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
			if err != nil {
				s.Logger.DebugContext(ctx, "describe_event_failed", "event", out[i].ID, "error", err)
				return nil
			}
			info := desc.GetWorkflowExecutionInfo()
			if st := workflows.Status(saString(info.GetSearchAttributes(), workflows.SAStatus.GetName())); st != "" {
				out[i].Status = st
			}
			if sha := saString(info.GetSearchAttributes(), workflows.SASHA.GetName()); sha != "" {
				out[i].SHA = sha
			}
			out[i].EndTime = closeTime(info)
			return nil
		})
	}
	_ = g.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	return out, nil
}

// CancelEvent cancels every build of the event.
func (s *Service) CancelEvent(ctx context.Context, ref workflows.EventRef) error {
	return translate(s.Client.CancelWorkflow(ctx, ref.WorkflowID(), ""), "event "+ref.String())
}

// ApproveEvent lets an event that waits for approval
// (screwdriver.cd/restrictPR) start its builds, recording id as who
// approved it. An event that does not wait for approval is a conflict.
func (s *Service) ApproveEvent(ctx context.Context, id queue.Identity, ref workflows.EventRef) (workflows.Approval, error) {
	var out workflows.Approval
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return out, err
	}
	if st.Approval == nil || st.Approval.ApprovedBy != "" || st.Status.Final() {
		why := fmt.Sprintf("it is %s and needs no approval", st.Status)
		switch {
		case st.Approval != nil && st.Approval.ApprovedBy != "":
			why = st.Approval.ApprovedBy + " approved it already"
		case st.Status.Final():
			why = fmt.Sprintf("it ended %s", st.Status)
		}
		return out, fmt.Errorf("%w: event %s is not waiting for approval: %s", ErrConflict, ref, why)
	}
	err = s.update(ctx, ref.WorkflowID(), workflows.UpdateApproveEvent, workflows.ApproveRequest{User: id.User}, &out)
	var done *serviceerror.NotFound
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &done) || strings.Contains(err.Error(), "not waiting for approval") ||
		strings.Contains(err.Error(), "already completed"):
		// It ended, or someone approved it, since it was read.
		return out, fmt.Errorf("%w: event %s is not waiting for approval: %s", ErrConflict, ref, rootCause(err))
	}
	return out, updateError(err, "event "+ref.String())
}

// rootCause is the innermost message of err.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// RestartEvent starts a new event from one or more jobs, reusing the
// event's commit; every success along the event's restart chain counts for
// joins, except the jobs restarted.
func (s *Service) RestartEvent(ctx context.Context, id queue.Identity, ref workflows.EventRef, req RestartEventRequest) (EventStarted, error) {
	if len(req.From) == 0 {
		return EventStarted{}, invalid("from: name the job (or jobs) to restart from")
	}
	for _, j := range req.From {
		if !reJob.MatchString(j) {
			return EventStarted{}, invalid("from %q: not a job name; name the job (or jobs) to restart from", j)
		}
	}
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return EventStarted{}, err
	}
	if st.SHA == "" {
		return EventStarted{}, invalid("event %s never resolved a commit (%s); start a new event instead", ref, st.Reason)
	}
	from := slices.Compact(slices.Clone(req.From))
	return s.startFrom(ctx, id, ref, st, from, req.Force, false)
}

// RerunEvent starts a new event at the event's commit that runs exactly the
// jobs that failed, were aborted or collapsed (and, through the graph, the
// jobs that did not run because of them), with every success inherited: two
// failed branches of a join are re-run together and the join follows.
func (s *Service) RerunEvent(ctx context.Context, id queue.Identity, ref workflows.EventRef, req RerunEventRequest) (EventStarted, error) {
	st, err := s.eventState(ctx, ref)
	if err != nil {
		return EventStarted{}, err
	}
	if !st.Status.Final() {
		return EventStarted{}, fmt.Errorf("%w: event %s is still %s; re-run it once it has ended", ErrConflict, ref, st.Status)
	}
	if st.SHA == "" {
		return EventStarted{}, invalid("event %s never resolved a commit (%s); start a new event instead", ref, st.Reason)
	}
	// COLLAPSED jobs are not re-run: a newer commit's build replaced them,
	// and running the old commit after it would roll back (a deploy).
	var jobs []string
	for _, j := range st.Jobs {
		switch j.Status {
		case workflows.StatusFailure, workflows.StatusAborted:
			jobs = append(jobs, j.Job)
		}
	}
	if len(jobs) == 0 {
		if len(st.Jobs) == 0 {
			return EventStarted{}, invalid("event %s ran no job (%s); start a new event instead", ref, st.Reason)
		}
		return EventStarted{}, invalid("event %s has no failed or aborted job to re-run (collapsed jobs are not re-run: a newer commit replaced them)", ref)
	}
	return s.startFrom(ctx, id, ref, st, jobs, req.Force, true)
}

// startFrom starts an event at jobs of event ref (state st), inheriting its
// successes.
func (s *Service) startFrom(ctx context.Context, id queue.Identity, ref workflows.EventRef, st workflows.EventState, jobs []string, force, rerun bool) (EventStarted, error) {
	var succeeded []string
	for _, j := range inherited(st) {
		if !slices.Contains(jobs, j) {
			succeeded = append(succeeded, j)
		}
	}
	t := st.Trigger
	t.SHA, t.DeliveryID, t.Sender = st.SHA, "", id.User
	ident := id
	r := workflows.StartEventRequest{
		Trigger: t, StartFrom: jobs[0], Force: force, Parent: ref.Number, ParentSucceeded: succeeded,
		Creator: id.User, Identity: &ident, Rerun: rerun,
	}
	if len(jobs) > 1 || rerun {
		r.StartJobs = jobs
	}
	return s.startEvent(ctx, ref.Pipeline, r)
}

// ---- builds -------------------------------------------------------------

// BuildFilter narrows ListBuilds.
type BuildFilter struct {
	Pipeline, Job, Event, Queue string
	Status                      workflows.Status
	// Cause keeps the ended builds that ended for that cause.
	Cause workflows.Cause
	// PR keeps the builds of one pull request.
	PR    int
	Limit int
}

// causeNames lists the causes for error messages.
func causeNames() string {
	names := make([]string, 0, len(workflows.Causes()))
	for _, c := range workflows.Causes() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "") + "'" }

// ListBuilds lists builds, newest first, from visibility alone.
func (s *Service) ListBuilds(ctx context.Context, f BuildFilter) ([]Build, error) {
	q := []string{"WorkflowType = 'BuildWorkflow'"}
	add := func(key, v string) {
		if v != "" {
			q = append(q, key+" = "+quote(v))
		}
	}
	add(workflows.SAPipeline.GetName(), f.Pipeline)
	add(workflows.SAJob.GetName(), f.Job)
	add(workflows.SAEvent.GetName(), f.Event)
	add(workflows.SAQueue.GetName(), f.Queue)
	if f.PR < 0 {
		return nil, invalid("pr %d: must be positive", f.PR)
	}
	if f.PR > 0 {
		q = append(q, fmt.Sprintf("%s = %d", workflows.SAPR.GetName(), f.PR))
	}
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, invalid("status %q: want one of CREATED, QUEUED, BLOCKED, FROZEN, RUNNING, SUCCESS, FAILURE, ABORTED, COLLAPSED", f.Status)
		}
		add(workflows.SAStatus.GetName(), string(f.Status))
	}
	if f.Cause != "" {
		if !f.Cause.Valid() {
			return nil, invalid("cause %q: want one of %s", f.Cause, causeNames())
		}
		add(workflows.SACause.GetName(), string(f.Cause))
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	execs, err := s.list(ctx, strings.Join(q, " AND "), f.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]Build, 0, len(execs))
	for _, ex := range execs {
		b, ok := buildFromVisibility(ex)
		if ok {
			out = append(out, b)
		}
	}
	return out, nil
}

func buildFromVisibility(ex *workflowpb.WorkflowExecutionInfo) (Build, bool) {
	ref, err := workflows.ParseBuildRef(ex.GetExecution().GetWorkflowId())
	if err != nil {
		return Build{}, false
	}
	sa := ex.GetSearchAttributes()
	b := Build{
		ID: ref.String(), Pipeline: ref.Pipeline, Job: ref.Job, Event: ref.EventRef().String(), PR: ref.PR,
		Status:     workflows.Status(saString(sa, workflows.SAStatus.GetName())),
		Queue:      saString(sa, workflows.SAQueue.GetName()),
		Executor:   saString(sa, workflows.SAExecutor.GetName()),
		SHA:        saString(sa, workflows.SASHA.GetName()),
		Cause:      workflows.Cause(saString(sa, workflows.SACause.GetName())),
		CreateTime: ex.GetStartTime().AsTime(),
	}
	if p, err := strconv.Atoi(saString(sa, workflows.SAPriority.GetName())); err == nil {
		b.Priority = p
	}
	if f := ex.GetMemo().GetFields()[workflows.MemoBuild]; f != nil {
		var sum workflows.BuildSummary
		if converter.GetDefaultDataConverter().FromPayload(f, &sum) == nil {
			b.Reason, b.Attempts, b.QueuedTime, b.StartTime, b.EndTime = sum.Reason, sum.Attempts, sum.QueuedTime, sum.StartTime, sum.EndTime
			b.WaitUntil, b.CollapsedInto, b.Fork = sum.WaitUntil, sum.CollapsedInto, sum.Fork
			if sum.Executor != "" {
				b.Executor = sum.Executor
			}
		}
	}
	if b.EndTime.IsZero() {
		b.EndTime = closeTime(ex)
	}
	return b, true
}

// GetBuild returns a build's full record, with a live wait reason when it
// waits for a slot.
func (s *Service) GetBuild(ctx context.Context, ref workflows.BuildRef) (Build, error) {
	desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
	if err != nil {
		return Build{}, translate(err, "build "+ref.String())
	}
	var st workflows.BuildState
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := s.Client.QueryWorkflow(ctx, ref.WorkflowID(), "", workflows.QueryBuild)
		if err != nil {
			return Build{}, translate(err, "build "+ref.String())
		}
		if err := v.Get(&st); err != nil {
			return Build{}, fmt.Errorf("decode build %s: %w", ref, err)
		}
	} else if err := s.Client.GetWorkflow(ctx, ref.WorkflowID(), "").Get(ctx, &st); err != nil {
		b, _ := buildFromVisibility(desc.GetWorkflowExecutionInfo())
		b.Status, b.Reason = workflows.StatusAborted, "build workflow ended without a result: "+err.Error()
		return b, nil
	}
	b := Build{
		ID: st.ID, Pipeline: ref.Pipeline, Job: ref.Job, Event: ref.EventRef().String(), PR: ref.PR, Status: st.Status,
		Reason: st.Reason, Queue: st.Queue, Priority: st.Priority, Executor: st.Executor, SHA: st.SHA,
		Attempts: len(st.Attempts), CreateTime: st.CreateTime, QueuedTime: st.QueuedTime, StartTime: st.StartTime,
		EndTime: st.EndTime, WaitUntil: st.WaitUntil, CollapsedInto: st.CollapsedInto, AttemptList: st.Attempts, Steps: st.Steps,
		Fork: st.Fork, Secrets: st.Secrets, SecretsListed: st.SecretsListed, Cause: st.Cause, CauseInfo: st.CauseInfo,
	}
	// The attempts' credential hashes stay in the API (attempt credentials).
	for i := range b.AttemptList {
		if h := b.AttemptList[i].CredentialHash; h != "" {
			if b.credentials == nil {
				b.credentials = make([]string, len(b.AttemptList))
			}
			b.credentials[i] = h
			b.AttemptList[i].CredentialHash = ""
		}
	}
	if n := len(st.Attempts); n > 0 {
		b.LogKey = activities.LogKey(st.ID, st.Attempts[n-1].Number)
	}
	if err := s.liveReasons(ctx, []*Build{&b}); err != nil {
		s.Logger.DebugContext(ctx, "live_reason_failed", "build", b.ID, "error", err)
	}
	return b, nil
}

// CancelBuild cancels a build: a waiting one ends at once, a running one's
// processes are killed.
func (s *Service) CancelBuild(ctx context.Context, id queue.Identity, ref workflows.BuildRef) error {
	// Who cancels goes first, so the build's end cause can name them; a
	// build that already ended ignores it (its cancel then fails below
	// with the build's own answer). With authentication off nobody is
	// named.
	if id.User != "" && id.User != queue.SystemUser {
		err := s.Client.SignalWorkflow(ctx, ref.WorkflowID(), "", workflows.SignalCancelledBy, workflows.CancelledBy{User: id.User})
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			s.Logger.WarnContext(ctx, "cancel_by_signal_failed", "build", ref.String(), "error", err)
		}
	}
	return translate(s.Client.CancelWorkflow(ctx, ref.WorkflowID(), ""), "build "+ref.String())
}

// liveReasons rewrites the reason of builds waiting for a slot with the
// queue's current picture: slots busy, builds ahead, or no live member.
func (s *Service) liveReasons(ctx context.Context, builds []*Build) error {
	var waiting []*Build
	for _, b := range builds {
		if b.Status == workflows.StatusQueued && !b.QueuedTime.IsZero() {
			waiting = append(waiting, b)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	queues, members, err := s.registry(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	for _, b := range waiting {
		q, ok := findQueue(queues, b.Queue)
		if !ok {
			b.Reason = fmt.Sprintf("waiting on queue %s, which no longer exists: recreate it or cancel the build", b.Queue)
			continue
		}
		plan := queue.Evaluate(q, members, now, s.Liveness)
		if b.Fork {
			// A pull request from a fork waits for a container executor
			// (its queue's untrusted task queue).
			plan = queue.EvaluateUntrusted(q, members, now, s.Liveness)
		}
		ahead, err := s.count(ctx, fmt.Sprintf(
			"WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s AND %s = 'QUEUED' AND (%s < %d OR (%s = %d AND %s < '%s'))",
			workflows.SAQueue.GetName(), quote(b.Queue), workflows.SAStatus.GetName(),
			workflows.SAPriority.GetName(), b.Priority, workflows.SAPriority.GetName(), b.Priority,
			workflows.SADispatchedAt.GetName(), b.QueuedTime.UTC().Format(time.RFC3339Nano)))
		if err != nil {
			return err
		}
		b.Reason = queue.WaitReason(q, plan, plan.Busy, ahead)
	}
	return nil
}

func findQueue(qs []queue.Queue, name string) (queue.Queue, bool) {
	for _, q := range qs {
		if q.Name == name {
			return q, true
		}
	}
	return queue.Queue{}, false
}

// ---- visibility helpers -------------------------------------------------

func (s *Service) list(ctx context.Context, query string, limit int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for len(out) < limit {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Namespace, Query: query, NextPageToken: token, PageSize: int32(min(limit-len(out), 1000)), //nolint:gosec // G115: at most 1000
		})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *Service) count(ctx context.Context, query string) (int, error) {
	resp, err := s.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: s.Namespace, Query: query})
	if err != nil {
		return 0, fmt.Errorf("count workflows (%s): %w", query, err)
	}
	return int(resp.GetCount()), nil
}

func saString(sa *commonpb.SearchAttributes, key string) string {
	p := sa.GetIndexedFields()[key]
	if p == nil {
		return ""
	}
	var v any
	if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case []any:
		if len(x) > 0 {
			if s, ok := x[0].(string); ok {
				return s
			}
		}
	}
	return fmt.Sprint(v)
}

func closeTime(ex *workflowpb.WorkflowExecutionInfo) time.Time {
	if ex.GetCloseTime() == nil {
		return time.Time{}
	}
	return ex.GetCloseTime().AsTime()
}

// reAdmin is a user name or role:<name>.
var reAdmin = regexp.MustCompile(`^(role:)?[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$`)

// validAdmins checks a pipeline's admin list.
func validAdmins(admins []string) error {
	if len(admins) > 100 {
		return invalid("admins: at most 100 entries, got %d", len(admins))
	}
	for i, a := range admins {
		if !reAdmin.MatchString(a) {
			return invalid("admins[%d] %q: want a user name or role:<name>", i, a)
		}
	}
	return nil
}

// checkLocalRepo refuses a repository on the API's own machine (a local git
// repository, a plain directory or a file:// URL) outside the allowed
// prefixes: otherwise any token could snapshot any readable directory of
// the host (/etc) into a pipeline.
func (s *Service) checkLocalRepo(repo string) error {
	path := ""
	switch {
	case strings.HasPrefix(repo, "file://"):
		path = strings.TrimPrefix(repo, "file://")
	case scm.Kind(repo) != scm.KindGitRemote:
		path = repo
	default:
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return invalid("repo %s: %v", repo, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for _, p := range s.LocalRepos {
		if p == "/" || abs == p || strings.HasPrefix(abs, strings.TrimSuffix(p, "/")+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: repo %s is a path on the API's machine, and SLUICE_LOCAL_REPOS does not allow it (allowed: %s); use a git URL, or have the operator allow a prefix",
		queue.ErrForbidden, repo, orNone(s.LocalRepos))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
