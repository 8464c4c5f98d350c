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
// timestamp), and trigger → the build claimed by an executor (dispatch),
// next to two bare workflows on the same server: start → activity started
// (the no-op baseline, also dispatch's baseline) and start → the same step
// started in `sh -c` after the executor's checkout (the comparable
// baseline; both steps read their start from the shell's clock). The
// three arms take turns event by event (armOrder), so they share the
// machine's drift. One warm-up run of each is not counted (it clones the
// repository's mirrors).
func runLatency(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStackWithExecutors(ctx, "latency")
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	l := &latencyRun{s: s, rec: filepath.Join(s.dir, "records"), phases: make([][]time.Duration, 5)}
	r, err := newRepo(ctx, filepath.Join(s.dir, "repo"), specYAML([]job{{name: "main", requires: []string{"~commit"}, cmd: recordCmd(l.rec, "true")}}))
	if err != nil {
		return "", err
	}
	if err := s.createPipeline(ctx, "lat", r.dir); err != nil {
		return "", err
	}
	work, err := newCheckoutWork(ctx, r, filepath.Join(s.dir, "baseline"))
	if err != nil {
		return "", err
	}
	l.bl, err = startBaseline(s.Client, work, 1, b.plan.executorSlots, noopBaseline, comparableBaseline)
	if err != nil {
		return "", err
	}
	defer l.bl.stop()

	n := b.plan.latencyEvents
	b.progress("latency: %d sequential events, no-op and comparable bare runs, taking turns (+1 warm-up each)", n)
	arms := []func(context.Context, int) error{l.sluice, l.noop, l.comparable}
	for i := range n + 1 {
		for _, a := range armOrder(i, len(arms)) {
			if err := arms[a](ctx, i); err != nil {
				return "", err
			}
		}
		if (i+1)%50 == 0 {
			b.progress("latency: %d/%d events, p50 so far %.1f ms", i+1, n+1, ms(percentile(l.lats, 50)))
		}
	}
	if b.trace {
		fmt.Fprintf(os.Stderr, "latency: timeline of event lat/%d (trigger at 0, step started at %.1f ms)\n", l.lastEvent, ms(l.lastStep.Sub(l.lastT0)))
		ref := workflows.BuildRef{Pipeline: "lat", Job: "main", Event: l.lastEvent}
		ids := []string{workflows.PipelineWorkflowID("lat"), ref.EventRef().WorkflowID()}
		if !b.buildsInEvents {
			ids = append(ids, ref.WorkflowID())
		}
		if err := writeTrace(ctx, os.Stderr, s.Client, l.lastT0, ids...); err != nil {
			return "", err
		}
	}
	return l.line(n), nil
}

// latencyRun holds the latency figure's samples, arm by arm.
type latencyRun struct {
	s   *stack
	bl  *baseline
	rec string
	// lats: trigger → step started; dispatch: trigger → claimed.
	lats, dispatch []time.Duration
	// phases: trigger → event workflow → build workflow → lane grant
	// (dispatch) → executor claim → step start.
	phases [][]time.Duration
	// noopLats: bare start → activity started; comparableLats: bare start →
	// the step started in sh after the checkout.
	noopLats, comparableLats []time.Duration
	// The last event, for -trace.
	lastT0, lastStep time.Time
	lastEvent        int
}

// sluice runs event i (0 is the warm-up) and notes its marks.
func (l *latencyRun) sluice(ctx context.Context, i int) error {
	t0 := time.Now()
	ev, err := l.s.API.StartEvent(ctx, "lat", api.StartEventRequest{Type: "commit", Branch: "main"})
	if err == nil {
		ev, err = l.s.numbered(ctx, ev)
	}
	if err != nil {
		return fmt.Errorf("start event %d: %w", i+1, err)
	}
	res, err := waitEvents(ctx, l.s.Client, []string{ev.ID})
	if err != nil {
		return err
	}
	if st := res[ev.ID]; st.Status != workflows.StatusSuccess {
		return fmt.Errorf("event %s ended %s: %s", ev.ID, st.Status, st.Reason)
	}
	spans, err := readRecords(l.rec)
	if err != nil {
		return err
	}
	ref := workflows.BuildRef{Pipeline: "lat", Job: "main", Event: ev.Number}
	sp, ok := spans[ref.String()]
	if !ok {
		return fmt.Errorf("build %s succeeded but its step recorded no start", ref)
	}
	l.lastT0, l.lastStep, l.lastEvent = t0, sp.start, ev.Number
	if i == 0 {
		return nil
	}
	bs, err := buildState(ctx, l.s.Client, ref, res[ev.ID])
	if err != nil {
		return err
	}
	l.lats = append(l.lats, sp.start.Sub(t0))
	// StartTime is set by the claim: the start of the workflow task that
	// accepted the executor's claim update.
	l.dispatch = append(l.dispatch, bs.StartTime.Sub(t0))
	marks := []time.Time{t0, res[ev.ID].StartTime, bs.CreateTime, bs.QueuedTime, bs.StartTime, sp.start}
	for k := range l.phases {
		l.phases[k] = append(l.phases[k], marks[k+1].Sub(marks[k]))
	}
	return nil
}

// noop runs bare no-op run i.
func (l *latencyRun) noop(ctx context.Context, i int) error {
	toActivity, _, err := l.bl.once(ctx, noopBaseline, fmt.Sprintf("bare-latency-%d", i))
	if err == nil && i > 0 {
		l.noopLats = append(l.noopLats, toActivity)
	}
	return err
}

// comparable runs bare comparable run i.
func (l *latencyRun) comparable(ctx context.Context, i int) error {
	_, toStep, err := l.bl.once(ctx, comparableBaseline, fmt.Sprintf("comparable-latency-%d", i))
	if err == nil && i > 0 {
		l.comparableLats = append(l.comparableLats, toStep)
	}
	return err
}

// line is the figure's output: the existing keys first (docs quote them),
// then dispatch and the comparable baseline.
func (l *latencyRun) line(n int) string {
	p50, p99, b50 := percentile(l.lats, 50), percentile(l.lats, 99), percentile(l.noopLats, 50)
	d50, c50 := percentile(l.dispatch, 50), percentile(l.comparableLats, 50)
	p := func(k int) float64 { return ms(percentile(l.phases[k], 50)) }
	return fmt.Sprintf("latency p50_ms=%.1f p99_ms=%.1f baseline_p50_ms=%.1f ratio_p50=%.2f baseline_p99_ms=%.1f events=%d "+
		"p50_event_ms=%.1f p50_build_ms=%.1f p50_grant_ms=%.1f p50_claim_ms=%.1f p50_step_ms=%.1f "+
		"dispatch_p50_ms=%.1f dispatch_p99_ms=%.1f dispatch_ratio_p50=%.2f "+
		"comparable_p50_ms=%.1f comparable_p99_ms=%.1f ratio_p50_comparable=%.2f",
		ms(p50), ms(p99), ms(b50), round2(durRatio(p50, b50)), ms(percentile(l.noopLats, 99)), n,
		p(0), p(1), p(2), p(3), p(4),
		ms(d50), ms(percentile(l.dispatch, 99)), round2(durRatio(d50, b50)),
		ms(c50), ms(percentile(l.comparableLats, 99)), round2(durRatio(p50, c50)))
}
