// Package testenv runs sluice for integration tests against real parts: one
// in-process Temporal server per test package (the same embedding as `sluice
// dev`, in memory), and per test an isolated installation in its own
// namespace with a controller, the HTTP API on a real listener, a log store,
// and executors as real `sluice worker --role executor` processes.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/devstack"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// namespaces is how many isolated installations one server offers.
const namespaces = 120

// Server is an in-process Temporal server shared by a test package.
type Server struct {
	stack *devstack.Stack
	mu    sync.Mutex
	next  int
}

// StartServer starts an in-memory Temporal server with pre-created namespaces.
func StartServer(ctx context.Context) (*Server, error) {
	extra := make([]string, namespaces)
	for i := range extra {
		extra[i] = "sluice-test-" + strconv.Itoa(i+1)
	}
	stack, err := devstack.Start(ctx, devstack.Options{
		Namespace: "default", ExtraNamespaces: extra, SearchAttributes: workflows.SearchAttributes(),
	})
	if err != nil {
		return nil, err
	}
	return &Server{stack: stack}, nil
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return s.stack.FrontendAddress() }

// Stop stops the server.
func (s *Server) Stop() error { return s.stack.Stop() }

// Options tune one installation. Zero values give fast test timings.
type Options struct {
	// LocalExecutor runs an in-process executor named "local" serving "default".
	LocalExecutor bool
	// NoController skips the controller (tests that start it as a process).
	NoController bool
	// MemberHeartbeat, Liveness and BuildHeartbeat default to 500ms, 3s, 5s.
	MemberHeartbeat, Liveness, BuildHeartbeat time.Duration
	// MaxAttempts defaults to 3.
	MaxAttempts int
	// Tokens, when set, is a tokens file (YAML) the API authenticates
	// requests against; Token is then what Env.API and executors send.
	Tokens, Token string
	// GitHubSecret, when set, makes the API verify GitHub webhook
	// signatures with it.
	GitHubSecret string
	// Env adds configuration variables (e.g. SLUICE_GITHUB_TOKEN).
	Env map[string]string
	// WrapAPIAppTokens, when set, wraps the API's GitHub App token minter
	// (a test counting what the API mints; SLUICE_GITHUB_APP_ID in Env).
	WrapAPIAppTokens func(activities.AppTokens) activities.AppTokens
	// OIDC, with Tokens, signs people in to the pages at this provider
	// (its RedirectURL is filled in) with the grants of Tokens' people:
	// section.
	OIDC *api.OIDCConfig
	// BuildWorkflows: pipelines created through the API start a build
	// workflow per build, as before their events ran their builds
	// (api.Service.BuildsInEvents, on by default).
	BuildWorkflows bool
}

// Env is one isolated sluice installation on the shared server.
type Env struct {
	t         testing.TB
	Server    *Server
	Namespace string
	Client    client.Client
	Config    *config.Config
	// API talks to the real HTTP API.
	API     *api.Client
	APIURL  string
	Service *api.Service
	Logs    *logstore.Store
	Dir     string
	Logger  *slog.Logger
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	token   string
}

// NewEnv starts an installation in a fresh namespace; it stops when the
// test ends.
func (s *Server) NewEnv(t testing.TB, opts Options) *Env {
	t.Helper()
	s.mu.Lock()
	s.next++
	n := s.next
	s.mu.Unlock()
	require.LessOrEqual(t, n, namespaces, "testenv: more installations than pre-created namespaces; raise testenv.namespaces")
	if opts.MemberHeartbeat == 0 {
		opts.MemberHeartbeat = 500 * time.Millisecond
	}
	if opts.Liveness == 0 {
		opts.Liveness = 3 * time.Second
	}
	if opts.BuildHeartbeat == 0 {
		opts.BuildHeartbeat = 5 * time.Second
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 3
	}
	dir := t.TempDir()
	e := &Env{t: t, Server: s, Namespace: "sluice-test-" + strconv.Itoa(n), Dir: dir}
	tw := &testWriter{t: t}
	e.Logger = slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env := map[string]string{
		"TEMPORAL_ADDRESS":               s.Address(),
		"TEMPORAL_NAMESPACE":             e.Namespace,
		"SLUICE_DATA_DIR":                filepath.Join(dir, "data"),
		"SLUICE_MEMBER_HEARTBEAT":        opts.MemberHeartbeat.String(),
		"SLUICE_EXECUTOR_LIVENESS":       opts.Liveness.String(),
		"SLUICE_BUILD_HEARTBEAT_TIMEOUT": opts.BuildHeartbeat.String(),
		"SLUICE_BUILD_MAX_ATTEMPTS":      strconv.Itoa(opts.MaxAttempts),
		"SLUICE_EXECUTOR_RUNTIME":        "host",
		// The tests look at what becomes of the events they start, by
		// number; on a loaded test machine the default wait (100 ms) would
		// answer some starts pending. How soon a start is answered has
		// tests of its own (TestAdmissionWhileThePipelineCannotAnswer, the
		// API's batch tests) and a bench figure (accept latency).
		"SLUICE_ADMIT_WAIT": "10s",
	}
	if os.Geteuid() == 0 {
		// The tests' builds are trusted: as root (CI), say so explicitly.
		env["SLUICE_EXECUTOR_RUN_AS"] = "root"
	}
	maps.Copy(env, opts.Env)
	cfg, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	e.Config = cfg

	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.Client, err = workers.Dial(ctx, cfg, s.Address(), e.Logger)
	require.NoError(t, err)
	require.NoError(t, workers.RegisterSearchAttributes(ctx, e.Client, e.Namespace))
	e.Logs, err = logstore.Open(filepath.Join(dir, "logs"))
	require.NoError(t, err)

	e.Service = &api.Service{
		Client: e.Client, Namespace: e.Namespace, Liveness: cfg.LivenessTimeout, AdmitWait: cfg.AdmitWait,
		Dispatch: workflows.Dispatch{HeartbeatTimeout: cfg.HeartbeatTimeout, MaxAttempts: cfg.MaxAttempts},
		Repos:    activities.CachedRepos(filepath.Join(dir, "git")), Logger: e.Logger,
		BuildsInEvents: !opts.BuildWorkflows,
	}
	var auth func(*http.Request) (queue.Identity, error)
	var people *api.People
	if opts.Tokens != "" {
		tokens, err := api.ParseTokens([]byte(opts.Tokens))
		require.NoError(t, err)
		auth = tokens.Authenticate
		e.token = opts.Token
		people = &api.People{Grants: tokens.People(), SessionKey: []byte("test session key " + e.Namespace)}
	}
	srv := httptest.NewUnstartedServer(nil)
	if opts.OIDC != nil {
		require.NotNil(t, people, "testenv: OIDC needs Tokens")
		oc := *opts.OIDC
		oc.RedirectURL = "http://" + srv.Listener.Addr().String() + "/ui/oidc/callback"
		people.OIDC = api.NewOIDC(oc)
	}
	secrets, _, err := api.OpenSecretStore(filepath.Join(dir, "secrets"), "test key "+e.Namespace)
	require.NoError(t, err)
	e.Service.HasSecrets = secrets.HasAny
	e.Service.PipelineTokens = secrets.PipelineTokens()
	e.Service.AppTokens, err = workers.AppTokens(cfg) // SLUICE_GITHUB_APP_ID in opts.Env
	require.NoError(t, err)
	if opts.WrapAPIAppTokens != nil && e.Service.AppTokens != nil {
		e.Service.AppTokens = opts.WrapAPIAppTokens(e.Service.AppTokens)
	}
	e.Service.Numbers = secrets.EventNumbers()
	e.Service.Meta = secrets.MetaStore()
	e.Service.Audit = secrets.AuditTrail()
	e.Service.LocalRepos = []string{"/"} // the tests' repositories are temporary directories
	// The API's bucket: SLUICE_BLOB_URL in opts.Env, else one under dir.
	blobURL, err := blobstore.DefaultURL(dir)
	require.NoError(t, err)
	if opts.Env["SLUICE_BLOB_URL"] != "" {
		blobURL = opts.Env["SLUICE_BLOB_URL"]
	}
	blobs, err := blobstore.Open(ctx, blobURL)
	require.NoError(t, err)
	srv.Config.Handler = api.NewHandler(api.Deps{
		Service: e.Service, Logs: e.Logs, Logger: e.Logger, Authenticate: auth, GitHubSecret: opts.GitHubSecret, Secrets: secrets, Blobs: blobs,
		Metrics: api.NewMetrics(e.Service), People: people,
		Ready: func(ctx context.Context) error {
			_, err := e.Client.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	})
	srv.Start()
	e.APIURL = srv.URL
	e.API = api.NewClient(srv.URL)
	e.API.Token = e.token
	cfg.APIURL = srv.URL

	local := func(key, _ string) runner.LogSink { return e.Logs.Sink(key) }
	if !opts.NoController {
		e.run(ctx, func(ctx context.Context) error {
			return workers.RunController(ctx, workers.Options{Client: e.Client, Config: cfg, Logger: e.Logger, Logs: local, Name: "controller", PipelineTokens: secrets.PipelineTokens()})
		})
	}
	if opts.LocalExecutor {
		e.run(ctx, func(ctx context.Context) error {
			return workers.RunExecutor(ctx, workers.Options{Client: e.Client, Config: cfg, Logger: e.Logger, Logs: local, Name: "local", Secrets: e.Service.LocalSecretSource(secrets)})
		})
	}
	t.Cleanup(func() {
		cancel()
		e.wg.Wait()
		srv.Close()
		_ = blobs.Close()
		e.Client.Close()
		tw.close()
	})
	if !opts.NoController {
		e.WaitFor("the registry to answer", 30*time.Second, func() bool {
			_, err := e.API.ListQueues(context.Background())
			return err == nil
		})
	}
	if opts.LocalExecutor {
		e.WaitExecutorLive("local")
	}
	return e
}

// WaitExecutorLive waits until the registry lists the member as live and active.
func (e *Env) WaitExecutorLive(name string) {
	e.t.Helper()
	e.WaitFor("executor "+name+" to be live", 60*time.Second, func() bool {
		es, err := e.API.ListExecutors(context.Background())
		if err != nil {
			return false
		}
		for _, x := range es {
			if x.Name == name && x.Live && x.State == "active" {
				return true
			}
		}
		return false
	})
}

func (e *Env) run(ctx context.Context, fn func(context.Context) error) {
	e.wg.Go(func() {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			e.t.Errorf("testenv: worker stopped: %v", err)
		}
	})
}

// Context is a context bounded by the test's deadline (or 5 minutes).
func (e *Env) Context() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond every 100ms until it holds, failing the test after timeout.
func (e *Env) WaitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("testenv: timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartEvent starts an event through the API and, when the start is
// answered pending (its pipeline was too busy to number it within
// SLUICE_ADMIT_WAIT), waits for its number as the CLI does: the answer
// always names the event, and a test's next start is numbered after it.
func (e *Env) StartEvent(ctx context.Context, pipeline string, req api.StartEventRequest) (api.EventStarted, error) {
	ev, err := e.API.StartEvent(ctx, pipeline, req)
	if err != nil {
		return ev, err
	}
	return e.API.Numbered(ctx, ev, 100*time.Millisecond)
}

// WaitEvent polls an event until its status is final and returns it.
func (e *Env) WaitEvent(id string, timeout time.Duration) api.Event {
	e.t.Helper()
	var ev api.Event
	e.WaitFor("event "+id+" to end", timeout, func() bool {
		var err error
		ev, err = e.API.GetEvent(context.Background(), id)
		return err == nil && ev.Status.Final()
	})
	return ev
}

// ---- executor processes ----------------------------------------------------

// ExecutorOptions describe an executor process.
type ExecutorOptions struct {
	Name   string
	Queues []string
	Labels map[string]string
	// Env adds environment variables (KEY=VALUE).
	Env []string
	// Dir is the process's working directory ("" is the test's).
	Dir string
	// DefaultDataDir leaves SLUICE_DATA_DIR unset: the executor uses the
	// default, relative `.sluice` in Dir, as the README's command does.
	DefaultDataDir bool
}

// Process is a real executor process.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	mu   sync.Mutex
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns the sluice binary: $SLUICE_BIN, or one built once per package.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("SLUICE_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "sluice-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.CommandContext(t.Context(), "go", "build", "-o", binPath, "./starter")
		cmd.Dir = root
		// Static, as the Dockerfile builds it: builds in containers run it
		// as their meta and sluice commands.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build sluice: %w\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// StartExecutor starts `sluice worker --role executor` for this installation.
func (e *Env) StartExecutor(opts ExecutorOptions) *Process {
	e.t.Helper()
	bin := Binary(e.t)
	var labels []string
	for k, v := range opts.Labels {
		labels = append(labels, k+"="+v)
	}
	queues := opts.Queues
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	dataDir := filepath.Join(e.Dir, "executors", opts.Name)
	cmd := exec.CommandContext(e.t.Context(), bin, "worker", "--role", "executor")
	// The test's end kills the executor and its builds, as Kill does.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+e.Server.Address(),
		"TEMPORAL_NAMESPACE="+e.Namespace,
		"SLUICE_EXECUTOR_NAME="+opts.Name,
		"SLUICE_EXECUTOR_QUEUES="+strings.Join(queues, ","),
		"SLUICE_EXECUTOR_LABELS="+strings.Join(labels, ","),
		"SLUICE_API_URL="+e.APIURL,
		"SLUICE_MEMBER_HEARTBEAT="+e.Config.MemberHeartbeat.String(),
		"SLUICE_EXECUTOR_LIVENESS="+e.Config.LivenessTimeout.String(),
		"SLUICE_LOG_LEVEL=info",
		"SLUICE_TOKEN="+e.token,
		// Specs name images no registry here serves: tests that want a
		// container runtime say so in opts.Env.
		"SLUICE_EXECUTOR_RUNTIME=host",
	)
	if os.Geteuid() == 0 {
		// The tests' builds are trusted: as root (CI), say so explicitly.
		cmd.Env = append(cmd.Env, "SLUICE_EXECUTOR_RUN_AS=root")
	}
	if opts.DefaultDataDir {
		cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
			return strings.HasPrefix(kv, "SLUICE_DATA_DIR=") || strings.HasPrefix(kv, "SLUICE_WORK_DIR=")
		})
	} else {
		cmd.Env = append(cmd.Env, "SLUICE_DATA_DIR="+dataDir)
	}
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.Dir = opts.Dir
	p := &Process{Name: opts.Name, cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &lockedWriter{p: p}, &lockedWriter{p: p}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(e.t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		p.Kill()
		if e.t.Failed() {
			e.t.Logf("executor %s output:\n%s", p.Name, p.Output())
		}
	})
	return p
}

// Kill sends SIGKILL to the executor and every build process it started.
func (p *Process) Kill() {
	if p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits for the process to exit.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second): // beyond an executor's 20 s stop timeout
		p.Kill()
	}
}

// Output is what the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct{ p *Process }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

// testWriter sends log lines to t.Log until the test's cleanup closes it
// (goroutines that log later must not panic the test binary).
type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
