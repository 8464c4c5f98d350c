package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestAuditTrail takes every audited action once, through the API, a page
// action, a webhook and the sign-in page, and reads the trail back: each
// action left exactly one record naming who acted (a webhook's sender for
// the event it started; a redelivery adds none), and a secret's value
// appears nowhere. A pipeline's admin reads only that pipeline's records;
// an outsider is refused the route and the page; bad filters get errors
// that name them, from the API and from `sluice audit`. A screenshot of
// the audit page.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	const (
		hookSecret   = "audit-webhook-secret"
		aliceToken   = "alice-token-audit-0123"
		bobToken     = "bob-token-audit-0123"
		malloryToken = "mallory-token-audit-0123"
		rootToken    = "root-token-audit-0123"
		secretValue  = "s3cr3t-value-never-recorded"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: hookSecret, Token: rootToken, Tokens: `
tokens:
  - {user: alice, token: ` + aliceToken + `, privileges: [define-queues, manage-executors]}
  - {user: bob, token: ` + bobToken + `, roles: [app-team]}
  - {user: mallory, token: ` + malloryToken + `}
  - {user: root, token: ` + rootToken + `, privileges: [manage-pipelines]}
`})
	ctx := e.Context()
	as := func(token string) *api.Client {
		c := api.NewClient(e.APIURL)
		c.Token = token
		return c
	}
	alice, bob, mallory, root := as(aliceToken), as(bobToken), as(malloryToken), as(rootToken)

	gate := testenv.NewGate(t)
	dir := t.TempDir()
	fixed, hold := filepath.Join(dir, "fixed"), filepath.Join(dir, "hold")
	spec := fmt.Sprintf(`
annotations: {screwdriver.cd/restrictPR: fork}
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    steps: [{m: 'test -e %s'}]
  hold:
    requires: [~commit]
    steps: [{h: 'if test -e %s; then %s; fi'}]
  check: {requires: [~pr], steps: [{c: 'echo checked'}]}
  nightly:
    annotations: {screwdriver.cd/buildPeriodically: H 4 * * *}
    steps: [{n: 'echo nightly'}]
`, fixed, hold, gate.Wait())
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	repo2 := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})

	// want is every record the actions below must leave: actor, action,
	// target.
	var want []string
	did := func(actor, action, target string) { want = append(want, actor+" "+action+" "+target) }

	_, err := alice.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo.Dir})
	require.NoError(t, err)
	did("alice", "pipeline.create", "app")
	_, err = mallory.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "other", Repo: testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec}).Dir})
	require.NoError(t, err)
	did("mallory", "pipeline.create", "other")
	_, err = alice.UpdatePipeline(ctx, "app", api.UpdatePipelineRequest{Admins: &[]string{"role:app-team"}})
	require.NoError(t, err)
	did("alice", "pipeline.update", "app")
	_, err = alice.UpdatePipeline(ctx, "app", api.UpdatePipelineRequest{Repo: &repo2.Dir})
	require.NoError(t, err)
	did("alice", "pipeline.repo", "app")

	_, err = alice.SetSecret(ctx, "app", "NPM_TOKEN", api.SetSecretRequest{Value: secretValue})
	require.NoError(t, err)
	did("alice", "secret.set", "NPM_TOKEN")
	require.NoError(t, bob.DeleteSecret(ctx, "app", "NPM_TOKEN"))
	did("bob", "secret.delete", "NPM_TOKEN")

	// An event whose main fails; its failed jobs re-run; a restart.
	first, err := alice.StartEvent(ctx, "app", api.StartEventRequest{})
	require.NoError(t, err)
	did("alice", "event.start", first.ID)
	require.Equal(t, workflows.StatusFailure, e.WaitEvent(first.ID, time.Minute).Status)
	require.NoError(t, os.WriteFile(fixed, nil, 0o600))
	rerun, err := alice.RerunEvent(ctx, first.ID, api.RerunEventRequest{})
	require.NoError(t, err)
	did("alice", "event.rerun", first.ID)
	restart, err := bob.RestartEvent(ctx, first.ID, api.RestartEventRequest{From: api.JobList{"main"}})
	require.NoError(t, err)
	did("bob", "event.restart", first.ID)
	e.WaitEvent(rerun.ID, time.Minute)
	e.WaitEvent(restart.ID, time.Minute)

	// From here on hold waits: an event started by a page action and
	// cancelled; another whose build is cancelled.
	require.NoError(t, os.WriteFile(hold, nil, 0o600))
	code, loc := pagePost(t, e, "/ui/pipelines/app/events", aliceToken, url.Values{"branch": {""}})
	require.Equal(t, http.StatusSeeOther, code, loc)
	paged := "app/" + strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/ui/pipelines/app/events/")
	did("alice", "event.start", paged)
	require.NoError(t, alice.CancelEvent(ctx, paged))
	did("alice", "event.cancel", paged)
	fifth, err := alice.StartEvent(ctx, "app", api.StartEventRequest{})
	require.NoError(t, err)
	did("alice", "event.start", fifth.ID)
	var holdBuild string
	e.WaitFor("the held build", time.Minute, func() bool {
		ev, err := root.GetEvent(ctx, fifth.ID)
		if err != nil {
			return false
		}
		for _, b := range ev.Builds {
			if b.Job == "hold" {
				holdBuild = b.ID
			}
		}
		return holdBuild != ""
	})
	require.NoError(t, bob.CancelBuild(ctx, holdBuild))
	did("bob", "build.cancel", holdBuild)
	require.NoError(t, os.Remove(hold))

	// A fork's pull request, delivered twice (one event), approved.
	repo2.Git("checkout", "-q", "-b", "feature")
	head := repo2.Commit(map[string]string{"README": "fork change\n"}, "fork change")
	repo2.Git("checkout", "-q", "main")
	pr := deliverPR(t, e, hookSecret, repo2, 7, head, "mallory/app", "audit-fork-1")
	require.Len(t, pr.Events, 1)
	did("webhook:github:mallory", "event.start", pr.Events[0].ID)
	again := deliverPR(t, e, hookSecret, repo2, 7, head, "mallory/app", "audit-fork-1")
	require.True(t, again.Events[0].Duplicate, "%+v", again)
	e.WaitFor("the fork's event to wait for approval", time.Minute, func() bool {
		ev, err := root.GetEvent(ctx, pr.Events[0].ID)
		return err == nil && ev.Status == workflows.StatusBlocked && ev.Approval != nil
	})
	_, err = bob.ApproveEvent(ctx, pr.Events[0].ID)
	require.NoError(t, err)
	did("bob", "event.approve", pr.Events[0].ID)

	// The schedule: paused, unpaused, triggered (its event is the
	// schedule's, not a person's: no record).
	e.WaitFor("the periodic job to be registered", 30*time.Second, func() bool {
		p, err := root.GetPipeline(ctx, "app")
		return err == nil && p.Periodic["nightly"] != ""
	})
	for _, action := range []string{"pause", "unpause", "trigger"} {
		require.NoError(t, alice.ScheduleAction(ctx, "app", "nightly", action))
		did("alice", "schedule."+action, "app:nightly")
	}

	// Queues and executors.
	_, err = alice.CreateQueue(ctx, api.QueueRequest{Name: "fast", Rules: []string{"run-on=executors"}})
	require.NoError(t, err)
	did("alice", "queue.create", "fast")
	_, err = alice.UpdateQueue(ctx, api.QueueRequest{Name: "fast", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	did("alice", "queue.update", "fast")
	require.NoError(t, alice.DeleteQueue(ctx, "fast"))
	did("alice", "queue.delete", "fast")
	for _, action := range []string{"drain", "activate"} {
		_, err = alice.ExecutorAction(ctx, "local", action)
		require.NoError(t, err)
		did("alice", "executor."+action, "local")
	}

	// A sign-in to the pages.
	code, _ = formPost(t, e, "/ui/login", nil, url.Values{"token": {bobToken}, "next": {"/ui/"}})
	require.Equal(t, http.StatusSeeOther, code)
	did("bob", "signin", "bob")

	// Refused and failed requests leave no record.
	_, err = mallory.StartEvent(ctx, "app", api.StartEventRequest{})
	require.ErrorContains(t, err, "not an admin")
	_, err = alice.StartEvent(ctx, "app", api.StartEventRequest{Type: "bogus"})
	require.Error(t, err)

	records := func(c *api.Client, q api.AuditQuery) []api.AuditRecord {
		t.Helper()
		rs, err := c.Audit(ctx, q)
		require.NoError(t, err)
		return rs
	}
	got := func(rs []api.AuditRecord) []string {
		out := make([]string, 0, len(rs))
		for _, r := range rs {
			out = append(out, r.Actor+" "+r.Action+" "+r.Target)
		}
		sort.Strings(out)
		return out
	}
	sort.Strings(want)
	all := records(root, api.AuditQuery{Limit: api.MaxAuditLimit})
	require.Equal(t, want, got(all), "one record per action, with its actor")
	for _, r := range all {
		raw, err := json.Marshal(r)
		require.NoError(t, err)
		require.NotContains(t, string(raw), secretValue, "a secret's value is never recorded")
		require.False(t, r.At.IsZero())
	}

	// Filters: a pipeline's admin reads its records (only); by user, action.
	for _, r := range records(bob, api.AuditQuery{Pipeline: "app", Limit: api.MaxAuditLimit}) {
		require.Equal(t, "app", r.Pipeline, "%+v", r)
	}
	require.Len(t, records(root, api.AuditQuery{User: "webhook:github:mallory"}), 1)
	require.Len(t, records(root, api.AuditQuery{Action: "secret.set", Since: "1h"}), 1)
	require.Equal(t, []string{"mallory pipeline.create other"}, got(records(mallory, api.AuditQuery{Pipeline: "other"})), "an owner reads her own pipeline's records")
	// Paging back with before: the pages join up to the whole trail.
	var pages []api.AuditRecord
	for q := (api.AuditQuery{Limit: 5}); ; {
		page := records(root, q)
		pages = append(pages, page...)
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].At.Format(time.RFC3339Nano)
	}
	require.Equal(t, all, pages)

	t.Run("outsiders are refused", func(t *testing.T) {
		for _, c := range []struct {
			who  *api.Client
			q    api.AuditQuery
			want string
		}{
			{mallory, api.AuditQuery{}, "needs the manage-pipelines privilege"},
			{mallory, api.AuditQuery{Pipeline: "app"}, `not an admin of pipeline app`},
			{bob, api.AuditQuery{}, "needs the manage-pipelines privilege"},
			{bob, api.AuditQuery{Pipeline: "other"}, `not an admin of pipeline other`},
			{as(""), api.AuditQuery{Pipeline: "app"}, "missing Authorization header"},
		} {
			_, err := c.who.Audit(ctx, c.q)
			require.ErrorContains(t, err, c.want)
			status := http.StatusForbidden
			if c.who.Token == "" {
				status = http.StatusUnauthorized
			}
			var ae *api.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, status, ae.Status)
		}
		for _, path := range []string{"/ui/audit", "/ui/audit?pipeline=app"} {
			code, body := pageGet(t, e, path, malloryToken)
			require.Equal(t, http.StatusForbidden, code, "%s: %s", path, body)
			require.NotContains(t, body, "pipeline.create")
		}
		code, body := pageGet(t, e, "/ui/audit?pipeline=app", bobToken)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "secret.delete")
		require.NotContains(t, body, "executor.drain", "a pipeline admin's page shows only the pipeline's records")
	})

	t.Run("bad filters", func(t *testing.T) {
		for q, msg := range map[string]string{
			"since=yesterday":  `since "yesterday": want a duration back from now`,
			"since=-5h":        "want a positive duration",
			"limit=0":          "limit=\"0\": want a number from 1 to 1000",
			"limit=5000":       "want a number from 1 to 1000",
			"who=alice":        `unknown query parameter "who"`,
			"user=a&user=b":    "given 2 times",
			"pipeline=app&x=1": `unknown query parameter "x"`,
			"before=monday":    `before="monday": want a time (RFC 3339`,
		} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.APIURL+"/api/v1/audit?"+q, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+rootToken)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, b)
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(b, &eb), "%s", b)
			require.Contains(t, eb.Error, msg, q)
		}
	})

	t.Run("cli", func(t *testing.T) {
		env := func(token string) []string { return []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + token} }
		out, stderr, code := sluice(t, env(bobToken), "audit", "--pipeline", "app", "-o", "json")
		require.Zero(t, code, stderr)
		var rs []api.AuditRecord
		require.NoError(t, json.Unmarshal([]byte(out), &rs), out)
		require.NotEmpty(t, rs)
		for _, r := range rs {
			require.Equal(t, "app", r.Pipeline)
		}
		out, stderr, code = sluice(t, env(rootToken), "audit", "--user", "alice", "--action", "executor.drain", "--since", "1h")
		require.Zero(t, code, stderr)
		require.Contains(t, out, "executor.drain")
		require.Contains(t, out, "WHO")
		require.NotContains(t, out, "secret.set")

		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"audit", "--since", "yesterday"}, `--since "yesterday": want a duration back from now (90m, 24h, 30d) or a time`},
			{[]string{"audit", "--limit", "5000"}, "--limit 5000: want a number from 1 to 1000"},
			{[]string{"audit", "--before", "24h"}, `--before "24h": want a time (RFC 3339`},
			{[]string{"audit", "extra"}, "extra"},
		} {
			_, stderr, code := sluice(t, env(rootToken), c.args...)
			require.Equal(t, 2, code, "%v: %s", c.args, stderr)
			require.Contains(t, stderr, c.want, c.args)
		}
		_, stderr, code = sluice(t, env(malloryToken), "audit")
		require.NotZero(t, code)
		require.Contains(t, stderr, "needs the manage-pipelines privilege")
	})

	// Deleting the pipeline is recorded; its records stay (holders of
	// manage-pipelines read them).
	require.NoError(t, alice.DeletePipeline(ctx, "app"))
	rs := records(root, api.AuditQuery{Pipeline: "app", Action: "pipeline.delete"})
	require.Len(t, rs, 1)
	require.Equal(t, "alice", rs[0].Actor)
	require.Greater(t, len(records(root, api.AuditQuery{Pipeline: "app", Limit: api.MaxAuditLimit})), 10)

	t.Run("page", func(t *testing.T) {
		bctx := browser(t)
		run := func(steps ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			require.NoError(t, chromedp.Do(within(bctx, t, time.Minute), steps...))
		}
		run(chromedp.Navigate(e.APIURL+"/ui/login"),
			chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name=token]`), rootToken),
			chromedp.Submit(chromedp.CSS(`form.login`)),
			chromedp.WaitVisible(chromedp.CSS(`form.logout`)),
			chromedp.Navigate(e.APIURL+"/ui/audit?pipeline=app"),
			chromedp.WaitVisible(chromedp.CSS(`table#audit`)))
		n, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[int](`document.querySelectorAll("table#audit tbody tr").length`))
		require.NoError(t, err)
		require.Equal(t, len(records(root, api.AuditQuery{Pipeline: "app", Limit: api.MaxAuditLimit})), n)
		screenshot(bctx, t, t.TempDir(), "audit")
		// The signed-in browser's sign-in is recorded too.
		require.Len(t, records(root, api.AuditQuery{User: "root", Action: "signin"}), 1)
	})
}

// formPost posts a form to a page route with the token's sign-in cookie
// (none when token is ""), without following the redirect; it answers the
// status and the redirect's Location (or the body).
func formPost(t *testing.T, e *testenv.Env, path string, cookie *http.Cookie, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(e.Context(), http.MethodPost, e.APIURL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pagePost sends a page action signed in with token, with its CSRF token.
func pagePost(t *testing.T, e *testenv.Env, path, token string, form url.Values) (int, string) {
	t.Helper()
	form.Set("csrf", pageCSRF(t, e, token))
	return formPost(t, e, path, &http.Cookie{Name: "sluice_token", Value: token}, form)
}

// pageGet reads a page signed in with token.
func pageGet(t *testing.T, e *testenv.Env, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(e.Context(), http.MethodGet, e.APIURL+path, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "sluice_token", Value: token})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
