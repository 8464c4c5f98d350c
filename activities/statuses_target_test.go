package activities_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/scm"
)

// flakyTokens fails the first fails reads of a pipeline token (the API
// blinked), then finds it.
type flakyTokens struct {
	fails int32
	calls atomic.Int32
}

func (f *flakyTokens) PipelineToken(context.Context, string, string) (string, bool, error) {
	if f.calls.Add(1) <= f.fails {
		return "", false, errors.New("connection refused")
	}
	return "pipeline-token", true, nil
}

type nopPoster struct{}

func (nopPoster) PostStatus(context.Context, scm.StatusTarget, string, scm.CommitStatus) error {
	return nil
}

func statusSettings(tokens activities.PipelineTokens) *activities.StatusSettings {
	return &activities.StatusSettings{
		PipelineTokens: tokens,
		NewPoster:      func(string, string) (scm.StatusPoster, error) { return nopPoster{}, nil },
	}
}

// resolveWithRetries runs ResolveEvent from a workflow with the event's
// kind of retry policy (maxAttempts attempts), so the activity sees its
// attempt number as it does in production.
func resolveWithRetries(t *testing.T, acts *activities.Activities, in activities.ResolveEventInput, maxAttempts int32) (activities.ResolveEventResult, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(acts.ResolveEvent)
	wf := func(ctx workflow.Context) (activities.ResolveEventResult, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: maxAttempts},
		})
		var out activities.ResolveEventResult
		err := workflow.ExecuteActivity(ctx, acts.ResolveEvent, in).Get(ctx, &out)
		return out, err
	}
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "resolve"})
	env.ExecuteWorkflow("resolve")
	require.True(t, env.IsWorkflowCompleted())
	var out activities.ResolveEventResult
	if err := env.GetWorkflowError(); err != nil {
		return out, err
	}
	require.NoError(t, env.GetWorkflowResult(&out))
	return out, nil
}

// N15: a pipeline token the API cannot give for a moment is retried, not
// taken as "no statuses for this event"; only when every attempt failed
// does the event go on without statuses, saying why.
func TestResolveEventRetriesAnUnreadablePipelineToken(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	in := activities.ResolveEventInput{Pipeline: "app", Repo: r.dir, Statuses: "github:owner/app"}

	t.Run("the API comes back", func(t *testing.T) {
		t.Parallel()
		tokens := &flakyTokens{fails: 2}
		h := setup(t)
		h.acts.Statuses = statusSettings(tokens)
		out, err := resolveWithRetries(t, h.acts, in, activities.ResolveMaxAttempts)
		require.NoError(t, err)
		require.Equal(t, int32(3), tokens.calls.Load(), "two failed reads, then the one that worked")
		require.Empty(t, out.StatusesOff)
		require.NotNil(t, out.Statuses)
		require.Equal(t, "owner/app", out.Statuses.Repo)
	})
	t.Run("the API stays away", func(t *testing.T) {
		t.Parallel()
		tokens := &flakyTokens{fails: 100}
		h := setup(t)
		h.acts.Statuses = statusSettings(tokens)
		out, err := resolveWithRetries(t, h.acts, in, activities.ResolveMaxAttempts)
		require.NoError(t, err, "the event still starts")
		require.Equal(t, int32(activities.ResolveMaxAttempts), tokens.calls.Load(), "every attempt tried")
		require.Nil(t, out.Statuses)
		require.Equal(t, "cannot read the pipeline's SLUICE_GITHUB_TOKEN secret: connection refused", out.StatusesOff)
		require.NotNil(t, out.Spec, "the event's spec is read all the same")
	})
}
