package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/config"
)

// getenv returns a getenv function over a fixed map.
func getenv(t *testing.T, vars map[string]string) func(string) string {
	t.Helper()
	return func(k string) string { return vars[k] }
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(t, nil))
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, &config.Config{
		TemporalNamespace:   "default",
		TemporalCompression: "auto",
		DataDir:             filepath.Join(wd, ".sluice"),
		Host:                "127.0.0.1",
		TemporalPort:        7233,
		UIPort:              8233,
		APIAddr:             "127.0.0.1:8080",
		APIURL:              "http://localhost:8080",
		GitHubAPIURL:        "https://api.github.com/",
		GitLabURL:           "https://gitlab.com",
		OIDCScopes:          []string{"openid", "profile", "email", "groups"},
		ExecutorQueues:      []string{"default"},
		ExecutorRuntime:     "auto",
		HeartbeatTimeout:    20 * time.Second,
		AdmitWait:           100 * time.Millisecond,
		MaxAttempts:         3,
		BuildsInEvents:      true,
		ScheduleCatchup:     5 * time.Minute,
		LogRetention:        720 * time.Hour,
		AuditRetention:      8760 * time.Hour,
		CacheMax:            1 << 30,
		ArtifactMax:         1 << 30,
		LivenessTimeout:     75 * time.Second,
		MemberHeartbeat:     3 * time.Second,
		LogLevel:            "info",
		LogFormat:           "text",
		TemporalLogLevel:    "warn",
	}, c)
	// The blob store defaults to a file bucket under the absolute data dir.
	u, err := c.BlobURL()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u, "file://"+filepath.Join(wd, ".sluice", "blobs")+"?"), u)
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]config.ByteSize{
		"0": 0, "1024": 1024, "64k": 64000, "64KiB": 64 << 10, "500MiB": 500 << 20, "2GB": 2e9, "1gib": 1 << 30, "3 TiB": 3 << 40, "7B": 7,
	} {
		var b config.ByteSize
		require.NoError(t, b.UnmarshalText([]byte(in)), in)
		require.Equal(t, want, b, in)
	}
	for _, in := range []string{"", "MiB", "-5", "1.5GB", "5 parsecs", "99999999999TiB"} {
		var b config.ByteSize
		require.Error(t, b.UnmarshalText([]byte(in)), in)
	}
}

func TestLoadEveryVariable(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"TEMPORAL_ADDRESS":               "temporal.example:7233",
		"TEMPORAL_NAMESPACE":             "ci",
		"TEMPORAL_TLS":                   "true",
		"TEMPORAL_TLS_CA":                "/etc/ca.pem",
		"TEMPORAL_TLS_CERT":              "/etc/cert.pem",
		"TEMPORAL_TLS_KEY":               "/etc/key.pem",
		"TEMPORAL_API_KEY":               "key-123",
		"TEMPORAL_GRPC_COMPRESSION":      "none",
		"SLUICE_DATA_DIR":                "/var/lib/sluice",
		"SLUICE_HOST":                    "0.0.0.0",
		"SLUICE_TEMPORAL_PORT":           "17233",
		"SLUICE_UI_PORT":                 "0",
		"SLUICE_METRICS_PORT":            "9090",
		"SLUICE_API_ADDR":                "127.0.0.1:9000",
		"SLUICE_API_URL":                 "https://ci.example",
		"SLUICE_BUILD_API_URL":           "http://sluice-api:8080",
		"SLUICE_API_TOKENS_FILE":         "/etc/sluice/tokens.yaml",
		"SLUICE_TOKEN":                   "tok-123",
		"SLUICE_GITHUB_SECRET":           "gh-secret",
		"SLUICE_GITLAB_TOKEN":            "gl-token",
		"SLUICE_GITLAB_SECRET":           "gl-secret",
		"SLUICE_GITLAB_URL":              "https://gitlab.example",
		"SLUICE_GITHUB_TOKEN":            "gh-token",
		"SLUICE_GITHUB_APP_ID":           "42",
		"SLUICE_GITHUB_APP_KEY_FILE":     "/etc/sluice/app.pem",
		"SLUICE_GITHUB_APP_REPOS":        "acme/*,tools/ci",
		"SLUICE_GITHUB_API_URL":          "https://ghe.example/api/v3/",
		"SLUICE_PUBLIC_URL":              "https://ci.example/sluice",
		"SLUICE_SMTP_URL":                "smtp://mailer:pw@mail.example:587?from=ci@example.com",
		"SLUICE_SLACK_API_URL":           "https://slack.example/api/",
		"SLUICE_TEMPORAL_UI_URL":         "https://temporal.example",
		"SLUICE_OIDC_ISSUER":             "https://id.example",
		"SLUICE_OIDC_CLIENT_ID":          "sluice",
		"SLUICE_OIDC_CLIENT_SECRET":      "oidc-s3cret",
		"SLUICE_OIDC_REDIRECT_URL":       "https://ci.example/ui/oidc/callback",
		"SLUICE_OIDC_NAME":               "Example SSO",
		"SLUICE_OIDC_SCOPES":             "openid,email",
		"SLUICE_SESSION_KEY":             "session-k3y-0123456789",
		"SLUICE_LOCAL_REPOS":             "/srv/repos,/home/ci",
		"SLUICE_EXECUTOR_NAME":           "runner-1",
		"SLUICE_EXECUTOR_QUEUES":         "default,gpu",
		"SLUICE_EXECUTOR_LABELS":         "arch=arm64,os=linux",
		"SLUICE_EXECUTOR_RUNTIME":        "podman",
		"SLUICE_EXECUTOR_RUN_AS":         "ci-builds",
		"SLUICE_CONTAINER_NETWORK":       "sluice-builds",
		"SLUICE_WORK_DIR":                "/scratch",
		"SLUICE_KEEP_WORKSPACES":         "true",
		"SLUICE_BUILD_HEARTBEAT_TIMEOUT": "45s",
		"SLUICE_ADMIT_WAIT":              "750ms",
		"SLUICE_BUILD_MAX_ATTEMPTS":      "7",
		"SLUICE_BUILDS_IN_EVENTS":        "false",
		"SLUICE_SCHEDULE_CATCHUP_WINDOW": "90s",
		"SLUICE_SECRET_KEY":              "k3y",
		"SLUICE_LOG_RETENTION":           "168h",
		"SLUICE_AUDIT_RETENTION":         "2160h",
		"SLUICE_BLOB_URL":                "s3://ci-blobs?region=eu-west-1",
		"SLUICE_CACHE_MAX":               "500MiB",
		"SLUICE_ARTIFACT_MAX":            "2GB",
		"SLUICE_METRICS_ADDR":            "127.0.0.1:9464",
		"SLUICE_TEMPORAL_DB":             "postgres://u:p@db:5432/temporal",
		"SLUICE_TEMPORAL_SHARDS":         "8",
		"SLUICE_DB":                      "postgres://u:p@db:5432/sluice?sslmode=disable",
		"SLUICE_EXECUTOR_LIVENESS":       "1m",
		"SLUICE_MEMBER_HEARTBEAT":        "10s",
		"SLUICE_LOG_LEVEL":               "DEBUG",
		"SLUICE_LOG_FORMAT":              "json",
		"SLUICE_TEMPORAL_LOG_LEVEL":      "error",
	}
	// The table above must name every variable, so a new field gets a test.
	for _, f := range config.Fields() {
		require.Contains(t, vars, f.Env, "TestLoadEveryVariable does not set %s", f.Env)
	}
	c, err := config.Load(getenv(t, vars))
	require.NoError(t, err)
	require.Equal(t, &config.Config{
		TemporalAddress:     "temporal.example:7233",
		TemporalNamespace:   "ci",
		TemporalTLS:         true,
		TemporalTLSCA:       "/etc/ca.pem",
		TemporalTLSCert:     "/etc/cert.pem",
		TemporalTLSKey:      "/etc/key.pem",
		TemporalAPIKey:      "key-123",
		TemporalCompression: "none",
		DataDir:             "/var/lib/sluice",
		Host:                "0.0.0.0",
		TemporalPort:        17233,
		UIPort:              0,
		MetricsPort:         9090,
		APIAddr:             "127.0.0.1:9000",
		APIURL:              "https://ci.example",
		BuildAPIURL:         "http://sluice-api:8080",
		APITokensFile:       "/etc/sluice/tokens.yaml",
		Token:               "tok-123",
		GitHubSecret:        "gh-secret",
		GitLabToken:         "gl-token",
		GitLabSecret:        "gl-secret",
		GitLabURL:           "https://gitlab.example",
		GitHubToken:         "gh-token",
		GitHubAppID:         42,
		GitHubAppKeyFile:    "/etc/sluice/app.pem",
		GitHubAppRepos:      []string{"acme/*", "tools/ci"},
		GitHubAPIURL:        "https://ghe.example/api/v3/",
		PublicURL:           "https://ci.example/sluice",
		SMTPURL:             "smtp://mailer:pw@mail.example:587?from=ci@example.com",
		SlackAPIURL:         "https://slack.example/api/",
		TemporalUIURL:       "https://temporal.example",
		OIDCIssuer:          "https://id.example",
		OIDCClientID:        "sluice",
		OIDCClientSecret:    "oidc-s3cret",
		OIDCRedirectURL:     "https://ci.example/ui/oidc/callback",
		OIDCName:            "Example SSO",
		OIDCScopes:          []string{"openid", "email"},
		SessionKey:          "session-k3y-0123456789",
		LocalRepos:          []string{"/srv/repos", "/home/ci"},
		ExecutorName:        "runner-1",
		ExecutorQueues:      []string{"default", "gpu"},
		ExecutorLabels:      map[string]string{"arch": "arm64", "os": "linux"},
		ExecutorRuntime:     "podman",
		ExecutorRunAs:       "ci-builds",
		ContainerNetwork:    "sluice-builds",
		WorkDir:             "/scratch",
		KeepWorkspaces:      true,
		HeartbeatTimeout:    45 * time.Second,
		AdmitWait:           750 * time.Millisecond,
		MaxAttempts:         7,
		ScheduleCatchup:     90 * time.Second,
		SecretKey:           "k3y",
		LogRetention:        168 * time.Hour,
		AuditRetention:      2160 * time.Hour,
		Blob:                "s3://ci-blobs?region=eu-west-1",
		CacheMax:            500 << 20,
		ArtifactMax:         2e9,
		MetricsAddr:         "127.0.0.1:9464",
		TemporalDB:          "postgres://u:p@db:5432/temporal",
		TemporalShards:      8,
		DB:                  "postgres://u:p@db:5432/sluice?sslmode=disable",
		LivenessTimeout:     time.Minute,
		MemberHeartbeat:     10 * time.Second,
		LogLevel:            "DEBUG",
		LogFormat:           "json",
		TemporalLogLevel:    "error",
	}, c)
}

// Every configured path is absolute after Load: builds run in their own
// workspace, where a relative data directory names another place (the README
// quickstart failed every step that way).
func TestLoadMakesEveryPathAbsolute(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	paths := map[string]string{
		"SLUICE_DATA_DIR":            "state",
		"SLUICE_WORK_DIR":            "./work",
		"SLUICE_API_TOKENS_FILE":     "etc/tokens.yaml",
		"SLUICE_GITHUB_APP_KEY_FILE": "app.pem",
		"TEMPORAL_TLS_CA":            "ca.pem",
		"TEMPORAL_TLS_CERT":          "cert.pem",
		"TEMPORAL_TLS_KEY":           "key.pem",
		"SLUICE_GITHUB_APP_ID":       "1",
		"SLUICE_LOCAL_REPOS":         "repos",
	}
	c, err := config.Load(getenv(t, paths))
	require.NoError(t, err)
	got := map[string]string{
		"SLUICE_DATA_DIR":            c.DataDir,
		"SLUICE_WORK_DIR":            c.WorkDir,
		"SLUICE_API_TOKENS_FILE":     c.APITokensFile,
		"SLUICE_GITHUB_APP_KEY_FILE": c.GitHubAppKeyFile,
		"TEMPORAL_TLS_CA":            c.TemporalTLSCA,
		"TEMPORAL_TLS_CERT":          c.TemporalTLSCert,
		"TEMPORAL_TLS_KEY":           c.TemporalTLSKey,
		"SLUICE_LOCAL_REPOS":         strings.Join(c.LocalRepos, ","),
	}
	for name, v := range got {
		require.Equal(t, filepath.Join(wd, paths[name]), v, name)
	}
	require.Equal(t, filepath.Join(wd, "work"), c.Workspaces())
	// Every variable whose description says it is a file or directory is
	// in the table above, so a new path variable cannot stay relative.
	for _, f := range config.Fields() {
		d := strings.ToLower(f.Desc)
		if strings.Contains(d, " file") || strings.Contains(d, "directory") || strings.HasPrefix(f.Env, "TEMPORAL_TLS_") && f.Env != "TEMPORAL_TLS" {
			if f.Env == "SLUICE_SECRET_KEY" || f.Env == "SLUICE_TEMPORAL_DB" || f.Env == "SLUICE_DB" || f.Env == "SLUICE_BLOB_URL" {
				continue // key material and a URL, not paths
			}
			require.Contains(t, got, f.Env, "%s looks like a path: make Load absolutize it", f.Env)
		}
	}
}

func TestLoadIgnoresUnknownVariables(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(t, map[string]string{"SLUICE_NO_SUCH_THING": "x", "HOME": "/root"}))
	require.NoError(t, err)
	require.Equal(t, "default", c.TemporalNamespace)
}

func TestLoadErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vars map[string]string
		want string // the variable the error must name
		msg  string // a fragment of the explanation
	}{
		{name: "temporal address without port", vars: map[string]string{"TEMPORAL_ADDRESS": "temporal.example"}, want: "TEMPORAL_ADDRESS", msg: "host:port"},
		{name: "blank namespace", vars: map[string]string{"TEMPORAL_NAMESPACE": "  "}, want: "TEMPORAL_NAMESPACE", msg: "must not be empty"},
		{name: "tls cert without key", vars: map[string]string{"TEMPORAL_TLS_CERT": "/etc/cert.pem"}, want: "TEMPORAL_TLS_CERT", msg: "go together"},
		{name: "tls key without cert", vars: map[string]string{"TEMPORAL_TLS_KEY": "/etc/key.pem"}, want: "TEMPORAL_TLS_CERT", msg: "TEMPORAL_TLS_KEY"},
		{name: "temporal port too large", vars: map[string]string{"SLUICE_TEMPORAL_PORT": "70000"}, want: "SLUICE_TEMPORAL_PORT", msg: "out of range"},
		{name: "ui port negative", vars: map[string]string{"SLUICE_UI_PORT": "-1"}, want: "SLUICE_UI_PORT", msg: "out of range"},
		{name: "metrics port too large", vars: map[string]string{"SLUICE_METRICS_PORT": "65536"}, want: "SLUICE_METRICS_PORT", msg: "out of range"},
		{name: "port not a number", vars: map[string]string{"SLUICE_TEMPORAL_PORT": "http"}, want: "SLUICE_TEMPORAL_PORT", msg: `"http"`},
		{name: "unknown compression", vars: map[string]string{"TEMPORAL_GRPC_COMPRESSION": "zstd"}, want: "TEMPORAL_GRPC_COMPRESSION", msg: "auto, gzip or none"},
		{name: "tls not a bool", vars: map[string]string{"TEMPORAL_TLS": "maybe"}, want: "TEMPORAL_TLS", msg: `"maybe"`},
		{name: "keep workspaces not a bool", vars: map[string]string{"SLUICE_KEEP_WORKSPACES": "sometimes"}, want: "SLUICE_KEEP_WORKSPACES", msg: `"sometimes"`},
		{name: "api addr without port", vars: map[string]string{"SLUICE_API_ADDR": "localhost"}, want: "SLUICE_API_ADDR", msg: "[host]:port"},
		{name: "api url without scheme", vars: map[string]string{"SLUICE_API_URL": "localhost:8080"}, want: "SLUICE_API_URL", msg: "http(s) URL"},
		{name: "api url ftp", vars: map[string]string{"SLUICE_API_URL": "ftp://ci.example"}, want: "SLUICE_API_URL", msg: "http(s) URL"},
		{name: "api url without host", vars: map[string]string{"SLUICE_API_URL": "http://"}, want: "SLUICE_API_URL", msg: "http(s) URL"},
		{name: "build api url without scheme", vars: map[string]string{"SLUICE_BUILD_API_URL": "sluice-api:8080"}, want: "SLUICE_BUILD_API_URL", msg: "http(s) URL"},
		{name: "empty queue in list", vars: map[string]string{"SLUICE_EXECUTOR_QUEUES": "default,,gpu"}, want: "SLUICE_EXECUTOR_QUEUES", msg: "empty queue name"},
		{name: "only separators as queues", vars: map[string]string{"SLUICE_EXECUTOR_QUEUES": ","}, want: "SLUICE_EXECUTOR_QUEUES", msg: "empty queue name"},
		{name: "label without value", vars: map[string]string{"SLUICE_EXECUTOR_LABELS": "arch"}, want: "SLUICE_EXECUTOR_LABELS", msg: "key=value"},
		{name: "unknown runtime", vars: map[string]string{"SLUICE_EXECUTOR_RUNTIME": "lxc"}, want: "SLUICE_EXECUTOR_RUNTIME", msg: "host, docker, podman or auto"},
		{name: "run as a bad gid", vars: map[string]string{"SLUICE_EXECUTOR_RUN_AS": "1000:staff"}, want: "SLUICE_EXECUTOR_RUN_AS", msg: "uid[:gid]"},
		{name: "run as a negative uid", vars: map[string]string{"SLUICE_EXECUTOR_RUN_AS": "-1"}, want: "SLUICE_EXECUTOR_RUN_AS", msg: "uid[:gid]"},
		{name: "container network host", vars: map[string]string{"SLUICE_CONTAINER_NETWORK": "host"}, want: "SLUICE_CONTAINER_NETWORK", msg: "network of their own"},
		{name: "container network of a container", vars: map[string]string{"SLUICE_CONTAINER_NETWORK": "container:temporal"}, want: "SLUICE_CONTAINER_NETWORK", msg: "network of their own"},
		{name: "container network option", vars: map[string]string{"SLUICE_CONTAINER_NETWORK": "--privileged"}, want: "SLUICE_CONTAINER_NETWORK", msg: "network name"},
		{name: "label with empty key", vars: map[string]string{"SLUICE_EXECUTOR_LABELS": "=arm64"}, want: "SLUICE_EXECUTOR_LABELS", msg: "empty label key"},
		{name: "heartbeat timeout not a duration", vars: map[string]string{"SLUICE_BUILD_HEARTBEAT_TIMEOUT": "soon"}, want: "SLUICE_BUILD_HEARTBEAT_TIMEOUT", msg: `"soon"`},
		{name: "heartbeat timeout zero", vars: map[string]string{"SLUICE_BUILD_HEARTBEAT_TIMEOUT": "0s"}, want: "SLUICE_BUILD_HEARTBEAT_TIMEOUT", msg: "positive"},
		{name: "heartbeat timeout below a second", vars: map[string]string{"SLUICE_BUILD_HEARTBEAT_TIMEOUT": "500ms"}, want: "SLUICE_BUILD_HEARTBEAT_TIMEOUT", msg: "at least 1s"},
		{name: "liveness not a duration", vars: map[string]string{"SLUICE_EXECUTOR_LIVENESS": "15"}, want: "SLUICE_EXECUTOR_LIVENESS", msg: `"15"`},
		{name: "liveness negative", vars: map[string]string{"SLUICE_EXECUTOR_LIVENESS": "-5s"}, want: "SLUICE_EXECUTOR_LIVENESS", msg: "positive"},
		{name: "member heartbeat zero", vars: map[string]string{"SLUICE_MEMBER_HEARTBEAT": "0s"}, want: "SLUICE_MEMBER_HEARTBEAT", msg: "positive"},
		{name: "member heartbeat not a duration", vars: map[string]string{"SLUICE_MEMBER_HEARTBEAT": "often"}, want: "SLUICE_MEMBER_HEARTBEAT", msg: `"often"`},
		{name: "liveness under twice the heartbeat", vars: map[string]string{"SLUICE_EXECUTOR_LIVENESS": "5s", "SLUICE_MEMBER_HEARTBEAT": "3s"}, want: "SLUICE_EXECUTOR_LIVENESS", msg: "twice SLUICE_MEMBER_HEARTBEAT"},
		{name: "bad metrics address", vars: map[string]string{"SLUICE_METRICS_ADDR": "9464"}, want: "SLUICE_METRICS_ADDR", msg: "[host]:port"},
		{name: "negative log retention", vars: map[string]string{"SLUICE_LOG_RETENTION": "-1h"}, want: "SLUICE_LOG_RETENTION", msg: "must not be negative"},
		{name: "blob url without scheme", vars: map[string]string{"SLUICE_BLOB_URL": "/var/lib/blobs"}, want: "SLUICE_BLOB_URL", msg: "file:///dir or s3://"},
		{name: "blob url unsupported scheme", vars: map[string]string{"SLUICE_BLOB_URL": "gs://bucket"}, want: "SLUICE_BLOB_URL", msg: "file:///dir or s3://"},
		{name: "blob url file with a host", vars: map[string]string{"SLUICE_BLOB_URL": "file://blobs/x"}, want: "SLUICE_BLOB_URL", msg: "file:///absolute/dir"},
		{name: "blob url s3 without bucket", vars: map[string]string{"SLUICE_BLOB_URL": "s3://?region=x"}, want: "SLUICE_BLOB_URL", msg: "no bucket"},
		{name: "artifact max not a size", vars: map[string]string{"SLUICE_ARTIFACT_MAX": "huge"}, want: "SLUICE_ARTIFACT_MAX", msg: "500MiB"},
		{name: "cache max unknown unit", vars: map[string]string{"SLUICE_CACHE_MAX": "5 parsecs"}, want: "SLUICE_CACHE_MAX", msg: "unknown unit"},
		{name: "cache max not a size", vars: map[string]string{"SLUICE_CACHE_MAX": "lots"}, want: "SLUICE_CACHE_MAX", msg: "500MiB"},
		{name: "temporal db not postgres", vars: map[string]string{"SLUICE_TEMPORAL_DB": "mysql://x"}, want: "SLUICE_TEMPORAL_DB", msg: "postgres:// URL"},
		{name: "db not postgres", vars: map[string]string{"SLUICE_DB": "mysql://u:hunter2@db/sluice"}, want: "SLUICE_DB", msg: `got scheme "mysql"`},
		{name: "db a file path", vars: map[string]string{"SLUICE_DB": "/var/lib/sluice.db"}, want: "SLUICE_DB", msg: "or a postgres:// URL"},
		{name: "db without a database", vars: map[string]string{"SLUICE_DB": "postgres://u:hunter2@db:5432"}, want: "SLUICE_DB", msg: "no host or no database"},
		{name: "db not a URL", vars: map[string]string{"SLUICE_DB": "postgres://u:hunter2@db:port/sluice"}, want: "SLUICE_DB", msg: "does not parse"},
		{name: "negative shards", vars: map[string]string{"SLUICE_TEMPORAL_SHARDS": "-1"}, want: "SLUICE_TEMPORAL_SHARDS", msg: "0-1024"},
		{name: "catch-up window below Temporal's minimum", vars: map[string]string{"SLUICE_SCHEDULE_CATCHUP_WINDOW": "5s"}, want: "SLUICE_SCHEDULE_CATCHUP_WINDOW", msg: "at least 10s"},
		{name: "max attempts zero", vars: map[string]string{"SLUICE_BUILD_MAX_ATTEMPTS": "0"}, want: "SLUICE_BUILD_MAX_ATTEMPTS", msg: "1-100"},
		{name: "max attempts too many", vars: map[string]string{"SLUICE_BUILD_MAX_ATTEMPTS": "101"}, want: "SLUICE_BUILD_MAX_ATTEMPTS", msg: "1-100"},
		{name: "max attempts not a number", vars: map[string]string{"SLUICE_BUILD_MAX_ATTEMPTS": "three"}, want: "SLUICE_BUILD_MAX_ATTEMPTS", msg: `"three"`},
		{name: "log level unknown", vars: map[string]string{"SLUICE_LOG_LEVEL": "loud"}, want: "SLUICE_LOG_LEVEL", msg: "debug, info, warn or error"},
		{name: "temporal log level unknown", vars: map[string]string{"SLUICE_TEMPORAL_LOG_LEVEL": "trace"}, want: "SLUICE_TEMPORAL_LOG_LEVEL", msg: "debug, info, warn or error"},
		{name: "log format unknown", vars: map[string]string{"SLUICE_LOG_FORMAT": "xml"}, want: "SLUICE_LOG_FORMAT", msg: "text or json"},
		{name: "oidc issuer not a URL", vars: map[string]string{"SLUICE_OIDC_ISSUER": "id.example", "SLUICE_OIDC_CLIENT_ID": "c", "SLUICE_API_TOKENS_FILE": "/t.yaml"}, want: "SLUICE_OIDC_ISSUER", msg: "http(s) URL"},
		{name: "oidc issuer without client", vars: map[string]string{"SLUICE_OIDC_ISSUER": "https://id.example", "SLUICE_API_TOKENS_FILE": "/t.yaml"}, want: "SLUICE_OIDC_CLIENT_ID", msg: "must be set with SLUICE_OIDC_ISSUER"},
		{name: "oidc issuer without tokens file", vars: map[string]string{"SLUICE_OIDC_ISSUER": "https://id.example", "SLUICE_OIDC_CLIENT_ID": "c"}, want: "SLUICE_OIDC_ISSUER", msg: "needs SLUICE_API_TOKENS_FILE"},
		{name: "oidc scopes without openid", vars: map[string]string{"SLUICE_OIDC_ISSUER": "https://id.example", "SLUICE_OIDC_CLIENT_ID": "c", "SLUICE_API_TOKENS_FILE": "/t.yaml", "SLUICE_OIDC_SCOPES": "email"}, want: "SLUICE_OIDC_SCOPES", msg: "must include openid"},
		{name: "session key too short", vars: map[string]string{"SLUICE_SESSION_KEY": "short"}, want: "SLUICE_SESSION_KEY", msg: "want at least 16"},
		{name: "oidc client without issuer", vars: map[string]string{"SLUICE_OIDC_CLIENT_ID": "c"}, want: "SLUICE_OIDC_CLIENT_ID", msg: "without SLUICE_OIDC_ISSUER"},
		{name: "oidc redirect elsewhere", vars: map[string]string{"SLUICE_OIDC_ISSUER": "https://id.example", "SLUICE_OIDC_CLIENT_ID": "c", "SLUICE_API_TOKENS_FILE": "/t.yaml", "SLUICE_OIDC_REDIRECT_URL": "https://ci.example/callback"}, want: "SLUICE_OIDC_REDIRECT_URL", msg: "/ui/oidc/callback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(getenv(t, tt.vars))
			require.Nil(t, c)
			require.ErrorIs(t, err, config.ErrInvalid)
			require.ErrorContains(t, err, tt.want+": ")
			require.ErrorContains(t, err, tt.msg)
			require.NotContains(t, err.Error(), "hunter2", "no password in an error")
			// Exactly one problem: the one the case provokes.
			require.Len(t, problems(err), 1, "%v", err)
		})
	}
}

func TestLoadEdgeValuesAreValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		vars  map[string]string
		check func(t *testing.T, c *config.Config)
	}{
		{name: "liveness exactly twice the heartbeat", vars: map[string]string{"SLUICE_EXECUTOR_LIVENESS": "6s", "SLUICE_MEMBER_HEARTBEAT": "3s"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, 6*time.Second, c.LivenessTimeout)
			require.Equal(t, 3*time.Second, c.MemberHeartbeat)
		}},
		{name: "heartbeat timeout exactly 1s", vars: map[string]string{"SLUICE_BUILD_HEARTBEAT_TIMEOUT": "1s"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, time.Second, c.HeartbeatTimeout)
		}},
		{name: "max attempts bounds low", vars: map[string]string{"SLUICE_BUILD_MAX_ATTEMPTS": "1"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, 1, c.MaxAttempts)
		}},
		{name: "max attempts bounds high", vars: map[string]string{"SLUICE_BUILD_MAX_ATTEMPTS": "100"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, 100, c.MaxAttempts)
		}},
		{name: "ports at the edges", vars: map[string]string{"SLUICE_TEMPORAL_PORT": "65535", "SLUICE_UI_PORT": "0"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, 65535, c.TemporalPort)
			require.Zero(t, c.UIPort)
		}},
		{name: "temporal address with ipv6 host", vars: map[string]string{"TEMPORAL_ADDRESS": "[::1]:7233"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, "[::1]:7233", c.TemporalAddress)
		}},
		{name: "tls cert and key together", vars: map[string]string{"TEMPORAL_TLS_CERT": "c.pem", "TEMPORAL_TLS_KEY": "k.pem"}, check: func(t *testing.T, c *config.Config) {
			require.True(t, filepath.IsAbs(c.TemporalTLSCert) && filepath.Base(c.TemporalTLSCert) == "c.pem", c.TemporalTLSCert)
			require.True(t, filepath.IsAbs(c.TemporalTLSKey) && filepath.Base(c.TemporalTLSKey) == "k.pem", c.TemporalTLSKey)
		}},
		{name: "every queue", vars: map[string]string{"SLUICE_EXECUTOR_QUEUES": "*"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, []string{"*"}, c.ExecutorQueues)
		}},
		{name: "log level in capitals", vars: map[string]string{"SLUICE_LOG_LEVEL": "WARN", "SLUICE_LOG_FORMAT": "JSON"}, check: func(t *testing.T, c *config.Config) {
			require.Equal(t, "warn", strings.ToLower(c.LogLevel))
			require.Equal(t, "json", strings.ToLower(c.LogFormat))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(getenv(t, tt.vars))
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestLoadReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := config.Load(getenv(t, map[string]string{
		"TEMPORAL_ADDRESS":          "nope",
		"SLUICE_UI_PORT":            "99999",
		"SLUICE_TEMPORAL_PORT":      "grpc",
		"SLUICE_MEMBER_HEARTBEAT":   "sometimes",
		"SLUICE_BUILD_MAX_ATTEMPTS": "0",
		"SLUICE_LOG_LEVEL":          "chatty",
		"SLUICE_LOG_FORMAT":         "yaml",
		"TEMPORAL_TLS_KEY":          "k.pem",
	}))
	require.ErrorIs(t, err, config.ErrInvalid)
	for _, name := range []string{
		"TEMPORAL_ADDRESS", "SLUICE_UI_PORT", "SLUICE_TEMPORAL_PORT", "SLUICE_MEMBER_HEARTBEAT",
		"SLUICE_BUILD_MAX_ATTEMPTS", "SLUICE_LOG_LEVEL", "SLUICE_LOG_FORMAT", "TEMPORAL_TLS_CERT",
	} {
		require.ErrorContains(t, err, name+": ")
	}
	// One line per problem: a variable that fails to parse is not reported
	// a second time for the zero value it was left with.
	require.Len(t, problems(err), 8, "%v", err)
}

func TestValidateOnAStruct(t *testing.T) {
	t.Parallel()
	c, err := config.Load(getenv(t, nil))
	require.NoError(t, err)
	require.NoError(t, c.Validate())

	c.DataDir = ""
	c.ExecutorQueues = nil
	err = c.Validate()
	require.ErrorIs(t, err, config.ErrInvalid)
	require.ErrorContains(t, err, "SLUICE_DATA_DIR: must not be empty")
	require.ErrorContains(t, err, "SLUICE_EXECUTOR_QUEUES: must name at least one queue")
}

func TestFieldsCoverEveryTaggedField(t *testing.T) {
	t.Parallel()
	fields := config.Fields()
	typ := reflect.TypeFor[config.Config]()
	var tagged []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		env := f.Tag.Get("env")
		require.NotEmpty(t, env, "field %s has no env tag", f.Name)
		tagged = append(tagged, env)
	}
	got := make([]string, 0, len(fields))
	seen := map[string]bool{}
	for _, f := range fields {
		got = append(got, f.Env)
		require.False(t, seen[f.Env], "%s listed twice", f.Env)
		seen[f.Env] = true
		require.NotEmpty(t, strings.TrimSpace(f.Desc), "%s has no description", f.Env)
	}
	require.Equal(t, tagged, got, "Fields lists every variable in declaration order")

	byEnv := map[string]config.Field{}
	for _, f := range fields {
		byEnv[f.Env] = f
	}
	require.Equal(t, "7233", byEnv["SLUICE_TEMPORAL_PORT"].Default)
	require.Equal(t, "default", byEnv["SLUICE_EXECUTOR_QUEUES"].Default)
	require.Empty(t, byEnv["TEMPORAL_ADDRESS"].Default)
}

func TestMarkdownHasARowPerField(t *testing.T) {
	t.Parallel()
	md := config.Markdown()
	lines := strings.Split(strings.TrimRight(md, "\n"), "\n")
	fields := config.Fields()
	require.Len(t, lines, 2+len(fields))
	require.Equal(t, "| variable | default | meaning |", lines[0])
	require.Equal(t, "| --- | --- | --- |", lines[1])
	for i, f := range fields {
		row := lines[2+i]
		require.True(t, strings.HasPrefix(row, "| `"+f.Env+"` | "), "row %d: %s", i, row)
		require.True(t, strings.HasSuffix(row, " | "+f.Desc+" |"), "row %d: %s", i, row)
		if f.Default == "" {
			require.Contains(t, row, "| — |")
		} else {
			require.Contains(t, row, "| `"+f.Default+"` |")
		}
	}
}

func TestExecutorName(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	tests := []struct {
		name string
		cfg  config.Config
		want string
	}{
		{name: "explicit", cfg: config.Config{ExecutorName: "runner-1"}, want: "runner-1"},
		{name: "host name fallback", cfg: config.Config{}, want: host},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.cfg.Executor()
			require.NotEmpty(t, got)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestWorkspaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config.Config
		want string
	}{
		{name: "explicit work dir", cfg: config.Config{WorkDir: "/scratch", DataDir: "/data"}, want: "/scratch"},
		{name: "under the data dir", cfg: config.Config{DataDir: "/data"}, want: filepath.Join("/data", "work")},
		{name: "relative default", cfg: config.Config{DataDir: ".sluice"}, want: filepath.Join(".sluice", "work")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.cfg.Workspaces())
		})
	}
}

// problems splits a Load error into its per-variable problems, one per line.
func problems(err error) []string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.TrimSpace(line) != "" {
			out = append(out, line)
		}
	}
	return out
}
