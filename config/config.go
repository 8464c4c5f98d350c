package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/runner"
	"github.com/sluice-ci/sluice/scm"
)

// Config is every setting sluice reads from its environment. Each field names
// its variable and default; the README's configuration table is generated from
// the same tags (see Describe).
type Config struct {
	// TemporalAddress is the host:port of an existing Temporal frontend. Empty
	// means "sluice dev" embeds its own server; other roles require it.
	TemporalAddress string `env:"TEMPORAL_ADDRESS" desc:"host:port of an external Temporal frontend; empty makes 'sluice dev' embed one"`
	// TemporalNamespace is the Temporal namespace sluice uses.
	TemporalNamespace string `env:"TEMPORAL_NAMESPACE" envDefault:"default" desc:"Temporal namespace"`
	// TemporalTLS turns on TLS to the Temporal frontend (system roots, or TemporalTLSCA).
	TemporalTLS bool `env:"TEMPORAL_TLS" envDefault:"false" desc:"use TLS to reach TEMPORAL_ADDRESS"`
	// TemporalTLSCA is a PEM file with the CA that signed the frontend's certificate.
	TemporalTLSCA string `env:"TEMPORAL_TLS_CA" desc:"PEM CA bundle for TEMPORAL_TLS"`
	// TemporalTLSCert and TemporalTLSKey are a client certificate for mTLS.
	TemporalTLSCert string `env:"TEMPORAL_TLS_CERT" desc:"PEM client certificate for mTLS"`
	// TemporalTLSKey is the key of TemporalTLSCert.
	TemporalTLSKey string `env:"TEMPORAL_TLS_KEY" desc:"PEM client key for mTLS"`
	// TemporalAPIKey is sent as a bearer token (Temporal Cloud API keys).
	TemporalAPIKey string `env:"TEMPORAL_API_KEY" desc:"API key sent to the Temporal frontend" json:"-"`
	// TemporalCompression is the gRPC compression of calls to Temporal.
	TemporalCompression string `env:"TEMPORAL_GRPC_COMPRESSION" envDefault:"auto" desc:"gzip compression of gRPC calls to Temporal: auto (none to a loopback address such as the embedded server's, gzip elsewhere), gzip or none"`

	// DataDir holds the embedded server's SQLite file, repository mirrors,
	// workspaces and build logs.
	DataDir string `env:"SLUICE_DATA_DIR" envDefault:".sluice" desc:"state directory: temporal.db, sluice.db (secrets), git mirrors, workspaces, logs"`
	// TemporalDB selects the embedded server's persistence.
	TemporalDB string `env:"SLUICE_TEMPORAL_DB" desc:"persistence of the embedded Temporal server: empty is SQLite in DATA_DIR/temporal.db; postgres://user:password@host:port/temporal?sslmode=disable uses PostgreSQL (databases and schemas created or upgraded at start; visibility in <database>_visibility)" json:"-"`
	// DB is where sluice keeps its own records (pipeline secrets).
	DB string `env:"SLUICE_DB" desc:"database of sluice's own records (pipeline secrets): empty is SQLite in DATA_DIR/sluice.db; postgres://user:password@host:port/sluice?sslmode=disable uses PostgreSQL (database created if missing, schema migrated at start), which two or more API replicas need" json:"-"`
	// TemporalShards is the number of history shards.
	TemporalShards int `env:"SLUICE_TEMPORAL_SHARDS" envDefault:"0" desc:"history shards of the embedded Temporal server (0: 1 on SQLite, 4 on PostgreSQL); fixed when its database is first created"`
	// Host is the interface the embedded servers and the API bind to in dev.
	Host string `env:"SLUICE_HOST" envDefault:"127.0.0.1" desc:"interface the embedded Temporal server and Web UI bind to"`
	// TemporalPort is the embedded Temporal frontend's gRPC port.
	TemporalPort int `env:"SLUICE_TEMPORAL_PORT" envDefault:"7233" desc:"embedded Temporal frontend gRPC port"`
	// UIPort is the embedded Temporal Web UI's port; 0 disables the UI.
	UIPort int `env:"SLUICE_UI_PORT" envDefault:"8233" desc:"embedded Temporal Web UI port (0 disables it)"`
	// MetricsPort exposes the embedded server's Prometheus metrics; 0 disables them.
	MetricsPort int `env:"SLUICE_METRICS_PORT" envDefault:"0" desc:"embedded Temporal server Prometheus port (0 disables)"`

	// APIAddr is where the HTTP API listens.
	APIAddr string `env:"SLUICE_API_ADDR" envDefault:"127.0.0.1:8080" desc:"HTTP API listen address (loopback by default: 0.0.0.0:8080 or :8080 to reach it from other machines, with SLUICE_API_TOKENS_FILE); on loopback it answers only requests whose Host is localhost, 127.0.0.1 or [::1]"`
	// APIURL is how the CLI and remote executors reach the API.
	APIURL string `env:"SLUICE_API_URL" envDefault:"http://localhost:8080" desc:"base URL of the API, used by the CLI and by executors to ship logs"`
	// BuildAPIURL is how builds reach the API (meta get --external,
	// sluice artifact get); empty: APIURL.
	BuildAPIURL string `env:"SLUICE_BUILD_API_URL" desc:"base URL of the API as a build's steps reach it (SD_API_URL: meta get --external, sluice artifact get); empty: SLUICE_API_URL. Container builds need an address the containers reach, e.g. http://host.containers.internal:8080 with the API listening beyond loopback, or the API's service name on the builds' network"`
	// APITokensFile turns on bearer-token authentication for /api/v1.
	APITokensFile string `env:"SLUICE_API_TOKENS_FILE" desc:"YAML file of API tokens with their users, roles and privileges; empty turns authentication off (every request acts as the system)"`
	// Token is the bearer token the CLI and remote executors send to the API.
	Token string `env:"SLUICE_TOKEN" desc:"bearer token the CLI and executors send to the API" json:"-"`
	// GitHubSecret verifies GitHub webhook signatures (X-Hub-Signature-256).
	GitHubSecret string `env:"SLUICE_GITHUB_SECRET" desc:"GitHub webhook secret; empty accepts unsigned deliveries" json:"-"`
	// GitLabSecret verifies GitLab webhook deliveries (X-Gitlab-Token).
	GitLabSecret string `env:"SLUICE_GITLAB_SECRET" desc:"GitLab webhook secret token (X-Gitlab-Token); empty accepts any" json:"-"`

	// LocalRepos are the path prefixes under which pipelines may use a
	// repository on the API's own machine.
	LocalRepos []string `env:"SLUICE_LOCAL_REPOS" envSeparator:"," desc:"comma-separated path prefixes under which a pipeline may use a repository on the API's machine (a local git repository, a plain directory or a file:// URL); empty allows none ('sluice dev': the parent of the directory it starts in). / allows every path"`

	// OIDCIssuer turns on sign-in to the pages with OpenID Connect.
	OIDCIssuer string `env:"SLUICE_OIDC_ISSUER" desc:"OpenID Connect issuer URL people sign in to the pages with (e.g. https://accounts.google.com); needs SLUICE_API_TOKENS_FILE, whose people: section maps claims to roles and privileges; empty: sign-in with an API token only"`
	// OIDCClientID and OIDCClientSecret are sluice's client at the issuer.
	OIDCClientID string `env:"SLUICE_OIDC_CLIENT_ID" desc:"OAuth client ID of sluice at the OIDC issuer"`
	// OIDCClientSecret is the client's secret (empty: a public client, PKCE only).
	OIDCClientSecret string `env:"SLUICE_OIDC_CLIENT_SECRET" desc:"OAuth client secret of sluice at the OIDC issuer (empty: a public client with PKCE only)" json:"-"`
	// OIDCRedirectURL is where the issuer sends people back.
	OIDCRedirectURL string `env:"SLUICE_OIDC_REDIRECT_URL" desc:"redirect URL registered at the issuer (default: SLUICE_PUBLIC_URL, else SLUICE_API_URL, followed by /ui/oidc/callback)"`
	// OIDCScopes are the scopes sluice asks the provider for.
	OIDCScopes []string `env:"SLUICE_OIDC_SCOPES" envDefault:"openid,profile,email,groups" envSeparator:"," desc:"comma-separated scopes sluice asks the OIDC issuer for; the claims that the people: section of SLUICE_API_TOKENS_FILE reads must be in the ID token (a provider that refuses the groups scope, such as Google: openid,profile,email)"`
	// OIDCName names the provider on the sign-in page.
	OIDCName string `env:"SLUICE_OIDC_NAME" desc:"provider name on the sign-in page's 'Sign in with …' button (default: the issuer's host)"`
	// SessionKey signs the pages' session cookies.
	SessionKey string `env:"SLUICE_SESSION_KEY" desc:"key material that signs the pages' session cookies (use a long random string, the same on every API replica); empty: a random key per API process, so sessions end when it restarts" json:"-"`

	// TemporalUIURL is the Temporal Web UI the pages link workflows to.
	TemporalUIURL string `env:"SLUICE_TEMPORAL_UI_URL" desc:"Temporal Web UI base URL that sluice's web pages link each event and build to (sluice dev: its embedded UI)"`
	// PublicURL is the base of the web pages commit statuses link to.
	PublicURL string `env:"SLUICE_PUBLIC_URL" desc:"base URL of sluice's web pages as people reach them, linked from commit statuses (default: SLUICE_API_URL)"`
	// GitHubToken posts commit statuses to GitHub.
	GitHubToken string `env:"SLUICE_GITHUB_TOKEN" desc:"GitHub token that posts commit statuses (fine-grained: Commit statuses read/write; classic: repo:status); read by controllers" json:"-"`
	// GitHubAppID and GitHubAppKeyFile sign in as a GitHub App instead.
	GitHubAppID int64 `env:"SLUICE_GITHUB_APP_ID" desc:"GitHub App ID that posts commit statuses through its installation on each repository (instead of a token), and whose installation tokens read the repositories of pipelines without credentials of their own; read by controllers and the API"`
	// GitHubAppKeyFile is the App's private key (PEM).
	GitHubAppKeyFile string `env:"SLUICE_GITHUB_APP_KEY_FILE" desc:"the GitHub App's private key file (PEM)"`
	// GitHubAppRepos are the repositories the App's installation tokens
	// may read for pipelines without credentials of their own.
	GitHubAppRepos []string `env:"SLUICE_GITHUB_APP_REPOS" envSeparator:"," desc:"comma-separated repositories (owner/repo or owner/*) that pipelines without credentials of their own read and check out with the GitHub App's installation tokens; empty: none. Anyone who may create a pipeline can build what is listed, so list only what every sluice user may read"`
	// GitHubAPIURL is GitHub's REST API (GitHub Enterprise Server: https://<host>/api/v3/).
	GitHubAPIURL string `env:"SLUICE_GITHUB_API_URL" envDefault:"https://api.github.com/" desc:"GitHub REST API base URL (GitHub Enterprise Server: https://<host>/api/v3/); repositories on its host report there"`
	// GitLabToken posts commit statuses to GitLab.
	GitLabToken string `env:"SLUICE_GITLAB_TOKEN" desc:"GitLab access token (api scope, Developer role) that posts commit statuses; read by controllers. The webhook token is SLUICE_GITLAB_SECRET" json:"-"`
	// GitLabURL is the GitLab instance.
	GitLabURL string `env:"SLUICE_GITLAB_URL" envDefault:"https://gitlab.com" desc:"GitLab instance URL; repositories on its host report there"`

	// SMTPURL is the mail server email notifications go through.
	SMTPURL string `env:"SLUICE_SMTP_URL" desc:"mail server of email notifications (a job's settings.email): smtp://[user:password@]host[:port]?from=sluice@example.com (port 587 by default; STARTTLS when the server offers it, and a password is sent only over TLS or to localhost) or smtps://... (TLS from the start, port 465); read by controllers. Empty: no email" json:"-"`
	// SlackAPIURL is Slack's Web API (tests point it elsewhere).
	SlackAPIURL string `env:"SLUICE_SLACK_API_URL" desc:"Slack Web API base URL that Slack notifications with a pipeline's SLUICE_SLACK_TOKEN post to (default: https://slack.com/api/)"`

	// MetricsAddr serves a worker's Prometheus metrics.
	MetricsAddr string `env:"SLUICE_METRICS_ADDR" desc:"host:port where 'sluice worker' serves Prometheus /metrics (empty: off); the API always serves /metrics on its own address"`
	// Blob is the bucket of finished build logs, artifacts and caches.
	Blob string `env:"SLUICE_BLOB_URL" desc:"bucket for finished build logs, artifacts and caches: file:///dir or s3://bucket?region=…[&endpoint=https://host&use_path_style=true] (credentials from the AWS SDK chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile or an instance role); empty is DATA_DIR/blobs. API replicas and executors on other machines need the same s3:// bucket"`
	// ArtifactMax caps the artifacts one build uploads.
	ArtifactMax ByteSize `env:"SLUICE_ARTIFACT_MAX" envDefault:"1GiB" desc:"size cap of the artifacts one build uploads (what it leaves in $SD_ARTIFACTS_DIR), e.g. 500MiB or 2GB: they are uploaded in path order while they fit, and the build's sd-teardown-artifacts log names those skipped. 0 keeps no artifacts"`
	// CacheMax caps the compressed caches of one pipeline.
	CacheMax ByteSize `env:"SLUICE_CACHE_MAX" envDefault:"1GiB" desc:"size budget of one pipeline's build caches in the blob store (compressed; all scopes together), e.g. 500MiB or 2GB; a save that would exceed it evicts that pipeline's least recently used caches first, and an archive larger than the whole budget is not saved. 0 turns caches off"`
	// LogRetention bounds how long build logs are kept.
	LogRetention time.Duration `env:"SLUICE_LOG_RETENTION" envDefault:"720h" desc:"build logs untouched this long are deleted by the API (checked hourly); 0 keeps them forever. Deleting a pipeline deletes its logs"`
	// AuditRetention bounds how long audit records are kept.
	AuditRetention time.Duration `env:"SLUICE_AUDIT_RETENTION" envDefault:"8760h" desc:"audit trail records older than this are deleted by the API (checked hourly; default 365 days); 0 keeps them forever. Deleting a pipeline keeps its records"`
	// SecretKey encrypts pipeline secrets at rest.
	SecretKey string `env:"SLUICE_SECRET_KEY" desc:"key material that encrypts pipeline secrets at rest (AES-256-GCM; use a long random string); empty generates one into DATA_DIR/secrets/secret.key with a warning" json:"-"`
	// ExecutorName is this executor's registry name.
	ExecutorName string `env:"SLUICE_EXECUTOR_NAME" desc:"member name in the registry of this executor or controller (default: the host name for an executor, controller@<host> for a controller; 'local' in dev)"`
	// ExecutorQueues are the queues this executor serves ("*" = all).
	ExecutorQueues []string `env:"SLUICE_EXECUTOR_QUEUES" envDefault:"default" envSeparator:"," desc:"comma-separated queues this executor serves; * serves every queue"`
	// ExecutorLabels are this executor's labels, matched by queue rules.
	ExecutorLabels map[string]string `env:"SLUICE_EXECUTOR_LABELS" envSeparator:"," envKeyValSeparator:"=" desc:"comma-separated key=value labels matched by queue rules"`
	// ExecutorRuntime is how this executor runs builds: host, docker, podman
	// or auto.
	ExecutorRuntime string `env:"SLUICE_EXECUTOR_RUNTIME" envDefault:"auto" desc:"how builds run: host, docker, podman, or auto (docker if 'docker info' answers, else podman if 'podman info' answers, else host)"`
	// ExecutorRunAs is the user host-runtime builds run as.
	ExecutorRunAs string `env:"SLUICE_EXECUTOR_RUN_AS" desc:"user that builds on the host runtime run as: a user name or uid[:gid] (the executor runs as root and switches; SLUICE_DATA_DIR becomes 0700 and SLUICE_WORK_DIR must lie outside it). A 'sluice worker' running as root refuses the host runtime without it; 'root' accepts builds running as root, able to read the worker's token and data ('sluice dev' only warns). See docs/security.md"`
	// ContainerNetwork is the network build containers join.
	ContainerNetwork string `env:"SLUICE_CONTAINER_NETWORK" desc:"network the docker/podman build containers join (--network), e.g. one with no route to Temporal or PostgreSQL (docker-compose.yml: sluice-builds); empty: the runtime's default bridge. 'host' and container:… are refused"`
	// WorkDir is where executors create build workspaces.
	WorkDir string `env:"SLUICE_WORK_DIR" desc:"root of build workspaces (default: DATA_DIR/work)"`
	// KeepWorkspaces keeps build workspaces after builds end, for debugging.
	KeepWorkspaces bool `env:"SLUICE_KEEP_WORKSPACES" envDefault:"false" desc:"keep build workspaces after the build ends"`

	// HeartbeatTimeout is how long a running build may go without a heartbeat
	// before it is dispatched again to another executor.
	HeartbeatTimeout time.Duration `env:"SLUICE_BUILD_HEARTBEAT_TIMEOUT" envDefault:"20s" desc:"a running build whose executor is silent this long is dispatched again"`
	// AdmitWait bounds how long the API waits for a pipeline to number an
	// event it admitted (docs/performance.md, Admission).
	AdmitWait time.Duration `env:"SLUICE_ADMIT_WAIT" envDefault:"100ms" desc:"an event start (API or webhook) waits at most this long for its pipeline to number it; past that it is admitted durably by a signal (the pipeline starts it once) and the answer is 202 with the admission ID (the CLI then asks until the event is numbered)"`
	// MaxAttempts bounds dispatches of one build after executor loss.
	MaxAttempts int `env:"SLUICE_BUILD_MAX_ATTEMPTS" envDefault:"3" desc:"dispatch attempts per build before it fails for executor loss"`
	// BuildsInEvents: pipelines created or updated through this API run
	// their builds inside their events (docs/option-b.md).
	BuildsInEvents bool `env:"SLUICE_BUILDS_IN_EVENTS" envDefault:"true" desc:"run each new event's builds inside the event (one workflow per event, not one per build: a quarter less CPU and history per build, docs/option-b.md); the API stamps it on the pipelines it creates or updates, so pipelines created before keep a build workflow per build until updated. In the Temporal UI a waiting build is found by its event: SluiceOpenBuilds = \"QUEUED@<queue>\". false: every pipeline created or updated starts a build workflow per build"`
	// ScheduleCatchup bounds how late a periodic build may still start.
	ScheduleCatchup time.Duration `env:"SLUICE_SCHEDULE_CATCHUP_WINDOW" envDefault:"5m" desc:"a buildPeriodically fire missed while Temporal was down still starts if it is at most this late; older missed fires are skipped, as Screwdriver does not catch up (minimum 10s)"`
	// LivenessTimeout is a member's lease: a member that does not renew it
	// this long is gone (one that stops gracefully, or loses a build, is gone
	// at once). Members renew at two thirds of it.
	LivenessTimeout time.Duration `env:"SLUICE_EXECUTOR_LIVENESS" envDefault:"75s" desc:"a member's lease in the registry: an executor that has not renewed it this long (every two thirds of it) is no longer a live queue member; one that stops or loses a build is dropped at once"`
	// MemberHeartbeat is how often members check in with the registry.
	MemberHeartbeat time.Duration `env:"SLUICE_MEMBER_HEARTBEAT" envDefault:"3s" desc:"how often executors and controllers read their grants from the registry"`

	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"SLUICE_LOG_LEVEL" envDefault:"info" desc:"debug, info, warn or error"`
	// LogFormat is text or json.
	LogFormat string `env:"SLUICE_LOG_FORMAT" envDefault:"text" desc:"text or json"`
	// TemporalLogLevel filters the embedded server's own logs.
	TemporalLogLevel string `env:"SLUICE_TEMPORAL_LOG_LEVEL" envDefault:"warn" desc:"level of the embedded Temporal server's logs"`
}

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("config: invalid")

// Load reads the configuration from getenv (os.Getenv in main) and validates it.
// Errors name the variable at fault.
func Load(getenv func(string) string) (*Config, error) {
	var c Config
	environ := map[string]string{}
	for _, f := range Fields() {
		if v := getenv(f.Env); v != "" {
			environ[f.Env] = v
		}
	}
	// A value that does not parse is reported under its variable's name (the
	// env package names the struct field), and Validate still runs so every
	// problem shows at once; it skips the variables already reported, whose
	// fields hold zero values.
	var errs []error
	failed := map[string]bool{}
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		errs = append(errs, parseErrors(err, environ, failed)...)
	}
	if err := c.validate(failed); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := c.absolutize(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return &c, nil
}

// absolutize turns every configured path into an absolute one, once, at
// start-up: nothing below Load sees a relative path. Builds run in their own
// workspace (a shell whose working directory is not the worker's), so a
// relative data directory would name a different place there.
func (c *Config) absolutize() error {
	var errs []error
	for name, p := range map[string]*string{
		"SLUICE_DATA_DIR":            &c.DataDir,
		"SLUICE_WORK_DIR":            &c.WorkDir,
		"SLUICE_API_TOKENS_FILE":     &c.APITokensFile,
		"SLUICE_GITHUB_APP_KEY_FILE": &c.GitHubAppKeyFile,
		"TEMPORAL_TLS_CA":            &c.TemporalTLSCA,
		"TEMPORAL_TLS_CERT":          &c.TemporalTLSCert,
		"TEMPORAL_TLS_KEY":           &c.TemporalTLSKey,
	} {
		if *p == "" || filepath.IsAbs(*p) {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: cannot make %q absolute: %w", name, *p, err))
			continue
		}
		*p = abs
	}
	for i, p := range c.LocalRepos {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("SLUICE_LOCAL_REPOS: cannot make %q absolute: %w", p, err))
			continue
		}
		c.LocalRepos[i] = abs
	}
	return errors.Join(errs...)
}

// parseErrors rewrites the env package's errors to name the variable at fault
// and records those variables in failed.
func parseErrors(err error, environ map[string]string, failed map[string]bool) []error {
	all := []error{err}
	var agg env.AggregateError
	if errors.As(err, &agg) {
		all = agg.Errors
	}
	out := make([]error, 0, len(all))
	for _, e := range all {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := reflect.TypeFor[Config]().FieldByName(pe.Name); ok {
				if name := f.Tag.Get("env"); name != "" {
					failed[name] = true
					out = append(out, fmt.Errorf("%s: cannot parse %q: %w", name, environ[name], pe.Err))
					continue
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// Validate checks every field and reports all problems at once, each naming
// its environment variable.
func (c *Config) Validate() error {
	if err := c.validate(nil); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// validate reports every problem except those with variables in skip.
func (c *Config) validate(skip map[string]bool) error {
	var errs []error
	bad := func(name, format string, args ...any) {
		if skip[name] {
			return
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if c.TemporalAddress != "" {
		if _, _, err := net.SplitHostPort(c.TemporalAddress); err != nil {
			bad("TEMPORAL_ADDRESS", "want host:port, got %q", c.TemporalAddress)
		}
	}
	if strings.TrimSpace(c.TemporalNamespace) == "" {
		bad("TEMPORAL_NAMESPACE", "must not be empty")
	}
	if !slices.Contains([]string{"auto", "gzip", "none"}, c.TemporalCompression) {
		bad("TEMPORAL_GRPC_COMPRESSION", "want auto, gzip or none, got %q", c.TemporalCompression)
	}
	if (c.TemporalTLSCert == "") != (c.TemporalTLSKey == "") {
		bad("TEMPORAL_TLS_CERT", "TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together")
	}
	if c.DataDir == "" {
		bad("SLUICE_DATA_DIR", "must not be empty")
	}
	for name, p := range map[string]int{"SLUICE_TEMPORAL_PORT": c.TemporalPort, "SLUICE_UI_PORT": c.UIPort, "SLUICE_METRICS_PORT": c.MetricsPort} {
		if p < 0 || p > 65535 {
			bad(name, "port %d out of range 0-65535", p)
		}
	}
	if c.SMTPURL != "" {
		// Never quoted: it may hold a password.
		if u, err := url.Parse(c.SMTPURL); err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
			bad("SLUICE_SMTP_URL", "want smtp://[user:password@]host[:port]?from=address or smtps://...")
		} else if u.Query().Get("from") == "" {
			bad("SLUICE_SMTP_URL", "names no sender: add ?from=sluice@example.com")
		}
	}
	for name, u := range map[string]string{"SLUICE_TEMPORAL_UI_URL": c.TemporalUIURL, "SLUICE_PUBLIC_URL": c.PublicURL, "SLUICE_GITHUB_API_URL": c.GitHubAPIURL, "SLUICE_GITLAB_URL": c.GitLabURL, "SLUICE_SLACK_API_URL": c.SlackAPIURL} {
		if u == "" {
			continue
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad(name, "want an http(s) URL, got %q", u)
		}
	}
	if c.OIDCIssuer != "" {
		if u, err := url.Parse(c.OIDCIssuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("SLUICE_OIDC_ISSUER", "want an http(s) URL, got %q", c.OIDCIssuer)
		}
		if c.OIDCClientID == "" {
			bad("SLUICE_OIDC_CLIENT_ID", "must be set with SLUICE_OIDC_ISSUER (sluice's client ID at the issuer)")
		}
		if c.APITokensFile == "" {
			bad("SLUICE_OIDC_ISSUER", "needs SLUICE_API_TOKENS_FILE: its people: section maps who signs in to roles and privileges")
		}
		if !slices.Contains(c.OIDCScopes, "openid") {
			bad("SLUICE_OIDC_SCOPES", "must include openid, got %q", strings.Join(c.OIDCScopes, ","))
		}
	} else {
		for name, v := range map[string]string{"SLUICE_OIDC_CLIENT_ID": c.OIDCClientID, "SLUICE_OIDC_CLIENT_SECRET": c.OIDCClientSecret, "SLUICE_OIDC_REDIRECT_URL": c.OIDCRedirectURL} {
			if v != "" {
				bad(name, "set without SLUICE_OIDC_ISSUER")
			}
		}
	}
	if c.SessionKey != "" && len(c.SessionKey) < 16 {
		bad("SLUICE_SESSION_KEY", "is %d characters, want at least 16 (a long random string)", len(c.SessionKey))
	}
	if c.OIDCRedirectURL != "" {
		if u, err := url.Parse(c.OIDCRedirectURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "/ui/oidc/callback" && !strings.HasSuffix(u.Path, "/ui/oidc/callback") {
			bad("SLUICE_OIDC_REDIRECT_URL", "want an http(s) URL ending in /ui/oidc/callback, got %q", c.OIDCRedirectURL)
		}
	}
	if c.GitHubAppID < 0 {
		bad("SLUICE_GITHUB_APP_ID", "must be a positive App ID, got %d", c.GitHubAppID)
	}
	for _, r := range c.GitHubAppRepos {
		if err := scm.CheckAppRepoPattern(r); err != nil {
			bad("SLUICE_GITHUB_APP_REPOS", "%v", err)
		}
	}
	if len(c.GitHubAppRepos) > 0 && c.GitHubAppID == 0 {
		bad("SLUICE_GITHUB_APP_REPOS", "needs SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_APP_KEY_FILE: the repositories are read with the App's tokens")
	}
	if (c.GitHubAppID != 0) != (c.GitHubAppKeyFile != "") {
		bad("SLUICE_GITHUB_APP_ID", "SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_APP_KEY_FILE go together")
	}
	if _, _, err := net.SplitHostPort(c.APIAddr); err != nil {
		bad("SLUICE_API_ADDR", "want [host]:port, got %q", c.APIAddr)
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("SLUICE_API_URL", "want an http(s) URL, got %q", c.APIURL)
	}
	if u, err := url.Parse(c.BuildAPIURL); c.BuildAPIURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		bad("SLUICE_BUILD_API_URL", "want an http(s) URL, got %q", c.BuildAPIURL)
	}
	if len(c.ExecutorQueues) == 0 {
		bad("SLUICE_EXECUTOR_QUEUES", "must name at least one queue")
	}
	for _, q := range c.ExecutorQueues {
		if strings.TrimSpace(q) == "" {
			bad("SLUICE_EXECUTOR_QUEUES", "empty queue name in %q", strings.Join(c.ExecutorQueues, ","))
			break
		}
	}
	switch c.ExecutorRuntime {
	case "host", "docker", "podman", "auto":
	default:
		bad("SLUICE_EXECUTOR_RUNTIME", "want host, docker, podman or auto, got %q", c.ExecutorRuntime)
	}
	if err := runner.CheckRunAsSyntax(c.ExecutorRunAs); err != nil {
		bad("SLUICE_EXECUTOR_RUN_AS", "%v", err)
	}
	if err := runner.CheckNetwork(c.ContainerNetwork); err != nil {
		bad("SLUICE_CONTAINER_NETWORK", "%v", err)
	}
	for k := range c.ExecutorLabels {
		if k == "" {
			bad("SLUICE_EXECUTOR_LABELS", "empty label key")
		}
	}
	positive := map[string]time.Duration{
		"SLUICE_BUILD_HEARTBEAT_TIMEOUT": c.HeartbeatTimeout,
		"SLUICE_EXECUTOR_LIVENESS":       c.LivenessTimeout,
		"SLUICE_MEMBER_HEARTBEAT":        c.MemberHeartbeat,
		"SLUICE_ADMIT_WAIT":              c.AdmitWait,
	}
	for name, d := range positive {
		if d <= 0 {
			bad(name, "must be a positive duration, got %s", d)
		}
	}
	if c.MemberHeartbeat > 0 && c.LivenessTimeout > 0 && c.LivenessTimeout < 2*c.MemberHeartbeat {
		bad("SLUICE_EXECUTOR_LIVENESS", "%s must be at least twice SLUICE_MEMBER_HEARTBEAT (%s)", c.LivenessTimeout, c.MemberHeartbeat)
	}
	if c.HeartbeatTimeout > 0 && c.HeartbeatTimeout < time.Second {
		bad("SLUICE_BUILD_HEARTBEAT_TIMEOUT", "must be at least 1s, got %s", c.HeartbeatTimeout)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("SLUICE_METRICS_ADDR", "want [host]:port, got %q", c.MetricsAddr)
		}
	}
	if c.Blob != "" {
		if u, err := url.Parse(c.Blob); err != nil || (u.Scheme != "file" && u.Scheme != "s3") {
			bad("SLUICE_BLOB_URL", "want file:///dir or s3://bucket?region=…, got %q", c.Blob)
		} else if u.Scheme == "file" && (u.Path == "" || (u.Host != "" && u.Host != "localhost")) {
			bad("SLUICE_BLOB_URL", "want file:///absolute/dir, got %q", c.Blob)
		} else if u.Scheme == "s3" && u.Host == "" {
			bad("SLUICE_BLOB_URL", "want s3://bucket?region=…, the URL names no bucket")
		}
	}
	if c.ArtifactMax < 0 {
		bad("SLUICE_ARTIFACT_MAX", "must not be negative, got %d", c.ArtifactMax)
	}
	if c.CacheMax < 0 {
		bad("SLUICE_CACHE_MAX", "must not be negative, got %d", c.CacheMax)
	}
	if c.LogRetention < 0 {
		bad("SLUICE_LOG_RETENTION", "must not be negative, got %s", c.LogRetention)
	}
	if c.AuditRetention < 0 {
		bad("SLUICE_AUDIT_RETENTION", "must not be negative, got %s", c.AuditRetention)
	}
	if c.ScheduleCatchup < 10*time.Second {
		bad("SLUICE_SCHEDULE_CATCHUP_WINDOW", "must be at least 10s (Temporal's minimum), got %s", c.ScheduleCatchup)
	}
	if c.TemporalDB != "" && !strings.HasPrefix(c.TemporalDB, "postgres://") && !strings.HasPrefix(c.TemporalDB, "postgresql://") {
		bad("SLUICE_TEMPORAL_DB", "want empty (SQLite) or a postgres:// URL")
	}
	if c.DB != "" {
		if u, err := url.Parse(c.DB); err != nil {
			bad("SLUICE_DB", "want empty (SQLite in SLUICE_DATA_DIR) or a postgres:// URL; the value does not parse as a URL")
		} else if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			bad("SLUICE_DB", "want empty (SQLite in SLUICE_DATA_DIR) or a postgres:// URL, got scheme %q", u.Scheme)
		} else if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			bad("SLUICE_DB", "want postgres://user:password@host:port/database, the URL names no host or no database")
		}
	}
	if c.TemporalShards < 0 || c.TemporalShards > 1024 {
		bad("SLUICE_TEMPORAL_SHARDS", "must be 0-1024, got %d", c.TemporalShards)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		bad("SLUICE_BUILD_MAX_ATTEMPTS", "must be 1-100, got %d", c.MaxAttempts)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("SLUICE_LOG_LEVEL", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	switch strings.ToLower(c.TemporalLogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("SLUICE_TEMPORAL_LOG_LEVEL", "want debug, info, warn or error, got %q", c.TemporalLogLevel)
	}
	switch strings.ToLower(c.LogFormat) {
	case "text", "json":
	default:
		bad("SLUICE_LOG_FORMAT", "want text or json, got %q", c.LogFormat)
	}
	return errors.Join(errs...)
}

// Executor returns the executor name, falling back to the host name.
func (c *Config) Executor() string {
	if c.ExecutorName != "" {
		return c.ExecutorName
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "executor"
	}
	return h
}

// Workspaces returns the root of build workspaces.
func (c *Config) Workspaces() string {
	if c.WorkDir != "" {
		return c.WorkDir
	}
	return filepath.Join(c.DataDir, "work")
}

// BlobURL returns the blob store's URL: SLUICE_BLOB_URL, or a file://
// bucket under the (absolute) data directory.
func (c *Config) BlobURL() (string, error) {
	if c.Blob != "" {
		return c.Blob, nil
	}
	return blobstore.DefaultURL(c.DataDir)
}

// ByteSize is a size in bytes read from "1073741824", "500MiB", "2GB", "64k".
type ByteSize int64

// UnmarshalText parses a whole number with an optional, case-insensitive
// unit: B; K/KB, M/MB, G/GB, T/TB (powers of 1000); KiB, MiB, GiB, TiB
// (powers of 1024).
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return fmt.Errorf("want a size such as 500MiB or 2GB, got %q", s)
	}
	var n int64
	if _, err := fmt.Sscan(s[:i], &n); err != nil {
		return fmt.Errorf("want a size such as 500MiB or 2GB, got %q", s)
	}
	units := map[string]int64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "kib": 1 << 10,
		"m": 1e6, "mb": 1e6, "mib": 1 << 20,
		"g": 1e9, "gb": 1e9, "gib": 1 << 30,
		"t": 1e12, "tb": 1e12, "tib": 1 << 40,
	}
	mult, ok := units[strings.ToLower(strings.TrimSpace(s[i:]))]
	if !ok {
		return fmt.Errorf("unknown unit %q in %q (want B, KB, KiB, MB, MiB, GB, GiB, TB or TiB)", s[i:], s)
	}
	if n > 0 && mult > 0 && n > (1<<63-1)/mult {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = ByteSize(n * mult)
	return nil
}

// Field describes one configuration variable for help texts and docs.
type Field struct {
	Env     string `json:"variable"`
	Default string `json:"default,omitempty"`
	Desc    string `json:"description"`
}

// Fields lists every variable in declaration order.
func Fields() []Field {
	t := reflect.TypeFor[Config]()
	out := make([]Field, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		out = append(out, Field{Env: name, Default: f.Tag.Get("envDefault"), Desc: f.Tag.Get("desc")})
	}
	return out
}

// Setting is one variable's effective value (`sluice config`).
type Setting struct {
	Variable    string `json:"variable"`
	Value       string `json:"value"`
	Default     string `json:"default,omitempty"`
	Source      string `json:"source"` // "env" or "default"
	Secret      bool   `json:"secret,omitempty"`
	Description string `json:"description"`
}

// Redacted stands for a secret's value in Effective.
const Redacted = "<redacted>"

// Effective lists every variable's value as getenv (flags first, then the
// environment) sets it, or its default; secrets (TEMPORAL_API_KEY,
// SLUICE_TOKEN, webhook secrets) show as Redacted when set.
func Effective(getenv func(string) string) []Setting {
	t := reflect.TypeFor[Config]()
	out := make([]Setting, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		s := Setting{Variable: name, Default: f.Tag.Get("envDefault"), Source: "default", Secret: f.Tag.Get("json") == "-", Description: f.Tag.Get("desc")}
		s.Value = s.Default
		if v := getenv(name); v != "" {
			s.Value, s.Source = v, "env"
		}
		if s.Secret && s.Value != "" {
			s.Value = Redacted
		}
		out = append(out, s)
	}
	return out
}

// Markdown renders the configuration table for the README.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, f := range Fields() {
		def := f.Default
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Env, def, f.Desc)
	}
	return b.String()
}

// OIDCCallback is the redirect URL the OIDC issuer sends people back to:
// SLUICE_OIDC_REDIRECT_URL, else /ui/oidc/callback under SLUICE_PUBLIC_URL
// or SLUICE_API_URL.
func (c *Config) OIDCCallback() string {
	if c.OIDCRedirectURL != "" {
		return c.OIDCRedirectURL
	}
	base := c.PublicURL
	if base == "" {
		base = c.APIURL
	}
	return strings.TrimRight(base, "/") + "/ui/oidc/callback"
}
