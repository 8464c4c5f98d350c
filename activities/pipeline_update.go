package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// PipelineUpdater sends a pipeline workflow an update and returns its
// answer (workers.Temporal). The argument and the answer are JSON, so that
// this package needs none of the workflows' types.
type PipelineUpdater interface {
	UpdatePipeline(ctx context.Context, pipeline, updateID, name string, arg json.RawMessage) (json.RawMessage, error)
}

// UpdatePipelineInput names the pipeline, the update and its argument.
// UpdateID makes a retried update count once (per pipeline run).
type UpdatePipelineInput struct {
	Pipeline string `json:"pipeline"`
	UpdateID string `json:"update_id"`
	Name     string `json:"name"`
	// Arg is the update's argument (decoded here as plain JSON values,
	// encoded again for the update).
	Arg any `json:"arg"`
}

// ErrTypeNoUpdater is the error type of UpdatePipeline when retrying does
// not help: the worker sends no updates, or the pipeline is not running.
const ErrTypeNoUpdater = "NoPipelineUpdater"

// UpdatePipeline is the local activity through which an event hands its
// builds to its pipeline's lanes and gets the lanes' first answer back
// (workflows.UpdateEnqueue).
func (a *Activities) UpdatePipeline(ctx context.Context, in UpdatePipelineInput) (json.RawMessage, error) {
	if a.Pipelines == nil {
		return nil, temporal.NewNonRetryableApplicationError("this worker sends no pipeline updates", ErrTypeNoUpdater, errors.New("no updater"))
	}
	arg, err := json.Marshal(in.Arg)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("encode the update's argument", ErrTypeNoUpdater, err)
	}
	out, err := a.Pipelines.UpdatePipeline(ctx, in.Pipeline, in.UpdateID, in.Name, arg)
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		// The pipeline ended (deleted): no retry brings it back.
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("pipeline %s is not running: %v", in.Pipeline, err), ErrTypeNoUpdater, err)
	}
	if err != nil {
		return nil, fmt.Errorf("update %s of pipeline %s: %w", in.Name, in.Pipeline, err)
	}
	return out, nil
}
