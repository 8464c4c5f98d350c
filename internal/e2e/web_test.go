package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// chromium finds Debian's chromium (or another Chrome) or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium in PATH (apt-get install chromium; .ci/run installs it): the pages are not tested in a browser")
	return ""
}

// browser starts a headless chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// within bounds one browser step (the browser lives on).
func within(ctx context.Context, t *testing.T, d time.Duration) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return c
}

// screenshot saves the page as a PNG under dir; with
// SLUICE_UPDATE_SCREENSHOTS=1 it also refreshes docs/screenshots/<name>.png.
func screenshot(ctx context.Context, t *testing.T, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(within(ctx, t, time.Minute), chromedp.FullScreenshot(100))
	require.NoError(t, err)
	file := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(file, png, 0o644))
	t.Logf("screenshot %s (%d bytes)", file, len(png))
	if os.Getenv("SLUICE_UPDATE_SCREENSHOTS") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "screenshots", name+".png"), png, 0o644))
	}
}

// webSpec: main prints a line, waits on gate 1, prints the second, waits on
// gate 2; hold keeps solo's one slot until gate 3, so later waits for it.
func webSpec(g1, g2, g3 *testenv.Gate) string {
	return fmt.Sprintf(`
shared: {image: alpine}
jobs:
  first:
    requires: [~commit]
    steps: [{f: "echo first-line"}]
  main:
    requires: [first]
    steps:
      - run: %q
  after:
    requires: [main]
    steps: [{a: "true"}]
  hold:
    requires: [~commit]
    annotations: {screwdriver.cd/executor: solo}
    steps: [{h: %q}]
  later:
    requires: [first]
    annotations: {screwdriver.cd/executor: solo}
    steps: [{l: "true"}]
`, "echo started; "+g1.Wait()+"; echo second-line; "+g2.Wait(), g3.Wait())
}

// TestWebPages drives the pages in a real browser on a running event: the
// sign-in, the event graph's colours, a build page whose log grows while
// the step runs, the queue page listing a waiting build with its reason.
func TestWebPages(t *testing.T) {
	t.Parallel()
	const token = "web-token-0123456789"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Token: token, Tokens: `
tokens:
  - {user: ann, token: ` + token + `, privileges: [define-queues]}
`, Env: map[string]string{"SLUICE_EXECUTOR_QUEUES": "*"}})
	ctx := e.Context()
	shots := t.TempDir()
	bctx := browser(t)

	// Anonymous requests are refused; a valid token cookie is served.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// get answers the status and the redirect's location.
	get := func(path, cookie string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.APIURL+path, nil)
		require.NoError(t, err)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "sluice_token", Value: cookie})
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Location")
	}
	for _, c := range []string{"", "not-a-token"} {
		status, location := get("/ui/", c)
		require.Equal(t, http.StatusSeeOther, status, "cookie %q", c)
		require.Equal(t, "/ui/login?next=%2Fui%2F", location)
	}
	status, _ := get("/ui/", token)
	require.Equal(t, http.StatusOK, status)
	status, _ = get("/ui/builds/web/main/1/log-follow", "")
	require.Equal(t, http.StatusUnauthorized, status)

	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "solo", Rules: []string{"run-on=executors,max-parallel=1"}})
	require.NoError(t, err)
	gate1, gate2, gate3 := testenv.NewGate(t), testenv.NewGate(t), testenv.NewGate(t)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": webSpec(gate1, gate2, gate3)})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "web", Repo: repo.Dir})
	require.NoError(t, err)

	// Sign in through the form.
	require.NoError(t, chromedp.Do(within(bctx, t, time.Minute),
		chromedp.Navigate(e.APIURL+"/ui/pipelines/web"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
	))
	loc, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, loc, "/ui/login?next=")
	screenshot(bctx, t, shots, "login")
	require.NoError(t, chromedp.Do(within(bctx, t, time.Minute),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.Submit(chromedp.CSS(`form.login`)),
		chromedp.WaitVisible(chromedp.CSS(`h2`)),
	))
	loc, err = chromedp.Run(within(bctx, t, time.Minute), chromedp.Location())
	require.NoError(t, err)
	require.Equal(t, e.APIURL+"/ui/pipelines/web", loc, "signed in, back to the page asked for")

	ev, err := e.StartEvent(ctx, "web", api.StartEventRequest{Type: "commit", Branch: "main", SHA: repo.Head()})
	require.NoError(t, err)
	mainID := fmt.Sprintf("web/main/%d", ev.Number)
	e.WaitFor("main to run", time.Minute, func() bool {
		b, err := e.API.GetBuild(ctx, mainID)
		return err == nil && b.Status == workflows.StatusRunning
	})

	// The event graph: first succeeded (green), main runs (blue), after
	// has not started (not in the event yet).
	fill := func(job string) string {
		a, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.AttributeValue(chromedp.CSS(fmt.Sprintf(`g.job[data-job=%q] rect`, job)), "fill"))
		require.NoError(t, err)
		require.True(t, a.Exists, "job %s has a box", job)
		return a.Value
	}
	require.NoError(t, chromedp.Do(within(bctx, t, time.Minute),
		chromedp.Navigate(fmt.Sprintf("%s/ui/pipelines/web/events/%d", e.APIURL, ev.Number)),
		chromedp.WaitVisible(chromedp.CSS(`svg.graph`)),
	))
	require.Equal(t, "#2da44e", fill("first"), "first succeeded: green")
	require.Equal(t, "#0969da", fill("main"), "main runs: blue")
	require.Equal(t, "#ffffff", fill("after"), "after has not started")
	screenshot(bctx, t, shots, "event")

	// The build page's log grows while the step runs, without a reload.
	require.NoError(t, chromedp.Do(within(bctx, t, time.Minute),
		chromedp.Navigate(e.APIURL+"/ui/builds/"+mainID),
		chromedp.WaitVisible(chromedp.CSS(`#log`)),
	))
	_, err = chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[int](`window.__sluiceMarker = 42`))
	require.NoError(t, err)
	text, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Text(chromedp.CSS(`#log`)))
	require.NoError(t, err)
	require.NotContains(t, text, "second-line", "the page opened before the step printed its second line")
	gate1.Open()
	waitCtx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	_, err = chromedp.Run(waitCtx, chromedp.Poll[bool](`document.getElementById("log").innerText.includes("second-line")`, chromedp.WithPollingInterval(200*time.Millisecond)))
	require.NoError(t, err)
	b, err := e.API.GetBuild(ctx, mainID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusRunning, b.Status, "the line showed while the step still runs")
	marker, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[int](`window.__sluiceMarker || 0`))
	require.NoError(t, err)
	require.Equal(t, 42, marker, "the line came without reloading the page")
	screenshot(bctx, t, shots, "build")
	gate2.Open()

	// The queue page lists the waiting build with its reason.
	require.NoError(t, chromedp.Do(within(bctx, t, time.Minute),
		chromedp.Navigate(e.APIURL+"/ui/queues/solo"),
		chromedp.WaitVisible(chromedp.CSS(`#waiting`)),
	))
	waiting, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Text(chromedp.CSS(`#waiting`)))
	require.NoError(t, err)
	// later starts after first, while hold has solo's one slot.
	require.Contains(t, waiting, fmt.Sprintf("web/later/%d", ev.Number))
	require.Contains(t, waiting, "QUEUED")
	require.Regexp(t, `slot|busy`, waiting, "the reason says it waits for a slot: %s", waiting)
	screenshot(bctx, t, shots, "queue")
	gate3.Open()

	final := e.WaitEvent(ev.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)
	require.NoError(t, chromedp.Do(within(bctx, t, time.Minute),
		chromedp.Navigate(e.APIURL+"/ui/pipelines/web"),
		chromedp.WaitVisible(chromedp.CSS(`table`)),
	))
	text, err = chromedp.Run(within(bctx, t, time.Minute), chromedp.Text(chromedp.CSS(`main`)))
	require.NoError(t, err)
	require.Contains(t, text, fmt.Sprintf("#%d", ev.Number))
	require.Contains(t, text, "SUCCESS")
	screenshot(bctx, t, shots, "pipeline")

	// Bad input: a page that does not exist says so.
	status, _ = get("/ui/pipelines/web/events/999", token)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = get("/ui/builds/web/main/x", token)
	require.Equal(t, http.StatusBadRequest, status)
}
