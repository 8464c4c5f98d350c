package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	s, err := b.newStackWithExecutors(ctx, "throughput")
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
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
	self0, members0 := s.cpuParts()
	cpu0 := self0 + members0
	start := time.Now()
	ids, accepted, err := s.startEvents(ctx, name, n, n)
	if err != nil {
		return "", err
	}
	res, err := waitEvents(ctx, s.Client, ids)
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
	self1, members1 := s.cpuParts()
	cpuPerBuild := (self1 + members1 - cpu0) / time.Duration(n)
	b.progress("throughput: CPU per build %.1f ms: %.1f ms in the server, controller and API, %.1f ms in the executors and their steps",
		ms(cpuPerBuild), ms((self1-self0)/time.Duration(n)), ms((members1-members0)/time.Duration(n)))
	b.progress("throughput: %d builds in %s", n, last.Sub(start).Round(time.Millisecond))
	if st, err := s.stages(ctx, start, accepted, res); err == nil {
		b.progress("throughput: stages after the first trigger: %s", st)
	} else {
		b.progress("throughput: stages: %v", err)
	}
	if b.trace {
		if err := writeTaskStats(ctx, os.Stderr, s.Client, workflows.PipelineWorkflowID(name)); err != nil {
			return "", err
		}
		mid, err := workflows.ParseEventRef(ids[len(ids)/2])
		if err != nil {
			return "", err
		}
		build := workflows.BuildRef{Pipeline: name, Job: "main", Event: mid.Number}
		fmt.Fprintf(os.Stderr, "throughput: timeline of event %s (0 = the first trigger)\n", mid)
		if err := writeTrace(ctx, os.Stderr, s.Client, start, mid.WorkflowID(), build.WorkflowID()); err != nil {
			return "", err
		}
	}

	bl, err := startBaseline(s.Client, 2, b.plan.executorSlots)
	if err != nil {
		return "", err
	}
	defer bl.stop()
	if _, err := bl.once(ctx, "bare-throughput-warmup"); err != nil {
		return "", err
	}
	b.progress("throughput: %d bare workflow runs at once", n)
	cpu0 = s.cpuTime()
	base, err := bl.burst(ctx, "bare-throughput", n)
	if err != nil {
		return "", err
	}
	baseCPU := (s.cpuTime() - cpu0) / time.Duration(n)
	return fmt.Sprintf("throughput builds_per_s=%.2f baseline_per_s=%.2f ratio=%.2f events=%d executors=2 slots=%d cpu_ms_per_build=%.1f baseline_cpu_ms_per_run=%.1f",
		rate, base, round2(rate/base), n, 2*b.plan.executorSlots, ms(cpuPerBuild), ms(baseCPU)), nil
}

// runEvents starts n commit events of a pipeline, width at a time through
// the API, and waits until they all end.
func (s *stack) runEvents(ctx context.Context, pipeline string, n, width int) (map[string]workflows.EventState, error) {
	ids, _, err := s.startEvents(ctx, pipeline, n, width)
	if err != nil {
		return nil, err
	}
	return waitEvents(ctx, s.Client, ids)
}

// startEvents starts n commit events of a pipeline, width at a time, and
// returns their IDs and when the API answered each.
func (s *stack) startEvents(ctx context.Context, pipeline string, n, width int) ([]string, []time.Time, error) {
	ids := make([]string, n)
	accepted := make([]time.Time, n)
	err := parallel(n, width, func(i int) error {
		ev, err := s.API.StartEvent(ctx, pipeline, api.StartEventRequest{Type: "commit", Branch: "main"})
		if err != nil {
			return fmt.Errorf("start event %d of %s: %w", i+1, pipeline, err)
		}
		ids[i], accepted[i] = ev.ID, time.Now()
		return nil
	})
	return ids, accepted, err
}

// stages reports, for builds started together, when (after start) they
// reached each stage: median and last. It shows where a burst queues up.
func (s *stack) stages(ctx context.Context, start time.Time, accepted []time.Time, res map[string]workflows.EventState) (string, error) {
	var refs []workflows.BuildRef
	var evStarts []time.Time
	for _, st := range res {
		evStarts = append(evStarts, st.StartTime)
		for _, j := range st.Jobs {
			for _, id := range j.Builds {
				ref, err := workflows.ParseBuildRef(id)
				if err != nil {
					return "", err
				}
				refs = append(refs, ref)
			}
		}
	}
	states := make([]workflows.BuildState, len(refs))
	err := parallel(len(refs), 32, func(i int) error {
		if err := s.Client.GetWorkflow(ctx, refs[i].WorkflowID(), "").Get(ctx, &states[i]); err != nil {
			return fmt.Errorf("build %s: %w", refs[i], err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	pick := func(f func(workflows.BuildState) time.Time) []time.Time {
		out := make([]time.Time, 0, len(states))
		for _, st := range states {
			out = append(out, f(st))
		}
		return out
	}
	rows := []struct {
		name  string
		times []time.Time
	}{
		{"accepted", accepted},
		{"event_started", evStarts},
		{"build_created", pick(func(b workflows.BuildState) time.Time { return b.CreateTime })},
		{"granted", pick(func(b workflows.BuildState) time.Time { return b.QueuedTime })},
		{"claimed", pick(func(b workflows.BuildState) time.Time { return b.StartTime })},
		{"ended", pick(func(b workflows.BuildState) time.Time { return b.EndTime })},
	}
	var out []string
	for _, r := range rows {
		ds := make([]time.Duration, 0, len(r.times))
		for _, t := range r.times {
			if !t.IsZero() {
				ds = append(ds, t.Sub(start))
			}
		}
		out = append(out, fmt.Sprintf("%s p50=%.1fs last=%.1fs", r.name, percentile(ds, 50).Seconds(), percentile(ds, 100).Seconds()))
	}
	return strings.Join(out, ", "), nil
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
