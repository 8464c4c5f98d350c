package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-ci/sluice/internal/telemetry"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Metrics are the API's Prometheus metrics: the queues' picture, computed
// from the registry and Temporal's visibility when scraped (what an
// autoscaler scales executors on), plus the API's own request latency and
// webhook deliveries.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.HistogramVec
	webhooks *prometheus.CounterVec
}

// NewMetrics registers the API's metrics over svc.
func NewMetrics(svc *Service) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_api_request_duration_seconds", Help: "API request latency by route and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route", "code"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_webhook_deliveries_total", Help: "Webhook deliveries by provider and outcome (started, ignored, duplicate, unauthorized, invalid, error).",
		}, []string{"provider", "outcome"}),
	}
	m.registry.MustRegister(m.requests, m.webhooks, &queueCollector{svc: svc},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	// The Temporal SDK's metrics of this process's client come along.
	return promhttp.HandlerFor(prometheus.Gatherers{m.registry, telemetry.Registry()}, promhttp.HandlerOpts{})
}

func (m *Metrics) webhook(provider, outcome string) {
	if m != nil {
		m.webhooks.WithLabelValues(provider, outcome).Inc()
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// queueCollector computes the queue metrics at scrape time.
type queueCollector struct{ svc *Service }

var (
	descWaiting = prometheus.NewDesc("sluice_queue_builds_waiting",
		"Builds of a queue not yet running, by status: QUEUED (dispatched, waiting for a slot: what autoscaling should count), HELD (QUEUED in its lane: its turn, a delay, an earlier event), BLOCKED, FROZEN, CREATED.",
		[]string{"queue", "status"}, nil)
	descSlots = prometheus.NewDesc("sluice_queue_slots",
		"Slots the queue's active rule gives a member (total) and those running a build (busy).",
		[]string{"queue", "member", "kind"}, nil)
	descLive = prometheus.NewDesc("sluice_queue_live_members",
		"Live members in the queue's active rule.", []string{"queue"}, nil)
	descWaitCode = prometheus.NewDesc("sluice_queue_builds_waiting_by_code",
		"Builds of a queue waiting, by wait_code (no-member, slot-busy, blocked-by, frozen, delayed, min-gap, lane-order, never-served; approval waits hold events, not builds). Counts the first 1000 waiting builds of each queue.",
		[]string{"queue", "wait_code"}, nil)
	descScrapeError = prometheus.NewDesc("sluice_queue_metrics_error",
		"1 when the last scrape could not read the registry or visibility.", nil, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWaiting
	ch <- descSlots
	ch <- descLive
	ch <- descWaitCode
	ch <- descScrapeError
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	failed := 0.0
	if err := c.collect(ctx, ch); err != nil {
		failed = 1
		if c.svc.Logger != nil {
			c.svc.Logger.Warn("queue_metrics_failed", "error", err)
		}
	}
	ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, failed)
}

func (c *queueCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	if c.svc == nil || c.svc.Client == nil {
		return nil
	}
	qs, ms, err := c.svc.registry(ctx)
	if err != nil {
		return err
	}
	now := c.svc.now()
	for _, q := range qs {
		plan := queue.Evaluate(q, ms, now, c.svc.Liveness)
		live := 0
		for _, m := range ms {
			if !m.Serves(q.Name) {
				continue
			}
			total, busy := plan.Allowed[m.Name], m.Running[q.Name]
			if total > 0 {
				live++
			}
			if total == 0 && busy == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(total), q.Name, m.Name, "total")
			ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(busy), q.Name, m.Name, "busy")
		}
		ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(live), q.Name)
		base := fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s", workflows.SAQueue.GetName(), quote(q.Name))
		dispatched := fmt.Sprintf(" AND %s IS NOT NULL", workflows.SADispatchedAt.GetName())
		// Builds run inside their events are counted from the events'
		// memos (SLUICE_BUILDS_IN_EVENTS).
		var owned []Build
		if c.svc.BuildsInEvents {
			if owned, err = c.svc.ownedWaiting(ctx, q.Name, maxWaitingScanned); err != nil {
				return err
			}
		}
		ownedCount := map[string]int{}
		for _, b := range owned {
			label := string(b.Status)
			if b.Status == workflows.StatusQueued && b.QueuedTime.IsZero() {
				label = "HELD"
			}
			ownedCount[label]++
		}
		for _, w := range []struct{ label, where string }{
			// N18: only QUEUED builds that were dispatched wait for a slot
			// (what autoscaling should count); the others wait in their
			// lane (their turn, a delay, an earlier event): HELD.
			{string(workflows.StatusQueued), fmt.Sprintf(" AND %s = '%s'", workflows.SAStatus.GetName(), workflows.StatusQueued) + dispatched},
			{"HELD", fmt.Sprintf(" AND %s = '%s' AND %s IS NULL", workflows.SAStatus.GetName(), workflows.StatusQueued, workflows.SADispatchedAt.GetName())},
			{string(workflows.StatusBlocked), fmt.Sprintf(" AND %s = '%s'", workflows.SAStatus.GetName(), workflows.StatusBlocked)},
			{string(workflows.StatusFrozen), fmt.Sprintf(" AND %s = '%s'", workflows.SAStatus.GetName(), workflows.StatusFrozen)},
			{string(workflows.StatusCreated), fmt.Sprintf(" AND %s = '%s'", workflows.SAStatus.GetName(), workflows.StatusCreated)},
		} {
			n, err := c.svc.count(ctx, base+w.where)
			if err != nil {
				return err
			}
			ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(n+ownedCount[w.label]), q.Name, w.label)
		}
		if err := c.collectWaitCodes(ctx, ch, q, plan, ms, now, owned); err != nil {
			return err
		}
	}
	return nil
}

// maxWaitingScanned bounds how many waiting builds of a queue one scrape
// reads to count them by wait code.
const maxWaitingScanned = 1000

// collectWaitCodes counts queue q's waiting builds by wait code. A build
// dispatched to the queue gets the queue's code from its plan (never-served,
// no-member, min-gap or slot-busy), as `build show` would.
func (c *queueCollector) collectWaitCodes(ctx context.Context, ch chan<- prometheus.Metric, q queue.Queue, plan queue.Plan, ms []queue.Member, now time.Time, owned []Build) error {
	execs, err := c.svc.list(ctx, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s AND %s != '%s'",
		workflows.SAQueue.GetName(), quote(q.Name), workflows.SAStatus.GetName(), workflows.StatusRunning), maxWaitingScanned)
	if err != nil {
		return err
	}
	counts := map[workflows.WaitCode]int{}
	waiting := owned
	for _, ex := range execs {
		if b, ok := buildFromVisibility(ex); ok {
			waiting = append(waiting, b)
		}
	}
	for _, b := range waiting {
		if b.Status.Final() || b.Status == workflows.StatusRunning {
			continue
		}
		code := b.WaitCode
		if code == "" {
			code = workflows.WaitCodeOf(b.Status, b.Reason)
		}
		if b.Status == workflows.StatusQueued && !b.QueuedTime.IsZero() {
			p := plan
			if b.Fork {
				p = queue.EvaluateUntrusted(q, ms, now, c.svc.Liveness)
			}
			code = queueWaitCode(q, p, ms, b.Fork, 0)
		}
		if code != "" {
			counts[code]++
		}
	}
	for _, code := range workflows.WaitCodes() {
		if code == workflows.WaitApproval {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descWaitCode, prometheus.GaugeValue, float64(counts[code]), q.Name, string(code))
	}
	return nil
}
