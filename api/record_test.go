package api

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	querypb "go.temporal.io/api/query/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/workflows"
)

// A build's record costs one query while it runs (no describe first), its
// result once it ended, and a describe only for a build started before its
// state carried the branch. The mock fails on any other call.
func TestBuildRecordCalls(t *testing.T) {
	t.Parallel()
	ref := workflows.BuildRef{Pipeline: "app", Job: "test", Event: 3}
	wid := ref.WorkflowID()
	query := func(c *mocks.Client, res *client.QueryWorkflowWithOptionsResponse) {
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == wid && r.QueryType == workflows.QueryBuild && r.QueryRejectCondition == enumspb.QUERY_REJECT_CONDITION_NOT_OPEN
		})).Return(res, nil).Once()
	}
	running := workflows.BuildState{ID: ref.String(), Build: ref, Status: workflows.StatusRunning, Executor: "exec-a", Branch: "main"}

	t.Run("running", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		query(c, &client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{running}})
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusRunning, b.Status)
		require.Equal(t, "exec-a", b.Executor)
		require.Equal(t, "main", b.Branch)
	})
	t.Run("ended", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		query(c, &client.QueryWorkflowWithOptionsResponse{QueryRejected: &querypb.QueryRejected{Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}})
		ended := running
		ended.Status, ended.Branch = workflows.StatusSuccess, "release"
		run := mocks.NewWorkflowRun(t)
		run.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
			*ptr.(*workflows.BuildState) = ended
			return nil
		}).Once()
		c.On("GetWorkflow", mock.Anything, wid, "").Return(run).Once()
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusSuccess, b.Status)
		require.Equal(t, "release", b.Branch)
	})
	t.Run("started before the branch was recorded", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		old := running
		old.Branch = ""
		query(c, &client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{old}})
		p, err := converter.GetDefaultDataConverter().ToPayload("legacy")
		require.NoError(t, err)
		c.On("DescribeWorkflowExecution", mock.Anything, wid, "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
				Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.SABranch.GetName(): p}},
			},
		}, nil).Once()
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, "legacy", b.Branch, "the branch comes from the search attribute")
		require.Equal(t, workflows.StatusRunning, b.Status)
	})
}
