package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// runGraph: one event of a width × depth DAG with joins (steps `true`), and
// one event of a side × side matrix job. Overhead per job = (wall − the
// critical path's step time) / jobs.
func runGraph(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStackWithExecutors(ctx, "graph")
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	jobs := dagJobs(b.plan.graphWidth, b.plan.graphDepth)
	b.progress("graph: one event of %d jobs (%d wide, %d deep)", len(jobs), b.plan.graphWidth, b.plan.graphDepth)
	wall, st, err := s.oneEvent(ctx, "dag", jobs)
	if err != nil {
		return "", err
	}
	steps, err := s.stepTimes(ctx, st)
	if err != nil {
		return "", err
	}
	cp := criticalPath(jobs, steps)
	overhead := (wall - cp) / time.Duration(len(jobs))
	if b.trace {
		fmt.Fprintf(os.Stderr, "graph: timeline of the DAG's event (started at 0, ended at %.1f ms)\n", ms(wall))
		t0 := st.EndTime.Add(-wall)
		ids := []string{workflows.PipelineWorkflowID("dag"), st.Event.WorkflowID()}
		if err := writeTrace(ctx, os.Stderr, s.Client, t0, ids...); err != nil {
			return "", err
		}
		for _, bs := range st.Builds {
			line := fmt.Sprintf("  %-12s %-8s created %7.1f queued %7.1f started %7.1f", bs.Build.Job, bs.Executor, ms(bs.CreateTime.Sub(t0)), ms(bs.QueuedTime.Sub(t0)), ms(bs.StartTime.Sub(t0)))
			for _, step := range bs.Steps {
				line += fmt.Sprintf(" %s %.1f–%.1f", step.Name, ms(step.Start.Sub(t0)), ms(step.End.Sub(t0)))
			}
			fmt.Fprintf(os.Stderr, "%s ended %7.1f\n", line, ms(bs.EndTime.Sub(t0)))
		}
	}

	side := b.plan.matrixSide
	var vals []string
	for i := range side {
		vals = append(vals, strconv.Itoa(i+1))
	}
	mjobs := []job{{name: "m", requires: []string{"~commit"}, cmd: "true", matrix: map[string][]string{"A": vals, "B": vals}}}
	b.progress("graph: one event of a %d-permutation matrix job", side*side)
	mwall, mst, err := s.oneEvent(ctx, "matrix", mjobs)
	if err != nil {
		return "", err
	}
	if n := len(mst.Jobs[0].Builds); n != side*side {
		return "", fmt.Errorf("matrix event ran %d builds, want %d", n, side*side)
	}
	return fmt.Sprintf("graph jobs=%d wall_s=%.2f overhead_ms_per_job=%.1f critical_path_steps_ms=%.1f depth=%d\n"+
		"matrix permutations=%d wall_s=%.2f",
		len(jobs), wall.Seconds(), ms(overhead), ms(cp), b.plan.graphDepth, side*side, mwall.Seconds()), nil
}

// dagJobs is width × depth jobs g<level>_<i>: level 0 starts on commit;
// every later job joins three jobs of the level before, and the first job
// of each level joins all of them.
func dagJobs(width, depth int) []job {
	name := func(level, i int) string { return fmt.Sprintf("g%d_%d", level, i) }
	var jobs []job
	for level := range depth {
		for i := range width {
			j := job{name: name(level, i), cmd: "true"}
			switch {
			case level == 0:
				j.requires = []string{"~commit"}
			case i == 0:
				for k := range width {
					j.requires = append(j.requires, name(level-1, k))
				}
			default:
				for _, k := range []int{i, (i + 1) % width, (i + 7) % width} {
					if r := name(level-1, k); !slices.Contains(j.requires, r) {
						j.requires = append(j.requires, r)
					}
				}
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// oneEvent creates a pipeline of jobs, starts one event and waits for it.
// wall runs from the API call to the event's end.
func (s *stack) oneEvent(ctx context.Context, name string, jobs []job) (time.Duration, workflows.EventState, error) {
	var st workflows.EventState
	r, err := newRepo(ctx, filepath.Join(s.dir, name), specYAML(jobs))
	if err != nil {
		return 0, st, err
	}
	if err := s.createPipeline(ctx, name, r.dir); err != nil {
		return 0, st, err
	}
	t0 := time.Now()
	ev, err := s.API.StartEvent(ctx, name, api.StartEventRequest{Type: "commit", Branch: "main"})
	if err == nil {
		ev, err = s.numbered(ctx, ev)
	}
	if err != nil {
		return 0, st, fmt.Errorf("start event of %s: %w", name, err)
	}
	res, err := waitEvents(ctx, s.Client, []string{ev.ID})
	if err != nil {
		return 0, st, err
	}
	st = res[ev.ID]
	if st.Status != workflows.StatusSuccess {
		return 0, st, fmt.Errorf("event %s ended %s: %s", ev.ID, st.Status, st.Reason)
	}
	return st.EndTime.Sub(t0), st, nil
}

// stepTimes reads every build's step time (summed over its steps) by job.
// A matrix job counts its longest permutation.
func (s *stack) stepTimes(ctx context.Context, st workflows.EventState) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	var refs []workflows.BuildRef
	for _, j := range st.Jobs {
		for _, id := range j.Builds {
			ref, err := workflows.ParseBuildRef(id)
			if err != nil {
				return nil, err
			}
			refs = append(refs, ref)
		}
	}
	times := make([]time.Duration, len(refs))
	err := parallel(len(refs), 16, func(i int) error {
		bs, err := buildState(ctx, s.Client, refs[i], st)
		if err != nil {
			return err
		}
		for _, step := range bs.Steps {
			times[i] += step.End.Sub(step.Start)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, ref := range refs {
		out[ref.Job] = max(out[ref.Job], times[i])
	}
	return out, nil
}

// criticalPath is the longest chain of step time through the jobs (jobs
// are listed after everything they require).
func criticalPath(jobs []job, steps map[string]time.Duration) time.Duration {
	finish := map[string]time.Duration{}
	var longest time.Duration
	for _, j := range jobs {
		var ready time.Duration
		for _, r := range j.requires {
			ready = max(ready, finish[r]) // "~commit" is 0
		}
		finish[j.name] = ready + steps[j.name]
		longest = max(longest, finish[j.name])
	}
	return longest
}
