package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// runRegistry: registryMembers simulated members check in every 3 s with
// the one registry workflow for registryFor, each as a real executor does
// (workers.RegistryLink: a query for its grants, a lease renewal when one is
// due), or, with -registry-mode update, with a heartbeat update every time
// (as before leases): the check-in latency p50/p99 (named heartbeat),
// the registry's history events per minute and its continue-as-new runs,
// and the CPU they cost. The controller (which runs the registry workflow)
// is its own process here so that its CPU is its own; the bench process
// holds the server, the API and the simulated members' client. The idle
// stack's CPU, measured first, is the baseline.
func runRegistry(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStack(ctx, "registry", stackOptions{controllerProcess: true})
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	if err := s.createQueue(ctx, b.plan.executorSlots); err != nil {
		return "", err
	}
	members, window, every := b.plan.registryMembers, b.plan.registryFor, 3*time.Second
	b.progress("registry: %d members checking in every %s for %s (%s)", members, every, window, b.plan.registryMode)
	// Watch the registry's runs: each continue-as-new starts a new run ID;
	// the events a run added are its last history length seen (minus, for
	// the first, its length at the start).
	w := &runWatch{lengths: map[string]int64{}}
	if err := w.poll(ctx, s.Client); err != nil {
		return "", err
	}
	firstLen := w.lengths[w.order[0]]
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			_ = w.poll(watchCtx, s.Client)
			select {
			case <-watchCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	idle, err := idleCPU(ctx, s, registryIdleWindow)
	if err != nil {
		return "", err
	}
	self0, controller0 := s.cpuParts()
	var mu sync.Mutex
	var lats, renewLats []time.Duration
	var failures int
	var lastErr error
	start := time.Now()
	end := start.Add(window)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			m := queue.Member{Name: fmt.Sprintf("sim-%03d", i), Role: queue.RoleExecutor, Host: "bench", Queues: []string{benchQueue}}
			link := &workers.RegistryLink{Client: s.Client}
			// Spread the members over the interval, as executors started at
			// different times are.
			next := start.Add(time.Duration(rand.Int64N(int64(every)))) //nolint:gosec // spreading load, not security
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				if time.Now().After(end) {
					return
				}
				t0 := time.Now()
				renewed, err := true, error(nil)
				if b.plan.registryMode == "update" {
					err = heartbeatOnce(ctx, s.Client, m)
				} else {
					_, renewed, err = link.CheckIn(ctx, m)
				}
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					failures++
					lastErr = err
				} else {
					lats = append(lats, d)
					if renewed {
						renewLats = append(renewLats, d)
					}
				}
				mu.Unlock()
				next = next.Add(every)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	self1, controller1 := s.cpuParts()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	stopWatch()
	<-watched
	if err := w.poll(ctx, s.Client); err != nil {
		return "", err
	}
	runs, events := len(w.order), -firstLen
	for _, id := range w.order {
		events += w.lengths[id]
	}
	minutes := took.Minutes()
	line := fmt.Sprintf("registry mode=%s members=%d interval_s=%d duration_s=%.0f heartbeats=%d failed=%d heartbeat_p50_ms=%.1f heartbeat_p99_ms=%.1f heartbeat_max_ms=%.1f renewals=%d renewal_p99_ms=%.1f history_events_per_min=%.0f continue_as_new=%d continue_as_new_per_hour=%.1f",
		b.plan.registryMode, members, int(every.Seconds()), took.Seconds(), len(lats), failures, ms(percentile(lats, 50)), ms(percentile(lats, 99)), ms(percentile(lats, 100)),
		len(renewLats), ms(percentile(renewLats, 99)), float64(events)/minutes, runs-1, float64(runs-1)/took.Hours())
	sent := max(len(lats)+failures, 1)
	line += fmt.Sprintf(" cpu_ms_per_heartbeat=%.2f controller_cpu_ms_per_s=%.1f server_cpu_ms_per_s=%.1f idle_cpu_ms_per_s=%.1f",
		float64(self1-self0+controller1-controller0)/float64(time.Millisecond)/float64(sent),
		perSecond(controller1-controller0, took), perSecond(self1-self0, took), perSecond(idle, registryIdleWindow))
	if lastErr != nil {
		b.progress("registry: last heartbeat error: %v", lastErr)
	}
	return line, nil
}

// registryIdleWindow is how long the idle stack's CPU is measured.
const registryIdleWindow = 5 * time.Second

// idleCPU is the stack's CPU over window with nothing asked of it but its
// own members' heartbeats (here: the controller's).
func idleCPU(ctx context.Context, s *stack, window time.Duration) (time.Duration, error) {
	cpu0 := s.cpuTime()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	return s.cpuTime() - cpu0, nil
}

func heartbeatOnce(ctx context.Context, c client.Client, m queue.Member) error {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := c.UpdateWorkflow(hctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.RegistryID, UpdateName: workflows.UpdateHeartbeat,
		Args: []any{workflows.Heartbeat{Member: m}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	var view workflows.MemberView
	return h.Get(hctx, &view)
}

// runWatch records the registry's run IDs and their history lengths.
type runWatch struct {
	mu      sync.Mutex
	order   []string
	lengths map[string]int64
}

func (w *runWatch) poll(ctx context.Context, c client.Client) error {
	d, err := c.DescribeWorkflowExecution(ctx, workflows.RegistryID, "")
	if err != nil {
		return err
	}
	info := d.GetWorkflowExecutionInfo()
	id := info.GetExecution().GetRunId()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.lengths[id]; !ok {
		// The run that continued as new ended at its final length; read it.
		if n := len(w.order); n > 0 {
			if prev, err := c.DescribeWorkflowExecution(ctx, workflows.RegistryID, w.order[n-1]); err == nil {
				w.lengths[w.order[n-1]] = prev.GetWorkflowExecutionInfo().GetHistoryLength()
			}
		}
		w.order = append(w.order, id)
	}
	w.lengths[id] = info.GetHistoryLength()
	return nil
}
