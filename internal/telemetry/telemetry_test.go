package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/internal/devstack"
	"github.com/sluice-ci/sluice/internal/telemetry"
)

func greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

func hello(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out string
	err := workflow.ExecuteActivity(ctx, greet, name).Get(ctx, &out)
	return out, err
}

// TestSDKTelemetry runs a workflow and its activity on a real in-process
// Temporal server through a client with the process's metrics handler and
// the tracing interceptor: the spans of the workflow and the activity are
// recorded, and the SDK's metrics show in the registry /metrics serves.
func TestSDKTelemetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, err := devstack.Start(ctx, devstack.Options{Namespace: "default"})
	require.NoError(t, err)
	defer func() { _ = stack.Stop() }()

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracing, err := telemetry.TracingInterceptor(tp.Tracer("test"))
	require.NoError(t, err)
	mh, err := telemetry.MetricsHandler()
	require.NoError(t, err)
	c, err := client.DialContext(ctx, client.Options{
		HostPort: stack.FrontendAddress(), Namespace: "default", MetricsHandler: mh,
		Interceptors: []interceptor.ClientInterceptor{tracing},
	})
	require.NoError(t, err)
	defer c.Close()
	w := worker.New(c, "telemetry", worker.Options{})
	w.RegisterWorkflow(hello)
	w.RegisterActivity(greet)
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "telemetry"}, hello, "sluice")
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "hello sluice", out)

	require.NoError(t, tp.ForceFlush(ctx))
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	require.Contains(t, names, "StartWorkflow:hello")
	require.Contains(t, names, "RunWorkflow:hello")
	require.Contains(t, names, "StartActivity:greet")
	require.Contains(t, names, "RunActivity:greet")

	// The worker counts the completion after it answered the server, so
	// the client's Get may return first: wait for the counter.
	var joined string
	require.Eventually(t, func() bool {
		families, err := telemetry.Registry().Gather()
		if err != nil {
			return false
		}
		var metrics []string
		for _, f := range families {
			metrics = append(metrics, f.GetName())
		}
		joined = strings.Join(metrics, " ")
		return strings.Contains(joined, "temporal_workflow_completed")
	}, 30*time.Second, 20*time.Millisecond, "SDK metrics reach the registry")
	require.Contains(t, joined, "temporal_activity_execution_latency", joined)
}
