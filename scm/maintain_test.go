package scm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFetchMaintainsTheMirrorNowAndThen counts git's automatic maintenance
// runs: one at the mirror's first fetch, none at the fetches that follow
// within maintainEvery, one again once it is over.
func TestFetchMaintainsTheMirrorNowAndThen(t *testing.T) {
	h := newHistory(t)
	calls := filepath.Join(t.TempDir(), "calls")
	wrapGit(t, fmt.Sprintf(`echo "$*" >> %q`, calls))
	count := func(what string) int {
		b, err := os.ReadFile(calls)
		require.NoError(t, err)
		return strings.Count(string(b), what)
	}

	r := openRepo(t, h.dir).(*gitRepo)
	ctx := context.Background()
	require.Equal(t, 1, count("maintenance run --auto"), "the clone's fetch maintains the new mirror")
	for range 3 {
		h.commit("more", map[string]string{"more.txt": time.Now().String()})
		_, err := r.Resolve(ctx, "main")
		require.NoError(t, err)
	}
	require.Equal(t, 4, count(" fetch "), "every resolve of a branch that moved fetches")
	require.Equal(t, 4, count("maintenance.auto=false"), "no fetch runs git's own maintenance")
	require.Equal(t, 1, count("maintenance run --auto"), "within maintainEvery, no maintenance")

	old := time.Now().Add(-maintainEvery - time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(r.mirror, maintainedFile), old, old))
	h.commit("more", map[string]string{"more.txt": "once more"})
	_, err := r.Resolve(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, 2, count("maintenance run --auto"), "maintainEvery later, maintenance again")
}
