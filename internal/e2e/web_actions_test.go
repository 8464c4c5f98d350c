package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestWebActions drives the page actions in one browser against one
// installation: a user without rights sees no button and is refused a
// forged POST that carries her own valid CSRF token; actions without the
// session's CSRF token, or from another origin, are refused; then the
// pipeline's owner approves a fork's pull request (it runs), starts an
// event with a parameter (the build sees it), cancels a build (it ends
// ABORTED on the page it lands on), re-runs the failed jobs and restarts
// from a job (new events that succeed), and drains and re-activates the
// executor. Screenshots of each page with its buttons.
func TestWebActions(t *testing.T) {
	t.Parallel()
	const (
		secret       = "web-actions-webhook-secret"
		aliceToken   = "alice-token-web-actions-0123"
		malloryToken = "mallory-token-web-actions-0123"
	)
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, GitHubSecret: secret, Token: aliceToken, Tokens: `
tokens:
  - {user: alice, token: ` + aliceToken + `, privileges: [define-queues, manage-executors]}
  - {user: mallory, token: ` + malloryToken + `}
`})
	ctx := e.Context()
	shots := t.TempDir()
	bctx := browser(t)

	_, err := e.API.UpdateQueue(ctx, api.QueueRequest{Name: "default", Rules: []string{
		"run-on=executors,max-parallel=2,untrusted-on-host=true", "run-on=controller,max-parallel=1",
	}})
	require.NoError(t, err)
	gate := testenv.NewGate(t)
	fixed := filepath.Join(t.TempDir(), "fixed")
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
annotations: {screwdriver.cd/restrictPR: fork}
parameters:
  target: {value: [staging, prod], description: where to deploy}
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    steps: [{m: 'echo "target=$SD_PARAM_TARGET"; %s'}]
  flaky:
    requires: [~commit]
    steps: [{f: 'test -e %s'}]
  check: {requires: [~pr], steps: [{c: 'echo checked'}]}
  nightly:
    annotations: {screwdriver.cd/buildPeriodically: H 4 * * *}
    steps: [{n: 'echo nightly'}]
`, gate.Wait(), fixed)})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo.Dir})
	require.NoError(t, err)

	// A fork's pull request waits for approval.
	repo.Git("checkout", "-q", "-b", "feature")
	head := repo.Commit(map[string]string{"README": "fork change\n"}, "fork change")
	repo.Git("checkout", "-q", "main")
	res := deliverPR(t, e, secret, repo, 7, head, "mallory/app", "web-actions-fork-1")
	prID := res.Events[0].ID
	prRef, err := workflows.ParseEventRef(prID)
	require.NoError(t, err)
	e.WaitFor("the fork's event to wait for approval", time.Minute, func() bool {
		ev, err := e.API.GetEvent(ctx, prID)
		return err == nil && ev.Status == workflows.StatusBlocked && ev.Approval != nil
	})
	prPage := fmt.Sprintf("%s/ui/pipelines/app/events/%d", e.APIURL, prRef.Number)

	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(within(bctx, t, time.Minute), steps...))
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Location())
		require.NoError(t, err)
		return loc
	}
	signIn := func(token string) {
		t.Helper()
		run(chromedp.Navigate(e.APIURL+"/ui/login"),
			chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
			chromedp.Submit(chromedp.CSS(`form.login`)),
			chromedp.WaitVisible(chromedp.CSS(`form.logout`)))
	}
	forms := func() int {
		t.Helper()
		n, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[int](`document.querySelectorAll("form.action").length`))
		require.NoError(t, err)
		return n
	}
	// click submits an action's form and waits for the page it lands on.
	click := func(sel string) string {
		t.Helper()
		run(chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
		return location()
	}
	// until waits for js to hold on the page, across the page's own
	// reloads (a navigating page fails an evaluation: try again).
	until := func(what, js string) {
		t.Helper()
		e.WaitFor(what, time.Minute, func() bool {
			c, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			ok, err := chromedp.Run(c, chromedp.Evaluate[bool](js))
			return err == nil && ok
		})
	}
	// post sends a page action's form as a plain HTTP client would.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path, token string, form url.Values, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.APIURL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "sluice_token", Value: token})
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("outsider", func(t *testing.T) {
		signIn(malloryToken)
		run(chromedp.Navigate(prPage), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		require.Zero(t, forms(), "mallory sees no action on the event page")
		run(chromedp.Navigate(e.APIURL+"/ui/pipelines/app"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		require.Zero(t, forms(), "mallory sees no start form")
		run(chromedp.Navigate(e.APIURL+"/ui/queues/default"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		require.Zero(t, forms(), "mallory sees no executor buttons")

		// Forged POSTs with her own valid CSRF token are refused by the
		// API routes' policies.
		mine := url.Values{"csrf": {pageCSRF(t, e, malloryToken)}}
		approve := fmt.Sprintf("/ui/events/app/%d/approve", prRef.Number)
		status, body := post(approve, malloryToken, mine, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, `user &#34;mallory&#34; is not an admin of pipeline app`)
		before, err := e.API.ListEvents(ctx, "app", 10)
		require.NoError(t, err)
		start := url.Values{"csrf": mine["csrf"], "branch": {"main"}, "param.target": {"prod"}}
		status, body = post("/ui/pipelines/app/events", malloryToken, start, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		status, body = post("/ui/executors/local/drain", malloryToken, mine, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		status, body = post("/ui/pipelines/app/jobs/nightly/schedule/pause", malloryToken, mine, nil)
		require.Equal(t, http.StatusForbidden, status, body)

		// The owner's session without its CSRF token, with another
		// session's, or from another origin is refused too.
		status, body = post(approve, aliceToken, url.Values{}, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "CSRF token is missing or not this session")
		status, body = post(approve, aliceToken, mine, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "CSRF token is missing or not this session")
		status, body = post(approve, aliceToken, url.Values{"csrf": {pageCSRF(t, e, aliceToken)}}, map[string]string{"Referer": "https://evil.example/x"})
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "Referer")

		ev, err := e.API.GetEvent(ctx, prID)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusBlocked, ev.Status, "the refused actions changed nothing")
		require.Empty(t, ev.Approval.ApprovedBy)
		evs, err := e.API.ListEvents(ctx, "app", 10)
		require.NoError(t, err)
		require.Len(t, evs, len(before), "mallory's forged start started nothing")
		ex, err := e.API.ListExecutors(ctx)
		require.NoError(t, err)
		for _, x := range ex {
			require.NotEqual(t, "draining", x.State, "%s", x.Name)
		}
	})

	signIn(aliceToken)

	t.Run("approve", func(t *testing.T) {
		run(chromedp.Navigate(prPage), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
		screenshot(bctx, t, shots, "event-approve")
		loc := click(`#approve`)
		require.Equal(t, prPage+"?done=approved", loc)
		ev := e.WaitEvent(prID, 2*time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
		require.Equal(t, "alice", ev.Approval.ApprovedBy)
		require.Len(t, ev.Builds, 1, "the approved pull request ran its job")
	})

	var first api.Event
	t.Run("start with a parameter and cancel a build", func(t *testing.T) {
		run(chromedp.Navigate(e.APIURL+"/ui/pipelines/app"), chromedp.WaitVisible(chromedp.CSS(`form.start-event`)))
		run(chromedp.SetValue(chromedp.CSS(`select[name="param.target"]`), "prod"))
		screenshot(bctx, t, shots, "pipeline-actions")
		loc := click(`form.start-event button`)
		m := regexp.MustCompile(`/ui/pipelines/app/events/(\d+)\?done=started$`).FindStringSubmatch(loc)
		require.NotNil(t, m, "lands on the new event's page: %s", loc)
		n, _ := strconv.Atoi(m[1])
		id := fmt.Sprintf("app/%d", n)
		mainID := fmt.Sprintf("app/main/%d", n)
		// Its step is running (RUNNING comes with the claim, before the
		// checkout and the step's first line).
		e.WaitFor("main's step to run", time.Minute, func() bool {
			b, err := e.API.GetBuild(ctx, mainID)
			if err != nil || b.Status != workflows.StatusRunning || b.LogKey == "" {
				return false
			}
			chunk, err := e.API.ReadLog(ctx, b.LogKey, "m", 0, 1<<16)
			return err == nil && strings.Contains(string(chunk.Data), "target=")
		})

		run(chromedp.Navigate(e.APIURL+"/ui/builds/"+mainID), chromedp.WaitVisible(chromedp.CSS(`#cancel-build`)))
		screenshot(bctx, t, shots, "build-actions")
		loc = click(`#cancel-build`)
		require.Equal(t, e.APIURL+"/ui/builds/"+mainID+"?done=cancelled", loc)
		// The page shows the build end without a reload.
		until("the build page to show ABORTED", `document.querySelector("#build-status").innerText.includes("ABORTED")`)
		// Then it reloads itself once as a final page (and stays).
		until("the build page to reload as final", `document.querySelector("#log") !== null && document.querySelector("#log").getAttribute("data-final") === "true"`)
		b, err := e.API.GetBuild(ctx, mainID)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusAborted, b.Status)
		chunk, err := e.API.ReadLog(ctx, b.LogKey, "m", 0, 1<<16)
		require.NoError(t, err)
		require.Contains(t, string(chunk.Data), "target=prod", "the build saw the parameter the form gave")
		first = e.WaitEvent(id, 2*time.Minute)
		require.NotEqual(t, workflows.StatusSuccess, first.Status, "%+v", first)
		require.Equal(t, "prod", first.Parameters["target"], "the event has the parameter the form gave")
	})
	require.NotZero(t, first.Number)

	var rerun api.Event
	t.Run("re-run failed jobs", func(t *testing.T) {
		gate.Open()
		require.NoError(t, os.WriteFile(fixed, nil, 0o600))
		page := fmt.Sprintf("%s/ui/pipelines/app/events/%d", e.APIURL, first.Number)
		run(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#rerun`)))
		screenshot(bctx, t, shots, "event-actions")
		loc := click(`#rerun`)
		m := regexp.MustCompile(`/ui/pipelines/app/events/(\d+)\?done=rerun$`).FindStringSubmatch(loc)
		require.NotNil(t, m, "lands on the new event's page: %s", loc)
		require.NotEqual(t, strconv.Itoa(first.Number), m[1])
		rerun = e.WaitEvent("app/"+m[1], 2*time.Minute)
		require.Equal(t, workflows.StatusSuccess, rerun.Status, "%+v", rerun)
		require.True(t, rerun.Rerun)
		require.Equal(t, first.Number, rerun.Parent)
		jobs := map[string]bool{}
		for _, b := range rerun.Builds {
			jobs[b.Job] = true
		}
		require.Equal(t, map[string]bool{"main": true, "flaky": true}, jobs, "the failed and aborted jobs ran again")
	})

	t.Run("restart from a job", func(t *testing.T) {
		require.NotZero(t, rerun.Number)
		page := fmt.Sprintf("%s/ui/pipelines/app/events/%d", e.APIURL, rerun.Number)
		run(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`button.restart[data-job="flaky"]`)))
		loc := click(`button.restart[data-job="flaky"]`)
		m := regexp.MustCompile(`/ui/pipelines/app/events/(\d+)\?done=restarted$`).FindStringSubmatch(loc)
		require.NotNil(t, m, "lands on the new event's page: %s", loc)
		ev := e.WaitEvent("app/"+m[1], 2*time.Minute)
		require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
		require.Equal(t, rerun.Number, ev.Parent)
		require.Len(t, ev.Builds, 1, "only flaky ran: %+v", ev.Builds)
		require.Equal(t, "flaky", ev.Builds[0].Job)
	})

	t.Run("cancel an event", func(t *testing.T) {
		res := deliverPR(t, e, secret, repo, 8, head, "mallory/app", "web-actions-fork-2")
		id := res.Events[0].ID
		ref, err := workflows.ParseEventRef(id)
		require.NoError(t, err)
		e.WaitFor("the second fork event to wait for approval", time.Minute, func() bool {
			ev, err := e.API.GetEvent(ctx, id)
			return err == nil && ev.Status == workflows.StatusBlocked
		})
		page := fmt.Sprintf("%s/ui/pipelines/app/events/%d", e.APIURL, ref.Number)
		run(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#cancel-event`)))
		require.Equal(t, page+"?done=cancelled", click(`#cancel-event`))
		// The page shows the event's end without a manual reload.
		until("the event page to show ABORTED", `document.querySelector("h1") !== null && document.querySelector("h1").innerText.includes("ABORTED")`)
		ev := e.WaitEvent(id, time.Minute)
		require.Equal(t, workflows.StatusAborted, ev.Status, "%+v", ev)
		require.Empty(t, ev.Builds)
	})

	t.Run("pause, unpause and trigger a schedule", func(t *testing.T) {
		e.WaitFor("the periodic job to be registered", 30*time.Second, func() bool {
			p, err := e.API.GetPipeline(ctx, "app")
			return err == nil && p.Periodic["nightly"] != ""
		})
		paused := func() bool {
			t.Helper()
			d, err := e.Client.ScheduleClient().GetHandle(ctx, workflows.PeriodicScheduleID("app", "nightly")).Describe(ctx)
			require.NoError(t, err)
			return d.Schedule.State.Paused
		}
		pipelinePage := e.APIURL + "/ui/pipelines/app"
		run(chromedp.Navigate(pipelinePage), chromedp.WaitVisible(chromedp.CSS(`button.sched-pause[data-job="nightly"]`)))
		require.Equal(t, pipelinePage+"?done=schedule", click(`button.sched-pause[data-job="nightly"]`))
		require.True(t, paused())
		run(chromedp.Navigate(pipelinePage), chromedp.WaitVisible(chromedp.CSS(`button.sched-unpause[data-job="nightly"]`)))
		click(`button.sched-unpause[data-job="nightly"]`)
		require.False(t, paused())
		run(chromedp.Navigate(pipelinePage), chromedp.WaitVisible(chromedp.CSS(`button.sched-trigger[data-job="nightly"]`)))
		click(`button.sched-trigger[data-job="nightly"]`)
		e.WaitFor("the triggered periodic event", time.Minute, func() bool {
			evs, err := e.API.ListEvents(ctx, "app", 20)
			if err != nil {
				return false
			}
			for _, listed := range evs {
				ev, err := e.API.GetEvent(ctx, listed.ID)
				if err == nil && ev.Trigger.Kind == workflows.TriggerPeriodic {
					return ev.Status == workflows.StatusSuccess
				}
			}
			return false
		})
	})

	t.Run("drain and activate the executor", func(t *testing.T) {
		run(chromedp.Navigate(e.APIURL+"/ui/queues/default"), chromedp.WaitVisible(chromedp.CSS(`button.exec-drain[data-member="local"]`)))
		screenshot(bctx, t, shots, "queue-actions")
		state := func() string {
			t.Helper()
			ex, err := e.API.ListExecutors(ctx)
			require.NoError(t, err)
			for _, x := range ex {
				if x.Name == "local" {
					return x.State
				}
			}
			return ""
		}
		loc := click(`button.exec-drain[data-member="local"]`)
		require.Equal(t, e.APIURL+"/ui/queues/default?done=executor", loc)
		// Draining, or already inactive when nothing ran on it.
		require.Contains(t, []string{"draining", "inactive"}, state())
		run(chromedp.Navigate(e.APIURL+"/ui/queues/default"), chromedp.WaitVisible(chromedp.CSS(`button.exec-activate[data-member="local"]`)))
		click(`button.exec-activate[data-member="local"]`)
		require.Equal(t, "active", state())
	})
}
