package workers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// RegistryLink keeps one member in the registry at a small cost to its
// history. At every check-in (the member's heartbeat interval) the member
// reads what it may do with a query, which writes nothing; it renews its
// lease with an update (which the registry records) only:
//
//   - the first time, and when the registry asks (it does not know the
//     member, or holds it down after a lost build or a leave);
//   - when what it reports changed: host, labels, queues, runtime, the
//     queues it runs builds of (a count going from 0 to more or back: the
//     registry turns a draining member inactive on it), or any count while
//     the member is draining;
//   - when two thirds of the lease (the registry's liveness timeout, told in
//     every answer) have passed since the last renewal;
//   - when the registry fails the query (one from before leases has no
//     such query): the update is then what a heartbeat always was. A query
//     that times out or finds no server is an error, not a renewal: an
//     update would not fare better, and would add to the load.
//
// Other changes of the running counts ride on the next renewal. A
// RegistryLink is used by one goroutine at a time.
type RegistryLink struct {
	Client client.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	sent      *queue.Member // what the last renewal reported
	renewedAt time.Time
	lease     time.Duration     // from the last answer
	state     queue.MemberState // from the last answer
}

// CheckIn returns what member m may do now, and whether it renewed the lease.
func (l *RegistryLink) CheckIn(ctx context.Context, m queue.Member) (workflows.MemberView, bool, error) {
	now := l.now()
	if !l.mustRenew(m, now) {
		view, err := l.read(ctx, m.Name)
		var failed *serviceerror.QueryFailed
		switch {
		case errors.As(err, &failed):
			// The registry answered but has no such query (it predates
			// leases) or failed it: the update is what a heartbeat was.
		case err != nil:
			// Unreachable or overloaded: an update would not fare better
			// and would add to the load. The lease is not due yet; the
			// caller keeps its last view and checks in again.
			return view, false, fmt.Errorf("read grants: %w", err)
		case view.Renew, view.State == queue.StateDraining && !maps.Equal(view0(l.sent.Running), view0(m.Running)):
			// Asked to renew, or a draining member's counts changed (it
			// turns inactive when it reports none running).
		default:
			l.lease, l.state = view.Lease, view.State
			return view, false, nil
		}
	}
	view, err := l.renew(ctx, m)
	if err != nil {
		return view, true, err
	}
	sent := m
	sent.Labels, sent.Queues, sent.Running = maps.Clone(m.Labels), slices.Clone(m.Queues), maps.Clone(m.Running)
	l.sent, l.renewedAt, l.lease, l.state = &sent, now, view.Lease, view.State
	return view, true, nil
}

// Leave tells the registry the member stopped, so that the queues' rules
// stop counting on it at once.
func (l *RegistryLink) Leave(ctx context.Context, name string) error {
	h, err := l.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.RegistryID,
		UpdateName:   workflows.UpdateLeave,
		Args:         []any{workflows.LeaveRequest{Member: name}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("leave the registry: %w", err)
	}
	l.sent = nil
	return nil
}

func (l *RegistryLink) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// mustRenew reports whether the lease must be renewed before anything else.
func (l *RegistryLink) mustRenew(m queue.Member, now time.Time) bool {
	s := l.sent
	switch {
	case s == nil, l.lease <= 0:
		return true
	case now.Sub(l.renewedAt) >= l.lease*2/3, now.Before(l.renewedAt):
		return true
	case s.Name != m.Name, s.Role != m.Role, s.Host != m.Host, s.Runtime != m.Runtime,
		!maps.Equal(s.Labels, m.Labels), !slices.Equal(s.Queues, m.Queues):
		return true
	case !maps.Equal(busy(s.Running), busy(m.Running)):
		return true
	case l.state == queue.StateDraining && !maps.Equal(view0(s.Running), view0(m.Running)):
		return true
	}
	return false
}

// busy is the set of queues with running builds.
func busy(running map[string]int) map[string]bool {
	out := map[string]bool{}
	for q, n := range running {
		if n > 0 {
			out[q] = true
		}
	}
	return out
}

// view0 drops zero counts, so that {"a": 0} and {} compare equal.
func view0(running map[string]int) map[string]int {
	out := map[string]int{}
	for q, n := range running {
		if n != 0 {
			out[q] = n
		}
	}
	return out
}

func (l *RegistryLink) read(ctx context.Context, name string) (workflows.MemberView, error) {
	var view workflows.MemberView
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := l.Client.QueryWorkflow(qctx, workflows.RegistryID, "", workflows.QueryMemberView, name)
	if err != nil {
		return view, err
	}
	if err := v.Get(&view); err != nil {
		return view, err
	}
	return view, nil
}

func (l *RegistryLink) renew(ctx context.Context, m queue.Member) (workflows.MemberView, error) {
	var view workflows.MemberView
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := l.Client.UpdateWorkflow(hctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.RegistryID,
		UpdateName:   workflows.UpdateHeartbeat,
		Args:         []any{workflows.Heartbeat{Member: m}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return view, fmt.Errorf("heartbeat: %w", err)
	}
	if err := h.Get(hctx, &view); err != nil {
		return view, fmt.Errorf("heartbeat: %w", err)
	}
	return view, nil
}
