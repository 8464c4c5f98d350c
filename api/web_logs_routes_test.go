package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/logstore"
)

// An outsider (no cookie, or one whose token is not valid) reads nothing
// through the log viewer's routes or the raw log route of the API: 401.
func TestLogViewerRoutesRefuseOutsiders(t *testing.T) {
	t.Parallel()
	store, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, store.Append("app/test/1/1", "run", []byte("secret-ish output\n")))
	h := newHandler(t, api.Deps{Authenticate: tokenAuth("good-token"), Logs: store})
	var viewer []string
	for _, rt := range api.Routes(api.Deps{Logs: store}) {
		if rt.Policy.Kind == api.PolicyAuthenticated && strings.HasPrefix(rt.Pattern, "GET /ui/") {
			viewer = append(viewer, rt.Pattern)
		}
	}
	require.ElementsMatch(t, []string{
		"GET /ui/builds/{pipeline}/{job}/{n}/log/{step}",
		"GET /ui/builds/{pipeline}/{job}/{n}/log/{step}/raw",
		"GET /ui/builds/{pipeline}/{job}/{n}/log-search",
		"GET /ui/builds/{pipeline}/{job}/{n}/log-follow",
	}, viewer, "the log viewer's routes are in the route table")
	for _, path := range []string{
		"/ui/builds/app/test/1/log/run", "/ui/builds/app/test/1/log/run/raw",
		"/ui/builds/app/test/1/log-search?q=secret", "/ui/builds/app/test/1/log-follow",
	} {
		for _, cookie := range []string{"", "sluice_token=bad"} {
			rec := call(t, h, http.MethodGet, path, "", http.Header{"Cookie": {cookie}})
			require.Equal(t, http.StatusUnauthorized, rec.Code, "%s with cookie %q", path, cookie)
			require.NotContains(t, rec.Body.String(), "secret-ish")
		}
	}
	rec := call(t, h, http.MethodGet, "/api/v1/builds/app%2Ftest%2F1%2F1/logs/run/raw", "", nil)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	rec = call(t, h, http.MethodGet, "/api/v1/builds/app%2Ftest%2F1%2F1/logs/run/raw", "", http.Header{"Authorization": {"Bearer good-token"}})
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "secret-ish output\n", rec.Body.String())
	require.Equal(t, `attachment; filename=app-test-1-1-run.log`, rec.Header().Get("Content-Disposition"))
}
