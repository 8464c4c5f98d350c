package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// N19: a pipeline deleted and created again under its name continues its
// event numbers even after Temporal's retention purged every history of
// the old one (here purged by hand: the test cannot wait a week), so no
// event or build ID repeats and old commit statuses never link to new
// builds.
func TestEventNumbersSurviveRetention(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	spec := map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main: {requires: [~commit], steps: [{a: 'true'}]}\n"}
	repo := testenv.NewRepo(t, spec)
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "again", Repo: repo.Dir})
	require.NoError(t, err)
	var old []string
	for range 3 {
		ev, err := e.StartEvent(ctx, "again", api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		e.WaitEvent(ev.ID, time.Minute)
		old = append(old, ev.ID)
	}
	require.Equal(t, "again/3", old[2])
	require.NoError(t, e.API.DeletePipeline(ctx, "again"))

	// The retention: every history of the old pipeline goes.
	purge := func(workflowID string) {
		_, err := e.Client.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: e.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
		})
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			require.NoError(t, err, workflowID)
		}
	}
	e.WaitFor("the deleted pipeline's workflow to end", time.Minute, func() bool {
		desc, err := e.Client.DescribeWorkflowExecution(ctx, workflows.PipelineWorkflowID("again"), "")
		return err == nil && desc.GetWorkflowExecutionInfo().GetCloseTime() != nil
	})
	purge(workflows.PipelineWorkflowID("again"))
	for _, id := range old {
		ref, err := workflows.ParseEventRef(id)
		require.NoError(t, err)
		purge(ref.WorkflowID())
		purge(workflows.BuildRef{Pipeline: "again", Job: "main", Event: ref.Number}.WorkflowID())
	}
	e.WaitFor("visibility to forget the old events", time.Minute, func() bool {
		_, err := e.Client.DescribeWorkflowExecution(ctx, workflows.PipelineWorkflowID("again"), "")
		var nf *serviceerror.NotFound
		events, lerr := e.API.ListEvents(ctx, "again", 10)
		return errors.As(err, &nf) && (lerr != nil || len(events) == 0)
	})

	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "again", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "again", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.Equal(t, "again/4", ev.ID, "numbering continues after the old pipeline's last event")
}
