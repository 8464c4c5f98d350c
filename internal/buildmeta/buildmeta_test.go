package buildmeta_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/buildmeta"
)

func TestSetGetMerge(t *testing.T) {
	t.Parallel()
	doc := buildmeta.Doc{}
	require.NoError(t, buildmeta.Set(doc, "version", "1.2.3"))
	require.NoError(t, buildmeta.Set(doc, "deploy.region", "eu"))
	v, err := buildmeta.ParseValue(`{"n": 3, "ok": true}`, true)
	require.NoError(t, err)
	require.NoError(t, buildmeta.Set(doc, "deploy.info", v))
	require.NoError(t, buildmeta.Set(doc, "version.major", "1"), "a value that is not an object is replaced")

	got, ok, err := buildmeta.Get(doc, "deploy.region")
	require.NoError(t, err)
	require.True(t, ok)
	s, err := buildmeta.Format(got, ok, false)
	require.NoError(t, err)
	require.Equal(t, "eu", s)
	s, err = buildmeta.Format(got, ok, true)
	require.NoError(t, err)
	require.Equal(t, `"eu"`, s)
	got, ok, err = buildmeta.Get(doc, "deploy.info.n")
	require.NoError(t, err)
	s, err = buildmeta.Format(got, ok, false)
	require.NoError(t, err)
	require.Equal(t, "3", s, "numbers stay as written")
	got, ok, err = buildmeta.Get(doc, "nope.nothing")
	require.NoError(t, err)
	require.False(t, ok)
	s, err = buildmeta.Format(got, ok, false)
	require.NoError(t, err)
	require.Equal(t, "null", s, "Screwdriver prints null for a missing key")

	for _, bad := range []string{"", ".a", "a..b", "a b", "a.b$"} {
		require.ErrorIs(t, buildmeta.Set(doc, bad, "x"), buildmeta.ErrBadKey, bad)
	}
	_, err = buildmeta.ParseValue("{nope", true)
	require.ErrorContains(t, err, "not JSON")

	dst := buildmeta.Doc{"a": map[string]any{"x": "1", "y": "2"}, "keep": "k"}
	buildmeta.Merge(dst, buildmeta.Doc{"a": map[string]any{"y": "3"}, "b": "new"})
	require.Equal(t, buildmeta.Doc{"a": map[string]any{"x": "1", "y": "3"}, "keep": "k", "b": "new"}, dst)
}

func TestFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "meta.json")
	doc, err := buildmeta.ReadFile(path)
	require.NoError(t, err)
	require.Empty(t, doc, "a missing file is the empty document")
	require.NoError(t, buildmeta.Set(doc, "a.b", "c"))
	require.NoError(t, buildmeta.WriteFile(path, doc))
	again, err := buildmeta.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, doc, again)
	_, err = buildmeta.Parse([]byte(`[1]`))
	require.ErrorContains(t, err, "not a JSON object")
}
