package workers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/telemetry"
	"github.com/sluice-ci/sluice/workflows"
)

// Dial connects to Temporal at address with the TLS and API key settings of
// cfg, logging through logger.
func Dial(ctx context.Context, cfg *config.Config, address string, logger *slog.Logger) (client.Client, error) {
	opts := client.Options{
		HostPort:  address,
		Namespace: cfg.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk")),
	}
	if cfg.TemporalTLS || cfg.TemporalTLSCA != "" || cfg.TemporalTLSCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TemporalTLSCA != "" {
			pem, err := os.ReadFile(cfg.TemporalTLSCA)
			if err != nil {
				return nil, fmt.Errorf("TEMPORAL_TLS_CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("TEMPORAL_TLS_CA: no certificate in %s", cfg.TemporalTLSCA)
			}
			tc.RootCAs = pool
		}
		if cfg.TemporalTLSCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.TemporalTLSCert, cfg.TemporalTLSKey)
			if err != nil {
				return nil, fmt.Errorf("TEMPORAL_TLS_CERT/TEMPORAL_TLS_KEY: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts.ConnectionOptions.TLS = tc
	}
	if !Compress(cfg.TemporalCompression, address) {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if cfg.TemporalAPIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.TemporalAPIKey)
	}
	// The SDK's metrics go to this process's /metrics endpoints; its
	// spans, when OTEL_EXPORTER_OTLP_ENDPOINT is set, to that collector.
	mh, err := telemetry.MetricsHandler()
	if err != nil {
		return nil, err
	}
	opts.MetricsHandler = mh
	tracing, err := telemetry.Tracing(ctx, "sluice")
	if err != nil {
		return nil, err
	}
	if tracing != nil {
		opts.Interceptors = append(opts.Interceptors, tracing)
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(dialCtx, opts)
	if err != nil {
		return nil, &DialError{Address: address, Namespace: cfg.TemporalNamespace, Err: err}
	}
	return c, nil
}

// Compress reports whether calls to the Temporal frontend at address are
// gzip-compressed under the setting TEMPORAL_GRPC_COMPRESSION (auto, gzip
// or none). auto compresses except to a loopback address (the embedded
// server's, or a frontend beside the process): there gzip only spends CPU
// on both ends, ≈4 % of the stack's CPU per build in the bench, to save
// bytes that never cross a network.
func Compress(setting, address string) bool {
	switch setting {
	case "gzip":
		return true
	case "none":
		return false
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// DialError is a Temporal frontend that could not be reached (the CLI exits
// with its own code for it).
type DialError struct {
	Address, Namespace string
	Err                error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("connect to Temporal at %s (namespace %s): %v", e.Address, e.Namespace, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// RegisterSearchAttributes adds sluice's custom search attributes to the
// namespace where they are missing. It is idempotent.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	op := c.OperatorService()
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributes() {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = typ
		case got != typ:
			return fmt.Errorf("search attribute %s exists with type %s, sluice needs %s", name, got, typ)
		}
	}
	if len(missing) > 0 {
		_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("add search attributes to %s: %w", namespace, err)
		}
	}
	return waitSearchAttributes(ctx, c, namespace, searchAttributesWait)
}

// searchAttributesWait bounds how long RegisterSearchAttributes waits for
// Temporal to use attributes just added: a server caches a namespace's
// attributes and refreshes them every 10 s by default (60 s for
// Elasticsearch's).
const searchAttributesWait = 2 * time.Minute

// waitSearchAttributes returns once the frontend accepts a query naming every
// sluice search attribute. A server reads attributes through caches, so ones
// another process added a moment ago are refused ("invalid search attribute")
// until the caches refresh; starting workflows before that would fail them.
// Test servers refresh on every read (system.forceSearchAttributesCacheRefreshOnRead)
// and pass the first probe; production servers need not.
func waitSearchAttributes(ctx context.Context, c client.Client, namespace string, limit time.Duration) error {
	query := searchAttributesProbe()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		var invalid *serviceerror.InvalidArgument
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &invalid):
			return fmt.Errorf("check sluice's search attributes in %s: %w", namespace, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sluice's search attributes were added to %s but the server still refuses them after %s: %w",
				namespace, time.Since(start).Round(time.Second), err)
		case <-time.After(delay):
		}
	}
}

// searchAttributesProbe is a visibility query that names every sluice
// search attribute with a value of its type.
func searchAttributesProbe() string {
	sas := workflows.SearchAttributes()
	names := slices.Sorted(maps.Keys(sas))
	terms := make([]string, 0, len(names))
	for _, name := range names {
		v := "'-'"
		switch sas[name] {
		case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_DOUBLE:
			v = "0"
		case enumspb.INDEXED_VALUE_TYPE_DATETIME:
			v = "'2000-01-01T00:00:00Z'"
		case enumspb.INDEXED_VALUE_TYPE_BOOL:
			v = "false"
		}
		terms = append(terms, name+" = "+v)
	}
	return strings.Join(terms, " OR ")
}

// EnsureRegistry starts the registry workflow unless it runs already.
func EnsureRegistry(ctx context.Context, c client.Client, liveness time.Duration) error {
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.RegistryID,
		TaskQueue:                workflows.ControllerTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "sluice queues and executors",
	}, workflows.RegistryWorkflow, workflows.RegistryInput{Liveness: liveness})
	if err != nil {
		return fmt.Errorf("start the registry workflow: %w", err)
	}
	return nil
}
