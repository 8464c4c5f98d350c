package workers

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/grpc"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// frontend is a Temporal frontend that only answers what an SDK worker
// needs to start, and records activity polls. Polls hang until the worker
// gives up on them (stop), so a poll in flight holds a slot.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer

	mu     sync.Mutex
	active map[string]int // task queue → polls in flight
	total  map[string]int // task queue → polls ever made
	ids    map[string]bool
	// workflowPolls counts workflow-task polls, of any task queue.
	workflowPolls int
}

func (f *frontend) PollWorkflowTaskQueue(ctx context.Context, _ *workflowservice.PollWorkflowTaskQueueRequest) (*workflowservice.PollWorkflowTaskQueueResponse, error) {
	f.mu.Lock()
	f.workflowPolls++
	f.mu.Unlock()
	<-ctx.Done()
	return &workflowservice.PollWorkflowTaskQueueResponse{}, nil
}

func (f *frontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *frontend) DescribeNamespace(_ context.Context, req *workflowservice.DescribeNamespaceRequest) (*workflowservice.DescribeNamespaceResponse, error) {
	return &workflowservice.DescribeNamespaceResponse{NamespaceInfo: &namespacepb.NamespaceInfo{Name: req.GetNamespace()}}, nil
}

func (f *frontend) PollActivityTaskQueue(ctx context.Context, req *workflowservice.PollActivityTaskQueueRequest) (*workflowservice.PollActivityTaskQueueResponse, error) {
	tq := req.GetTaskQueue().GetName()
	f.mu.Lock()
	f.active[tq]++
	f.total[tq]++
	f.ids[req.GetIdentity()] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active[tq]--
		f.mu.Unlock()
	}()
	<-ctx.Done()
	return &workflowservice.PollActivityTaskQueueResponse{}, nil
}

func (f *frontend) polls(tq string) (active, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active[tq], f.total[tq]
}

// setupFrontend serves a fake frontend and returns an SDK client for it.
func setupFrontend(t *testing.T) (*frontend, client.Client) {
	t.Helper()
	f := &frontend{active: map[string]int{}, total: map[string]int{}, ids: map[string]bool{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := client.NewLazyClient(client.Options{
		HostPort: lis.Addr().String(), Namespace: "default",
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return f, c
}

func TestAgentApplyStartsAndStopsQueueWorkers(t *testing.T) {
	t.Parallel()
	f, c := setupFrontend(t)
	ag := NewAgent(AgentOptions{
		Client: c, Member: queue.Member{Name: "exec-a", Role: queue.RoleExecutor},
		Activities: &activities.Activities{}, Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(ag.stop)
	tq := workflows.QueueTaskQueue("gpu")

	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 1}}}))
	require.Eventually(t, func() bool { a, _ := f.polls(tq); return a == 1 }, 10*time.Second, 5*time.Millisecond,
		"the worker polls the queue's task queue")
	// One slot, one long poll, which holds it while it waits.
	require.Equal(t, 1, poolOf(t, ag, "gpu").Used(), "the poll holds the queue's one slot")
	active, _ := f.polls(tq)
	require.Equal(t, 1, active)
	f.mu.Lock()
	require.True(t, f.ids["exec-a"], "polls carry the member name as identity")
	f.mu.Unlock()

	require.NoError(t, ag.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: 0, Why: "rule 2 is active"}}}))
	require.Eventually(t, func() bool { a, _ := f.polls(tq); return a == 0 }, 10*time.Second, 5*time.Millisecond,
		"without slots the worker stops and its poll ends")
	ok, why := ag.Accepting("gpu", false)
	require.False(t, ok)
	require.Equal(t, "exec-a is not in queue gpu's active rule: rule 2 is active", why)
	// The worker has stopped (its pollers joined): it never polled for
	// workflow tasks, which its task queue does not carry.
	f.mu.Lock()
	require.Zero(t, f.workflowPolls, "an executor's queue worker polls no workflow tasks")
	f.mu.Unlock()
}

// waitPolls waits until exactly n polls of tq are in flight. A queue
// worker has one poller (MaxConcurrentActivityTaskPollers), so at most one
// poll of a task queue is ever in flight: no wait is needed to see that
// no second one starts.
func waitPolls(t *testing.T, f *frontend, tq string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { a, _ := f.polls(tq); return a == n }, 10*time.Second, 5*time.Millisecond,
		"want %d polls of %s in flight", n, tq)
}

func TestAgentQueueWorkersFollowTheView(t *testing.T) {
	t.Parallel()
	f, c := setupFrontend(t)
	ag := NewAgent(AgentOptions{
		Client: c, Member: queue.Member{Name: "exec-b", Role: queue.RoleExecutor},
		Activities: &activities.Activities{}, Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(ag.stop)
	gpu, cpu := workflows.QueueTaskQueue("gpu"), workflows.QueueTaskQueue("cpu")
	view := func(state queue.MemberState, gpuSlots, cpuSlots int) workflows.MemberView {
		return workflows.MemberView{State: state, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: gpuSlots}, "cpu": {Allowed: cpuSlots}}}
	}

	// Inactive: slots granted, but no worker polls.
	require.NoError(t, ag.apply(view(queue.StateInactive, 2, 1)))
	waitPolls(t, f, gpu, 0)
	waitPolls(t, f, cpu, 0)

	// Active: one poll per worker (each poll holds a slot while it waits).
	require.NoError(t, ag.apply(view(queue.StateActive, 2, 1)))
	waitPolls(t, f, gpu, 1)
	waitPolls(t, f, cpu, 1)

	// cpu leaves the active rule: its worker stops; gpu keeps polling.
	require.NoError(t, ag.apply(view(queue.StateActive, 2, 0)))
	waitPolls(t, f, cpu, 0)
	waitPolls(t, f, gpu, 1)

	// Slots again: a new worker starts for cpu.
	_, before := f.polls(cpu)
	require.NoError(t, ag.apply(view(queue.StateActive, 2, 1)))
	waitPolls(t, f, cpu, 1)
	_, after := f.polls(cpu)
	require.Greater(t, after, before)

	// Stopping the agent stops every worker.
	ag.stop()
	waitPolls(t, f, gpu, 0)
	waitPolls(t, f, cpu, 0)
}

// A container executor polls both task queues of a queue it may run forks'
// builds of, within one budget: with one slot, one poll is in flight
// across both. A host executor never polls the untrusted task queue.
func TestAgentPollsTheUntrustedTaskQueueWithinTheQueuesSlots(t *testing.T) {
	t.Parallel()
	f, c := setupFrontend(t)
	box := NewAgent(AgentOptions{
		Client: c, Member: queue.Member{Name: "box", Role: queue.RoleExecutor, Runtime: queue.RuntimeContainer},
		Activities: &activities.Activities{}, Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(box.stop)
	tq, utq := workflows.QueueTaskQueue("gpu"), workflows.UntrustedTaskQueue("gpu")
	view := func(slots, untrusted int) workflows.MemberView {
		return workflows.MemberView{
			State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"gpu": {Allowed: slots}},
			Untrusted: map[string]workflows.SlotGrant{"gpu": {Allowed: untrusted}},
		}
	}
	require.NoError(t, box.apply(view(1, 1)))
	require.Eventually(t, func() bool {
		a, _ := f.polls(tq)
		b, _ := f.polls(utq)
		return a+b == 1
	}, 10*time.Second, 5*time.Millisecond, "one slot: one poll in flight across both task queues")
	time.Sleep(50 * time.Millisecond)
	a, _ := f.polls(tq)
	b, _ := f.polls(utq)
	require.Equal(t, 1, a+b, "one slot: one poll in flight across both task queues")

	require.NoError(t, box.apply(view(2, 2)))
	waitPolls(t, f, tq, 1)
	waitPolls(t, f, utq, 1)

	require.NoError(t, box.apply(view(2, 0)))
	waitPolls(t, f, utq, 0)
	waitPolls(t, f, tq, 1)

	host := NewAgent(AgentOptions{
		Client: c, Member: queue.Member{Name: "host", Role: queue.RoleExecutor, Runtime: queue.RuntimeHost},
		Activities: &activities.Activities{}, Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(host.stop)
	cpu := workflows.QueueTaskQueue("cpu")
	require.NoError(t, host.apply(workflows.MemberView{State: queue.StateActive, Slots: map[string]workflows.SlotGrant{"cpu": {Allowed: 2}}}))
	waitPolls(t, f, cpu, 1)
	waitPolls(t, f, workflows.UntrustedTaskQueue("cpu"), 0)
}
