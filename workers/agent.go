package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/internal/shared"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// AgentOptions configure a queue member (an executor, or a controller that
// can run builds when a rule says so).
type AgentOptions struct {
	Client client.Client
	// Member is who we are: name, role, host, labels and queues served.
	Member queue.Member
	// Interval between check-ins with the registry (see RegistryLink: most
	// read the member's grants; a few renew its lease).
	Interval time.Duration
	// Activities run the builds; their Executor is set to the agent.
	Activities *activities.Activities
	Logger     *slog.Logger
}

// Agent keeps a member registered and live, and sizes its per-queue workers
// from the registry's answers.
type Agent struct {
	opts AgentOptions
	log  *slog.Logger

	mu      sync.Mutex
	state   queue.MemberState
	queues  map[string]*queueWorker
	running map[string]int
	lastErr string
	link    RegistryLink
	// janitors poll deleted queues' task queues (controllers; janitor.go).
	janitors map[string][]worker.Worker
	// grantAsks are the registry queries by queue: builds of a queue that
	// start together share one, and a yes stands for queue.GrantStands
	// (Accepting).
	grantAsks shared.Reads[string, workflows.MemberGrant]
}

// queueWorker is what the member runs for one queue: a worker for each of
// the queue's two task queues, its builds (trusted) and its untrusted builds
// (pull requests from forks, which only members the registry allows poll,
// see workflows.MemberView.Untrusted). Both share pool, the member's slots
// for the queue, so the queue's max parallel runs hold across both.
type queueWorker struct {
	pool      *queue.SlotPool
	turns     *turns
	trusted   taskQueueWorker
	untrusted taskQueueWorker
}

// taskQueueWorker polls one task queue of a queue while gate, its own
// allowance, is above 0.
type taskQueueWorker struct {
	gate   *queue.SlotPool
	worker worker.Worker
	grant  workflows.SlotGrant
}

func newQueueWorker() *queueWorker {
	return &queueWorker{
		pool: queue.NewSlotPool(nil), turns: newTurns(),
		trusted: taskQueueWorker{gate: queue.NewSlotPool(nil)}, untrusted: taskQueueWorker{gate: queue.NewSlotPool(nil)},
	}
}

func (qw *queueWorker) side(untrusted bool) *taskQueueWorker {
	if untrusted {
		return &qw.untrusted
	}
	return &qw.trusted
}

var (
	_ activities.Executor      = (*Agent)(nil)
	_ activities.LocalAcceptor = (*Agent)(nil)
)

// NewAgent makes an agent and makes it the activities' executor.
func NewAgent(opts AgentOptions) *Agent {
	if opts.Interval <= 0 {
		opts.Interval = 3 * time.Second
	}
	ag := &Agent{
		opts:     opts,
		log:      opts.Logger.With("member", opts.Member.Name, "role", string(opts.Member.Role)),
		state:    queue.StateActive,
		queues:   map[string]*queueWorker{},
		running:  map[string]int{},
		janitors: map[string][]worker.Worker{},
		link:     RegistryLink{Client: opts.Client},
	}
	opts.Activities.Executor = ag
	return ag
}

// Name is the member's registry name.
func (ag *Agent) Name() string { return ag.opts.Member.Name }

// Accepting reports whether a build of the queue may start here now. Besides
// the last heartbeat's answer it asks the registry, so deactivating or
// draining an executor stops new builds at once, and a member that the
// queue's active rule no longer includes hands the build back (the build
// workflow dispatches it again without counting an attempt). Builds of a
// queue that ask while a query of the registry for that queue is under way
// share its answer (asked at most one round trip before them) instead of
// each queueing a query behind it on the one registry workflow, and a yes
// stands for the queue's builds that arrive within queue.GrantStands
// after its query was sent: whoever withdraws a grant waits that long
// before saying so (api). A no is never reused: the next build asks again.
//
// untrusted: the build came from the queue's untrusted task queue (a pull
// request from a fork); it is checked against the member's untrusted grant.
func (ag *Agent) Accepting(queueName string, untrusted bool) (bool, string) {
	if ok, why := ag.AcceptingLocally(queueName, untrusted); !ok {
		return false, why
	}
	g, err := ag.memberGrant(queueName, untrusted)
	if err != nil {
		return true, "" // registry unreachable: trust the last heartbeat
	}
	if m := g.Member; m.State != queue.StateActive && m.State != "" {
		ag.mu.Lock()
		ag.state = m.State
		ag.mu.Unlock()
	}
	return ag.grants(g, queueName, untrusted)
}

// grants reads the registry's answer for a build of the queue. The active
// rule may have changed since the last heartbeat (a member of a preferred
// rule became live): a poll that was in flight must not run the build. The
// next heartbeat stops the poller.
func (ag *Agent) grants(g workflows.MemberGrant, queueName string, untrusted bool) (bool, string) {
	if m := g.Member; m.State != queue.StateActive && m.State != "" {
		return false, fmt.Sprintf("%s is %s", ag.Name(), m.State)
	}
	grant := g.Grant
	if untrusted {
		grant = g.Untrusted
	}
	if grant.Allowed == 0 {
		return false, ag.notInRule(queueName, untrusted, grant.Why)
	}
	return true, ""
}

// memberGrant returns the registry's yes for a build of queueName given
// less than queue.GrantStands ago, or else asks the registry for the
// member's state and grant of the queue, or waits for the answer of a query
// for it already under way.
func (ag *Agent) memberGrant(queueName string, untrusted bool) (workflows.MemberGrant, error) {
	if g, ok := ag.grantAsks.Standing(queueName, queue.GrantStands); ok {
		if yes, _ := ag.grants(g, queueName, untrusted); yes {
			return g, nil
		}
	}
	g, _, err := ag.grantAsks.DoKept(context.Background(), queueName, func(ctx context.Context) (workflows.MemberGrant, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var g workflows.MemberGrant
		v, err := ag.opts.Client.QueryWorkflow(ctx, workflows.RegistryID, "", workflows.QueryMemberGrant, ag.Name(), queueName)
		if err == nil {
			err = v.Get(&g)
		}
		return g, err
	})
	return g, err
}

// AcceptingLocally is Accepting's first part, by the last heartbeat's
// answer alone (no registry query): RunBuild starts a build's checkout
// once it passes, while Accepting asks the registry
// (activities.LocalAcceptor).
func (ag *Agent) AcceptingLocally(queueName string, untrusted bool) (bool, string) {
	ag.mu.Lock()
	qw, state := ag.queues[queueName], ag.state
	var limit int
	var why string
	if qw != nil {
		sd := qw.side(untrusted)
		limit, why = sd.gate.Limit(), sd.grant.Why
	}
	ag.mu.Unlock()
	switch {
	case qw == nil:
		return false, fmt.Sprintf("%s does not serve queue %s", ag.Name(), queueName)
	case state != queue.StateActive:
		return false, fmt.Sprintf("%s is %s", ag.Name(), state)
	case limit == 0:
		return false, ag.notInRule(queueName, untrusted, why)
	}
	return true, ""
}

// notInRule says why the member may not take a build of the queue.
func (ag *Agent) notInRule(queueName string, untrusted bool, why string) string {
	if untrusted {
		return fmt.Sprintf("%s may not run pull requests from forks of queue %s: %s", ag.Name(), queueName, why)
	}
	return fmt.Sprintf("%s is not in queue %s's active rule: %s", ag.Name(), queueName, why)
}

// Begin counts a running build until the returned func is called.
func (ag *Agent) Begin(queueName string) func() {
	ag.mu.Lock()
	ag.running[queueName]++
	ag.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			ag.mu.Lock()
			defer ag.mu.Unlock()
			ag.running[queueName]--
			if qw := ag.queues[queueName]; qw != nil {
				if err := ag.sizeWorkerLocked(queueName, qw); err != nil {
					ag.log.Warn("queue_worker_resize_failed", "queue", queueName, "error", err)
				}
			}
		})
	}
}

// Running returns the builds running per queue.
func (ag *Agent) Running() map[string]int {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return maps.Clone(ag.running)
}

// Run heartbeats until ctx ends, then stops the queue workers. Running
// builds are interrupted; their attempts are dispatched again elsewhere.
func (ag *Agent) Run(ctx context.Context) error {
	defer ag.stop()
	// Results a previous run of this member could not deliver before it died.
	go ag.opts.Activities.DeliverPending(ctx)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			ag.leave(ctx)
			return nil
		case <-t.C:
		}
		view, err := ag.heartbeat(ctx)
		if err != nil {
			ag.noteError(ctx, err)
			t.Reset(min(time.Second, ag.opts.Interval))
			continue
		}
		ag.noteError(ctx, nil)
		if err := ag.apply(view); err != nil {
			return err
		}
		t.Reset(ag.opts.Interval)
	}
}

func (ag *Agent) noteError(ctx context.Context, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	ag.mu.Lock()
	changed := msg != ag.lastErr
	ag.lastErr = msg
	ag.mu.Unlock()
	var nf *serviceerror.NotFound
	switch {
	case changed && errors.As(err, &nf):
		ag.log.InfoContext(ctx, "waiting_for_registry", "why", "no controller has created the registry yet")
	case changed && err != nil:
		ag.log.WarnContext(ctx, "registry_heartbeat_failed", "error", err)
	case changed:
		ag.log.InfoContext(ctx, "registry_heartbeat_ok")
	}
}

func (ag *Agent) heartbeat(ctx context.Context) (workflows.MemberView, error) {
	m := ag.opts.Member
	m.Running = ag.Running()
	view, _, err := ag.link.CheckIn(ctx, m)
	return view, err
}

// leave tells the registry that the member stops (its context ended), so
// that the queues' rules count on other members at once; the builds it
// still runs are interrupted and dispatched again.
func (ag *Agent) leave(ctx context.Context) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := ag.link.Leave(lctx, ag.Name()); err != nil {
		ag.log.Warn("registry_leave_failed", "error", err)
		return
	}
	ag.log.Info("registry_left")
}

// apply sizes every queue worker from the registry's view, creating workers
// for queues seen for the first time.
func (ag *Agent) apply(view workflows.MemberView) error {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if view.State != ag.state {
		ag.log.Info("member_state_changed", "from", string(ag.state), "to", string(view.State))
	}
	ag.state = view.State
	if err := ag.applyDeletedQueues(view.DeletedQueues); err != nil {
		return err
	}
	for name, g := range view.Slots {
		qw, ok := ag.queues[name]
		if !ok {
			qw = newQueueWorker()
			ag.queues[name] = qw
		}
		ug, ok := view.Untrusted[name]
		if !ok {
			ug = workflows.SlotGrant{Why: "the registry gives " + ag.Name() + " no pull requests from forks"}
		}
		allowed, untrusted := g.Allowed, ug.Allowed
		if view.State != queue.StateActive {
			allowed, untrusted = 0, 0
		}
		// The member's slots for the queue: the larger allowance, with the
		// gap of the rule that gives the trusted builds slots.
		slots, gap := max(allowed, untrusted), g.MinGap
		if allowed == 0 && untrusted > 0 {
			gap = ug.MinGap
		}
		if slots != qw.pool.Limit() || gap != qw.pool.MinGap() || untrusted != qw.untrusted.gate.Limit() {
			ag.log.Info("queue_slots_changed", "queue", name, "slots", allowed, "untrusted_slots", untrusted,
				"min_gap", gap.String(), "why", g.Why, "why_untrusted", ug.Why)
		}
		qw.pool.SetLimit(slots, gap)
		qw.trusted.gate.SetLimit(allowed, 0)
		qw.untrusted.gate.SetLimit(untrusted, 0)
		qw.trusted.grant, qw.untrusted.grant = g, ug
		if err := ag.sizeWorkerLocked(name, qw); err != nil {
			return err
		}
	}
	for name, qw := range ag.queues {
		if _, ok := view.Slots[name]; !ok && qw.pool.Limit() != 0 {
			ag.log.Info("queue_slots_changed", "queue", name, "slots", 0, "why", "queue no longer served or deleted")
			qw.pool.SetLimit(0, 0)
			qw.trusted.gate.SetLimit(0, 0)
			qw.untrusted.gate.SetLimit(0, 0)
			if err := ag.sizeWorkerLocked(name, qw); err != nil {
				return err
			}
		}
	}
	return nil
}

// sizeWorkerLocked runs a worker for the queue while the member has slots
// for it. Without slots the worker is stopped once no build runs on it: that
// cancels its outstanding long polls, which could otherwise still pick up a
// task the member would have to hand back.
//
// Each of the queue's two task queues has its own worker, sized by its own
// allowance (gate).
func (ag *Agent) sizeWorkerLocked(name string, qw *queueWorker) error {
	for _, untrusted := range []bool{false, true} {
		sd := qw.side(untrusted)
		tq := workflows.QueueTaskQueue(name)
		if untrusted {
			tq = workflows.UntrustedTaskQueue(name)
		}
		switch {
		case sd.gate.Limit() > 0 && qw.pool.Limit() > 0 && sd.worker == nil:
			sup := &poolSupplier{pool: qw.pool, gate: sd.gate, turns: qw.turns}
			if untrusted {
				sup.side = 1
			}
			w, err := ag.startWorker(name, tq, sup)
			if err != nil {
				return err
			}
			sd.worker = w
		case (sd.gate.Limit() == 0 || qw.pool.Limit() == 0) && sd.worker != nil && ag.running[name] == 0:
			w := sd.worker
			sd.worker = nil
			go w.Stop()
			ag.log.Info("queue_worker_stopped", "queue", name, "task_queue", tq)
		}
	}
	return nil
}

// startWorker starts a worker of one of the queue's task queues. It keeps
// one long poll open: each poll holds one of the member's slots for the
// queue while it waits, so with two pollers one task queue's idle polls
// could hold both slots of a two-slot rule, and the other task queue would
// poll only once they came back empty (see turns).
func (ag *Agent) startWorker(name, taskQueue string, slots worker.SlotSupplier) (worker.Worker, error) {
	fixed := func() worker.SlotSupplier {
		s, _ := worker.NewFixedSizeSlotSupplier(1)
		return s
	}
	tuner, err := worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier:        fixed(),
		ActivitySlotSupplier:        slots,
		LocalActivitySlotSupplier:   fixed(),
		NexusSlotSupplier:           fixed(),
		SessionActivitySlotSupplier: fixed(),
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: build tuner: %w", name, err)
	}
	w := worker.New(ag.opts.Client, taskQueue, worker.Options{
		Identity:                         ag.Name(),
		Tuner:                            tuner,
		MaxConcurrentActivityTaskPollers: 1,
		// Builds are activities: without this the SDK also keeps two
		// workflow-task long polls on the queue's task queue (which carries
		// no workflows) for every worker of every executor, each one a
		// poller the server's matching service holds and a task queue it
		// keeps loaded.
		DisableWorkflowWorker: true,
		// A stopping executor interrupts its builds at once; this is how
		// long it waits for them to kill their processes (SIGTERM, then
		// SIGKILL after the kill grace), remove their containers and hand
		// their results over before it exits.
		WorkerStopTimeout: 20 * time.Second,
		// Heartbeats carry cancellations: send them every second so a
		// cancelled build's processes die within a couple of seconds.
		MaxHeartbeatThrottleInterval:     time.Second,
		DefaultHeartbeatThrottleInterval: time.Second,
	})
	w.RegisterActivityWithOptions(ag.opts.Activities.RunBuild, activity.RegisterOptions{Name: "RunBuild"})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("queue %s: start worker: %w", name, err)
	}
	ag.log.Info("queue_worker_started", "queue", name, "task_queue", taskQueue)
	return w, nil
}

func (ag *Agent) stop() {
	ag.mu.Lock()
	var ws []worker.Worker
	for _, qw := range ag.queues {
		qw.pool.SetLimit(0, 0)
		for _, sd := range []*taskQueueWorker{&qw.trusted, &qw.untrusted} {
			sd.gate.SetLimit(0, 0)
			if sd.worker != nil {
				ws = append(ws, sd.worker)
			}
		}
	}
	for _, js := range ag.janitors {
		ws = append(ws, js...)
	}
	ag.janitors = map[string][]worker.Worker{}
	ag.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.Stop)
	}
	wg.Wait()
}
