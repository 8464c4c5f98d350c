package api

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// recentBuilds is how many of a queue's latest ended builds give the
// duration a start estimate counts with.
const recentBuilds = 20

// queueWaitCode is the wait code of a build dispatched to queue q and not
// started, from the queue's current plan: never-served when no member the
// registry knows serves it, no-member when none is live and active now,
// min-gap when a slot is free but the active rule spaces starts, else
// slot-busy.
func queueWaitCode(q queue.Queue, plan queue.Plan, members []queue.Member, fork bool, ahead int) workflows.WaitCode {
	switch {
	case !plan.Active() && queue.NeverServed(q, members, fork):
		return workflows.WaitNeverServed
	case !plan.Active():
		return workflows.WaitNoMember
	case plan.Busy+ahead < plan.Slots && plan.Rule.MinGap > 0:
		return workflows.WaitMinGap
	}
	return workflows.WaitSlotBusy
}

// waitPicture is what an estimate of a build's start counts with.
type waitPicture struct {
	code      workflows.WaitCode
	now       time.Time
	waitUntil time.Time
	// position is the build's place in line, 1 first: in its queue once
	// dispatched, in its job's lane before.
	position int
	// busy and slots are the queue's; minGap its active rule's.
	busy, slots int
	minGap      time.Duration
	// typical is the mean run time of the queue's recent builds (0: none
	// ended yet).
	typical time.Duration
}

// estimateStart returns when the build is likely to start, or the zero
// time and why no estimate can be made. Estimates count in whole build
// durations: builds ahead of it in its queue start a wave at a time on the
// queue's slots.
func estimateStart(p waitPicture) (time.Time, string) {
	switch p.code {
	case workflows.WaitApproval:
		return time.Time{}, "a pipeline admin must approve the event first"
	case workflows.WaitNoMember:
		return time.Time{}, "no live member serves the queue"
	case workflows.WaitNeverServed:
		return time.Time{}, "no executor that serves the queue has ever registered"
	case workflows.WaitFrozen, workflows.WaitDelayed:
		if !p.waitUntil.IsZero() {
			return p.waitUntil, ""
		}
		return time.Time{}, "the freeze windows never open"
	case workflows.WaitMinGap:
		return p.now.Add(p.minGap), ""
	}
	if p.typical <= 0 {
		return time.Time{}, "no build on the queue has ended yet"
	}
	waves := 0
	switch p.code {
	case workflows.WaitSlotBusy:
		// It starts once busy+position-slots builds ahead of it ended.
		if p.slots > 0 {
			ends := p.busy + p.position - p.slots
			waves = (ends + p.slots - 1) / p.slots
		}
	default: // blocked-by, lane-order: the builds ahead in its lane run first
		waves = max(1, p.position)
	}
	return p.now.Add(time.Duration(max(0, waves)) * p.typical), ""
}

// typicalDuration is the mean run time of the queue's last recentBuilds
// ended builds, 0 when none ended.
func (s *Service) typicalDuration(ctx context.Context, queueName string) (time.Duration, error) {
	execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus != 'Running' AND %s = %s AND %s = '%s'",
		workflows.SAQueue.GetName(), quote(queueName), workflows.SAStatus.GetName(), workflows.StatusSuccess), recentBuilds)
	if err != nil {
		return 0, err
	}
	var ended []Build
	for _, ex := range execs {
		if b, ok := buildFromVisibility(ex); ok {
			ended = append(ended, b)
		}
	}
	if s.BuildsInEvents {
		// Builds run inside their events: the last events that could reach
		// the queue, from their memos.
		events, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND ExecutionStatus != 'Running' AND %s = %s",
			workflows.SAQueues.GetName(), quote(queueName)), recentBuilds)
		if err != nil {
			return 0, err
		}
		for _, ex := range events {
			for _, b := range ownedFromVisibility(ex) {
				if b.Queue == queueName && b.Status == workflows.StatusSuccess {
					ended = append(ended, b)
				}
			}
		}
	}
	var sum time.Duration
	n := 0
	for _, b := range ended {
		if b.StartTime.IsZero() || b.EndTime.Before(b.StartTime) {
			continue
		}
		sum += b.EndTime.Sub(b.StartTime)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return sum / time.Duration(n), nil
}

// lanePositions maps each build a pipeline's lanes hold waiting to its
// place in its lane, 1 first.
func (s *Service) lanePositions(ctx context.Context, pipeline string) (map[string]int, error) {
	_, info, err := s.queryPipeline(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, ln := range info.Lanes.Jobs {
		for i, e := range ln.Waiting {
			out[e.Build.String()] = i + 1
		}
	}
	return out, nil
}

// startWarnings warns, at an event's start, when its pipeline's queue has
// never been served by any executor: its builds will wait (never-served)
// until one registers. Jobs that name another queue are warned about on
// `event show` once their builds wait (neverServedWarnings). A failure to
// read the registry gives no warning: the event started anyway. queue is
// the pipeline's default queue as its start's answer said ("": the
// pipeline is asked). The registry is read through a short cache
// (startRegistry): a burst of starts reads it once. Both reads are bounded
// by startWarningsWait: queries wait for a workflow task, and a start's
// answer must not wait on a busy workflow (the builds' wait code still
// says never-served).
func (s *Service) startWarnings(ctx context.Context, pipeline, queueName string) []string {
	ctx, cancel := context.WithTimeout(ctx, startWarningsWait)
	defer cancel()
	if queueName == "" {
		p, _, err := s.queryPipeline(ctx, pipeline)
		if err != nil {
			s.Logger.DebugContext(ctx, "start_warnings_failed", "pipeline", pipeline, "error", err)
			return nil
		}
		queueName = p.Queue
	}
	if queueName == "" {
		queueName = queue.DefaultQueueName
	}
	qs, ms, err := s.startRegistry(ctx, queueName)
	if err != nil {
		s.Logger.DebugContext(ctx, "start_warnings_failed", "pipeline", pipeline, "error", err)
		return nil
	}
	q, ok := findQueue(qs, queueName)
	if !ok || !queue.NeverServed(q, ms, false) {
		return nil
	}
	return []string{neverServedText("the pipeline's", q)}
}

// startRegistryFor is how long an event start's warning reuses a read of
// the registry. A queue's first executor is noticed by starts at most this
// late (the builds' wait code is read live).
const startRegistryFor = 2 * time.Second

// registryRead is one cached read of the registry's queues and members.
type registryRead struct {
	mu      sync.Mutex
	at      time.Time
	queues  []queue.Queue
	members []queue.Member
}

// startRegistry reads the registry for startWarnings, at most once every
// startRegistryFor unless the read does not know queue name (it may be
// new); concurrent callers wait for one read.
func (s *Service) startRegistry(ctx context.Context, name string) ([]queue.Queue, []queue.Member, error) {
	c := &s.regRead
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.now()
	if _, known := findQueue(c.queues, name); known && now.Sub(c.at) < startRegistryFor {
		return c.queues, c.members, nil
	}
	qs, ms, err := s.registry(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.at, c.queues, c.members = now, qs, ms
	return qs, ms, nil
}

// startWarningsWait bounds the reads behind an event start's warnings.
const startWarningsWait = 250 * time.Millisecond

func neverServedText(whose string, q queue.Queue) string {
	rules := make([]string, len(q.Rules))
	for i, r := range q.Rules {
		rules[i] = r.String()
	}
	return fmt.Sprintf("%s queue %s has never been served: no executor its rules select (%s) has registered; its builds wait (wait code never-served) until one does",
		whose, q.Name, strings.Join(rules, "; "))
}

// neverServedWarnings names, once per job, the builds that wait on a
// queue no executor ever served.
func neverServedWarnings(builds []Build) []string {
	var out []string
	seen := map[string]bool{}
	for _, b := range builds {
		if b.WaitCode != workflows.WaitNeverServed || seen[b.Job] {
			continue
		}
		seen[b.Job] = true
		out = append(out, fmt.Sprintf("job %s waits on queue %s, which no executor has ever served (wait code never-served)", b.Job, b.Queue))
	}
	return out
}
