package workflows

import (
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/internal/buildmeta"
)

// OwnStartMeta is the part of the metadata a build starts with that comes
// from the build itself and its event's trigger, as Screwdriver gives it:
// build.* (its IDs, job, commit and pull request), event.* (ID, trigger,
// creator, branch, pull request), sd.tag.name for a tag, sd.release.name
// and sd.release.author for a release, and commit.changedFiles
// (comma-separated) for a push or pull request that says which files it
// changed. The API merges it last, over the event's metadata, parameters,
// remote trigger and upstream builds (api.Service.StartMeta).
func OwnStartMeta(ref BuildRef, sha string, tr Trigger) buildmeta.Doc {
	event := ref.EventRef().String()
	build := map[string]any{"buildId": ref.String(), "eventId": event, "pipelineId": ref.Pipeline, "jobName": ref.Job, "sha": sha}
	if ref.PR > 0 {
		build["pr"] = strconv.Itoa(ref.PR)
	}
	ev := map[string]any{"id": event, "trigger": string(tr.Kind), "creator": tr.Sender}
	if tr.Branch != "" {
		ev["branch"] = tr.Branch
	}
	if tr.PR > 0 {
		ev["pr"] = strconv.Itoa(tr.PR)
	}
	doc := buildmeta.Doc{"build": build, "event": ev}
	switch tr.Kind {
	case TriggerTag:
		doc["sd"] = map[string]any{"tag": map[string]any{"name": tr.Ref}}
	case TriggerRelease:
		doc["sd"] = map[string]any{"release": map[string]any{"name": tr.Ref, "author": tr.Sender}}
	}
	if len(tr.ChangedFiles) > 0 {
		doc["commit"] = map[string]any{"changedFiles": strings.Join(tr.ChangedFiles, ",")}
	}
	return doc
}

// knownStartMeta is the metadata the first attempt of build in starts
// with when the workflow holds all of it: OwnStartMeta alone, for a build
// whose event was started with no metadata or parameters and by no remote
// trigger, and that has no upstream job. The executor then skips the
// API's read of it (activities.RunBuildInput.StartMeta). nil when only the
// API can tell: those, or a later attempt, which starts with what an
// earlier one saved.
func knownStartMeta(in BuildInput, attempt int) buildmeta.Doc {
	if attempt != 1 || in.Trigger.MetaRef != "" || len(in.Parameters) > 0 || in.Trigger.Remote != "" || len(in.Upstream) > 0 {
		return nil
	}
	return OwnStartMeta(in.Build, in.SHA, in.Trigger)
}
