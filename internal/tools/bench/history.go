package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-ci/sluice/workflows"
)

// historyCase is what one case of the history figure measured.
type historyCase struct {
	builds int
	// build, event and pipeline are the costs summed over every run of
	// those workflows (the pipeline's counted from before the first event).
	build, event, pipeline historyCost
}

func (h historyCase) total() historyCost { return h.build.Plus(h.event).Plus(h.pipeline) }

func (h historyCase) perBuild() float64 {
	return float64(h.total().Events) / float64(h.builds)
}

// runHistory: Temporal history events per build, summed over every
// workflow a build touches — its build workflow, its event workflow's share
// and its pipeline workflow's share (all runs, continue-as-new included) —
// for 1-job events and for a 10-job chain.
func runHistory(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStackWithExecutors(ctx, "history")
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	one, err := s.historyCase(ctx, "h1", []job{{name: "main", requires: []string{"~commit"}, cmd: "true"}}, b.plan.historyEvents)
	if err != nil {
		return "", err
	}
	var chain []job
	for i := range b.plan.chainJobs {
		req := "~commit"
		if i > 0 {
			req = fmt.Sprintf("c%d", i)
		}
		chain = append(chain, job{name: fmt.Sprintf("c%d", i+1), requires: []string{req}, cmd: "true"})
	}
	ch, err := s.historyCase(ctx, "h10", chain, b.plan.historyEvents)
	if err != nil {
		return "", err
	}
	total := historyCase{builds: one.builds + ch.builds, build: one.build.Plus(ch.build), event: one.event.Plus(ch.event), pipeline: one.pipeline.Plus(ch.pipeline)}
	f := func(h historyCost, builds int) float64 { return round1(float64(h.Events) / float64(builds)) }
	_, oneTasks, oneVis := per(one.total(), one.builds)
	_, chTasks, chVis := per(ch.total(), ch.builds)
	return fmt.Sprintf("history events_per_build=%.1f one_job=%.1f chain%d=%.1f "+
		"one_job_build=%.1f one_job_event=%.1f one_job_pipeline=%.1f chain_build=%.1f chain_event=%.1f chain_pipeline=%.1f events=%d "+
		"one_job_tasks=%.1f chain_tasks=%.1f one_job_visibility=%.1f chain_visibility=%.1f",
		total.perBuild(), one.perBuild(), b.plan.chainJobs, ch.perBuild(),
		f(one.build, one.builds), f(one.event, one.builds), f(one.pipeline, one.builds),
		f(ch.build, ch.builds), f(ch.event, ch.builds), f(ch.pipeline, ch.builds), b.plan.historyEvents,
		oneTasks, chTasks, oneVis, chVis), nil
}

// historyCase runs events sequential events of a fresh pipeline and counts
// the history events of its workflows.
func (s *stack) historyCase(ctx context.Context, name string, jobs []job, events int) (historyCase, error) {
	var h historyCase
	r, err := newRepo(ctx, filepath.Join(s.dir, name), specYAML(jobs))
	if err != nil {
		return h, err
	}
	if err := s.createPipeline(ctx, name, r.dir); err != nil {
		return h, err
	}
	pipelineQuery := fmt.Sprintf("WorkflowId = '%s'", workflows.PipelineWorkflowID(name))
	before, err := settledHistory(ctx, s, pipelineQuery)
	if err != nil {
		return h, err
	}
	var t0 time.Time
	for range events {
		t0 = time.Now()
		res, err := s.runEvents(ctx, name, 1, 1)
		if err != nil {
			return h, err
		}
		if bad := failedEvents(res); bad != "" {
			return h, fmt.Errorf("pipeline %s: %s", name, bad)
		}
	}
	after, err := settledHistory(ctx, s, pipelineQuery)
	if err != nil {
		return h, err
	}
	h.pipeline = after.Minus(before)
	sa := workflows.SAPipeline.GetName()
	var runs int
	h.build, _, runs, err = historyTotals(ctx, s.Client, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND %s = '%s'", sa, name))
	if err != nil {
		return h, err
	}
	want := events * len(jobs)
	if s.b.buildsInEvents {
		// The events run their builds: every cost is the event's.
		want = 0
	}
	if runs != want {
		return h, fmt.Errorf("pipeline %s: %d build workflows, want %d", name, runs, want)
	}
	h.builds = events * len(jobs)
	h.event, _, _, err = historyTotals(ctx, s.Client, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND %s = '%s'", sa, name))
	if err != nil || !s.b.trace {
		return h, err
	}
	// -trace: the last event's workflows, event type by event type.
	ev := workflows.EventRef{Pipeline: name, Number: events}
	ids := []string{workflows.PipelineWorkflowID(name), ev.WorkflowID()}
	for _, j := range jobs {
		if !s.b.buildsInEvents {
			ids = append(ids, workflows.BuildRef{Pipeline: name, Job: j.name, Event: events}.WorkflowID())
		}
	}
	fmt.Fprintf(os.Stderr, "history: workflows of event %s\n", ev)
	if len(jobs) == 1 {
		if err := writeTrace(ctx, os.Stderr, s.Client, t0, ids...); err != nil {
			return h, err
		}
	}
	for _, id := range ids {
		if err := writeTaskStats(ctx, os.Stderr, s.Client, id); err != nil {
			return h, err
		}
	}
	return h, nil
}

// settledHistory is the total history of the executions query matches once
// it stopped growing for a second (the last build's done signal has been
// handled).
func settledHistory(ctx context.Context, s *stack, query string) (historyCost, error) {
	last, stable := -1, 0
	var total historyCost
	err := waitFor(ctx, "history to settle ("+query+")", time.Minute, func() (bool, error) {
		h, _, _, err := historyTotals(ctx, s.Client, query)
		if err != nil {
			return false, err
		}
		total = h
		n := h.Events
		if n == last {
			stable++
		} else {
			stable = 0
		}
		last = n
		time.Sleep(200 * time.Millisecond)
		return stable >= 5, nil
	})
	return total, err
}
