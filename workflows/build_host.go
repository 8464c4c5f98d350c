package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// buildHost is what a build's logic (build) asks of the workflow it runs
// in: where the lanes' messages and the canceller's name arrive, where its
// search attributes and memo go, and how it tells the pipeline and the
// registry. Today that is always the build's own BuildWorkflow
// (ownWorkflow), or the event that owns it (ownedHost, EventInput.OwnsBuilds:
// docs/option-b.md). The calls keep BuildWorkflow's commands exactly as
// they were, so recorded histories replay.
type buildHost interface {
	// laneMessages carries the lanes' messages to the build (SignalLane).
	laneMessages(ctx workflow.Context) workflow.ReceiveChannel
	// cancelledBy carries who cancels the build (SignalCancelledBy).
	cancelledBy(ctx workflow.Context) workflow.ReceiveChannel
	// upsert records search attributes of the build.
	upsert(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate)
	// summarize records the build's summary (MemoBuild), which list views
	// read from visibility.
	summarize(ctx workflow.Context, s BuildSummary)
	// leaveLane tells the pipeline the build left its lane and returns
	// once the pipeline has it (SignalBuildDone).
	leaveLane(ctx workflow.Context, done BuildDone) error
	// started tells the pipeline a claimed build runs (SignalBuildStarted).
	started(ctx workflow.Context, s BuildStarted)
	// lost tells the registry an executor lost the build (SignalBuildLost).
	lost(ctx workflow.Context, l BuildLost)
	// activityID names a dispatch's RunBuild activity ("": the SDK's
	// sequence number).
	activityID(build string, dispatch int) string
	// settle returns once a claim that raced the build's end has seen its
	// final state.
	settle(ctx workflow.Context)
}

// ownWorkflow hosts a build in its own BuildWorkflow.
type ownWorkflow struct{}

var _ buildHost = ownWorkflow{}

func (ownWorkflow) laneMessages(ctx workflow.Context) workflow.ReceiveChannel {
	return workflow.GetSignalChannel(ctx, SignalLane)
}

func (ownWorkflow) cancelledBy(ctx workflow.Context) workflow.ReceiveChannel {
	return workflow.GetSignalChannel(ctx, SignalCancelledBy)
}

func (ownWorkflow) upsert(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, updates...)
}

func (ownWorkflow) summarize(ctx workflow.Context, s BuildSummary) {
	_ = workflow.UpsertMemo(ctx, map[string]any{MemoBuild: s})
}

func (ownWorkflow) leaveLane(ctx workflow.Context, done BuildDone) error {
	return workflow.SignalExternalWorkflow(ctx, PipelineWorkflowID(done.Build.Pipeline), "", SignalBuildDone, done).Get(ctx, nil)
}

func (ownWorkflow) started(ctx workflow.Context, s BuildStarted) {
	_ = workflow.SignalExternalWorkflow(ctx, PipelineWorkflowID(s.Build.Pipeline), "", SignalBuildStarted, s)
}

func (ownWorkflow) lost(ctx workflow.Context, l BuildLost) {
	_ = workflow.SignalExternalWorkflow(ctx, RegistryID, "", SignalBuildLost, l)
}

func (ownWorkflow) activityID(string, int) string { return "" }

func (ownWorkflow) settle(ctx workflow.Context) {
	// Let an executor's claim that raced the end see a final state.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}
