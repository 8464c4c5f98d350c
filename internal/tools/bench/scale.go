package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// runScale: thousands of builds queued with no executor (one event per
// pipeline, jobs × matrix permutations each), then executors start and
// drain them. The controller runs as its own process so its peak memory is
// its own. The largest history shows whether continue-as-new keeps the
// pipelines and the registry bounded.
func runScale(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStack(ctx, "scale", stackOptions{controllerProcess: true})
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	if err := s.createQueue(ctx, b.plan.executorSlots); err != nil {
		return "", err
	}
	p := b.plan
	total := p.scaleBuilds()
	var vals []string
	for i := range p.scalePerms {
		vals = append(vals, strconv.Itoa(i+1))
	}
	var jobs []job
	for i := range p.scaleJobs {
		jobs = append(jobs, job{
			name: fmt.Sprintf("j%d", i+1), requires: []string{"~commit"}, parallel: true, cmd: "true",
			matrix: map[string][]string{"N": vals},
		})
	}
	spec := specYAML(jobs)
	names := make([]string, p.scalePipelines)
	var first *repo
	for i := range names {
		names[i] = fmt.Sprintf("scale-%d", i+1)
		r, err := newRepo(ctx, filepath.Join(s.dir, names[i]), spec)
		if err != nil {
			return "", err
		}
		if err := s.createPipeline(ctx, names[i], r.dir); err != nil {
			return "", err
		}
		if first == nil {
			first = r
		}
	}

	b.progress("scale: queueing %d builds (%d pipelines × %d jobs × %d permutations) with no executor", total, p.scalePipelines, p.scaleJobs, p.scalePerms)
	start := time.Now()
	ids := make([]string, len(names))
	err = parallel(len(names), len(names), func(i int) error {
		ev, err := s.API.StartEvent(ctx, names[i], api.StartEventRequest{Type: "commit", Branch: "main"})
		if err == nil {
			ev, err = s.numbered(ctx, ev)
		}
		if err != nil {
			return fmt.Errorf("start event of %s: %w", names[i], err)
		}
		ids[i] = ev.ID
		return nil
	})
	if err != nil {
		return "", err
	}
	lastReport := time.Now()
	err = waitFor(ctx, fmt.Sprintf("%d builds to be dispatched to queue %s", total, benchQueue), time.Until(start.Add(time.Hour)), func() (bool, error) {
		n, err := s.dispatched(ctx)
		if err != nil {
			return false, err
		}
		if time.Since(lastReport) > 30*time.Second {
			b.progress("scale: %d/%d builds queued", n, total)
			lastReport = time.Now()
		}
		if s.controller.exited() {
			return false, fmt.Errorf("the controller exited: %s", s.controller.tail())
		}
		time.Sleep(time.Second)
		return n >= total, nil
	})
	if err != nil {
		return "", err
	}
	queued := time.Since(start)
	b.progress("scale: %d builds queued in %s; timing the lists and counts", total, queued.Round(time.Second))
	reads, err := s.timeReads(ctx, names[0])
	if err != nil {
		return "", err
	}
	b.progress("scale: starting %d executors", p.scaleExecutors)

	drainStart := time.Now()
	if _, err := s.startExecutors(ctx, p.scaleExecutors, false); err != nil {
		return "", err
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if n, err := s.dispatched(ctx); err == nil {
					b.progress("scale: %d/%d builds not started", n, total)
				}
			}
		}
	}()
	res, err := waitEvents(ctx, s.Client, ids)
	close(done)
	if err != nil {
		return "", err
	}
	if bad := failedEvents(res); bad != "" {
		return "", fmt.Errorf("not every event succeeded: %s", bad)
	}
	// The drain ends with the last event: an event ends right after its
	// last build, and its result says when, with no visibility lag.
	var last time.Time
	for _, st := range res {
		if st.EndTime.After(last) {
			last = st.EndTime
		}
	}
	drain := last.Sub(drainStart)
	// What `sluice build list` trails the builds by: build workflows, or
	// the events that ran them.
	closed, want := "WorkflowType = 'BuildWorkflow' AND ExecutionStatus != 'Running'", total
	if b.buildsInEvents {
		closed, want = "WorkflowType = 'EventWorkflow' AND ExecutionStatus != 'Running'", len(ids)
	}
	lag := visibilityCatchUp(ctx, s.Client, closed, want, last)
	rss, err := peakRSSMB(s.controller.cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	h, err := largestHistories(ctx, s.Client)
	if err != nil {
		return "", err
	}
	if b.trace {
		// What the largest history is made of: its events by type.
		if err := writeTaskStats(ctx, os.Stderr, s.Client, h.maxID); err != nil {
			return "", err
		}
	}
	// Peak memory before the baseline's workers and checkouts join this
	// process.
	serverRSS := selfRSS()
	// The baseline runs after sluice's drain, on the same server: taking
	// turns would mean queueing the 5,000 builds twice more.
	work, err := newCheckoutWork(ctx, first, filepath.Join(s.dir, "baseline"))
	if err != nil {
		return "", err
	}
	drainRate := float64(total) / drain.Seconds()
	base, err := drainBaseline(ctx, b, s, work, total, p.scaleExecutors, p.executorSlots)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("scale queued=%d drain_builds_per_s=%.2f controller_rss_mb=%.0f max_history_events=%d "+
		"max_history_workflow=%s enqueue_builds_per_s=%.2f pipeline_max_history=%d pipeline_runs=%d registry_max_history=%d registry_runs=%d server_rss_mb=%.0f executors=%d %s "+
		"comparable_drain_per_s=%.2f drain_ratio_comparable=%.2f %s",
		total, drainRate, rss, h.max, h.maxID, float64(total)/queued.Seconds(),
		h.pipelineMax, h.pipelineRuns, h.registryMax, h.registryRuns, serverRSS, p.scaleExecutors, lag,
		base, round2(ratio(drainRate, base)), reads), nil
}

// visibilityCatchUp waits up to three minutes for visibility to list want
// closed executions matching query and says how long after end it did
// ("visibility_lag_s=…"), or how many it still missed ("visibility_missing=…").
// The figure is what `sluice build list` trails the builds by after a burst.
func visibilityCatchUp(ctx context.Context, c client.Client, query string, want int, end time.Time) string {
	deadline := time.Now().Add(3 * time.Minute)
	n := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		got, err := count(ctx, c, query)
		if err == nil {
			n = got
			if n >= want {
				return fmt.Sprintf("visibility_lag_s=%.1f", time.Since(end).Seconds())
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Sprintf("visibility_missing=%d", want-n)
}

// count counts the executions a visibility query matches.
func count(ctx context.Context, c client.Client, query string) (int, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: query})
	if err != nil {
		return 0, fmt.Errorf("count workflows (%s): %w", query, err)
	}
	return int(resp.GetCount()), nil
}

// histories are the largest single runs: overall, of pipelines and of the registry.
type histories struct {
	max                       int
	maxID                     string
	pipelineMax, pipelineRuns int
	registryMax, registryRuns int
}

// largestHistories reads every run's history length: closed runs from
// visibility, running ones from DescribeWorkflowExecution.
func largestHistories(ctx context.Context, c client.Client) (histories, error) {
	var h histories
	// Build workflows are many and small (~34 events each, the history
	// figure); list the rest — pipelines, events, the registry, schedules —
	// and describe one build for the record.
	execs, err := listWorkflows(ctx, c, "WorkflowType != 'BuildWorkflow'")
	if err != nil {
		return h, err
	}
	builds, err := listPage(ctx, c, "WorkflowType = 'BuildWorkflow' AND ExecutionStatus != 'Running'", 1)
	if err != nil {
		return h, err
	}
	execs = append(execs, builds...)
	for _, ex := range execs {
		id := ex.GetExecution().GetWorkflowId()
		n := int(ex.GetHistoryLength())
		if ex.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			d, err := c.DescribeWorkflowExecution(ctx, id, ex.GetExecution().GetRunId())
			if err != nil {
				return h, fmt.Errorf("describe %s: %w", id, err)
			}
			n = int(d.GetWorkflowExecutionInfo().GetHistoryLength())
		}
		if n > h.max {
			h.max, h.maxID = n, id
		}
		switch ex.GetType().GetName() {
		case "PipelineWorkflow":
			h.pipelineMax = max(h.pipelineMax, n)
			h.pipelineRuns++
		case "RegistryWorkflow":
			h.registryMax = max(h.registryMax, n)
			h.registryRuns++
		}
	}
	return h, nil
}

// selfRSS is this process's peak memory (the Temporal server and the API).
func selfRSS() float64 {
	mb, err := peakRSSMB(os.Getpid())
	if err != nil {
		return 0
	}
	return mb
}

// dispatched counts the builds dispatched to the bench's queue and not
// started: build workflows by their dispatch time (a visibility count), or
// the queue's backlog as `sluice queue status` reads it (the events' open
// builds, docs/option-b.md).
func (s *stack) dispatched(ctx context.Context) (int, error) {
	if !s.b.buildsInEvents {
		return count(ctx, s.Client, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s > '2000-01-01T00:00:00Z'",
			workflows.SADispatchedAt.GetName()))
	}
	st, err := s.API.QueueStatus(ctx, benchQueue)
	if err != nil {
		return 0, err
	}
	return st.Backlog, nil
}

// timeReads times what a person's reads cost while the builds wait: the
// first page of `build list` (every queued build, and one pipeline's),
// `queue status`, `build show` of a waiting build (its place in line) and a
// scrape of /metrics (the builds waiting per queue). Build workflows answer
// these from visibility's counts and index; builds inside their events
// from a scan of the events' memos. Each is the median of five tries
// that answered; a try that failed is counted (<name>_failed).
func (s *stack) timeReads(ctx context.Context, pipeline string) (string, error) {
	var waiting string
	reads := []struct {
		name string
		read func() error
	}{
		{"list_queued", func() error {
			bs, err := s.API.ListBuilds(ctx, api.BuildFilter{Status: workflows.StatusQueued})
			if err == nil && len(bs) == 0 {
				err = errors.New("build list -status QUEUED listed nothing")
			}
			if len(bs) > 0 {
				waiting = bs[len(bs)-1].ID
			}
			return err
		}},
		{"list_pipeline", func() error {
			_, err := s.API.ListBuilds(ctx, api.BuildFilter{Pipeline: pipeline})
			return err
		}},
		{"queue_status", func() error {
			_, err := s.API.QueueStatus(ctx, benchQueue)
			return err
		}},
		{"build_show", func() error {
			_, err := s.API.GetBuild(ctx, waiting)
			return err
		}},
		{"metrics", func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+"/metrics", nil)
			if err != nil {
				return err
			}
			resp, err := s.API.HTTP.Do(req)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /metrics: %s", resp.Status)
			}
			return nil
		}},
	}
	var out []string
	for _, r := range reads {
		var ds []time.Duration
		failed := 0
		for range 5 {
			t := time.Now()
			if err := r.read(); err != nil {
				failed++
				s.b.progress("scale: %s failed after %s: %v", r.name, time.Since(t).Round(time.Millisecond), err)
				continue
			}
			ds = append(ds, time.Since(t))
		}
		if failed == 5 {
			return "", fmt.Errorf("%s failed five times", r.name)
		}
		out = append(out, fmt.Sprintf("%s_ms=%.1f", r.name, ms(percentile(ds, 50))))
		if failed > 0 {
			out = append(out, fmt.Sprintf("%s_failed=%d", r.name, failed))
		}
	}
	return strings.Join(out, " "), nil
}
