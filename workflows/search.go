package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Custom search attributes, registered at start-up by `sluice dev` and by
// controllers. They make pipelines, events and builds findable in the Web UI:
// e.g. `SluicePipeline = "myapp" AND SluiceStatus = "QUEUED"`.
var (
	SAPipeline = temporal.NewSearchAttributeKeyKeyword("SluicePipeline")
	SAJob      = temporal.NewSearchAttributeKeyKeyword("SluiceJob")
	SAEvent    = temporal.NewSearchAttributeKeyKeyword("SluiceEvent")
	SASHA      = temporal.NewSearchAttributeKeyKeyword("SluiceSHA")
	SABranch   = temporal.NewSearchAttributeKeyKeyword("SluiceBranch")
	SAStatus   = temporal.NewSearchAttributeKeyKeyword("SluiceStatus")
	SAQueue    = temporal.NewSearchAttributeKeyKeyword("SluiceQueue")
	SAExecutor = temporal.NewSearchAttributeKeyKeyword("SluiceExecutor")
	// SACause is, on an ended build, why it ended (a Cause).
	SACause        = temporal.NewSearchAttributeKeyKeyword("SluiceCause")
	SAPriority     = temporal.NewSearchAttributeKeyInt64("SluicePriority")
	SADispatchedAt = temporal.NewSearchAttributeKeyTime("SluiceDispatchedAt")
	// SASubscriptions lists, on a pipeline workflow, the remote jobs
	// ("sd@<pipeline>:<job>") whose success starts events in it.
	SASubscriptions = temporal.NewSearchAttributeKeyKeywordList("SluiceSubscriptions")
	// SAPR is, on a pull request's builds, the pull request's number.
	SAPR = temporal.NewSearchAttributeKeyInt64("SluicePR")
	// SAQueues lists, on an event workflow, every queue its jobs may reach:
	// a queue is not deleted while a running event can still reach it.
	SAQueues = temporal.NewSearchAttributeKeyKeywordList("SluiceQueues")
	// SAOpenBuilds lists, on an event that owns its builds
	// (EventInput.OwnsBuilds), "<STATUS>@<queue>" for each status one of
	// its unfinished builds has: `SluiceOpenBuilds = "QUEUED@linux"` finds
	// the events with a build waiting for a slot on queue linux.
	SAOpenBuilds = temporal.NewSearchAttributeKeyKeywordList("SluiceOpenBuilds")
)

// OpenBuildToken is a build's entry in SAOpenBuilds.
func OpenBuildToken(s Status, queue string) string { return string(s) + "@" + queue }

// SearchAttributes maps every custom attribute to its type, for registration.
// The embedded server creates its namespaces with them and caches them from
// then on (internal/devstack): an attribute added here later reaches an
// existing data directory through workers.RegisterSearchAttributes at the
// next start, which waits until the server uses it (up to a minute, its
// cache's refresh).
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SAPipeline.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAJob.GetName():           enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAEvent.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SASHA.GetName():           enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SABranch.GetName():        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAStatus.GetName():        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAQueue.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAExecutor.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SACause.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAPriority.GetName():      enumspb.INDEXED_VALUE_TYPE_INT,
		SADispatchedAt.GetName():  enumspb.INDEXED_VALUE_TYPE_DATETIME,
		SASubscriptions.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		SAPR.GetName():            enumspb.INDEXED_VALUE_TYPE_INT,
		SAQueues.GetName():        enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		SAOpenBuilds.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	}
}
