package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// runLatency: trigger → first step start of a 1-job pipeline over sequential
// events (trigger = the API's StartEvent call; start = the step's own
// timestamp), next to a bare workflow → activity start on the same server.
// One warm-up run of each is not counted (it clones the repository mirror).
func runLatency(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStackWithExecutors(ctx, "latency")
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	rec := filepath.Join(s.dir, "records")
	r, err := newRepo(ctx, filepath.Join(s.dir, "repo"), specYAML([]job{{name: "main", requires: []string{"~commit"}, cmd: recordCmd(rec, "true")}}))
	if err != nil {
		return "", err
	}
	if err := s.createPipeline(ctx, "lat", r.dir); err != nil {
		return "", err
	}
	n := b.plan.latencyEvents
	b.progress("latency: %d sequential events (+1 warm-up)", n)
	var lats []time.Duration
	var lastT0, lastStep time.Time
	var lastEvent int
	// phases: trigger → event workflow → build workflow → lane grant
	// (dispatch) → executor claim → step start.
	phases := make([][]time.Duration, 5)
	for i := range n + 1 {
		t0 := time.Now()
		ev, err := s.API.StartEvent(ctx, "lat", api.StartEventRequest{Type: "commit", Branch: "main"})
		if err != nil {
			return "", fmt.Errorf("start event %d: %w", i+1, err)
		}
		res, err := waitEvents(ctx, s.Client, []string{ev.ID})
		if err != nil {
			return "", err
		}
		if st := res[ev.ID]; st.Status != workflows.StatusSuccess {
			return "", fmt.Errorf("event %s ended %s: %s", ev.ID, st.Status, st.Reason)
		}
		spans, err := readRecords(rec)
		if err != nil {
			return "", err
		}
		build := workflows.BuildRef{Pipeline: "lat", Job: "main", Event: ev.Number}.String()
		sp, ok := spans[build]
		if !ok {
			return "", fmt.Errorf("build %s succeeded but its step recorded no start", build)
		}
		lastT0, lastStep, lastEvent = t0, sp.start, ev.Number
		if i > 0 {
			lats = append(lats, sp.start.Sub(t0))
			var bs workflows.BuildState
			if err := s.Client.GetWorkflow(ctx, workflows.BuildRef{Pipeline: "lat", Job: "main", Event: ev.Number}.WorkflowID(), "").Get(ctx, &bs); err != nil {
				return "", fmt.Errorf("build %s: %w", build, err)
			}
			marks := []time.Time{t0, res[ev.ID].StartTime, bs.CreateTime, bs.QueuedTime, bs.StartTime, sp.start}
			for k := range phases {
				phases[k] = append(phases[k], marks[k+1].Sub(marks[k]))
			}
		}
		if (i+1)%50 == 0 {
			b.progress("latency: %d/%d events, p50 so far %.1f ms", i+1, n+1, ms(percentile(lats, 50)))
		}
	}
	if b.trace {
		fmt.Fprintf(os.Stderr, "latency: timeline of event lat/%d (trigger at 0, step started at %.1f ms)\n", lastEvent, ms(lastStep.Sub(lastT0)))
		ref := workflows.BuildRef{Pipeline: "lat", Job: "main", Event: lastEvent}
		if err := writeTrace(ctx, os.Stderr, s.Client, lastT0, workflows.PipelineWorkflowID("lat"), ref.EventRef().WorkflowID(), ref.WorkflowID()); err != nil {
			return "", err
		}
	}

	bl, err := startBaseline(s.Client, 1, b.plan.executorSlots)
	if err != nil {
		return "", err
	}
	defer bl.stop()
	b.progress("latency: %d sequential bare workflow runs (+1 warm-up)", n)
	var base []time.Duration
	for i := range n + 1 {
		d, err := bl.once(ctx, fmt.Sprintf("bare-latency-%d", i))
		if err != nil {
			return "", err
		}
		if i > 0 {
			base = append(base, d)
		}
	}
	p50, p99, b50 := percentile(lats, 50), percentile(lats, 99), percentile(base, 50)
	return fmt.Sprintf("latency p50_ms=%.1f p99_ms=%.1f baseline_p50_ms=%.1f ratio_p50=%.2f baseline_p99_ms=%.1f events=%d "+
		"p50_event_ms=%.1f p50_build_ms=%.1f p50_grant_ms=%.1f p50_claim_ms=%.1f p50_step_ms=%.1f",
		ms(p50), ms(p99), ms(b50), round2(float64(p50)/float64(b50)), ms(percentile(base, 99)), n,
		ms(percentile(phases[0], 50)), ms(percentile(phases[1], 50)), ms(percentile(phases[2], 50)),
		ms(percentile(phases[3], 50)), ms(percentile(phases[4], 50))), nil
}
