package workflows

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEventSummary(t *testing.T) {
	t.Parallel()
	tr := Trigger{
		Kind: TriggerPR, Branch: "main", Ref: "feature", PR: 7, Sender: "carol", Title: "Add the widget",
		Author: "carol", Message: "  first line\n\nbody\n",
	}
	sum := SummaryOf(tr, "main")
	require.Equal(t, EventSummary{Kind: TriggerPR, Branch: "main", Ref: "feature", PR: 7, Sender: "carol", Title: "Add the widget", Author: "carol", Message: "first line"}, sum)

	long := Trigger{Title: strings.Repeat("t", 300), Author: strings.Repeat("a", 300), Message: strings.Repeat("é", 3000)}
	ClipChange(&long)
	require.Len(t, long.Title, maxTitle)
	require.Len(t, long.Author, maxTitle)
	require.LessOrEqual(t, len(long.Message), maxMessage)
	require.True(t, strings.HasSuffix(long.Message, "é"), "cut on a rune boundary")

	sas := eventSearchAttributes(PipelineConfig{Name: "app", Branch: "main"}, EventRef{Pipeline: "app", Number: 3}, tr)
	require.Len(t, sas, 5, "a pull request's event carries its number")
	sas = eventSearchAttributes(PipelineConfig{Name: "app", Branch: "main"}, EventRef{Pipeline: "app", Number: 3}, Trigger{Kind: TriggerCommit})
	require.Len(t, sas, 4)
}
