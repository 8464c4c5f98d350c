package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// githubDelivery sends a signed GitHub webhook delivery.
func githubDelivery(t *testing.T, e *testenv.Env, secret, event, delivery string, payload map[string]any) api.WebhookResult {
	t.Helper()
	body, err := json.Marshal(payload)
	require.NoError(t, err)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(e.Context(), http.MethodPost, e.APIURL+"/webhooks/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var res api.WebhookResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%+v", res)
	require.Len(t, res.Events, 1, "%+v", res)
	return res
}

// TestWebLists drives the list pages in a browser over four events of one
// pipeline (a manual start on main, one on branch feature whose job bad
// fails, a pull request from a webhook with its title and author, a push
// to main with its commit message and author): outsiders are sent to sign
// in; the dashboard shows each branch's last event; each filter of the
// build list (pipeline, job, status, branch, PR, end cause, executor,
// since/until) narrows it, paging walks every build once, and a filter set
// in the form round-trips through its URL; the event list filters by
// branch, PR and trigger; the event and build pages show the change
// (branch, PR and title, author, commit message, absolute times, end
// cause, step durations, attempts). Screenshots of each page.
func TestWebLists(t *testing.T) {
	t.Parallel()
	const (
		secret   = "web-lists-webhook-secret"
		annToken = "ann-token-web-lists-0123"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: secret, Token: annToken, Tokens: `
tokens:
  - {user: ann, token: ` + annToken + `}
`})
	ctx := e.Context()
	shots := t.TempDir()
	bctx := browser(t)

	// Outsiders: every list page sends them to sign in; the API's lists
	// with the new filters answer 401.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, cookie, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.APIURL+path, nil)
		require.NoError(t, err)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "sluice_token", Value: cookie})
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Location")
	}
	for _, path := range []string{"/ui/", "/ui/builds?status=FAILURE", "/ui/pipelines/app/events?branch=main"} {
		for _, cookie := range []string{"", "not-a-token"} {
			status, location := get(path, cookie, "")
			require.Equal(t, http.StatusSeeOther, status, "%s with cookie %q", path, cookie)
			require.Equal(t, "/ui/login?next="+url.QueryEscape(path), location)
		}
	}
	for _, path := range []string{"/api/v1/builds?branch=main&since=7d", "/api/v1/pipelines/app/events?trigger=pr"} {
		status, _ := get(path, "", "")
		require.Equal(t, http.StatusUnauthorized, status, path)
		status, _ = get(path, "", "not-a-token")
		require.Equal(t, http.StatusUnauthorized, status, path)
	}

	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared: {image: alpine}
jobs:
  ok: {requires: [~commit, ~pr], steps: [{o: "true"}]}
  bad: {requires: ["~commit:feature"], steps: [{b: "exit 3"}]}
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo.Dir})
	require.NoError(t, err)
	repo.Git("checkout", "-q", "-b", "feature")
	featureSHA := repo.Commit(map[string]string{"feature.txt": "work\n"}, "feature work")
	repo.Git("checkout", "-q", "main")

	ev1, err := e.StartEvent(ctx, "app", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	e.WaitEvent(ev1.ID, 2*time.Minute)
	ev2, err := e.StartEvent(ctx, "app", api.StartEventRequest{Type: "commit", Branch: "feature", SHA: featureSHA})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusFailure, e.WaitEvent(ev2.ID, 2*time.Minute).Status)
	between := time.Now().UTC() // every build of ev1 and ev2 was created before, of ev3 and ev4 after
	res := githubDelivery(t, e, secret, "pull_request", "web-lists-pr-7", map[string]any{
		"action": "opened", "number": 7,
		"pull_request": map[string]any{
			"number": 7, "title": "Add the widget", "user": map[string]any{"login": "carol"},
			"head": map[string]any{"ref": "feature", "sha": featureSHA, "repo": map[string]any{"full_name": "acme/app", "clone_url": repo.Dir}},
			"base": map[string]any{"ref": "main", "repo": map[string]any{"full_name": "acme/app", "clone_url": repo.Dir}},
		},
		"repository": map[string]any{"full_name": "acme/app", "clone_url": repo.Dir, "default_branch": "main"},
		"sender":     map[string]any{"login": "carol"},
	})
	ev3 := res.Events[0]
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev3.ID, 2*time.Minute).Status)
	pushSHA := repo.Commit(map[string]string{"fix.txt": "fixed\n"}, "Fix the flaky test\n\nThe retry loop now waits for the port.")
	res = githubDelivery(t, e, secret, "push", "web-lists-push-1", map[string]any{
		"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000", "after": pushSHA,
		"repository":  map[string]any{"full_name": "acme/app", "clone_url": repo.Dir, "default_branch": "main"},
		"head_commit": map[string]any{"id": pushSHA, "message": "Fix the flaky test\n\nThe retry loop now waits for the port.", "author": map[string]any{"name": "Dave D", "username": "dave"}},
		"sender":      map[string]any{"login": "dave"},
	})
	ev4 := res.Events[0]
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(ev4.ID, 2*time.Minute).Status)
	n := func(ev string) int {
		ref, err := workflows.ParseEventRef(ev)
		require.NoError(t, err)
		return ref.Number
	}
	okOf := func(ev string) string { return fmt.Sprintf("app/ok/%d", n(ev)) }
	prOK := fmt.Sprintf("app/PR-7:ok/%d", n(ev3.ID))
	badID := fmt.Sprintf("app/bad/%d", n(ev2.ID))
	all := []string{okOf(ev1.ID), badID, prOK, okOf(ev4.ID)} // ~commit is the pipeline's branch only
	// Visibility trails the workflows: wait until it lists every build ended.
	e.WaitFor("visibility to list every build ended", time.Minute, func() bool {
		bs, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "app"})
		if err != nil || len(bs) != len(all) {
			return false
		}
		for _, b := range bs {
			if !b.Status.Final() || b.Cause == "" {
				return false
			}
		}
		return true
	})

	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(within(bctx, t, time.Minute), steps...))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return s
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Location())
		require.NoError(t, err)
		return loc
	}
	// rows lists the data-<attr> of a table's rows on the current page.
	rows := func(table, attr string) []string {
		t.Helper()
		ids, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[[]string](fmt.Sprintf(
			`Array.from(document.querySelectorAll(%q)).map(r => r.getAttribute(%q))`, table+" tbody tr", "data-"+attr)))
		require.NoError(t, err)
		return ids
	}
	open := func(path, wait string) {
		t.Helper()
		run(chromedp.Navigate(e.APIURL+path), chromedp.WaitVisible(chromedp.CSS(wait)))
	}
	// navigated runs act (a click, a submit) and waits for the page it
	// leads to (the old page may hold the same elements).
	navigated := func(act chromedp.Action[chromedp.Void], wait string) {
		t.Helper()
		old := location()
		run(act)
		js := fmt.Sprintf(`location.href !== %q && document.readyState === "complete" && !!document.querySelector(%q)`, old, wait)
		// A navigating page fails an evaluation: try again.
		e.WaitFor("a new page after "+old, time.Minute, func() bool {
			c, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			ok, err := chromedp.Run(c, chromedp.Evaluate[bool](js))
			return err == nil && ok
		})
	}
	// builds opens the build list at query and lists the builds shown.
	builds := func(query string) []string {
		t.Helper()
		open("/ui/builds?"+query, `#build-filters`)
		return rows("#builds", "build")
	}
	run(chromedp.Navigate(e.APIURL+"/ui/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), annToken),
		chromedp.Submit(chromedp.CSS(`form.login`)),
		chromedp.WaitVisible(chromedp.CSS(`form.logout`)))

	// The dashboard: each branch's last event (the pull request's is not a
	// branch's), the pipeline's branch first.
	open("/ui/", `#dashboard`)
	require.Equal(t, []string{"main", "feature"}, rows("#dashboard", "branch"))
	require.Equal(t, []string{"SUCCESS", "FAILURE"}, rows("#dashboard", "status"))
	dash := text(`#dashboard`)
	require.Contains(t, dash, fmt.Sprintf("#%d", n(ev4.ID)), "main's last event is the push")
	require.Contains(t, dash, fmt.Sprintf("#%d", n(ev2.ID)))
	require.Contains(t, dash, "Fix the flaky test")
	require.Contains(t, dash, "by dave")
	require.NotContains(t, dash, "The retry loop", "the list shows the message's first line")
	screenshot(bctx, t, shots, "dashboard")

	// Each filter narrows the build list (builds are listed newest first).
	require.ElementsMatch(t, all, builds("pipeline=app"))
	require.Equal(t, []string{badID}, builds("pipeline=app&status=FAILURE"))
	require.Equal(t, []string{badID}, builds("pipeline=app&cause=failed"))
	require.Equal(t, []string{badID}, builds("pipeline=app&branch=feature"))
	require.ElementsMatch(t, []string{okOf(ev1.ID), prOK, okOf(ev4.ID)}, builds("branch=main&pipeline=app"), "a pull request's builds are its target branch's")
	require.Equal(t, []string{prOK}, builds("pipeline=app&pr=7"))
	require.Equal(t, []string{prOK}, builds("pipeline=app&pr=7&job=ok"), "a job with a PR is the PR's job")
	require.ElementsMatch(t, []string{okOf(ev1.ID), okOf(ev4.ID)}, builds("pipeline=app&job=ok"))
	require.ElementsMatch(t, all, builds("pipeline=app&executor=local"))
	require.Empty(t, builds("pipeline=app&executor=nobody"))
	require.Contains(t, text(`main`), "No build matches.")
	since := url.QueryEscape(between.Format(time.RFC3339Nano))
	require.ElementsMatch(t, []string{prOK, okOf(ev4.ID)}, builds("pipeline=app&since="+since))
	require.ElementsMatch(t, []string{okOf(ev1.ID), badID}, builds("pipeline=app&until="+since))
	require.Empty(t, builds("pipeline=app&status=nope"))
	require.Contains(t, text(`#list-error`), `status "NOPE"`)
	require.Empty(t, builds("pipeline=app&since=yesterday"))
	require.Contains(t, text(`#list-error`), `since "yesterday"`)

	// Paging: two builds a page, each build once, a link back to the first.
	var seen []string
	open("/ui/builds?pipeline=app&limit=2", `#builds`)
	for page := 1; ; page++ {
		got := rows("#builds", "build")
		require.LessOrEqual(t, len(got), 2, "page %d", page)
		seen = append(seen, got...)
		if page > 1 {
			first, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[string](`document.getElementById("first-page").getAttribute("href")`))
			require.NoError(t, err)
			require.Equal(t, "/ui/builds?limit=2&pipeline=app", first)
		}
		more, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[bool](`!!document.getElementById("next-page")`))
		require.NoError(t, err)
		if !more {
			break
		}
		require.Less(t, page, 5, "paging ends")
		navigated(chromedp.Click(chromedp.CSS(`#next-page`)), `#first-page`)
		require.Contains(t, location(), "page=", "the page token is in the URL")
	}
	require.Len(t, seen, len(all), "every build once: %v", seen)
	require.ElementsMatch(t, all, seen)

	// A filter set in the form is in the URL, and the URL gives it back.
	run(chromedp.Navigate(e.APIURL+"/ui/builds"), chromedp.WaitVisible(chromedp.CSS(`#build-filters`)))
	_, err = chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[bool](
		`document.querySelector("select[name=pipeline]").value = "app"; document.querySelector("select[name=status]").value = "FAILURE"; true`))
	require.NoError(t, err)
	run(chromedp.SendKeys(chromedp.CSS(`input[name=branch]`), "feature"))
	navigated(chromedp.Submit(chromedp.CSS(`#build-filters`)), `#builds`)
	loc, err := url.Parse(location())
	require.NoError(t, err)
	require.Equal(t, "/ui/builds", loc.Path)
	require.Equal(t, "app", loc.Query().Get("pipeline"))
	require.Equal(t, "FAILURE", loc.Query().Get("status"))
	require.Equal(t, "feature", loc.Query().Get("branch"))
	require.Equal(t, []string{badID}, rows("#builds", "build"))
	run(chromedp.Navigate("about:blank"))
	run(chromedp.Navigate(loc.String()), chromedp.WaitVisible(chromedp.CSS(`#builds`)))
	require.Equal(t, []string{badID}, rows("#builds", "build"), "the bookmarked URL lists the same builds")
	form, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[[]string](
		`["pipeline", "status", "branch"].map(n => document.querySelector("#build-filters [name=" + n + "]").value)`))
	require.NoError(t, err)
	require.Equal(t, []string{"app", "FAILURE", "feature"}, form, "the form shows the URL's filter")
	open("/ui/builds?pipeline=app", `#builds`)
	screenshot(bctx, t, shots, "builds")

	// A pipeline's events by branch, pull request and trigger.
	events := func(query string) []string {
		t.Helper()
		open("/ui/pipelines/app/events?"+query, `#event-filters`)
		return rows("#events", "event")
	}
	require.Equal(t, []string{ev4.ID, ev3.ID, ev2.ID, ev1.ID}, events(""))
	require.Equal(t, []string{ev2.ID}, events("branch=feature"))
	require.Equal(t, []string{ev3.ID}, events("trigger=pr"))
	require.Equal(t, []string{ev3.ID}, events("pr=7"))
	require.Equal(t, []string{ev4.ID, ev2.ID, ev1.ID}, events("trigger=commit"))
	require.Equal(t, []string{ev4.ID, ev1.ID}, events("trigger=commit&branch=main"))
	require.Empty(t, events("trigger=tag"))
	require.Equal(t, []string{ev4.ID}, events("limit=1"))
	require.Contains(t, text(`#next-page`), "next page")
	navigated(chromedp.Click(chromedp.CSS(`#next-page`)), `#first-page`)
	require.Equal(t, []string{ev3.ID}, rows("#events", "event"), "the second page")
	require.Empty(t, events("trigger=bogus"))
	require.Contains(t, text(`#list-error`), `trigger "bogus"`)
	open("/ui/pipelines/app/events", `#events`)
	evText := text(`#events`)
	require.Contains(t, evText, "PR #7")
	require.Contains(t, evText, "Add the widget")
	screenshot(bctx, t, shots, "events")

	// The pull request's event page: branch, PR number and title, author,
	// absolute times; the trigger that fired is marked in the graph.
	stamp := regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC \(\d+[smhd] ago\)`)
	open(fmt.Sprintf("/ui/pipelines/app/events/%d", n(ev3.ID)), `#event-pr`)
	require.Contains(t, text(`#event-pr`), "PR #7")
	require.Contains(t, text(`#event-pr`), "Add the widget")
	require.Equal(t, "carol", text(`#event-author`))
	require.Equal(t, "main ← feature", text(`#event-branch`))
	require.Regexp(t, stamp, text(`#event-started`))
	require.Regexp(t, stamp, text(`#event-ended`))
	fired, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("g.trigger[data-fired=true]")).map(g => g.dataset.trigger)`))
	require.NoError(t, err)
	require.Equal(t, []string{"pr"}, fired)
	screenshot(bctx, t, shots, "event-details")
	// The push: its commit's message (whole) and author.
	open(fmt.Sprintf("/ui/pipelines/app/events/%d", n(ev4.ID)), `#event-message`)
	require.Equal(t, "dave", text(`#event-author`))
	require.Equal(t, "Fix the flaky test\n\nThe retry loop now waits for the port.", text(`#event-message`))
	// A manual start: author and message read from the commit.
	open(fmt.Sprintf("/ui/pipelines/app/events/%d", n(ev1.ID)), `#event-message`)
	require.Equal(t, "sluice-test", text(`#event-author`))
	require.Equal(t, "initial commit", text(`#event-message`))

	// The failed build's page: branch, end cause with the step, times,
	// each step's duration, the attempts.
	open("/ui/builds/"+badID, `#build-cause`)
	require.Equal(t, "feature", text(`#build-branch`))
	require.Contains(t, text(`#build-cause`), "failed")
	require.Contains(t, text(`#build-cause`), "step b exit 3")
	for _, sel := range []string{`#build-created`, `#build-started`, `#build-ended`} {
		require.Regexp(t, stamp, text(sel), sel)
	}
	steps := text(`#steps`)
	require.Contains(t, steps, "b")
	took, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#steps td.took")).map(td => td.innerText)`))
	require.NoError(t, err)
	require.NotEmpty(t, took)
	for _, d := range took {
		_, err := time.ParseDuration(d)
		require.NoError(t, err, "a step's duration: %q", d)
	}
	attempts := text(`#attempts`)
	require.Contains(t, attempts, "local")
	require.Regexp(t, stamp, attempts)
	screenshot(bctx, t, shots, "build-details")

	// The build API's filters and its next page header.
	var list []api.Build
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.APIURL+"/api/v1/builds?pipeline=app&limit=2", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+annToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	_ = resp.Body.Close()
	require.Len(t, list, 2)
	require.NotEmpty(t, resp.Header.Get(api.NextPageHeader))
	bs, err := e.API.ListBuilds(ctx, api.BuildFilter{Pipeline: "app", Branch: "feature", Executor: "local"})
	require.NoError(t, err)
	ids := make([]string, 0, len(bs))
	for _, b := range bs {
		ids = append(ids, b.ID)
		require.Equal(t, "feature", b.Branch)
	}
	require.Equal(t, []string{badID}, ids)
	evs, err := e.API.ListEventsFiltered(ctx, "app", api.EventFilter{PR: 7, Trigger: workflows.TriggerPR, Limit: 10})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, ev3.ID, evs[0].ID)
	require.Equal(t, "Add the widget", evs[0].Trigger.Title, "the list carries the trigger from the event's memo")
}
