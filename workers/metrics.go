package workers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-ci/sluice/internal/telemetry"
)

// Metrics are an executor's Prometheus metrics: how long builds waited in
// their queue before this executor claimed them, how they ended, and its
// slots per queue (the figures an autoscaler scales executors on).
type Metrics struct {
	registry *prometheus.Registry
	wait     *prometheus.HistogramVec
	finished *prometheus.CounterVec
}

// NewMetrics registers an executor's metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_queue_wait_seconds", Help: "Time from a build's dispatch to its queue to its claim by this executor.",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"queue"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_builds_finished_total", Help: "Build attempts this executor ran, by queue and status (interrupted: the executor stopped or lost the attempt).",
		}, []string{"queue", "status"}),
	}
	m.registry.MustRegister(m.wait, m.finished,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Claimed records a claim after the build waited wait in queue.
func (m *Metrics) Claimed(queue string, wait time.Duration) {
	m.wait.WithLabelValues(queue).Observe(wait.Seconds())
}

// Finished records how an attempt ended.
func (m *Metrics) Finished(queue, status string) {
	m.finished.WithLabelValues(queue, status).Inc()
}

// watch exports the agent's slots and running builds per queue.
func (m *Metrics) watch(ag *Agent) {
	m.registry.MustRegister(&agentCollector{ag: ag})
}

// Serve serves /metrics on addr until ctx ends.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{m.registry, telemetry.Registry()}, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

var (
	descExecSlots = prometheus.NewDesc("sluice_executor_slots",
		"Slots this executor has for a queue (0 when the active rule leaves it out).", []string{"queue"}, nil)
	descExecRunning = prometheus.NewDesc("sluice_executor_builds_running",
		"Builds of a queue running on this executor.", []string{"queue"}, nil)
)

type agentCollector struct{ ag *Agent }

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExecSlots
	ch <- descExecRunning
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	c.ag.mu.Lock()
	defer c.ag.mu.Unlock()
	for name, qw := range c.ag.queues {
		ch <- prometheus.MustNewConstMetric(descExecSlots, prometheus.GaugeValue, float64(qw.pool.Limit()), name)
		ch <- prometheus.MustNewConstMetric(descExecRunning, prometheus.GaugeValue, float64(c.ag.running[name]), name)
	}
}
