package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/cache"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/workflows"
)

// Options are what both roles need.
type Options struct {
	Client client.Client
	Config *config.Config
	Logger *slog.Logger
	// Logs returns the sink of one build attempt's step logs; a sink that
	// ships them to the API presents the attempt's credential.
	Logs func(key, credential string) runner.LogSink
	// Secrets gives executors the secrets of the builds they run.
	Secrets activities.SecretSource
	// Caches keeps build caches in the blob store (nil: builds with
	// `cache:` log "cache unavailable").
	Caches *cache.Store
	// Metrics, when set, records the executor's builds and slots; it is
	// served on SLUICE_METRICS_ADDR when that is set.
	Metrics *Metrics
	// Name is the member name ("controller@host", or the executor's name).
	Name string
	// PipelineTokens gives a controller the pipelines' own SCM tokens
	// (pipeline secrets); nil: global credentials only.
	PipelineTokens activities.PipelineTokens
	// Reaper is the command that starts this binary's reaper (e.g.
	// {"/usr/bin/sluice", "reap"}); nil starts none (tests of this
	// package), and only a restart cleans up after a lost attempt.
	Reaper []string
	// BuildData gives executors the metadata builds start with and keeps
	// what they end with (nil: none).
	BuildData activities.BuildData
	// SelfBinary is the sluice binary builds run as their meta and sluice
	// commands ("": the commands are not provided).
	SelfBinary string
	// Dev is `sluice dev` on one machine: an executor running as root with
	// no SLUICE_EXECUTOR_RUN_AS warns instead of refusing to start.
	Dev bool
}

func (o Options) activities() *activities.Activities {
	t := Temporal{Client: o.Client, Namespace: o.Config.TemporalNamespace, ScheduleCatchup: o.Config.ScheduleCatchup}
	return &activities.Activities{
		Logger:           o.Logger,
		Repos:            activities.CachedRepos(filepath.Join(o.Config.DataDir, "git")),
		Queues:           t,
		Remote:           t,
		Schedules:        t,
		Pipelines:        t,
		Claimer:          t,
		Logs:             o.Logs,
		Secrets:          o.Secrets,
		Caches:           o.Caches,
		BuildData:        o.BuildData,
		APIURL:           cmp.Or(o.Config.BuildAPIURL, o.Config.APIURL),
		SelfBinary:       o.SelfBinary,
		ArtifactMax:      int64(o.Config.ArtifactMax),
		WorkDir:          o.Config.Workspaces(),
		KeepWorkspaces:   o.Config.KeepWorkspaces,
		ContainerNetwork: o.Config.ContainerNetwork,
		Reporter:         o.Client,
		// One outbox per member: a controller and an executor may share a
		// data directory (sluice dev).
		Outbox: activities.OutboxDir(o.Config.DataDir, o.Name),
	}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

// ControllerName is a controller's member name on this host.
func ControllerName() string { return "controller@" + hostname() }

// RegisterController registers the workflows and orchestration activities on w.
func RegisterController(w worker.Registry, acts *activities.Activities) {
	workflows.Register(w)
	w.RegisterActivity(acts.ResolveEvent)
	w.RegisterActivity(acts.TriggerRemote)
	w.RegisterActivity(acts.SyncSchedules)
	w.RegisterActivity(acts.PostCommitStatus)
	w.RegisterActivity(acts.SendNotification)
	w.RegisterActivity(acts.UpdatePipeline)
}

// RunController registers search attributes, makes sure the registry runs,
// then runs the controller worker and the controller's queue membership until
// ctx ends.
func RunController(ctx context.Context, o Options) error {
	if o.Name == "" {
		o.Name = o.Config.ExecutorName // a name given to this controller (several on one host)
	}
	if o.Name == "" {
		o.Name = ControllerName()
	}
	if err := RegisterSearchAttributes(ctx, o.Client, o.Config.TemporalNamespace); err != nil {
		return err
	}
	acts := o.activities()
	// A controller runs the builds of run-on=controller rules on its host:
	// they are recorded and reaped like an executor's.
	acts.GroupRecords = o.guardLife(ctx, o.Name, runner.RuntimeHost, nil)
	var err error
	// A controller's builds (run-on=controller rules, the default queue's
	// fallback) run on the host.
	if acts.RunAs, err = hostIsolation(ctx, o, "controller"); err != nil {
		return fmt.Errorf("controller %s: %w", o.Name, err)
	}
	statuses, err := StatusSettings(o.Config, o.PipelineTokens)
	if err != nil {
		return fmt.Errorf("commit statuses: %w", err)
	}
	acts.Statuses = statuses
	acts.Notify = &activities.NotifySettings{SMTPURL: o.Config.SMTPURL, SlackAPIURL: o.Config.SlackAPIURL, PublicURL: statuses.PublicURL}
	w := worker.New(o.Client, workflows.ControllerTaskQueue, worker.Options{
		Identity:                           o.Name,
		WorkerStopTimeout:                  5 * time.Second,
		DeadlockDetectionTimeout:           5 * time.Second,
		WorkflowPanicPolicy:                worker.BlockWorkflow,
		MaxConcurrentActivityExecutionSize: 50,
	})
	RegisterController(w, acts)
	agent := NewAgent(AgentOptions{
		Client:     o.Client,
		Member:     queue.Member{Name: o.Name, Role: queue.RoleController, Host: hostname(), Queues: []string{queue.AllQueues}, Runtime: queue.RuntimeHost},
		Interval:   o.Config.MemberHeartbeat,
		Activities: acts,
		Logger:     o.Logger,
	})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start controller worker: %w", err)
	}
	defer w.Stop()
	if err := EnsureRegistry(ctx, o.Client, o.Config.LivenessTimeout); err != nil {
		return err
	}
	o.Logger.InfoContext(ctx, "controller_started", "task_queue", workflows.ControllerTaskQueue, "member", o.Name)
	if o.Config.MetricsAddr == "" {
		return agent.Run(ctx)
	}
	// A controller's builds (run-on=controller rules) count like an
	// executor's; the endpoint also serves health checks.
	m := o.Metrics
	if m == nil {
		m = NewMetrics()
	}
	acts.Metrics = m
	m.watch(agent)
	o.Logger.InfoContext(ctx, "metrics_listening", "member", o.Name, "address", o.Config.MetricsAddr)
	return RunAll(ctx, agent.Run, func(ctx context.Context) error { return m.Serve(ctx, o.Config.MetricsAddr) })
}

// RunExecutor registers the executor and runs its queue workers until ctx ends.
func RunExecutor(ctx context.Context, o Options) error {
	if o.Name == "" {
		o.Name = o.Config.Executor()
	}
	rt, why, err := runner.ChooseRuntime(ctx, o.Config.ExecutorRuntime)
	if err != nil {
		return fmt.Errorf("executor %s: %w", o.Name, err)
	}
	o.Logger.InfoContext(ctx, "executor_runtime", "member", o.Name, "runtime", rt, "why", why)
	// Builds with no image run on the host even with a container runtime.
	runAs, err := hostIsolation(ctx, o, "executor")
	if err != nil && rt == runner.RuntimeHost {
		return err
	}
	if err != nil {
		o.Logger.WarnContext(ctx, "host_builds_not_isolated", "member", o.Name, "error", err,
			"detail", "a build whose job names no image runs on the host")
	}
	if rt != runner.RuntimeHost {
		// This process owns no attempt yet: every container labelled as
		// this executor's (in this namespace) is left from an earlier life.
		removed, err := runner.RemoveLabelled(ctx, rt, map[string]string{
			activities.LabelNamespace: o.Config.TemporalNamespace, activities.LabelExecutor: o.Name,
		})
		if len(removed) > 0 {
			o.Logger.InfoContext(ctx, "orphan_containers_removed", "member", o.Name, "containers", removed)
		}
		if err != nil {
			o.Logger.WarnContext(ctx, "orphan_container_cleanup_failed", "member", o.Name, "error", err)
		}
	}
	// Likewise every recorded process group of a host build is left from an
	// earlier life of this executor (SIGKILL, OOM, crash): kill it, and
	// start this life's reaper.
	records := o.guardLife(ctx, o.Name, rt, map[string]string{
		activities.LabelNamespace: o.Config.TemporalNamespace, activities.LabelExecutor: o.Name,
	})
	labels := make(map[string]string, len(o.Config.ExecutorLabels)+1)
	for k, v := range o.Config.ExecutorLabels {
		labels[k] = v
	}
	labels["runtime"] = rt
	acts := o.activities()
	acts.Runtime, acts.RuntimeWhy, acts.GroupRecords, acts.RunAs = rt, why, records, runAs
	if o.Metrics == nil && o.Config.MetricsAddr != "" {
		o.Metrics = NewMetrics()
	}
	if o.Metrics != nil {
		acts.Metrics = o.Metrics
	}
	// The registry sends pull requests from forks only to members whose
	// builds run in containers.
	runtime := queue.RuntimeContainer
	if rt == runner.RuntimeHost {
		runtime = queue.RuntimeHost
	}
	agent := NewAgent(AgentOptions{
		Client: o.Client,
		Member: queue.Member{
			Name: o.Name, Role: queue.RoleExecutor, Host: hostname(),
			Labels: labels, Queues: o.Config.ExecutorQueues, Runtime: runtime,
		},
		Interval:   o.Config.MemberHeartbeat,
		Activities: acts,
		Logger:     o.Logger,
	})
	o.Logger.InfoContext(ctx, "executor_started", "member", o.Name, "queues", o.Config.ExecutorQueues, "labels", labels, "runtime", rt)
	if o.Metrics == nil {
		return agent.Run(ctx)
	}
	o.Metrics.watch(agent)
	if o.Config.MetricsAddr == "" {
		return agent.Run(ctx)
	}
	o.Logger.InfoContext(ctx, "metrics_listening", "member", o.Name, "address", o.Config.MetricsAddr)
	return RunAll(ctx, agent.Run, func(ctx context.Context) error { return o.Metrics.Serve(ctx, o.Config.MetricsAddr) })
}

// RunAll runs fns together until ctx ends or one fails.
func RunAll(ctx context.Context, fns ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, fn := range fns {
		g.Go(func() error { return fn(gctx) })
	}
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
