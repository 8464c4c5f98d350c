package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

type fakeUpdater struct {
	got struct {
		pipeline, updateID, name string
		arg                      json.RawMessage
	}
	out json.RawMessage
	err error
}

func (f *fakeUpdater) UpdatePipeline(_ context.Context, pipeline, updateID, name string, arg json.RawMessage) (json.RawMessage, error) {
	f.got.pipeline, f.got.updateID, f.got.name, f.got.arg = pipeline, updateID, name, arg
	return f.out, f.err
}

// TestUpdatePipeline: the update goes to the named pipeline with its ID and
// its argument as JSON, and its answer comes back as is; when retrying
// cannot help (no updater, the pipeline is gone) the error is not
// retryable, so the event falls back to its signal at once; any other
// failure is retried.
func TestUpdatePipeline(t *testing.T) {
	t.Parallel()
	in := UpdatePipelineInput{Pipeline: "app", UpdateID: "app/1/enqueue/1", Name: "enqueue-builds", Arg: map[string]any{"event": 1}}

	f := &fakeUpdater{out: json.RawMessage(`{"messages":{}}`)}
	out, err := (&Activities{Pipelines: f}).UpdatePipeline(context.Background(), in)
	require.NoError(t, err)
	require.JSONEq(t, `{"messages":{}}`, string(out))
	require.Equal(t, "app", f.got.pipeline)
	require.Equal(t, "app/1/enqueue/1", f.got.updateID)
	require.Equal(t, "enqueue-builds", f.got.name)
	require.JSONEq(t, `{"event":1}`, string(f.got.arg))

	for _, tc := range []struct {
		name      string
		acts      *Activities
		retryable bool
	}{
		{name: "no updater", acts: &Activities{}},
		{name: "pipeline gone", acts: &Activities{Pipelines: &fakeUpdater{err: serviceerror.NewNotFound("workflow not found")}}},
		{name: "other failure", acts: &Activities{Pipelines: &fakeUpdater{err: errors.New("deadline exceeded")}}, retryable: true},
	} {
		_, err := tc.acts.UpdatePipeline(context.Background(), in)
		require.Error(t, err, tc.name)
		var appErr *temporal.ApplicationError
		if tc.retryable {
			if errors.As(err, &appErr) {
				require.False(t, appErr.NonRetryable(), tc.name)
			}
			continue
		}
		require.ErrorAs(t, err, &appErr, tc.name)
		require.True(t, appErr.NonRetryable(), tc.name)
		require.Equal(t, ErrTypeNoUpdater, appErr.Type(), tc.name)
	}
}
