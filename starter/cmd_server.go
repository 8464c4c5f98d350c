package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/cache"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/devstack"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// defaultTemporal is where the worker and api roles look for Temporal when
// TEMPORAL_ADDRESS is empty: a `sluice dev` on the same host.
const defaultTemporal = "127.0.0.1:7233"

func (a *app) devCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: Temporal with its Web UI, the API, a controller and a local executor",
		Long: `dev runs the whole of sluice in the foreground:

  - a real Temporal server, in process, persisting to DATA_DIR/temporal.db
    (SQLite, WAL), with the Temporal Web UI on --ui-port;
  - the sluice API on --api-addr (health: /healthz, readiness: /readyz);
  - a controller worker and one local executor (named "local"), which runs
    steps in a shell on this machine (the build log says that the job's
    image is not used) unless --runtime / SLUICE_EXECUTOR_RUNTIME asks for
    docker, podman or auto: a laptop needs no registry to try sluice.

State survives restarts: stop with Ctrl-C and start again on the same data
directory, and every pipeline, event, schedule and queued build is still there.
With TEMPORAL_ADDRESS set, dev uses that cluster instead of embedding one.

Every flag can also be set through the environment variable named in its help.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			if a.env("SLUICE_EXECUTOR_RUNTIME") == "" {
				cfg.ExecutorRuntime = "host" // dev's default; see Long
			}
			return a.runDev(cmd.Context(), cfg)
		},
	}
	a.configFlag(cmd, "data-dir", "SLUICE_DATA_DIR", "")
	a.configFlag(cmd, "host", "SLUICE_HOST", "")
	a.configFlag(cmd, "temporal-address", "TEMPORAL_ADDRESS", "")
	a.configFlag(cmd, "namespace", "TEMPORAL_NAMESPACE", "")
	a.configFlag(cmd, "temporal-port", "SLUICE_TEMPORAL_PORT", "")
	a.configFlag(cmd, "ui-port", "SLUICE_UI_PORT", "")
	a.configFlag(cmd, "metrics-port", "SLUICE_METRICS_PORT", "")
	a.configFlag(cmd, "api-addr", "SLUICE_API_ADDR", "")
	a.configFlag(cmd, "tokens-file", "SLUICE_API_TOKENS_FILE", "")
	a.configFlag(cmd, "name", "SLUICE_EXECUTOR_NAME", "name of the local executor (default \"local\")")
	a.configFlag(cmd, "queues", "SLUICE_EXECUTOR_QUEUES", "")
	a.configFlag(cmd, "labels", "SLUICE_EXECUTOR_LABELS", "")
	a.configFlag(cmd, "runtime", "SLUICE_EXECUTOR_RUNTIME", "how the local executor runs builds: host (dev's default), docker, podman or auto")
	a.configFlag(cmd, "log-level", "SLUICE_LOG_LEVEL", "")
	a.configFlag(cmd, "log-format", "SLUICE_LOG_FORMAT", "")
	return cmd
}

func (a *app) runDev(ctx context.Context, cfg *config.Config) error {
	log := a.logger(cfg)
	auth, err := authenticator(cfg, log)
	if err != nil {
		return err
	}
	ppl, err := people(cfg, log)
	if err != nil {
		return err
	}
	if err := webhookSecretsRequired(cfg, auth != nil); err != nil {
		return err
	}
	if err := secretKeyRequired(cfg); err != nil {
		return err
	}
	if len(cfg.LocalRepos) == 0 {
		// A laptop's repositories sit beside the directory dev starts in.
		if wd, err := os.Getwd(); err == nil {
			cfg.LocalRepos = []string{filepath.Dir(wd)}
		}
	}
	log.Info("local_repositories", "allowed", strings.Join(cfg.LocalRepos, ","), "why", "SLUICE_LOCAL_REPOS, or the parent of the directory sluice dev starts in")
	if cfg.GitHubSecret == "" || cfg.GitLabSecret == "" {
		log.Warn("webhooks_unverified", "reason", "SLUICE_GITHUB_SECRET or SLUICE_GITLAB_SECRET is not set: unsigned deliveries are accepted only from this machine")
	}
	if !api.LoopbackAddr(cfg.APIAddr) && auth == nil {
		log.Warn("api_open_to_the_network", "address", cfg.APIAddr,
			"reason", "authentication is off and the API listens beyond loopback: anyone who reaches this address can run builds on this machine; set SLUICE_API_TOKENS_FILE or listen on 127.0.0.1")
	}
	addr := cfg.TemporalAddress
	var stack *devstack.Stack
	if addr == "" {
		started := time.Now()
		stack, err = devstack.Start(ctx, embeddedOptions(cfg, log))
		if err != nil {
			return err
		}
		defer func() {
			if err := stack.Stop(); err != nil {
				log.Warn("temporal_stop_failed", "error", err)
			}
		}()
		addr = stack.FrontendAddress()
		log.Info("temporal_started", "address", addr, "db", temporalDB(cfg), "took", time.Since(started).Round(time.Millisecond).String())
	}
	c, err := workers.Dial(ctx, cfg, addr, log)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := workers.RegisterSearchAttributes(ctx, c, cfg.TemporalNamespace); err != nil {
		return err
	}
	store, blobs, err := openLogStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { _ = blobs.Close() }()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("SLUICE_API_ADDR %s: %w", cfg.APIAddr, err)
	}
	secrets, closeDB, err := openSecrets(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	if stack != nil && stack.UIURL() != "" && cfg.TemporalUIURL == "" {
		cfg.TemporalUIURL = stack.UIURL()
	}
	caches := cache.New(blobs, int64(cfg.CacheMax))
	srv, svc, err := a.apiServer(cfg, c, store, caches, secrets, blobs, log, auth, ppl)
	if err != nil {
		return err
	}

	ui := "disabled"
	if stack != nil && stack.UIURL() != "" {
		ui = stack.UIURL() + "/namespaces/" + cfg.TemporalNamespace + "/workflows"
	}
	// The banner is for whoever watches; the stack runs on without it.
	_, _ = fmt.Fprintf(a.stdout, `sluice is running. Stop it with Ctrl-C.
  API:       %s   (health %s/healthz)
  Pages:     %s/ui/   (pipelines, event graphs, live build logs, queues)
  Web UI:    %s
  Temporal:  %s (namespace %s)
  Data dir:  %s
`, apiBase(cfg.APIAddr), apiBase(cfg.APIAddr), apiBase(cfg.APIAddr), ui, addr, cfg.TemporalNamespace, cfg.DataDir)

	name := cfg.ExecutorName
	if name == "" {
		name = "local"
	}
	// In the API's own process the executor writes the store directly: no
	// attempt credential to present.
	local := func(key, _ string) runner.LogSink { return store.Sink(key) }
	return workers.RunAll(ctx,
		func(ctx context.Context) error {
			go pruneLogs(ctx, cfg, store, log)
			go pruneArtifacts(ctx, cfg, blobs, log)
			go pruneAudit(ctx, cfg, secrets, log)
			return serve(ctx, srv, ln)
		},
		func(ctx context.Context) error {
			return workers.RunController(ctx, workers.Options{Client: c, Config: cfg, Logger: log, Logs: local, Caches: caches, PipelineTokens: secrets.PipelineTokens(), Reaper: reaperCommand(), Dev: true})
		},
		func(ctx context.Context) error {
			return workers.RunExecutor(ctx, workers.Options{
				Client: c, Config: cfg, Logger: log, Logs: local, Caches: caches, Name: name, Secrets: svc.LocalSecretSource(secrets), Reaper: reaperCommand(), Dev: true,
				BuildData: svc.LocalBuildData(blobs), SelfBinary: selfBinary(log),
			})
		},
	)
}

func apiBase(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// embeddedOptions configure the embedded Temporal server of `sluice dev`
// and `sluice temporal`.
func embeddedOptions(cfg *config.Config, log *slog.Logger) devstack.Options {
	return devstack.Options{
		DBPath: filepath.Join(cfg.DataDir, "temporal.db"), Postgres: cfg.TemporalDB, Shards: cfg.TemporalShards,
		Host: cfg.Host, FrontendPort: cfg.TemporalPort,
		UIPort: cfg.UIPort, MetricsPort: cfg.MetricsPort, Namespace: cfg.TemporalNamespace,
		Logger: log, ServerLogLevel: parseLevel(cfg.TemporalLogLevel),
		SearchAttributes: workflows.SearchAttributes(),
	}
}

// temporalDB names the embedded server's persistence for logs (no password).
func temporalDB(cfg *config.Config) string {
	if cfg.TemporalDB == "" {
		return filepath.Join(cfg.DataDir, "temporal.db")
	}
	if u, err := url.Parse(cfg.TemporalDB); err == nil {
		u.User = nil
		return u.String()
	}
	return "postgres"
}

// dialCluster connects the roles that need an existing Temporal cluster
// (TEMPORAL_ADDRESS, default a `sluice dev` on this host).
func dialCluster(ctx context.Context, cfg *config.Config, log *slog.Logger) (client.Client, error) {
	addr := cfg.TemporalAddress
	if addr == "" {
		addr = defaultTemporal
	}
	return workers.Dial(ctx, cfg, addr, log)
}

// authenticator loads SLUICE_API_TOKENS_FILE, before anything starts; nil
// (authentication off) when it is not set.
func authenticator(cfg *config.Config, log *slog.Logger) (func(*http.Request) (queue.Identity, error), error) {
	if cfg.GitLabToken != "" && cfg.GitLabSecret == "" {
		log.Warn("gitlab_webhooks_unverified", "reason",
			"SLUICE_GITLAB_TOKEN is the GitLab API token for commit statuses; the webhook secret token is SLUICE_GITLAB_SECRET, which is not set, so GitLab deliveries are not verified")
	}
	if cfg.APITokensFile == "" {
		log.Warn("api_auth_off", "reason", "SLUICE_API_TOKENS_FILE is not set: every API request acts as the system identity")
		return nil, nil
	}
	t, err := api.LoadTokens(cfg.APITokensFile)
	if err != nil {
		return nil, err
	}
	log.Info("api_auth_on", "tokens", t.Len(), "file", cfg.APITokensFile)
	return t.Authenticate, nil
}

// webhookSecretsRequired refuses an authenticated API whose webhooks could
// not be verified: with tokens on, anyone could otherwise start events
// through an unsigned delivery.
func webhookSecretsRequired(cfg *config.Config, authOn bool) error {
	if !authOn {
		return nil
	}
	var missing []string
	if cfg.GitHubSecret == "" {
		missing = append(missing, "SLUICE_GITHUB_SECRET")
	}
	if cfg.GitLabSecret == "" {
		missing = append(missing, "SLUICE_GITLAB_SECRET")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s not set: with SLUICE_API_TOKENS_FILE on, every webhook must be verifiable (set a random secret here and in the provider's webhook settings; one you do not use can be any long random string)",
		config.ErrInvalid, strings.Join(missing, " and "))
}

// secretKeyRequired refuses a PostgreSQL store without SLUICE_SECRET_KEY
// when the API would generate one: replicas share the database, and a key
// generated into one replica's data directory could not open what another
// sealed. (A key file from before is kept.)
func secretKeyRequired(cfg *config.Config) error {
	if cfg.DB == "" || cfg.SecretKey != "" {
		return nil
	}
	keyFile := filepath.Join(cfg.DataDir, "secrets", "secret.key")
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%w: SLUICE_SECRET_KEY: not set, and SLUICE_DB is PostgreSQL, which API replicas share: set the same long random key on every replica (a key generated into one replica's %s would not open the secrets another one sealed)",
		config.ErrInvalid, keyFile)
}

// openSecrets opens sluice's store (SLUICE_DB: SQLite in the data
// directory, or PostgreSQL) and the API's secrets in it, their key in
// DATA_DIR/secrets unless SLUICE_SECRET_KEY is set, and imports the
// secrets file of before once. closeDB releases the store.
func openSecrets(ctx context.Context, cfg *config.Config, log *slog.Logger) (secrets *api.SecretStore, closeDB func(), err error) {
	if err := secretKeyRequired(cfg); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(cfg.DataDir, "secrets")
	keyFile := filepath.Join(dir, "secret.key")
	db, err := store.Open(ctx, cfg.DB, filepath.Join(cfg.DataDir, "sluice.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("open sluice's store (SLUICE_DB): %w", err)
	}
	closeDB = func() {
		if err := db.Close(); err != nil {
			log.Warn("store_close_failed", "error", err)
		}
	}
	secrets, generated, err := api.NewSecretStore(db, dir, cfg.SecretKey)
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	if generated {
		log.Warn("secret_key_generated", "file", keyFile,
			"advice", "set SLUICE_SECRET_KEY (the same on every API replica) and keep it out of the data directory's backups")
	}
	file := filepath.Join(dir, api.SecretFile)
	n, err := secrets.ImportFile(file)
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	if n > 0 {
		log.Info("secrets_imported", "count", n, "from", file, "renamed_to", file+".imported", "store", db.String())
	}
	log.Info("store_opened", "store", db.String())
	return secrets, closeDB, nil
}

func (a *app) apiServer(cfg *config.Config, c client.Client, store *logstore.Store, caches *cache.Store, secrets *api.SecretStore, blobs *blobstore.Store, log *slog.Logger, auth func(*http.Request) (queue.Identity, error), ppl *api.People) (*http.Server, *api.Service, error) {
	svc := &api.Service{
		Client: c, Namespace: cfg.TemporalNamespace, Liveness: cfg.LivenessTimeout, AdmitWait: cfg.AdmitWait,
		Dispatch:       workflows.Dispatch{HeartbeatTimeout: cfg.HeartbeatTimeout, MaxAttempts: cfg.MaxAttempts},
		BuildsInEvents: cfg.BuildsInEvents,
		Repos:          activities.CachedRepos(filepath.Join(cfg.DataDir, "git")),
		Logger:         log, LocalRepos: cfg.LocalRepos,
	}
	if secrets != nil {
		svc.HasSecrets = secrets.HasAny
		svc.PipelineTokens = secrets.PipelineTokens()
		svc.Numbers = secrets.EventNumbers()
		svc.Meta = secrets.MetaStore()
		svc.Audit = secrets.AuditTrail()
	}
	// The GitHub App (if any) reads pipelines' repositories from here and
	// gives executors' checkouts their installation tokens.
	apps, err := workers.AppTokens(cfg)
	if err != nil {
		return nil, nil, err
	}
	svc.AppTokens = apps
	h := api.NewHandler(api.Deps{
		Service: svc, Logs: store, Caches: caches, Logger: log, Secrets: secrets, Metrics: api.NewMetrics(svc), Blobs: blobs,
		GitHubSecret: cfg.GitHubSecret, GitLabSecret: cfg.GitLabSecret,
		Authenticate: auth, TemporalUI: cfg.TemporalUIURL, LoopbackOnly: api.LoopbackAddr(cfg.APIAddr), People: ppl,
		Ready: func(ctx context.Context) error {
			_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	})
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, svc, nil
}

// selfBinary is this binary's path, which builds run as their meta and
// sluice commands ("" when it cannot be found: builds then have neither).
func selfBinary(log *slog.Logger) string {
	p, err := os.Executable()
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		log.Warn("self_binary_unknown", "error", err, "effect", "builds have no meta command")
		return ""
	}
	return p
}

// pruneArtifacts deletes build artifacts older than SLUICE_LOG_RETENTION,
// hourly, as logs are.
func pruneArtifacts(ctx context.Context, cfg *config.Config, blobs *blobstore.Store, log *slog.Logger) {
	if cfg.LogRetention <= 0 {
		return
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		n, err := api.PruneArtifacts(ctx, blobs, time.Now().Add(-cfg.LogRetention))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("artifact_prune_failed", "error", err)
		case n > 0:
			log.Info("artifacts_pruned", "files", n, "retention", cfg.LogRetention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openLogStore opens the blob store (SLUICE_BLOB_URL) and the log store
// under DATA_DIR/logs that copies every finished step log there, flushes
// the live ones there every second until ctx ends, and reads from there
// the logs it lacks (written through another API replica, or pruned
// locally).
func openLogStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (*logstore.Store, *blobstore.Store, error) {
	u, err := cfg.BlobURL()
	if err != nil {
		return nil, nil, err
	}
	blobs, err := blobstore.Open(ctx, u)
	if err != nil {
		return nil, nil, fmt.Errorf("SLUICE_BLOB_URL: %w", err)
	}
	store, err := logstore.Open(filepath.Join(cfg.DataDir, "logs"))
	if err != nil {
		_ = blobs.Close()
		return nil, nil, fmt.Errorf("open the log store: %w", err)
	}
	store.SetArchive(blobs, func(err error) { log.Warn("log_archive_failed", "error", err) })
	// Running builds' logs reach the blob store every second, so every
	// replica serves them while they are written.
	go store.FlushLive(ctx, logstore.DefaultLiveFlush, func(err error) { log.Warn("live_log_flush_failed", "error", err) })
	log.Info("blob_store_opened", "store", blobs.String())
	return store, blobs, nil
}

// pruneLogs deletes build logs older than SLUICE_LOG_RETENTION, hourly.
func pruneLogs(ctx context.Context, cfg *config.Config, store *logstore.Store, log *slog.Logger) {
	store.KeepPruned(ctx, cfg.LogRetention, time.Hour, func(n int, err error) {
		if err != nil {
			log.Warn("log_prune_failed", "error", err)
			return
		}
		log.Info("logs_pruned", "attempts", n, "retention", cfg.LogRetention.String())
	})
}

// serve runs srv on ln until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("API server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("API server shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (a *app) workerCmd() *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "worker --role controller|executor",
		Short: "Run a controller or an executor against a Temporal cluster",
		Long: `worker runs one sluice role against an existing Temporal cluster
(TEMPORAL_ADDRESS, default ` + defaultTemporal + `). Run any number of each:

  controller  runs the workflows (pipelines, events, builds, the registry) and
              can run builds itself when a queue rule says run-on=controller;
  executor    registers in the registry, heartbeats, and runs builds of the
              queues it serves with as many slots as the queue's rules allow.

Executors ship step logs to the API (SLUICE_API_URL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role != "controller" && role != "executor" {
				return fmt.Errorf("--role %q: want controller or executor", role)
			}
			cfg, err := a.config()
			if err != nil {
				return err
			}
			log := a.logger(cfg)
			c, err := dialCluster(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer c.Close()
			hc := &http.Client{Timeout: 30 * time.Second, Transport: api.BearerTransport{Token: cfg.Token}}
			remote := func(key, credential string) runner.LogSink {
				return logstore.NewRemoteSink(cfg.APIURL, key, hc, logstore.RemoteOptions{Logger: log, Credential: credential})
			}
			apiClient := api.NewClient(cfg.APIURL)
			apiClient.Token = cfg.Token
			// Build caches go straight to the blob store: executors are
			// trusted with it (docs/security.md); an outage makes builds
			// log "cache unavailable", never fail or stop the start.
			blobURL, err := cfg.BlobURL()
			if err != nil {
				return err
			}
			blobs, err := blobstore.Dial(cmd.Context(), blobURL)
			if err != nil {
				return fmt.Errorf("SLUICE_BLOB_URL: %w", err)
			}
			defer func() { _ = blobs.Close() }()
			o := workers.Options{
				Client: c, Config: cfg, Logger: log, Logs: remote, Secrets: apiClient.SecretSource(), PipelineTokens: apiClient.PipelineTokens(),
				Caches: cache.New(blobs, int64(cfg.CacheMax)), Reaper: reaperCommand(), BuildData: apiClient.BuildData(), SelfBinary: selfBinary(log),
			}
			if role == "controller" {
				return workers.RunController(cmd.Context(), o)
			}
			return workers.RunExecutor(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "controller or executor (required)")
	a.configFlag(cmd, "runtime", "SLUICE_EXECUTOR_RUNTIME", "")
	a.configFlag(cmd, "temporal-address", "TEMPORAL_ADDRESS", "")
	a.configFlag(cmd, "namespace", "TEMPORAL_NAMESPACE", "")
	a.configFlag(cmd, "name", "SLUICE_EXECUTOR_NAME", "")
	a.configFlag(cmd, "queues", "SLUICE_EXECUTOR_QUEUES", "")
	a.configFlag(cmd, "labels", "SLUICE_EXECUTOR_LABELS", "")
	a.configFlag(cmd, "data-dir", "SLUICE_DATA_DIR", "")
	a.configFlag(cmd, "work-dir", "SLUICE_WORK_DIR", "")
	a.configFlag(cmd, "log-level", "SLUICE_LOG_LEVEL", "")
	a.configFlag(cmd, "log-format", "SLUICE_LOG_FORMAT", "")
	return cmd
}

func (a *app) apiCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the HTTP API and webhooks against a Temporal cluster",
		Long: `api serves the sluice HTTP API (the CLI's back end), the GitHub and GitLab
webhook endpoints (/webhooks/github, /webhooks/gitlab) and the build log store
that executors ship logs to. It needs an existing Temporal cluster
(TEMPORAL_ADDRESS, default ` + defaultTemporal + `). Logs are kept under
SLUICE_DATA_DIR/logs while they are written and copied to the blob store
(SLUICE_BLOB_URL) when each step finishes; replicas read finished logs from
there. Give every replica the same s3:// bucket, and route each build's log
appends (POST /api/v1/builds/{id}/logs/...) to one replica, or share
SLUICE_DATA_DIR/logs between replicas, for live logs to be followed on all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			log := a.logger(cfg)
			auth, err := authenticator(cfg, log)
			if err != nil {
				return err
			}
			ppl, err := people(cfg, log)
			if err != nil {
				return err
			}
			if err := webhookSecretsRequired(cfg, auth != nil); err != nil {
				return err
			}
			if err := secretKeyRequired(cfg); err != nil {
				return err
			}
			c, err := dialCluster(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer c.Close()
			store, blobs, err := openLogStore(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer func() { _ = blobs.Close() }()
			var lc net.ListenConfig
			ln, err := lc.Listen(cmd.Context(), "tcp", cfg.APIAddr)
			if err != nil {
				return fmt.Errorf("SLUICE_API_ADDR %s: %w", cfg.APIAddr, err)
			}
			secrets, closeDB, err := openSecrets(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer closeDB()
			srv, _, err := a.apiServer(cfg, c, store, cache.New(blobs, int64(cfg.CacheMax)), secrets, blobs, log, auth, ppl)
			if err != nil {
				return err
			}
			go pruneArtifacts(cmd.Context(), cfg, blobs, log)
			log.Info("api_listening", "address", apiBase(cfg.APIAddr))
			go pruneLogs(cmd.Context(), cfg, store, log)
			go pruneAudit(cmd.Context(), cfg, secrets, log)
			return serve(cmd.Context(), srv, ln)
		},
	}
	a.configFlag(cmd, "temporal-address", "TEMPORAL_ADDRESS", "")
	a.configFlag(cmd, "namespace", "TEMPORAL_NAMESPACE", "")
	a.configFlag(cmd, "api-addr", "SLUICE_API_ADDR", "")
	a.configFlag(cmd, "tokens-file", "SLUICE_API_TOKENS_FILE", "")
	a.configFlag(cmd, "data-dir", "SLUICE_DATA_DIR", "")
	a.configFlag(cmd, "db", "SLUICE_DB", "")
	a.configFlag(cmd, "log-level", "SLUICE_LOG_LEVEL", "")
	a.configFlag(cmd, "log-format", "SLUICE_LOG_FORMAT", "")
	return cmd
}

func (a *app) temporalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "temporal",
		Short: "Run only the embedded Temporal server (SQLite) and its Web UI",
		Long: `temporal runs the same embedded Temporal server as 'sluice dev' (persisting to
DATA_DIR/temporal.db) with its Web UI, and nothing else. Point controllers,
executors and the API at it with TEMPORAL_ADDRESS. For production, run a real
Temporal cluster instead (see the README's scaling section).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			log := a.logger(cfg)
			stack, err := devstack.Start(cmd.Context(), embeddedOptions(cfg, log))
			if err != nil {
				return err
			}
			// The banner is for whoever watches; the server runs on without it.
			_, _ = fmt.Fprintf(a.stdout, "Temporal is running on %s (namespace %s); Web UI %s. Stop it with Ctrl-C.\n",
				stack.FrontendAddress(), cfg.TemporalNamespace, orDisabled(stack.UIURL()))
			<-cmd.Context().Done()
			return stack.Stop()
		},
	}
	a.configFlag(cmd, "data-dir", "SLUICE_DATA_DIR", "")
	a.configFlag(cmd, "host", "SLUICE_HOST", "")
	a.configFlag(cmd, "namespace", "TEMPORAL_NAMESPACE", "")
	a.configFlag(cmd, "temporal-port", "SLUICE_TEMPORAL_PORT", "")
	a.configFlag(cmd, "ui-port", "SLUICE_UI_PORT", "")
	a.configFlag(cmd, "metrics-port", "SLUICE_METRICS_PORT", "")
	a.configFlag(cmd, "log-level", "SLUICE_LOG_LEVEL", "")
	return cmd
}

func orDisabled(s string) string {
	if s == "" {
		return "disabled"
	}
	return s
}

func (a *app) configCmd() *cobra.Command {
	var defaults bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration and check it (--defaults: the README's table)",
		Long: `Print every configuration variable with its effective value (from the
environment, else its default; secrets are redacted) and check them all,
exiting 1 when any is invalid. --defaults prints the table of variables and
defaults as markdown instead.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if defaults {
				if a.output == "json" {
					return a.print(config.Fields(), nil)
				}
				_, err := fmt.Fprint(a.stdout, strings.TrimRight(config.Markdown(), "\n")+"\n")
				return err
			}
			settings := config.Effective(a.env)
			if err := a.print(settings, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				_, _ = fmt.Fprintln(tw, "VARIABLE\tVALUE\tSOURCE")
				for _, s := range settings {
					v := s.Value
					if v == "" {
						v = "-"
					}
					_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Variable, v, s.Source)
				}
				return tw.Flush()
			}); err != nil {
				return err
			}
			_, err := a.config()
			return err
		},
	}
	cmd.Flags().BoolVar(&defaults, "defaults", false, "print the variables with their defaults and meaning (markdown), not the effective values")
	return cmd
}
