// Package devstack embeds a real Temporal server (SQLite persistence) and the
// Temporal Web UI in the current process. It backs `sluice dev` and the
// integration-test harness, so both run the same embedding.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Options configure an embedded stack.
type Options struct {
	// DBPath is the SQLite file. Empty keeps everything in memory (tests).
	DBPath string
	// Postgres, when set, is a postgres:// URL: the history and visibility
	// stores live on that PostgreSQL server instead of SQLite (DBPath is
	// then unused). The databases and schemas are created or upgraded at
	// start with Temporal's embedded schemas (MigratePostgres).
	Postgres string
	// Shards is the number of history shards (default 1 on SQLite, 4 on
	// PostgreSQL). It is fixed when the cluster is first created.
	Shards int
	// Host is the interface to bind (default 127.0.0.1).
	Host string
	// FrontendPort is the gRPC frontend port; 0 picks a free one.
	FrontendPort int
	// UIPort serves the Web UI; 0 disables it.
	UIPort int
	// MetricsPort serves Prometheus metrics; 0 disables them.
	MetricsPort int
	// Namespace is created at start when missing.
	Namespace string
	// ExtraNamespaces are created too (tests isolate themselves in them).
	ExtraNamespaces []string
	// Retention is the namespace's retention of closed workflows.
	Retention time.Duration
	// Logger receives the server's logs at ServerLogLevel and above.
	Logger *slog.Logger
	// ServerLogLevel filters the server's own chatty logs (default warn).
	ServerLogLevel slog.Level
	// DynamicConfig overrides individual dynamic config keys.
	DynamicConfig map[string]any
	// SearchAttributes are registered with every namespace the stack
	// creates, before the server starts: the server uses them from its
	// first request, so it need not re-read its search attributes on every
	// request (system.forceSearchAttributesCacheRefreshOnRead, ~4 % of the
	// CPU of a busy embedded server; docs/performance.md). A namespace
	// that already exists keeps what it has.
	SearchAttributes map[string]enumspb.IndexedValueType
}

// Stack is a running embedded Temporal server and, optionally, its Web UI.
type Stack struct {
	server   temporal.Server
	ui       *uiserver.Server
	uiDone   chan error
	frontend string
	uiURL    string
}

// FrontendAddress is the host:port clients dial.
func (s *Stack) FrontendAddress() string { return s.frontend }

// UIURL is the Web UI's address, or "" when the UI is disabled.
func (s *Stack) UIURL() string { return s.uiURL }

// Start brings up the server (and UI), creates the namespace and waits until
// the frontend answers. It returns once clients can connect.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Retention == 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ServerLogLevel == 0 {
		opts.ServerLogLevel = slog.LevelWarn
	}

	ports, err := allocate(ctx, opts.Host, opts.FrontendPort, opts.UIPort, opts.MetricsPort)
	if err != nil {
		return nil, err
	}
	frontend := net.JoinHostPort(opts.Host, strconv.Itoa(ports.frontend))

	sqlCfg := config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{},
		DatabaseName:      opts.DBPath,
	}
	stores := storeConfig{name: sqliteplugin.PluginName, main: &sqlCfg, shards: 1}
	switch {
	case opts.Postgres != "":
		mainSQL, visSQL, err := PostgresConfig(opts.Postgres)
		if err != nil {
			return nil, fmt.Errorf("devstack: SLUICE_TEMPORAL_DB: %w", err)
		}
		if err := MigratePostgres(mainSQL, visSQL); err != nil {
			return nil, err
		}
		sqlCfg = mainSQL
		stores = storeConfig{name: "postgres", main: &sqlCfg, visibility: &visSQL, shards: 4}
	case opts.DBPath == "":
		sqlCfg.ConnectAttributes["mode"] = "memory"
		sqlCfg.ConnectAttributes["cache"] = "shared"
		sqlCfg.DatabaseName = "sluice-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	default:
		sqlCfg.ConnectAttributes["mode"] = "rwc"
		// WAL + NORMAL roughly doubles throughput on a file (design.md §5);
		// a crash may lose the last transactions but never corrupts the file.
		sqlCfg.ConnectAttributes["journal_mode"] = "wal"
		sqlCfg.ConnectAttributes["synchronous"] = "NORMAL"
		sqlCfg.ConnectAttributes["busy_timeout"] = "10000"
		// Copy the WAL into the file every ~40 MB of it rather than every
		// 4 MB: the hot pages (the shard, running workflows' rows) are
		// written once per checkpoint, and the checkpoints' writes and
		// fsyncs were ~4 % of a busy server's CPU.
		sqlCfg.ConnectAttributes["wal_autocheckpoint"] = "10000"
		if err := os.MkdirAll(filepath.Dir(opts.DBPath), 0o755); err != nil {
			return nil, fmt.Errorf("devstack: create data dir: %w", err)
		}
		if _, err := os.Stat(opts.DBPath); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(&sqlCfg); err != nil {
				return nil, fmt.Errorf("devstack: set up SQLite schema in %s: %w", opts.DBPath, err)
			}
		} else if err := pruneMembership(ctx, &sqlCfg); err != nil {
			return nil, err
		}
	}
	// The namespace is created directly in the store before the server
	// starts, so it exists (with our retention) before any client asks.
	var nss []*sqliteschema.NamespaceConfig
	for _, name := range append([]string{opts.Namespace}, opts.ExtraNamespaces...) {
		ns, err := sqliteschema.NewNamespaceConfig("active", name, false, opts.SearchAttributes)
		if err != nil {
			return nil, fmt.Errorf("devstack: namespace %q: %w", name, err)
		}
		ns.Detail.Config.Retention = durationpb.New(opts.Retention)
		nss = append(nss, ns)
	}
	if err := sqliteschema.CreateNamespaces(&sqlCfg, nss...); err != nil {
		return nil, fmt.Errorf("devstack: create namespaces: %w", err)
	}

	if opts.Shards > 0 {
		stores.shards = opts.Shards
	}
	cfg := serverConfig(opts, ports, stores, frontend)
	dc := dynamicconfig.StaticClient{}
	for k, v := range defaultDynamicConfig(opts.Postgres != "" || len(opts.SearchAttributes) > 0) {
		dc[dynamicconfig.MakeKey(k)] = []dynamicconfig.ConstrainedValue{{Value: v}}
	}
	for k, v := range opts.DynamicConfig {
		dc[dynamicconfig.MakeKey(k)] = []dynamicconfig.ConstrainedValue{{Value: v}}
	}
	serverOpts := []temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(newServerLogger(opts.Logger.With("component", "temporal"), opts.ServerLogLevel)),
		temporal.WithDynamicConfigClient(dc),
	}
	if opts.MetricsPort == 0 {
		serverOpts = append(serverOpts, temporal.WithCustomMetricsHandler(metrics.NoopMetricsHandler))
	}
	srv, err := temporal.NewServer(serverOpts...)
	if err != nil {
		return nil, fmt.Errorf("devstack: create server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("devstack: start server: %w", err)
	}
	s := &Stack{server: srv, frontend: frontend}
	if err := waitForFrontend(ctx, frontend, opts.Namespace); err != nil {
		_ = srv.Stop()
		return nil, err
	}
	if ports.ui != 0 {
		if err := s.startUI(opts, ports.ui); err != nil {
			_ = srv.Stop()
			return nil, err
		}
	}
	return s, nil
}

// Stop shuts the UI and the server down.
func (s *Stack) Stop() error {
	var uiErr error
	if s.ui != nil {
		s.ui.Stop()
		if err := <-s.uiDone; err != nil {
			uiErr = fmt.Errorf("devstack: ui server: %w", err)
		}
	}
	if err := s.server.Stop(); err != nil {
		return errors.Join(uiErr, fmt.Errorf("devstack: stop server: %w", err))
	}
	return uiErr
}

func (s *Stack) startUI(opts Options, port int) error {
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: s.frontend,
		Host:                opts.Host,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    opts.Namespace,
		HideLogs:            true,
		DisableNewsFetch:    true,
		NotifyOnNewVersion:  false,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		RefreshInterval:     0,
	}
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(staticUIConfig{cfg}))
	s.uiDone = make(chan error, 1)
	go func() { s.uiDone <- s.ui.Start() }()
	s.uiURL = "http://" + net.JoinHostPort(displayHost(opts.Host), strconv.Itoa(port))
	return nil
}

type staticUIConfig struct{ cfg *uiconfig.Config }

func (p staticUIConfig) GetConfig() (*uiconfig.Config, error) { return p.cfg, nil }

func displayHost(h string) string {
	if h == "0.0.0.0" || h == "::" || h == "" {
		return "localhost"
	}
	return h
}

// defaultDynamicConfig are the server settings sluice relies on. A server
// whose namespaces were created with sluice's search attributes
// (Options.SearchAttributes), or on PostgreSQL, caches its search
// attributes like any production one (sluice waits for ones added later to
// load, workers.RegisterSearchAttributes). Any other SQLite server, a test's,
// reads them from the database on every use, so attributes registered
// in its fresh namespaces are usable at once; Temporal marks that as not
// for production, and it costs ~4 % of a busy server's CPU.
func defaultDynamicConfig(cachedSearchAttributes bool) map[string]any {
	return map[string]any{
		"system.forceSearchAttributesCacheRefreshOnRead": !cachedSearchAttributes,
		// Per-pipeline fairness keys on queue task queues (design.md §4).
		"matching.enableFairness": true,
		// One partition per task queue keeps backlog counts and ordering exact
		// on a single-node server.
		"matching.numTaskqueueReadPartitions":  1,
		"matching.numTaskqueueWritePartitions": 1,
		// The one history shard reads new transfer tasks (workflow and activity
		// tasks to dispatch, signals, child starts) at most this often. The
		// default, 20 reads/s, spaces every such hop ~50 ms apart, and a build
		// takes a dozen hops from trigger to first step (docs/performance.md):
		// 200 cuts a 1-job event's trigger-to-step latency from ~700 to ~200 ms.
		"history.transferProcessorMaxPollRPS": 200,
		// sluice's list views, queue status, metrics and web pages read
		// visibility; the default 10 requests/s per namespace answers a
		// busy API with "namespace rate limit exceeded".
		"frontend.namespaceRPS.visibility": 100,
		// Every member heartbeats with an update on the one registry
		// workflow; Temporal admits 10 updates in flight per workflow by
		// default, so a few dozen members at once were refused
		// (docs/performance.md, "registry": 500 members fail at 10, hold
		// with p99 38 ms without the limit).
		"history.maxInFlightUpdates": 1000,
		// Sizes of externally stored payloads, computed for every batch of
		// history events (~2 % of a busy server's CPU); sluice stores none.
		"history.externalPayloadsEnabled": false,
		// A query of a workflow whose workflow task is under way waits in
		// a buffer for the task's end; Temporal buffers one per workflow
		// by default and refuses the next (ResourceExhausted, which the SDK
		// retries after a back-off of a few hundred milliseconds). An
		// event's builds each ask it for their record (metadata, secrets,
		// log and metadata writes) while it handles their claims and ends:
		// with one buffer place, a DAG's builds waited ~400 ms for those
		// answers several times per level (docs/performance.md).
		"history.MaxBufferedQueryCount": 64,
	}
}

type portSet struct {
	frontend, history, matching, worker     int
	mFrontend, mHistory, mMatching, mWorker int
	ui, metrics                             int
}

// allocate checks the fixed ports are free (a clear error beats the UI
// server's log.Fatal) and picks free ports for the internal services.
func allocate(ctx context.Context, host string, frontend, ui, metricsPort int) (portSet, error) {
	var p portSet
	var lc net.ListenConfig
	check := func(name string, port int) error {
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("devstack: %s port %d on %s is not available: %w", name, port, host, err)
		}
		return l.Close()
	}
	if frontend != 0 {
		if err := check("Temporal frontend", frontend); err != nil {
			return p, err
		}
		p.frontend = frontend
	}
	if ui != 0 {
		if err := check("Web UI", ui); err != nil {
			return p, err
		}
		p.ui = ui
	}
	if metricsPort != 0 {
		if err := check("metrics", metricsPort); err != nil {
			return p, err
		}
		p.metrics = metricsPort
	}
	// With a fixed frontend port, the other services take the ports next to
	// it (as Temporal's own defaults do: 7234-7236, membership 6933-6936), so
	// a restart comes back on the same addresses and the membership rows left
	// in the database point at us rather than at nobody.
	held := map[int]net.Listener{}
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	take := func(port int) bool {
		if port <= 0 || port > 65535 {
			return false
		}
		if _, dup := held[port]; dup {
			return false
		}
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		held[port] = l
		return true
	}
	type want struct {
		dst       *int
		preferred int
		// membership ports are stored in Temporal's cluster_membership
		// table, a SMALLINT on PostgreSQL: they must stay below 32768.
		membership bool
	}
	wants := []want{
		{&p.history, frontend + 1, false},
		{&p.matching, frontend + 2, false},
		{&p.worker, frontend + 3, false},
		{&p.mFrontend, frontend - 300, true},
		{&p.mHistory, frontend - 299, true},
		{&p.mMatching, frontend - 298, true},
		{&p.mWorker, frontend - 297, true},
	}
	if frontend == 0 {
		for i := range wants {
			wants[i].preferred = 0
		}
		wants = append(wants, want{&p.frontend, 0, false})
	}
	const maxMembershipPort = 32767
	for i, w := range wants {
		if w.membership && (w.preferred == 0 || w.preferred > maxMembershipPort) {
			// Deterministic for a fixed frontend port (a restart comes back
			// on the same ports), spread otherwise.
			start := 20000 + (frontend*4+i)%12000
			if frontend == 0 {
				start = 20000 + int(time.Now().UnixNano()%12000)
			}
			for port := start; port <= maxMembershipPort && *w.dst == 0; port++ {
				if take(port) {
					*w.dst = port
				}
			}
			if *w.dst != 0 {
				continue
			}
		}
		if w.preferred != 0 && take(w.preferred) {
			*w.dst = w.preferred
			continue
		}
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return p, fmt.Errorf("devstack: find a free port on %s: %w", host, err)
		}
		tcpAddr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			_ = l.Close()
			return p, fmt.Errorf("devstack: unexpected listener address %s", l.Addr())
		}
		held[tcpAddr.Port] = l
		*w.dst = tcpAddr.Port
	}
	return p, nil
}

// storeConfig is the persistence of the server: one SQLite store, or a
// PostgreSQL main store and its visibility store.
type storeConfig struct {
	name             string
	main, visibility *config.SQL
	shards           int
}

func (s storeConfig) persistence() config.Persistence {
	p := config.Persistence{
		DefaultStore:     s.name,
		VisibilityStore:  s.name,
		NumHistoryShards: int32(s.shards), //nolint:gosec // a small positive count
		DataStores:       map[string]config.DataStore{s.name: {SQL: s.main}},
	}
	if s.visibility != nil {
		p.VisibilityStore = s.name + "-visibility"
		p.DataStores[p.VisibilityStore] = config.DataStore{SQL: s.visibility}
	}
	return p
}

func serverConfig(opts Options, p portSet, stores storeConfig, frontend string) *config.Config {
	svc := func(grpc, membership int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpc, MembershipPort: membership, BindOnIP: opts.Host}}
	}
	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: opts.Host},
		},
		Persistence: stores.persistence(),
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        "active",
			CurrentClusterName:       "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": svc(p.frontend, p.mFrontend),
			"history":  svc(p.history, p.mHistory),
			"matching": svc(p.matching, p.mMatching),
			"worker":   svc(p.worker, p.mWorker),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: frontend},
	}
	if p.metrics != 0 {
		cfg.Global.Metrics = &metrics.Config{Prometheus: &metrics.PrometheusConfig{
			ListenAddress: net.JoinHostPort(opts.Host, strconv.Itoa(p.metrics)),
			HandlerPath:   "/metrics",
		}}
	}
	return cfg
}

// pruneMembership deletes the membership rows of earlier runs. This server is
// the only node, so every row is stale; left in place, they delay start-up
// until they expire.
func pruneMembership(ctx context.Context, cfg *config.SQL) error {
	db, err := persistencesql.NewSQLDB(sqlplugin.DbKindMain, cfg, resolver.NewNoopResolver(), serverlog.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("devstack: open %s: %w", cfg.DatabaseName, err)
	}
	defer func() { _ = db.Close() }()
	_, err = db.PruneClusterMembership(ctx, &sqlplugin.PruneClusterMembershipFilter{PruneRecordsBefore: time.Now().Add(100 * 365 * 24 * time.Hour)})
	if err != nil {
		return fmt.Errorf("devstack: clear stale cluster membership in %s: %w", cfg.DatabaseName, err)
	}
	return nil
}
