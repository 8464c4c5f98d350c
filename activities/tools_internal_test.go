package activities

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestToolsDirIsMadeOnceAndShared: the builds of an executor share one
// directory of meta and sluice links per target, made once, 0755 under a
// root builds may enter but not list; another target (a container's
// mount) gets its own; a directory at that place whose links point
// elsewhere is refused, not used.
func TestToolsDirIsMadeOnceAndShared(t *testing.T) {
	work := t.TempDir()
	self := filepath.Join(t.TempDir(), "sluice")
	require.NoError(t, os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755))

	dir, err := toolsDir(work, self)
	require.NoError(t, err)
	for _, name := range []string{"meta", "sluice"} {
		l, err := os.Readlink(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, self, l, name)
	}
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	root, err := os.Stat(filepath.Dir(dir))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o711), root.Mode().Perm())

	again, err := toolsDir(work, self)
	require.NoError(t, err)
	require.Equal(t, dir, again)
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "made once, nothing left aside")

	// Another process (or executor) finds it made and uses it.
	toolsDirs.Delete(dir)
	again, err = toolsDir(work, self)
	require.NoError(t, err)
	require.Equal(t, dir, again)

	inContainer, err := toolsDir(work, containerToolsDir+"/sluice")
	require.NoError(t, err)
	require.NotEqual(t, dir, inContainer)
	l, err := os.Readlink(filepath.Join(inContainer, "meta"))
	require.NoError(t, err)
	require.Equal(t, containerToolsDir+"/sluice", l)

	// Links changed behind the executor's back are not trusted.
	other := t.TempDir()
	bad, err := toolsDir(other, self)
	require.NoError(t, err)
	toolsDirs.Delete(bad)
	require.NoError(t, os.Remove(filepath.Join(bad, "meta")))
	require.NoError(t, os.Symlink("/bin/sh", filepath.Join(bad, "meta")))
	_, err = toolsDir(other, self)
	require.Error(t, err)
}
