package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// runThroughput: many 1-job events started at once on 2 executors × slots;
// builds per second from the first trigger to the last build's end. The
// job neither collapses nor blocks on itself, so its builds run side by
// side. Baseline: as many bare workflow + activity runs, 16 activity slots
// on 2 workers.
func runThroughput(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStack(ctx, "throughput", stackOptions{})
	if err != nil {
		return "", err
	}
	defer s.close()
	if err := s.createQueue(ctx, b.plan.executorSlots); err != nil {
		return "", err
	}
	if _, err := s.startExecutors(ctx, 2, true); err != nil {
		return "", err
	}
	rec := filepath.Join(s.dir, "records")
	r, err := newRepo(ctx, filepath.Join(s.dir, "repo"), specYAML([]job{{name: "main", requires: []string{"~commit"}, parallel: true, cmd: recordCmd(rec, "true")}}))
	if err != nil {
		return "", err
	}
	const name = "tp"
	if err := s.createPipeline(ctx, name, r.dir); err != nil {
		return "", err
	}
	if _, err := s.runEvents(ctx, name, 1, 1); err != nil { // warm-up: clones the mirror
		return "", err
	}

	n := b.plan.throughputEvents
	b.progress("throughput: %d events at once", n)
	start := time.Now()
	res, err := s.runEvents(ctx, name, n, n)
	if err != nil {
		return "", err
	}
	if bad := failedEvents(res); bad != "" {
		return "", fmt.Errorf("not every event succeeded: %s", bad)
	}
	_, last, err := closedSpan(ctx, s.Client, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND %s = '%s'", workflows.SAPipeline.GetName(), name), n+1)
	if err != nil {
		return "", err
	}
	rate := float64(n) / last.Sub(start).Seconds()
	b.progress("throughput: %d builds in %s", n, last.Sub(start).Round(time.Millisecond))

	bl, err := startBaseline(s.Client, 2, b.plan.executorSlots)
	if err != nil {
		return "", err
	}
	defer bl.stop()
	if _, err := bl.once(ctx, "bare-throughput-warmup"); err != nil {
		return "", err
	}
	b.progress("throughput: %d bare workflow runs at once", n)
	base, err := bl.burst(ctx, "bare-throughput", n)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("throughput builds_per_s=%.2f baseline_per_s=%.2f ratio=%.2f events=%d executors=2 slots=%d",
		rate, base, round2(rate/base), n, 2*b.plan.executorSlots), nil
}

// runEvents starts n commit events of a pipeline, width at a time through
// the API, and waits until they all end.
func (s *stack) runEvents(ctx context.Context, pipeline string, n, width int) (map[string]workflows.EventState, error) {
	ids := make([]string, n)
	err := parallel(n, width, func(i int) error {
		ev, err := s.API.StartEvent(ctx, pipeline, api.StartEventRequest{Type: "commit", Branch: "main"})
		if err != nil {
			return fmt.Errorf("start event %d of %s: %w", i+1, pipeline, err)
		}
		ids[i] = ev.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	return waitEvents(ctx, s.Client, ids)
}

// failedEvents describes the events that did not succeed, or "".
func failedEvents(res map[string]workflows.EventState) string {
	bad, example := 0, ""
	for id, st := range res {
		if st.Status != workflows.StatusSuccess {
			bad++
			example = fmt.Sprintf("%s ended %s: %s", id, st.Status, st.Reason)
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d (e.g. %s)", bad, len(res), example)
}
