package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workers"
	"github.com/sluice-ci/sluice/workflows"
)

// writesOf counts the updates the registry recorded for member (heartbeats
// and leaves): the history a member costs.
func writesOf(t *testing.T, e *testenv.Env, member string) (heartbeats, leaves int) {
	t.Helper()
	it := e.Client.GetWorkflowHistory(e.Context(), workflows.RegistryID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		if a == nil {
			continue
		}
		in := a.GetAcceptedRequest().GetInput()
		names := false
		for _, p := range in.GetArgs().GetPayloads() {
			names = names || strings.Contains(string(p.GetData()), `"`+member+`"`)
		}
		if !names {
			continue
		}
		switch in.GetName() {
		case workflows.UpdateHeartbeat:
			heartbeats++
		case workflows.UpdateLeave:
			leaves++
		}
	}
	return heartbeats, leaves
}

// A member whose report does not change reads its grants by query: checking
// in again and again writes nothing to the registry's history until its
// lease is due (two thirds of the liveness timeout). A change of what it
// reports, a leave, a lost lease, each costs one renewal.
func TestRegistryLeaseWritesOnlyOnChange(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{Liveness: time.Minute})
	ctx := e.Context()
	now := time.Now()
	clock := func() time.Time { return now }
	link := &workers.RegistryLink{Client: e.Client, Now: clock}
	m := queue.Member{Name: "sim-1", Role: queue.RoleExecutor, Host: "test", Queues: []string{"default"}}

	for i := range 10 {
		view, renewed, err := link.CheckIn(ctx, m)
		require.NoError(t, err)
		require.Equal(t, i == 0, renewed, "check-in %d", i)
		require.Equal(t, time.Minute, view.Lease)
		require.Positive(t, view.Slots["default"].Allowed, view.Slots["default"].Why)
	}
	hb, _ := writesOf(t, e, "sim-1")
	require.Equal(t, 1, hb, "ten check-ins of an unchanged member: one renewal")

	// A build starts: the queues it runs builds of changed.
	m.Running = map[string]int{"default": 1}
	_, renewed, err := link.CheckIn(ctx, m)
	require.NoError(t, err)
	require.True(t, renewed)
	// A second build of the same queue rides on the next renewal.
	m.Running = map[string]int{"default": 2}
	_, renewed, err = link.CheckIn(ctx, m)
	require.NoError(t, err)
	require.False(t, renewed)
	// New labels are reported at once.
	m.Labels = map[string]string{"pool": "gpu"}
	_, renewed, err = link.CheckIn(ctx, m)
	require.NoError(t, err)
	require.True(t, renewed)
	// The lease is due after two thirds of it.
	now = now.Add(39 * time.Second)
	_, renewed, err = link.CheckIn(ctx, m)
	require.NoError(t, err)
	require.False(t, renewed)
	now = now.Add(time.Second)
	_, renewed, err = link.CheckIn(ctx, m)
	require.NoError(t, err)
	require.True(t, renewed)
	hb, _ = writesOf(t, e, "sim-1")
	require.Equal(t, 4, hb)

	// Another link (a restarted process) left under the same name: the
	// registry holds the member down and asks it to renew.
	require.NoError(t, (&workers.RegistryLink{Client: e.Client}).Leave(ctx, "sim-1"))
	members, err := e.API.ListExecutors(ctx)
	require.NoError(t, err)
	for _, x := range members {
		if x.Name == "sim-1" {
			require.False(t, x.Live, "a member that left is not live")
		}
	}
	view, renewed, err := link.CheckIn(ctx, m)
	require.NoError(t, err)
	require.True(t, renewed, "the registry asked the member that left to renew")
	require.False(t, view.Renew)
	hb, leaves := writesOf(t, e, "sim-1")
	require.Equal(t, 5, hb)
	require.Equal(t, 1, leaves)
}
