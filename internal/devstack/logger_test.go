package devstack

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/server/common/log/tag"
)

// TestServerLoggerWith: tags given to With come before the message's own,
// each derived logger keeps only its own chain, and nothing below the
// level is written.
func TestServerLoggerWith(t *testing.T) {
	var buf bytes.Buffer
	base := newServerLogger(slog.New(slog.NewJSONHandler(&buf, nil)), slog.LevelInfo)
	parent := base.With(tag.NewStringTag("shard", "1")).(serverLogger)
	a := parent.With(tag.NewStringTag("wf", "a"))
	b := parent.With(tag.NewStringTag("wf", "b"))
	a.Info("from a", tag.NewInt("n", 1))
	b.Warn("from b")
	a.Debug("dropped")

	var lines []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		require.NoError(t, dec.Decode(&m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 2)
	require.Equal(t, "from a", lines[0]["msg"])
	require.Equal(t, "1", lines[0]["shard"])
	require.Equal(t, "a", lines[0]["wf"])
	require.EqualValues(t, 1, lines[0]["n"])
	require.Equal(t, "from b", lines[1]["msg"])
	require.Equal(t, "b", lines[1]["wf"], "a sibling's tags do not leak")
}
