// Package telemetry wires the Temporal SDK's metrics into Prometheus and,
// when OTEL_EXPORTER_OTLP_ENDPOINT is set, its tracing into OpenTelemetry,
// through the SDK's maintained OpenTelemetry contrib package.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

var (
	once     sync.Once
	registry *prometheus.Registry
	handler  client.MetricsHandler
	initErr  error

	traceMu   sync.Mutex
	providers []*sdktrace.TracerProvider
)

// Shutdown flushes the spans not exported yet (call it before exiting).
func Shutdown(ctx context.Context) error {
	traceMu.Lock()
	ps := providers
	providers = nil
	traceMu.Unlock()
	var errs []error
	for _, tp := range ps {
		errs = append(errs, tp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// Registry is this process's registry of the Temporal SDK's metrics
// (temporal_workflow_task_schedule_to_start_latency_seconds,
// temporal_activity_execution_latency_seconds, ...) and of the metrics
// sluice's workflows emit through the SDK (sluice_build_redispatches,
// sluice_executor_losses). The API's and workers' /metrics serve it next to
// their own.
func Registry() *prometheus.Registry {
	_, _ = MetricsHandler()
	return registry
}

// MetricsHandler is the SDK metrics handler every client of the process
// shares (client.Options.MetricsHandler).
func MetricsHandler() (client.MetricsHandler, error) {
	once.Do(func() {
		registry = prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
		if err != nil {
			initErr = fmt.Errorf("prometheus exporter: %w", err)
			return
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		handler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: mp.Meter("go.temporal.io/sdk")})
	})
	return handler, initErr
}

// Tracing returns the SDK's tracing interceptor exporting spans over OTLP
// (gRPC) when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set;
// nil when tracing is off. Shutdown flushes its spans.
func Tracing(ctx context.Context, service string) (interceptor.ClientInterceptor, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	exp, err := otlptracegrpc.New(ctx) // endpoint, headers, TLS from the standard OTEL_* variables
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	traceMu.Lock()
	providers = append(providers, tp)
	traceMu.Unlock()
	return TracingInterceptor(tp.Tracer("sluice"))
}

// TracingInterceptor is the SDK's OpenTelemetry tracing interceptor over tracer.
func TracingInterceptor(tracer trace.Tracer) (interceptor.ClientInterceptor, error) {
	ic, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tracer})
	if err != nil {
		return nil, fmt.Errorf("tracing interceptor: %w", err)
	}
	return ic, nil
}
