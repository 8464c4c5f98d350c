package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/workflows"
)

// TestTriggerMeta: the keys Screwdriver gives builds from their event's
// trigger.
func TestTriggerMeta(t *testing.T) {
	t.Parallel()
	get := func(doc buildmeta.Doc, key string) any {
		v, ok, err := buildmeta.Get(doc, key)
		require.NoError(t, err)
		if !ok {
			return nil
		}
		return v
	}
	tag := triggerMeta(workflows.Trigger{Kind: workflows.TriggerTag, Ref: "v1.2.0", Sender: "ann"})
	require.Equal(t, "v1.2.0", get(tag, "sd.tag.name"))
	require.Nil(t, get(tag, "sd.release.name"))

	rel := triggerMeta(workflows.Trigger{Kind: workflows.TriggerRelease, Ref: "v2", Sender: "bob"})
	require.Equal(t, "v2", get(rel, "sd.release.name"))
	require.Equal(t, "bob", get(rel, "sd.release.author"))

	pr := triggerMeta(workflows.Trigger{Kind: workflows.TriggerPR, Branch: "main", PR: 12, ChangedFiles: []string{"a.go", "docs/b.md"}})
	require.Equal(t, "12", get(pr, "event.pr"))
	require.Equal(t, "main", get(pr, "event.branch"))
	require.Equal(t, "a.go,docs/b.md", get(pr, "commit.changedFiles"))
	require.Nil(t, get(pr, "sd"))

	require.Empty(t, triggerMeta(workflows.Trigger{Kind: workflows.TriggerManual}))
}
