package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/logstore"
)

// TestAuthorizationMatrix sends a request to every /api/v1 route as each of
// anonymous, a token without privileges, another pipeline's owner, this
// pipeline's admin (by role), its owner, and a privileged operator, and
// checks each answer against the route's declared policy: 401 without a
// token, 403 for whoever the policy leaves out, and for everyone else an
// answer from the route itself. The requests are chosen so that an
// admitted one fails validation or finds nothing (400/404) instead of
// changing anything; the pipeline delete goes last. A route added to the
// table without a case here fails the test.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{
		"mallory": "mallory-token-0123456789", "olga": "olga-token-0123456789", "ren": "ren-token-0123456789",
		"alice": "alice-token-0123456789", "root": "root-token-0123456789",
	}
	e := server.NewEnv(t, testenv.Options{Token: tokens["root"], Tokens: fmt.Sprintf(`
tokens:
  - {user: mallory, token: %s}
  - {user: olga, token: %s}
  - {user: ren, token: %s, roles: [app-team]}
  - {user: alice, token: %s}
  - {user: root, token: %s, privileges: [manage-pipelines, manage-secrets, define-queues, manage-executors, read-secrets, read-scm-tokens]}
`, tokens["mallory"], tokens["olga"], tokens["ren"], tokens["alice"], tokens["root"])})
	ctx := e.Context()
	client := func(user string) *api.Client {
		c := api.NewClient(e.APIURL)
		c.Token = tokens[user]
		return c
	}
	spec := map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main: {requires: [~commit], steps: [{a: 'true'}]}\n"}
	_, err := client("alice").CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: testenv.NewRepo(t, spec).Dir, Admins: []string{"role:app-team"}})
	require.NoError(t, err)
	_, err = client("olga").CreatePipeline(ctx, api.CreatePipelineRequest{Name: "other", Repo: testenv.NewRepo(t, spec).Dir})
	require.NoError(t, err)

	type request struct{ method, path, body string }
	cases := map[string]request{
		"GET /api/v1/pipelines":                                            {"GET", "/api/v1/pipelines", ""},
		"POST /api/v1/pipelines":                                           {"POST", "/api/v1/pipelines", `{"name":"bad/name","repo":"x"}`},
		"GET /api/v1/pipelines/{name}":                                     {"GET", "/api/v1/pipelines/app", ""},
		"PATCH /api/v1/pipelines/{name}":                                   {"PATCH", "/api/v1/pipelines/app", `{"branch":"bad branch"}`},
		"DELETE /api/v1/pipelines/{name}":                                  {"DELETE", "/api/v1/pipelines/app", ""},
		"GET /api/v1/pipelines/{name}/badge.svg":                           {"GET", "/api/v1/pipelines/app/badge.svg", ""},
		"GET /api/v1/pipelines/{name}/jobs/{job}/schedule":                 {"GET", "/api/v1/pipelines/app/jobs/main/schedule", ""},
		"GET /api/v1/pipelines/{name}/events":                              {"GET", "/api/v1/pipelines/app/events", ""},
		"POST /api/v1/pipelines/{name}/events":                             {"POST", "/api/v1/pipelines/app/events", `{"type":"bogus"}`},
		"GET /api/v1/pipelines/{name}/admissions/{id}":                     {"GET", "/api/v1/pipelines/app/admissions/adm-nope", ""},
		"POST /api/v1/pipelines/{name}/jobs/{job}/schedule/{action}":       {"POST", "/api/v1/pipelines/app/jobs/main/schedule/explode", ""},
		"GET /api/v1/events/{pipeline}/{n}":                                {"GET", "/api/v1/events/app/999", ""},
		"POST /api/v1/events/{pipeline}/{n}/cancel":                        {"POST", "/api/v1/events/app/999/cancel", ""},
		"POST /api/v1/events/{pipeline}/{n}/restart":                       {"POST", "/api/v1/events/app/999/restart", `{}`},
		"POST /api/v1/events/{pipeline}/{n}/rerun":                         {"POST", "/api/v1/events/app/999/rerun", `{}`},
		"POST /api/v1/events/{pipeline}/{n}/approve":                       {"POST", "/api/v1/events/app/999/approve", ""},
		"GET /api/v1/builds":                                               {"GET", "/api/v1/builds?pipeline=app", ""},
		"GET /api/v1/builds/{id}":                                          {"GET", "/api/v1/builds/app%2Fmain%2F999", ""},
		"POST /api/v1/builds/{id}/cancel":                                  {"POST", "/api/v1/builds/app%2Fmain%2F999/cancel", ""},
		"GET /api/v1/queues":                                               {"GET", "/api/v1/queues", ""},
		"POST /api/v1/queues":                                              {"POST", "/api/v1/queues", `{"name":"q1","rules":["run-on=moon"]}`},
		"PUT /api/v1/queues/{name}":                                        {"PUT", "/api/v1/queues/q1", `{"name":"q1","rules":["run-on=moon"]}`},
		"DELETE /api/v1/queues/{name}":                                     {"DELETE", "/api/v1/queues/no-such-queue", ""},
		"GET /api/v1/queues/{name}":                                        {"GET", "/api/v1/queues/default", ""},
		"GET /api/v1/queues/{name}/status":                                 {"GET", "/api/v1/queues/default/status", ""},
		"GET /api/v1/executors":                                            {"GET", "/api/v1/executors", ""},
		"POST /api/v1/executors/{name}/{action}":                           {"POST", "/api/v1/executors/nobody/explode", ""},
		"GET /api/v1/audit":                                                {"GET", "/api/v1/audit?pipeline=app", ""},
		"GET /api/v1/pipelines/{name}/secrets":                             {"GET", "/api/v1/pipelines/app/secrets", ""},
		"PUT /api/v1/pipelines/{name}/secrets/{secret}":                    {"PUT", "/api/v1/pipelines/app/secrets/lower-case", `{"value":"v"}`},
		"DELETE /api/v1/pipelines/{name}/secrets/{secret}":                 {"DELETE", "/api/v1/pipelines/app/secrets/NOT_SET", ""},
		"POST /api/v1/secrets/resolve":                                     {"POST", "/api/v1/secrets/resolve", `{"build":"app/main/999","names":["X"]}`},
		"POST /api/v1/secrets/scm-token":                                   {"POST", "/api/v1/secrets/scm-token", `{"pipeline":"app","name":"NOPE"}`},
		"/api/v1/builds/{id}/logs":                                         {"GET", "/api/v1/builds/app%2Fmain%2F999/logs", ""},
		"/api/v1/builds/{id}/logs/":                                        {"GET", "/api/v1/builds/app%2Fmain%2F999/logs/main", ""},
		"GET /api/v1/builds/{id}/meta":                                     {"GET", "/api/v1/builds/app%2Fmain%2F999/meta", ""},
		"PUT /api/v1/builds/{id}/meta":                                     {"PUT", "/api/v1/builds/app%2Fmain%2F999/meta", `{"attempt":1,"status":"SUCCESS","meta":{}}`},
		"GET /api/v1/pipelines/{name}/jobs/{job}/meta":                     {"GET", "/api/v1/pipelines/app/jobs/main/meta", ""},
		"GET /api/v1/builds/{id}/artifacts":                                {"GET", "/api/v1/builds/app%2Fmain%2F999/artifacts", ""},
		"GET /api/v1/builds/{id}/artifacts/{path...}":                      {"GET", "/api/v1/builds/app%2Fmain%2F999/artifacts/dist/app", ""},
		"PUT /api/v1/builds/{id}/artifacts/{path...}":                      {"PUT", "/api/v1/builds/app%2Fmain%2F999/artifacts/dist/app?attempt=1", "bytes"},
		"GET /api/v1/events/{pipeline}/{n}/jobs/{job}/artifacts/{path...}": {"GET", "/api/v1/events/app/999/jobs/main/artifacts/dist/app", ""},
		// Page actions: signed in by cookie with the session's CSRF token
		// (pageCSRF), form bodies.
		"POST /ui/pipelines/{name}/events":                       {"POST", "/ui/pipelines/app/events", "param.nope=1"},
		"POST /ui/pipelines/{name}/jobs/{job}/schedule/{action}": {"POST", "/ui/pipelines/app/jobs/main/schedule/explode", ""},
		"POST /ui/events/{pipeline}/{n}/cancel":                  {"POST", "/ui/events/app/999/cancel", ""},
		"POST /ui/events/{pipeline}/{n}/restart":                 {"POST", "/ui/events/app/999/restart", "job=main"},
		"POST /ui/events/{pipeline}/{n}/rerun":                   {"POST", "/ui/events/app/999/rerun", ""},
		"POST /ui/events/{pipeline}/{n}/approve":                 {"POST", "/ui/events/app/999/approve", ""},
		"POST /ui/builds/{pipeline}/{job}/{n}/cancel":            {"POST", "/ui/builds/app/main/999/cancel", ""},
		"POST /ui/executors/{name}/{action}":                     {"POST", "/ui/executors/nobody/explode", ""},
		// The log viewer's reads, signed in by cookie.
		"GET /ui/builds/{pipeline}/{job}/{n}/log/{step}":     {"GET", "/ui/builds/app/main/999/log/main", ""},
		"GET /ui/builds/{pipeline}/{job}/{n}/log/{step}/raw": {"GET", "/ui/builds/app/main/999/log/main/raw", ""},
		"GET /ui/builds/{pipeline}/{job}/{n}/log-search":     {"GET", "/ui/builds/app/main/999/log-search?q=x", ""},
		"GET /ui/builds/{pipeline}/{job}/{n}/log-follow":     {"GET", "/ui/builds/app/main/999/log-follow", ""},
		// Personal tokens: each user's own (none here: 404 for the
		// revocations); only a person signed in with OIDC mints one,
		// never a page signed in with an API token (TestOIDCSignIn and
		// TestOIDCSignInInBrowser sign people in).
		"GET /api/v1/tokens":              {"GET", "/api/v1/tokens", ""},
		"POST /api/v1/tokens/{id}/revoke": {"POST", "/api/v1/tokens/nope/revoke", ""},
		"POST /ui/tokens/{id}/revoke":     {"POST", "/ui/tokens/nope/revoke", ""},
		"POST /ui/tokens":                 {"POST", "/ui/tokens", "name=laptop"},
	}
	routes := api.Routes(api.Deps{Secrets: &api.SecretStore{}, Logs: &logstore.Store{}, Meta: true, Artifacts: true})
	require.Len(t, cases, len(routes), "one case per route")
	// The delete goes last: after it, pipeline app is gone.
	var last api.Route
	ordered := make([]api.Route, 0, len(routes))
	for _, rt := range routes {
		if rt.Pattern == "DELETE /api/v1/pipelines/{name}" {
			last = rt
			continue
		}
		ordered = append(ordered, rt)
	}
	ordered = append(ordered, last)

	// A page action that succeeded would redirect (303): none may.
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	users := []string{"", "mallory", "olga", "ren", "alice", "root"}
	for _, rt := range ordered {
		req, ok := cases[rt.Pattern]
		require.True(t, ok, "no case for route %s", rt.Pattern)
		for _, user := range users {
			var want string // "401", "403" or "route" (anything else)
			switch {
			case user == "":
				want = "401"
			case rt.Policy.Kind == api.PolicyAuthenticated, rt.Policy.Kind == api.PolicyPublicPipeline: // app is not public
				want = "route"
			case rt.Policy.Kind == api.PolicyPrivilege:
				want = map[bool]string{true: "route", false: "403"}[user == "root"]
			case rt.Policy.Kind == api.PolicyPipelineAdmin:
				want = map[bool]string{true: "route", false: "403"}[user == "root" || user == "alice" || user == "ren"]
			case rt.Policy.Kind == api.PolicyPerson: // every user here signs in with an API token
				want = "403"
			default:
				t.Fatalf("route %s: unknown policy %q", rt.Pattern, rt.Policy.Kind)
			}
			if rt.Pattern == "DELETE /api/v1/pipelines/{name}" && user == "ren" {
				continue // alice deletes it next; one admin's delete is enough
			}
			page := strings.HasPrefix(req.path, "/ui/")
			body := req.body
			if page && user != "" {
				body = url.Values{"csrf": {pageCSRF(t, e, tokens[user])}}.Encode() + "&" + body
			}
			hr, err := http.NewRequestWithContext(ctx, req.method, e.APIURL+req.path, strings.NewReader(body))
			require.NoError(t, err)
			switch {
			case page:
				if user != "" {
					hr.AddCookie(&http.Cookie{Name: "sluice_token", Value: tokens[user]})
				}
				hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			case user != "":
				hr.Header.Set("Authorization", "Bearer "+tokens[user])
			}
			if !page && req.method != http.MethodGet {
				hr.Header.Set("Content-Type", "application/json")
			}
			resp, err := noRedirects.Do(hr)
			require.NoError(t, err)
			var answer bytes.Buffer
			_, _ = answer.ReadFrom(resp.Body)
			_ = resp.Body.Close()
			who := user
			if who == "" {
				who = "anonymous"
			}
			switch want {
			case "401":
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s as %s: %s", rt.Pattern, who, answer.String())
			case "403":
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s as %s: %s", rt.Pattern, who, answer.String())
			default:
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode,
					"%s as %s is admitted: %s", rt.Pattern, who, answer.String())
				require.Less(t, resp.StatusCode, 500, "%s as %s: %s", rt.Pattern, who, answer.String())
				require.NotEqual(t, http.StatusSeeOther, resp.StatusCode, "%s as %s: the case must change nothing", rt.Pattern, who)
			}
		}
	}
	// alice deleted her pipeline; olga's is untouched.
	_, err = client("root").GetPipeline(ctx, "other")
	require.NoError(t, err)
}

// pageCSRF signs in to the pages with token and answers the CSRF token
// their forms carry.
func pageCSRF(t *testing.T, e *testenv.Env, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(e.Context(), http.MethodGet, e.APIURL+"/ui/", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "sluice_token", Value: token})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindSubmatch(page)
	require.NotNil(t, m, "the page carries its CSRF token: %s", page)
	return string(m[1])
}

// TestOutsidersCannotTakeOverAPipeline: a token without privileges cannot
// update, delete, repoint or trigger another's pipeline (review finding 2),
// and the owner cannot repoint a pipeline that has secrets without
// manage-secrets (its secrets would reach the new repository's code).
func TestOutsidersCannotTakeOverAPipeline(t *testing.T) {
	t.Parallel()
	const aliceToken, malloryToken, rootToken = "alice-token-0123456789", "mallory-token-0123456789", "root-token-0123456789"
	e := server.NewEnv(t, testenv.Options{Token: rootToken, LocalExecutor: true, Tokens: `
tokens:
  - {user: alice, token: ` + aliceToken + `}
  - {user: mallory, token: ` + malloryToken + `}
  - {user: root, token: ` + rootToken + `, privileges: [manage-pipelines, manage-secrets, read-secrets, manage-executors, define-queues]}
`})
	ctx := e.Context()
	alice, mallory := api.NewClient(e.APIURL), api.NewClient(e.APIURL)
	alice.Token, mallory.Token = aliceToken, malloryToken
	spec := map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main: {requires: [~commit], steps: [{a: 'true'}]}\n"}
	repo := testenv.NewRepo(t, spec)
	evil := testenv.NewRepo(t, spec)
	_, err := alice.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "prod", Repo: repo.Dir})
	require.NoError(t, err)
	_, err = alice.SetSecret(ctx, "prod", "DEPLOY_KEY", api.SetSecretRequest{Value: "s3cret"})
	require.NoError(t, err)

	var ae *api.Error
	forbidden := func(err error, what string) {
		t.Helper()
		require.ErrorAs(t, err, &ae, what)
		require.Equal(t, http.StatusForbidden, ae.Status, what)
		require.Contains(t, ae.Message, `user "mallory" is not an admin of pipeline prod`, what)
	}
	_, err = mallory.UpdatePipeline(ctx, "prod", api.UpdatePipelineRequest{Repo: &evil.Dir})
	forbidden(err, "repoint")
	_, err = mallory.StartEvent(ctx, "prod", api.StartEventRequest{Type: "commit", Branch: "main"})
	forbidden(err, "trigger")
	_, err = mallory.SetSecret(ctx, "prod", "DEPLOY_KEY", api.SetSecretRequest{Value: "mine"})
	forbidden(err, "overwrite a secret")
	_, err = mallory.ListSecrets(ctx, "prod")
	forbidden(err, "list secrets")
	forbidden(mallory.DeletePipeline(ctx, "prod"), "delete")
	p, err := alice.GetPipeline(ctx, "prod")
	require.NoError(t, err)
	require.Equal(t, repo.Dir, p.Repo, "the pipeline still points at its repository")
	require.Equal(t, "alice", p.Owner)

	// The owner may trigger, but not repoint a pipeline with secrets
	// without manage-secrets.
	started, err := alice.StartEvent(ctx, "prod", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.NotEmpty(t, started.ID)
	_, err = alice.UpdatePipeline(ctx, "prod", api.UpdatePipelineRequest{Repo: &evil.Dir})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, "pipeline prod has secrets: changing its repository needs the manage-secrets privilege")
	// An operator with manage-pipelines and manage-secrets may.
	_, err = e.API.UpdatePipeline(ctx, "prod", api.UpdatePipelineRequest{Repo: &evil.Dir})
	require.NoError(t, err)
}
