package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// runThroughput: many 1-job events started at once on one pipeline, 2
// executors × slots; builds per second from the first trigger to the last
// build's close. The job neither collapses nor blocks on itself, so its
// builds run side by side.
func runThroughput(ctx context.Context, b *bench) (string, error) {
	return throughputFigure(ctx, b, "throughput", 1)
}

// runThroughputPipelines is runThroughput with the events spread over many
// pipelines (500 over 50 in the full run): the same builds without one
// pipeline workflow serialising their starts.
func runThroughputPipelines(ctx context.Context, b *bench) (string, error) {
	return throughputFigure(ctx, b, "throughput_pipelines", b.plan.spreadPipelines)
}

// throughputFigure runs the throughput comparison on npipe pipelines. Three
// arms take turns, round by round (armOrder): sluice's burst of events, as
// many bare no-op runs and as many bare comparable runs (checkout + sh), the
// bare ones on 2 activity workers × slots each, like the 2 executors. Each
// arm's CPU per run counts the whole stack from its first start until every
// run has ended, before the harness polls visibility for close times.
func throughputFigure(ctx context.Context, b *bench, figure string, npipe int) (string, error) {
	s, err := b.newStackWithExecutors(ctx, figure)
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	t := &throughputRun{s: s, b: b, figure: figure, n: b.plan.throughputEvents}
	rec := filepath.Join(s.dir, "records")
	r, err := newRepo(ctx, filepath.Join(s.dir, "repo"), specYAML([]job{{name: "main", requires: []string{"~commit"}, parallel: true, cmd: recordCmd(rec, "true")}}))
	if err != nil {
		return "", err
	}
	t.pipelines = throughputPipelines(npipe)
	for _, p := range t.pipelines {
		if err := s.createPipeline(ctx, p, r.dir); err != nil {
			return "", err
		}
	}
	// Warm-up, one event per pipeline: clones the mirrors.
	warm, _, _, err := s.startEventsOn(ctx, t.pipelines, npipe, 10)
	if err != nil {
		return "", err
	}
	if _, err := waitEvents(ctx, s.Client, warm); err != nil {
		return "", err
	}
	work, err := newCheckoutWork(ctx, r, filepath.Join(s.dir, "baseline"))
	if err != nil {
		return "", err
	}
	t.bl, err = startBaseline(s.Client, work, 2, b.plan.executorSlots, noopBaseline, comparableBaseline)
	if err != nil {
		return "", err
	}
	defer t.bl.stop()
	for _, k := range []baselineKind{noopBaseline, comparableBaseline} {
		if _, _, err := t.bl.once(ctx, k, figure+"-warmup-"+k.activity()); err != nil {
			return "", err
		}
	}

	arms := []func(context.Context, int) error{t.sluice, t.noop, t.comparable}
	for round := range b.plan.rounds {
		for _, a := range armOrder(round, len(arms)) {
			if err := arms[a](ctx, round); err != nil {
				return "", err
			}
		}
	}
	if b.trace {
		if err := t.writeTrace(ctx); err != nil {
			return "", err
		}
	}
	return t.line(), nil
}

// throughputPipelines names the figure's pipelines: "tp" alone, or tp-1..tp-n.
func throughputPipelines(n int) []string {
	if n <= 1 {
		return []string{"tp"}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tp-%d", i+1)
	}
	return out
}

// throughputRun holds the throughput figure's bursts, arm by arm.
type throughputRun struct {
	s         *stack
	b         *bench
	bl        *baseline
	figure    string
	n         int
	pipelines []string

	sluiceRuns, noopRuns, comparableRuns bursts
	// pending counts the starts the API answered pending (past its admit
	// wait), over the sluice bursts.
	pending int64
	// The last sluice burst, for -trace.
	lastStart time.Time
	lastIDs   []string
}

// sluice starts n events at once over the pipelines and waits for them.
func (t *throughputRun) sluice(ctx context.Context, round int) error {
	s, n := t.s, t.n
	t.b.progress("%s: round %d: %d events at once over %d pipeline(s)", t.figure, round+1, n, len(t.pipelines))
	self0, members0 := s.cpuParts()
	pending0 := s.pendingAnswers.Load()
	start := time.Now()
	ids, accepted, took, err := s.startEventsOn(ctx, t.pipelines, n, n)
	if err != nil {
		return err
	}
	t.pending += s.pendingAnswers.Load() - pending0
	res, err := waitEvents(ctx, s.Client, ids)
	if err != nil {
		return err
	}
	// CPU now, before closedSpan polls visibility.
	self1, members1 := s.cpuParts()
	if bad := failedEvents(res); bad != "" {
		return fmt.Errorf("not every event succeeded: %s", bad)
	}
	// Each event runs one build: its end is the build's when it runs it.
	wfType := "BuildWorkflow"
	if t.b.buildsInEvents {
		wfType = "EventWorkflow"
	}
	query := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", wfType, start.UTC().Format(time.RFC3339Nano))
	_, last, err := closedSpan(ctx, s.Client, query, n)
	if err != nil {
		return err
	}
	cpu := self1 + members1 - self0 - members0
	t.sluiceRuns = append(t.sluiceRuns, burst{runs: n, wall: last.Sub(start), cpu: cpu, accept: took})
	t.lastStart, t.lastIDs = start, ids
	t.b.progress("%s: %d builds in %s; CPU per build %.1f ms: %.1f ms in the server, controller and API, %.1f ms in the executors and their steps",
		t.figure, n, last.Sub(start).Round(time.Millisecond), ms(cpu/time.Duration(n)),
		ms((self1-self0)/time.Duration(n)), ms((members1-members0)/time.Duration(n)))
	if st, err := s.stages(ctx, start, accepted, res); err == nil {
		t.b.progress("%s: stages after the first trigger: %s", t.figure, st)
	} else {
		t.b.progress("%s: stages: %v", t.figure, err)
	}
	return nil
}

// noop runs n bare no-op runs at once.
func (t *throughputRun) noop(ctx context.Context, round int) error {
	return t.bare(ctx, round, noopBaseline, &t.noopRuns)
}

// comparable runs n bare comparable runs (checkout + sh) at once.
func (t *throughputRun) comparable(ctx context.Context, round int) error {
	return t.bare(ctx, round, comparableBaseline, &t.comparableRuns)
}

func (t *throughputRun) bare(ctx context.Context, round int, k baselineKind, into *bursts) error {
	t.b.progress("%s: round %d: %d bare %s runs at once", t.figure, round+1, t.n, k)
	prefix := fmt.Sprintf("%s-%s-r%d", t.figure, k.activity(), round)
	res, err := t.bl.burst(ctx, k, prefix, t.n, t.s.cpuTime)
	if err != nil {
		return err
	}
	*into = append(*into, res)
	return nil
}

// writeTrace prints the first pipeline's workflow-task statistics and the
// timeline of a middle event of the last burst.
func (t *throughputRun) writeTrace(ctx context.Context) error {
	if err := writeTaskStats(ctx, os.Stderr, t.s.Client, workflows.PipelineWorkflowID(t.pipelines[0])); err != nil {
		return err
	}
	mid, err := workflows.ParseEventRef(t.lastIDs[len(t.lastIDs)/2])
	if err != nil {
		return err
	}
	build := workflows.BuildRef{Pipeline: mid.Pipeline, Job: "main", Event: mid.Number}
	fmt.Fprintf(os.Stderr, "%s: timeline of event %s (0 = the first trigger)\n", t.figure, mid)
	ids := []string{mid.WorkflowID()}
	if !t.b.buildsInEvents {
		ids = append(ids, build.WorkflowID())
	}
	return writeTrace(ctx, os.Stderr, t.s.Client, t.lastStart, ids...)
}

// line is the figure's output: the existing keys first (docs quote them),
// then the comparable baseline, the API's accept latency and the rounds.
func (t *throughputRun) line() string {
	rate, base, comp := t.sluiceRuns.rate(), t.noopRuns.rate(), t.comparableRuns.rate()
	lo, hi := spread(roundRatios(t.sluiceRuns, t.comparableRuns))
	accepts := t.sluiceRuns.accepts()
	return fmt.Sprintf("%s builds_per_s=%.2f baseline_per_s=%.2f ratio=%.2f events=%d executors=2 slots=%d cpu_ms_per_build=%.1f baseline_cpu_ms_per_run=%.1f "+
		"comparable_per_s=%.2f ratio_comparable=%.2f ratio_comparable_min=%.2f ratio_comparable_max=%.2f comparable_cpu_ms_per_run=%.1f cpu_ratio_comparable=%.2f "+
		"accept_p50_ms=%.1f accept_p99_ms=%.1f accepted_pending=%d pipelines=%d rounds=%d",
		t.figure, rate, base, round2(ratio(rate, base)), t.n, 2*t.b.plan.executorSlots, ms(t.sluiceRuns.cpuPerRun()), ms(t.noopRuns.cpuPerRun()),
		comp, round2(ratio(rate, comp)), round2(lo), round2(hi), ms(t.comparableRuns.cpuPerRun()),
		round2(durRatio(t.sluiceRuns.cpuPerRun(), t.comparableRuns.cpuPerRun())),
		ms(percentile(accepts, 50)), ms(percentile(accepts, 99)), t.pending, len(t.pipelines), len(t.sluiceRuns))
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
	ids, accepted, _, err := s.startEventsOn(ctx, []string{pipeline}, n, width)
	return ids, accepted, err
}

// startEventsOn starts n commit events spread over pipelines (event i on
// pipelines[i mod len]), width at a time, and returns their IDs, when the
// API answered each, and how long each answer took (the API's accept
// latency: the HTTP request until the event is numbered).
func (s *stack) startEventsOn(ctx context.Context, pipelines []string, n, width int) ([]string, []time.Time, []time.Duration, error) {
	ids := make([]string, n)
	accepted := make([]time.Time, n)
	took := make([]time.Duration, n)
	err := parallel(n, width, func(i int) error {
		p := pipelines[i%len(pipelines)]
		t0 := time.Now()
		ev, err := s.API.StartEvent(ctx, p, api.StartEventRequest{Type: "commit", Branch: "main"})
		if err != nil {
			return fmt.Errorf("start event %d of %s: %w", i+1, p, err)
		}
		accepted[i], took[i] = time.Now(), time.Since(t0)
		if ev, err = s.numbered(ctx, ev); err != nil {
			return fmt.Errorf("start event %d of %s: %w", i+1, p, err)
		}
		ids[i] = ev.ID
		return nil
	})
	return ids, accepted, took, err
}

// stages reports, for builds started together, when (after start) they
// reached each stage: median and last. It shows where a burst queues up.
func (s *stack) stages(ctx context.Context, start time.Time, accepted []time.Time, res map[string]workflows.EventState) (string, error) {
	var refs []workflows.BuildRef
	var evs []workflows.EventState
	var evStarts []time.Time
	for _, st := range res {
		evStarts = append(evStarts, st.StartTime)
		for _, j := range st.Jobs {
			for _, id := range j.Builds {
				ref, err := workflows.ParseBuildRef(id)
				if err != nil {
					return "", err
				}
				refs, evs = append(refs, ref), append(evs, st)
			}
		}
	}
	states := make([]workflows.BuildState, len(refs))
	err := parallel(len(refs), 32, func(i int) error {
		var err error
		states[i], err = buildState(ctx, s.Client, refs[i], evs[i])
		return err
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
			for _, j := range st.Jobs {
				if j.Status != workflows.StatusSuccess {
					example += fmt.Sprintf(" (job %s: %s)", j.Job, j.Reason)
					break
				}
			}
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d (e.g. %s)", bad, len(res), example)
}

// numbered waits for the number of an event the API answered pending
// (admitted, not numbered within its admit wait). In a burst most starts
// are; the harness asks each pipeline once per round about all its pending
// admissions (admissionAsker), so that its asking does not load the busy
// pipeline it measures.
func (s *stack) numbered(ctx context.Context, ev api.EventStarted) (api.EventStarted, error) {
	if !ev.Pending {
		return ev, nil
	}
	s.pendingAnswers.Add(1)
	ch := make(chan admissionAnswer, 1)
	s.asks.mu.Lock()
	if s.asks.waiting == nil {
		s.asks.waiting = map[string]map[string]chan admissionAnswer{}
	}
	w, asking := s.asks.waiting[ev.Pipeline]
	if !asking {
		w = map[string]chan admissionAnswer{}
		s.asks.waiting[ev.Pipeline] = w
	}
	w[ev.Admission] = ch
	s.asks.mu.Unlock()
	if !asking {
		go s.askAdmissions(context.WithoutCancel(ctx), ev.Pipeline)
	}
	select {
	case <-ctx.Done():
		return ev, ctx.Err()
	case a := <-ch:
		return a.ev, a.err
	}
}

// admissionAnswer is what a pipeline made of one pending start.
type admissionAnswer struct {
	ev  api.EventStarted
	err error
}

// admissionAsker holds, per pipeline, the pending starts the harness waits for.
type admissionAsker struct {
	mu      sync.Mutex
	waiting map[string]map[string]chan admissionAnswer
}

// askAdmissionsEvery is how often the harness asks a pipeline about its
// pending starts: seldom, since the harness needs the numbers only to wait
// for the events (a figure's times come from the builds' own records), and
// a query is work for the pipelines it measures.
const askAdmissionsEvery = time.Second

// askAdmissions asks pipeline about every start waiting on it, one query a
// round, until none waits. A query that times out (a busy pipeline) is
// asked again next round.
func (s *stack) askAdmissions(ctx context.Context, pipeline string) {
	for {
		time.Sleep(askAdmissionsEvery)
		s.asks.mu.Lock()
		w := s.asks.waiting[pipeline]
		if len(w) == 0 {
			delete(s.asks.waiting, pipeline)
			s.asks.mu.Unlock()
			return
		}
		ids := slices.Sorted(maps.Keys(w))
		s.asks.mu.Unlock()
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := s.Client.QueryWorkflow(qctx, workflows.PipelineWorkflowID(pipeline), "", workflows.QueryAdmissions, ids)
		var seen []workflows.AdmissionSeen
		if err == nil {
			err = v.Get(&seen)
		}
		cancel()
		if err != nil {
			continue
		}
		s.asks.mu.Lock()
		for _, a := range seen {
			ch, ok := w[a.ID]
			switch {
			case !ok:
				continue
			case a.Error != "":
				ch <- admissionAnswer{err: fmt.Errorf("admission %s refused: %s", a.ID, a.Error)}
			case a.Event > 0:
				ref := workflows.EventRef{Pipeline: pipeline, Number: a.Event}
				ch <- admissionAnswer{ev: api.EventStarted{ID: ref.String(), Pipeline: pipeline, Number: ref.Number}}
			default:
				continue
			}
			delete(w, a.ID)
		}
		s.asks.mu.Unlock()
	}
}
