package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/devstack"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// benchQueue is the queue every figure's jobs run on.
const benchQueue = "bench"

// stackOptions shape one figure's stack.
type stackOptions struct {
	// controllerProcess runs the controller as `sluice worker --role
	// controller` (its memory is then its own) instead of in this process.
	controllerProcess bool
}

// stack is sluice as `sluice dev` runs it: the embedded Temporal server on
// a SQLite file (WAL), a controller, the HTTP API with its log store, and
// executor processes started on demand.
type stack struct {
	b    *bench
	name string
	dir  string

	temporal *devstack.Stack
	Client   client.Client
	cfg      *config.Config
	API      *api.Client
	apiURL   string
	http     *http.Server

	stopController func()
	// pendingAnswers counts the events the API answered pending
	// (admitted, not numbered within its admit wait).
	pendingAnswers atomic.Int64
	asks           admissionAsker
	controller     *proc

	mu    sync.Mutex
	procs []*proc
}

// newStackWithExecutors starts a stack with the bench queue and two executor
// processes, ready for events: most figures need no more.
func (b *bench) newStackWithExecutors(ctx context.Context, name string) (*stack, error) {
	s, err := b.newStack(ctx, name, stackOptions{})
	if err != nil {
		return nil, err
	}
	if err := s.createQueue(ctx, b.plan.executorSlots); err != nil {
		s.close(ctx)
		return nil, err
	}
	if _, err := s.startExecutors(ctx, 2, true); err != nil {
		s.close(ctx)
		return nil, err
	}
	return s, nil
}

// newStack starts a fresh stack in its own directory under the run's root.
func (b *bench) newStack(ctx context.Context, name string, opts stackOptions) (*stack, error) {
	if b.pg != nil {
		name += "-pg"
	}
	s := &stack{b: b, name: name, dir: filepath.Join(b.root, name)}
	ok := false
	defer func() {
		if !ok {
			s.close(ctx)
		}
	}()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("stack dir: %w", err)
	}
	var err error
	dopts := devstack.Options{
		DBPath: filepath.Join(s.dir, "temporal.db"), FrontendPort: 0, Namespace: "default",
		Logger: b.log.With("component", "temporal"), DynamicConfig: b.dynamicConfig,
		SearchAttributes: workflows.SearchAttributes(),
	}
	if b.pg != nil {
		// A database of its own per stack on the run's PostgreSQL server.
		dopts.DBPath, dopts.Postgres = "", pgDatabase(b.pg.URL, "bench_"+strings.ReplaceAll(name, "-", "_"))
	}
	s.temporal, err = devstack.Start(ctx, dopts)
	if err != nil {
		return nil, fmt.Errorf("start Temporal: %w", err)
	}
	env := map[string]string{
		"TEMPORAL_ADDRESS":   s.temporal.FrontendAddress(),
		"TEMPORAL_NAMESPACE": "default",
		"SLUICE_DATA_DIR":    filepath.Join(s.dir, "controller"),
		// The figures measure dispatch: steps run on the host, not in images.
		"SLUICE_EXECUTOR_RUNTIME": "host",
	}
	s.cfg, err = config.Load(func(k string) string { return env[k] })
	if err != nil {
		return nil, fmt.Errorf("controller config: %w", err)
	}
	s.Client, err = workers.Dial(ctx, s.cfg, s.temporal.FrontendAddress(), b.log)
	if err != nil {
		return nil, err
	}
	if err := workers.RegisterSearchAttributes(ctx, s.Client, "default"); err != nil {
		return nil, err
	}
	if err := s.startAPI(ctx); err != nil {
		return nil, err
	}
	if opts.controllerProcess {
		s.controller, err = s.startProcess(ctx, "controller", "controller", nil)
		if err != nil {
			return nil, err
		}
	} else {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		store, err := logstore.Open(filepath.Join(s.dir, "controller", "logs"))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("controller log store: %w", err)
		}
		go func() {
			done <- workers.RunController(cctx, workers.Options{
				Client: s.Client, Config: s.cfg, Logger: b.log, Name: "controller",
				Logs: func(key, _ string) runner.LogSink { return store.Sink(key) },
			})
		}()
		s.stopController = func() {
			cancel()
			if err := <-done; err != nil {
				b.progress("%s: controller: %v", name, err)
			}
		}
	}
	if err := waitFor(ctx, "the registry to answer", 60*time.Second, func() (bool, error) {
		_, err := s.API.ListQueues(ctx)
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *stack) startAPI(ctx context.Context) error {
	store, err := logstore.Open(filepath.Join(s.dir, "logs"))
	if err != nil {
		return fmt.Errorf("API log store: %w", err)
	}
	svc := &api.Service{
		Client: s.Client, Namespace: "default", Liveness: s.cfg.LivenessTimeout, AdmitWait: s.cfg.AdmitWait,
		Dispatch: workflows.Dispatch{HeartbeatTimeout: s.cfg.HeartbeatTimeout, MaxAttempts: s.cfg.MaxAttempts},
		Repos:    activities.CachedRepos(filepath.Join(s.dir, "api-git")), Logger: s.b.log,
		LocalRepos:     []string{"/"}, // the benchmark's repositories are temporary directories
		BuildsInEvents: s.b.buildsInEvents,
	}
	// Executors read and save each build's metadata through the API, which
	// keeps it in sluice's store and records what people and webhooks do in
	// the audit trail, as `sluice server` does (an event start's answer
	// waits for its record).
	secrets, _, err := api.OpenSecretStore(filepath.Join(s.dir, "api-store"), "bench key") //nolint:contextcheck // it bounds its own calls (storeContext)
	if err != nil {
		return fmt.Errorf("API store: %w", err)
	}
	svc.HasSecrets = secrets.HasAny
	svc.PipelineTokens = secrets.PipelineTokens()
	svc.Numbers = secrets.EventNumbers()
	svc.Meta = secrets.MetaStore()
	svc.Audit = secrets.AuditTrail()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("API listener: %w", err)
	}
	ready := func(ctx context.Context) error {
		_, err := s.Client.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}
	s.http = &http.Server{
		Handler:           api.NewHandler(api.Deps{Service: svc, Logs: store, Logger: s.b.log, Ready: ready, Secrets: secrets, Metrics: api.NewMetrics(svc)}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.http.Serve(ln) }()
	s.apiURL = "http://" + ln.Addr().String()
	s.API = &api.Client{BaseURL: s.apiURL, HTTP: newHTTPClient()}
	return nil
}

// newHTTPClient keeps enough idle connections for hundreds of concurrent
// requests, so a burst does not churn through ephemeral ports.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second,
	}}
}

// close stops everything the stack started, executors first. It runs
// even when ctx has ended.
func (s *stack) close(ctx context.Context) {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	if s.stopController != nil {
		s.stopController()
	}
	if s.http != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = s.http.Shutdown(sctx)
		cancel()
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.temporal != nil {
		if err := s.temporal.Stop(); err != nil {
			s.b.progress("%s: stop Temporal: %v", s.name, err)
		}
	}
}

// createQueue defines the bench queue: executors only, slots per executor.
func (s *stack) createQueue(ctx context.Context, slots int) error {
	_, err := s.API.CreateQueue(ctx, api.QueueRequest{
		Name: benchQueue, Description: "bench",
		Rules: []string{"run-on=executors,max-parallel=" + strconv.Itoa(slots)},
	})
	if err != nil {
		return fmt.Errorf("create queue %s: %w", benchQueue, err)
	}
	return nil
}

// startExecutors starts n executor processes serving the bench queue and,
// when wait is set, waits until the registry lists each as live.
func (s *stack) startExecutors(ctx context.Context, n int, wait bool) ([]string, error) {
	var names []string
	for i := range n {
		name := fmt.Sprintf("exec-%d", i+1)
		if _, err := s.startProcess(ctx, name, "executor", []string{"SLUICE_EXECUTOR_NAME=" + name, "SLUICE_EXECUTOR_QUEUES=" + benchQueue}); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	if !wait {
		return names, nil
	}
	return names, s.waitExecutorsLive(ctx, names)
}

func (s *stack) waitExecutorsLive(ctx context.Context, names []string) error {
	return waitFor(ctx, fmt.Sprintf("executors %v to be live", names), 60*time.Second, func() (bool, error) {
		es, err := s.API.ListExecutors(ctx)
		if err != nil {
			return false, nil
		}
		live := 0
		for _, e := range es {
			for _, n := range names {
				if e.Name == n && e.Live && e.State == "active" {
					live++
				}
			}
		}
		return live == len(names), nil
	})
}

// createPipeline creates a pipeline on a repository directory.
func (s *stack) createPipeline(ctx context.Context, name, repo string) error {
	if _, err := s.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: name, Repo: repo}); err != nil {
		return fmt.Errorf("create pipeline %s: %w", name, err)
	}
	return nil
}

// waitFor polls cond every 50 ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
