package scm

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseCommit(t *testing.T) {
	c := parseCommit("Ann Example\x002026-01-02T03:04:05+01:00\x00fix: the thing\n\nbody line\n")
	require.Equal(t, "Ann Example", c.Author)
	require.Equal(t, "fix: the thing\n\nbody line", c.Message)
	require.True(t, c.Time.Equal(time.Date(2026, 1, 2, 2, 4, 5, 0, time.UTC)))

	long := parseCommit("a\x00\x00" + strings.Repeat("é", MaxCommitMessage))
	require.LessOrEqual(t, len(long.Message), MaxCommitMessage)
	require.True(t, strings.HasSuffix(long.Message, "é"), "cut on a rune boundary")

	require.Equal(t, Commit{}, parseCommit(""))
}

func TestCommitOfReadsAuthorAndMessage(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	r := openRepo(t, "file://"+h.dir)
	cr, ok := r.(CommitReader)
	require.True(t, ok, "a git repository reads its commits")
	c, err := cr.CommitOf(t.Context(), h.c2)
	require.NoError(t, err)
	require.Equal(t, "second", c.Message)
	require.Equal(t, h.git("show", "-s", "--format=%an", h.c2), c.Author)
	require.False(t, c.Time.IsZero())
	_, err = cr.CommitOf(t.Context(), "0123456789abcdef0123456789abcdef01234567")
	require.Error(t, err, "a commit the repository does not have")
}
