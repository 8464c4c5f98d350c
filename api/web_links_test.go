package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRepoWebLinks(t *testing.T) {
	for repo, want := range map[string][2]string{
		"https://github.com/acme/app.git":      {"https://github.com/acme/app/commit/abc", "https://github.com/acme/app/pull/7"},
		"https://github.com/acme/app":          {"https://github.com/acme/app/commit/abc", "https://github.com/acme/app/pull/7"},
		"git@github.com:acme/app.git":          {"https://github.com/acme/app/commit/abc", "https://github.com/acme/app/pull/7"},
		"ssh://git@github.com/acme/app.git":    {"https://github.com/acme/app/commit/abc", "https://github.com/acme/app/pull/7"},
		"https://gitlab.com/grp/sub/app.git":   {"https://gitlab.com/grp/sub/app/-/commit/abc", "https://gitlab.com/grp/sub/app/-/merge_requests/7"},
		"git@gitlab.example.com:grp/app.git":   {"https://gitlab.example.com/grp/app/-/commit/abc", "https://gitlab.example.com/grp/app/-/merge_requests/7"},
		"/srv/git/app":                         {"", ""},
		"file:///srv/git/app":                  {"", ""},
		"https://git.example.com/acme/app.git": {"", ""},
		"https://github.com/acme":              {"", ""},
		"https://github.com/acme/app/extra":    {"", ""},
		"javascript://github.com/acme/app":     {"", ""},
		"https://github.com/acme/a%22pp":       {"", ""},
	} {
		w := repoWebOf(repo)
		require.Equal(t, want[0], w.Commit("abc"), repo)
		require.Equal(t, want[1], w.PR(7), repo)
	}
	require.Empty(t, repoWebOf("https://github.com/acme/app").Commit(""))
	require.Empty(t, repoWebOf("https://github.com/acme/app").PR(0))
}

// TestNewEventPageOfAPendingStart: a page's start lands on the new event,
// or on its pipeline when the API answered pending (no number yet).
func TestNewEventPageOfAPendingStart(t *testing.T) {
	require.Equal(t, "/ui/pipelines/app/events/12", newEventPage(nil, []byte(`{"id":"app/12","pipeline":"app","number":12}`)))
	require.Equal(t, "/ui/pipelines/app", newEventPage(nil, []byte(`{"pipeline":"app","admission":"adm-0123456789abcdef01234567","pending":true}`)))
	require.Equal(t, "/ui/", newEventPage(nil, []byte(`not json`)))
}
