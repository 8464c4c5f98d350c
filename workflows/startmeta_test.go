package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/buildmeta"
)

func metaValue(t *testing.T, doc buildmeta.Doc, key string) any {
	t.Helper()
	v, ok, err := buildmeta.Get(doc, key)
	require.NoError(t, err)
	if !ok {
		return nil
	}
	return v
}

// TestOwnStartMeta: the keys Screwdriver gives builds from themselves and
// their event's trigger.
func TestOwnStartMeta(t *testing.T) {
	t.Parallel()
	ref := BuildRef{Pipeline: "app", Job: "test", Event: 7, Index: 2}
	tag := OwnStartMeta(ref, "abc123", Trigger{Kind: TriggerTag, Ref: "v1.2.0", Sender: "ann"})
	require.Equal(t, buildmeta.Doc{
		"build": map[string]any{"buildId": ref.String(), "eventId": "app/7", "pipelineId": "app", "jobName": "test", "sha": "abc123"},
		"event": map[string]any{"id": "app/7", "trigger": "tag", "creator": "ann"},
		"sd":    map[string]any{"tag": map[string]any{"name": "v1.2.0"}},
	}, tag)

	rel := OwnStartMeta(ref, "abc123", Trigger{Kind: TriggerRelease, Ref: "v2", Sender: "bob"})
	require.Equal(t, "v2", metaValue(t, rel, "sd.release.name"))
	require.Equal(t, "bob", metaValue(t, rel, "sd.release.author"))
	require.Nil(t, metaValue(t, rel, "sd.tag"))

	prRef := BuildRef{Pipeline: "app", Job: "test", Event: 8, PR: 12}
	pr := OwnStartMeta(prRef, "def456", Trigger{Kind: TriggerPR, Branch: "main", PR: 12, ChangedFiles: []string{"a.go", "docs/b.md"}})
	require.Equal(t, "12", metaValue(t, pr, "event.pr"))
	require.Equal(t, "12", metaValue(t, pr, "build.pr"))
	require.Equal(t, "main", metaValue(t, pr, "event.branch"))
	require.Equal(t, "a.go,docs/b.md", metaValue(t, pr, "commit.changedFiles"))
	require.Nil(t, metaValue(t, pr, "sd"))

	manual := OwnStartMeta(ref, "abc123", Trigger{Kind: TriggerManual})
	require.Equal(t, []string{"build", "event"}, sortedKeys(manual))
	require.Equal(t, map[string]any{"id": "app/7", "trigger": "manual", "creator": ""}, manual["event"])
}

// TestKnownStartMeta: the workflow hands an executor the metadata a build
// starts with only when nothing but the build and its trigger makes it.
func TestKnownStartMeta(t *testing.T) {
	t.Parallel()
	in := BuildInput{Build: BuildRef{Pipeline: "app", Job: "main", Event: 3}, SHA: "abc", Trigger: Trigger{Kind: TriggerCommit, Branch: "main", Sender: "ann"}}
	require.Equal(t, OwnStartMeta(in.Build, "abc", in.Trigger), knownStartMeta(in, 1))
	for name, change := range map[string]func(*BuildInput){
		"metadata at the event's start": func(in *BuildInput) { in.Trigger.MetaRef = "ref-1" },
		"parameters":                    func(in *BuildInput) { in.Parameters = map[string]string{"region": "eu"} },
		"a remote trigger":              func(in *BuildInput) { in.Trigger.Remote = "sd@other:publish" },
		"an upstream job":               func(in *BuildInput) { in.Upstream = []string{"build"} },
	} {
		other := in
		change(&other)
		require.Nil(t, knownStartMeta(other, 1), name)
	}
	require.Nil(t, knownStartMeta(in, 2), "a later attempt starts with what an earlier one saved")
}
