package workers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

func viewAnswer(t *testing.T, v workflows.MemberView) encodedValue {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(t, err)
	return encodedValue{p: p}
}

// onRenew answers heartbeat updates with view.
func onRenew(t *testing.T, tc *mocks.Client, view workflows.MemberView) {
	t.Helper()
	h := mocks.NewWorkflowUpdateHandle(t)
	h.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
		*ptr.(*workflows.MemberView) = view
		return nil
	})
	tc.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(h, nil)
}

// A registry that answers the grants query with an error (one from before
// leases has no such query) gets the update a heartbeat always was; a
// query that times out is an error and no update: the registry is slow or
// away, and an update would only add to its load.
func TestRegistryLinkFallsBackOnlyWhenTheRegistryAnswers(t *testing.T) {
	t.Parallel()
	m := queue.Member{Name: "exec-a", Role: queue.RoleExecutor, Queues: []string{"*"}}
	now := time.Unix(1_000_000, 0)
	lease := workflows.MemberView{State: queue.StateActive, Lease: time.Minute}

	tc := mocks.NewClient(t)
	onRenew(t, tc, lease)
	link := &RegistryLink{Client: tc, Now: func() time.Time { return now }}
	_, renewed, err := link.CheckIn(context.Background(), m) // joins
	require.NoError(t, err)
	require.True(t, renewed)

	q := tc.On("QueryWorkflow", mock.Anything, workflows.RegistryID, "", workflows.QueryMemberView, "exec-a").
		Return(nil, context.DeadlineExceeded).Once()
	_, renewed, err = link.CheckIn(context.Background(), m)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, renewed)
	q.Unset()

	tc.On("QueryWorkflow", mock.Anything, workflows.RegistryID, "", workflows.QueryMemberView, "exec-a").
		Return(nil, serviceerror.NewQueryFailed("unknown queryType member-view")).Once()
	_, renewed, err = link.CheckIn(context.Background(), m)
	require.NoError(t, err)
	require.True(t, renewed, "a registry without the query gets the update")
	tc.AssertNumberOfCalls(t, "UpdateWorkflow", 2)

	tc.On("QueryWorkflow", mock.Anything, workflows.RegistryID, "", workflows.QueryMemberView, "exec-a").
		Return(viewAnswer(t, lease), nil).Once()
	_, renewed, err = link.CheckIn(context.Background(), m)
	require.NoError(t, err)
	require.False(t, renewed, "an answer with nothing to renew writes nothing")
	tc.AssertNumberOfCalls(t, "UpdateWorkflow", 2)
}
