package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

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
	var repo scm.Repo
	var sha string
	if req.Private {
		// Read with the pipeline's own credentials, which can be set only
		// once it exists: its first event reads it.
		if scm.Kind(req.Repo) != scm.KindGitRemote || (!scm.IsHTTPURL(req.Repo) && !scm.IsSSHURL(req.Repo)) {
			return Pipeline{}, invalid("repo %s: a private repository is an http(s) or ssh git URL", scm.RedactURL(req.Repo))
		}
	} else {
		// The pipeline has no secret yet: the GitHub App's installation
		// token, when the App reads this repository, else the host's
		// credentials.
		auth, err := activities.RepoAuthOrApp(ctx, nil, s.AppTokens, req.Name, req.Repo)
		if err != nil {
			return Pipeline{}, err
		}
		repo, err = s.openWith(ctx, req.Repo, auth)
		if err != nil {
			return Pipeline{}, invalid("repo %s: %v%s", scm.RedactURL(req.Repo), err, privateHint(err))
		}
		ref := req.Branch
		if scm.Kind(req.Repo) == scm.KindDir {
			ref = ""
		}
		sha, err = repo.Resolve(ctx, ref)
		if err != nil {
			return Pipeline{}, invalid("repo %s: cannot resolve branch %s: %v%s", scm.RedactURL(req.Repo), req.Branch, err, privateHint(err))
		}
	}
	next, err := s.nextEventNumber(ctx, req.Name)
	if err != nil {
		return Pipeline{}, err
	}
	owner := id
	cfg := workflows.PipelineConfig{
		Name: req.Name, Repo: req.Repo, Branch: req.Branch, Queue: req.Queue, Statuses: req.Statuses, Public: req.Public,
		Dispatch: s.Dispatch, Creator: id.User, CreatedAt: s.now().UTC(), Owner: &owner, Admins: req.Admins,
		BuildsInEvents: s.BuildsInEvents,
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
	var spec *pipeline.Spec
	// Subscriptions and schedules exist before the first commit event.
	if repo == nil {
		return s.GetPipeline(ctx, req.Name)
	}
	if data, err := repo.ReadFile(ctx, sha, activities.SpecFile); err == nil {
		if spec, err = pipeline.ParseWithOptions(data, pipeline.Options{Pipeline: req.Name}); err == nil {
			// The creator sets the schedules up: the periodic events act for
			// them, and a job on a queue they may not use is not scheduled.
			defined, _, err := s.registry(ctx)
			if err != nil {
				s.Logger.WarnContext(ctx, "spec_sync_queues_unread", "pipeline", req.Name, "error", err)
			}
			periodic, refused := workflows.SchedulesFor(spec, id, defined, req.Queue)
			setBy := id
			sync := workflows.SpecSync{
				SHA: sha, Subscriptions: spec.RemoteTriggers(), Periodic: periodic, SetBy: &setBy, Refused: refused,
				Warnings: spec.Warnings, Parameters: spec.ParameterList(),
			}
			if err := s.Client.SignalWorkflow(ctx, workflows.PipelineWorkflowID(req.Name), "", workflows.SignalSpecSynced, sync); err != nil {
				s.Logger.WarnContext(ctx, "spec_sync_failed", "pipeline", req.Name, "error", err)
			}
		}
	}
	p, err := s.GetPipeline(ctx, req.Name)
	if err == nil {
		withSpec(&p, spec)
	}
	return p, err
}

// withSpec adds what the spec says to a pipeline's answer: its warnings
// and parameters (nothing for a spec that could not be read).
func withSpec(p *Pipeline, spec *pipeline.Spec) {
	if spec == nil {
		return
	}
	p.Warnings, p.Parameters = spec.Warnings, spec.ParameterList()
}

// specAt reads and parses the spec of the repository at location at ref
// (a branch, tag or commit; "" for a directory's content).
func (s *Service) specAt(ctx context.Context, location, name, ref string) (*pipeline.Spec, error) {
	if s.Repos == nil {
		return nil, errors.New("no repository access")
	}
	// The pipeline's own credentials (or the GitHub App's), as its events
	// read it: a private repository's spec reads at update too.
	repo, err := s.openPipelineRepo(ctx, name, location)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", scm.RedactURL(location), err)
	}
	sha, err := repo.Resolve(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", ref, err)
	}
	data, err := repo.ReadFile(ctx, sha, activities.SpecFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", activities.SpecFile, err)
	}
	return pipeline.ParseWithOptions(data, pipeline.Options{Pipeline: name})
}

// defaultSpec is the spec at the head of the pipeline's default branch
// (nil when it cannot be read or is invalid: the events say why).
func (s *Service) defaultSpec(ctx context.Context, p Pipeline, location string) *pipeline.Spec {
	ref := p.Branch
	if p.RepoKind == scm.KindDir {
		ref = ""
	}
	spec, err := s.specAt(ctx, location, p.Name, ref)
	if err != nil {
		s.Logger.DebugContext(ctx, "spec_unread", "pipeline", p.Name, "error", err)
		return nil
	}
	return spec
}

// nextEventNumber continues numbering after an earlier pipeline of the same
// name, so event and build IDs stay unique. The deleted pipeline's last run
// records its next number in its memo (read from the history service, so
// it is exact); events found in visibility (every page) cover runs that
// ended before the memo existed.
func (s *Service) nextEventNumber(ctx context.Context, name string) (int, error) {
	next := 1
	if s.Numbers != nil {
		kept, err := s.Numbers.NextEvent(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("look up an earlier pipeline %s: %w", name, err)
		}
		next = max(next, kept)
	}
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
		Statuses: info.Config.Statuses, Admins: info.Config.Admins, Public: info.Config.Public,
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
// statuses went, or why it posted none, and what the spec of the last
// spec sync said (kept by the pipeline: the repository is not read).
func (s *Service) ShowPipeline(ctx context.Context, name string) (Pipeline, error) {
	p, info, err := s.queryPipeline(ctx, name)
	if err != nil {
		return p, err
	}
	p.SpecSyncedAt = info.SyncedAt
	p.Warnings, p.Parameters = info.Warnings, info.Parameters
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
	cfg := workflows.PipelineConfig{
		Name: name, Repo: curRepo, Branch: cur.Branch, Queue: cur.Queue, Statuses: cur.Statuses, Owner: &owner, Public: cur.Public,
		BuildsInEvents: s.BuildsInEvents,
	}
	if req.Public != nil {
		cfg.Public = *req.Public
	}
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
		if _, err := s.openPipelineRepo(ctx, name, cfg.Repo); err != nil {
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
	p, location, err := s.getPipeline(ctx, name)
	if err == nil {
		withSpec(&p, s.defaultSpec(ctx, p, location))
	}
	return p, err
}

// DeletePipeline deletes a pipeline: waiting builds end ABORTED, running
// builds finish, schedules are removed.
func (s *Service) DeletePipeline(ctx context.Context, name string) error {
	if err := workflows.ValidatePipelineName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var aborted int
	defer s.forgetPipelines()
	if err := updateError(s.update(ctx, workflows.PipelineWorkflowID(name), workflows.UpdateDelete, "", &aborted), "pipeline "+name); err != nil {
		return err
	}
	s.keepNextEvent(ctx, name)
	return nil
}

// keepNextEvent records a deleted pipeline's next event number in sluice's
// store (N19). The deleted pipeline takes no new event, so its count is
// final; its memo and visibility keep it too, until the retention.
func (s *Service) keepNextEvent(ctx context.Context, name string) {
	if s.Numbers == nil {
		return
	}
	v, err := s.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID(name), "", workflows.QueryPipeline)
	var info workflows.PipelineInfo
	if err == nil {
		err = v.Get(&info)
	}
	if err == nil {
		err = s.Numbers.KeepNextEvent(ctx, name, info.Events+1)
	}
	if err != nil {
		s.Logger.WarnContext(ctx, "next_event_not_kept", "pipeline", name, "error", err,
			"effect", "a pipeline created again under this name after Temporal's retention may repeat event IDs")
	}
}

// privateHint tells, when a repository wanted credentials, how a pipeline
// gets its own.
func privateHint(err error) string {
	if !scm.IsAuthError(err) {
		return ""
	}
	return " (a private repository? create the pipeline with --private, then give it credentials: sluice secret set NAME SLUICE_GITHUB_TOKEN, or SLUICE_DEPLOY_KEY for an ssh URL)"
}

// openPipelineRepo opens a pipeline's repository with its own credentials
// when it has some.
func (s *Service) openPipelineRepo(ctx context.Context, pipeline, location string) (scm.Repo, error) {
	auth, err := activities.RepoAuthOrApp(ctx, s.PipelineTokens, s.AppTokens, pipeline, location)
	if err != nil {
		return nil, err
	}
	return s.openWith(ctx, location, auth)
}

// openWith opens location with auth (nil: the host's credentials).
func (s *Service) openWith(ctx context.Context, location string, auth *scm.Auth) (scm.Repo, error) {
	if ao, ok := s.Repos.(activities.AuthRepoOpener); ok && auth != nil {
		return ao.OpenAuth(ctx, location, auth)
	}
	return s.Repos.Open(ctx, location)
}
