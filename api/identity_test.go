package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// A restart or a re-run acts for the person who asked, never for the
// pipeline's owner: the new event's queue `use` checks are made for them
// (M4e: restart and re-run sending no identity survived every test).
func TestRestartAndRerunActForTheCaller(t *testing.T) {
	t.Parallel()
	ended := workflows.EventState{
		Event: workflows.EventRef{Pipeline: "app", Number: 3}, Status: workflows.StatusFailure, SHA: "abcdef0123456789abcdef0123456789abcdef01",
		Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "main", Sender: "webhook"},
		Jobs: []workflows.JobOutcome{
			{Job: "build", Status: workflows.StatusSuccess},
			{Job: "test", Status: workflows.StatusFailure},
		},
	}
	for path, body := range map[string]string{"/api/v1/events/app/3/restart": `{"from": ["test"]}`, "/api/v1/events/app/3/rerun": `{}`} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			tc := newMockClient(t)
			refuseQuery(tc, ended.Event.WorkflowID(), workflows.QueryEvent, 0)
			run := mocks.NewWorkflowRun(t)
			run.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
				*ptr.(*workflows.EventState) = ended
				return nil
			})
			tc.On("GetWorkflow", mock.Anything, ended.Event.WorkflowID(), "").Return(run)
			var got workflows.StartEventRequest
			onAdmit(t, tc, "app", func(r workflows.StartEventRequest) (workflows.StartEventResult, error) {
				got = r
				return workflows.StartEventResult{Event: workflows.EventRef{Pipeline: "app", Number: 4}}, nil
			})
			dana := queue.Identity{User: "dana", Roles: []string{"app-team"}}
			h := newHandler(t, api.Deps{
				Service:      newService(t, tc),
				Authenticate: func(*http.Request) (queue.Identity, error) { return dana, nil },
				PipelineOf:   ownedBy("dana"),
			})
			ev := decodeBody[api.EventStarted](t, call(t, h, http.MethodPost, path, body, nil), http.StatusCreated)
			require.Equal(t, "app/4", ev.ID)
			require.Equal(t, &dana, got.Identity, "the new event acts for who asked")
			require.Equal(t, "dana", got.Creator)
			require.Equal(t, "dana", got.Trigger.Sender)
			require.Equal(t, 3, got.Parent)
			require.Equal(t, ended.SHA, got.Trigger.SHA, "at the event's commit")
		})
	}
}

// A cancel names who cancelled, so the build's end cause can say it: the
// API signals the build with the caller before it cancels the workflow.
func TestCancelBuildNamesTheCaller(t *testing.T) {
	t.Parallel()
	tc := newMockClient(t)
	ref := workflows.BuildRef{Pipeline: "app", Job: "test", Event: 3}
	var order []string
	tc.On("SignalWorkflow", mock.Anything, ref.WorkflowID(), "", workflows.SignalCancelledBy, workflows.CancelledBy{User: "dana"}).
		Run(func(mock.Arguments) { order = append(order, "signal") }).Return(nil).Once()
	tc.On("CancelWorkflow", mock.Anything, ref.WorkflowID(), "").
		Run(func(mock.Arguments) { order = append(order, "cancel") }).Return(nil).Once()
	dana := queue.Identity{User: "dana"}
	h := newHandler(t, api.Deps{
		Service:      newService(t, tc),
		Authenticate: func(*http.Request) (queue.Identity, error) { return dana, nil },
		PipelineOf:   ownedBy("dana"),
	})
	decodeBody[map[string]string](t, call(t, h, http.MethodPost, "/api/v1/builds/app%2Ftest%2F3/cancel", "", nil), http.StatusAccepted)
	require.Equal(t, []string{"signal", "cancel"}, order)
}
