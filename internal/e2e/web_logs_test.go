package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestLogViewer drives the build page's log viewer in a real browser on a
// running build: a coloured line, a folded step that unfolds, a live
// follow that loses its connection and resumes with each line once,
// search across the whole log (a line outside the page shown, reached
// through its result's link), a link to a line, and the raw download,
// byte for byte the stored log.
func TestLogViewer(t *testing.T) {
	t.Parallel()
	const token = "log-viewer-token-0123456789"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Token: token, Tokens: `
tokens:
  - {user: ann, token: ` + token + `}
`})
	ctx := e.Context()
	shots := t.TempDir()
	bctx := browser(t)
	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(within(bctx, t, time.Minute), actions...))
	}
	waitJS := func(what, js string) {
		t.Helper()
		_, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond)))
		require.NoError(t, err, what)
	}
	block := func(patterns ...string) {
		t.Helper()
		ps := []*network.BlockPattern{}
		for _, p := range patterns {
			ps = append(ps, &network.BlockPattern{URLPattern: p, Block: true})
		}
		c := within(bctx, t, time.Minute)
		_, err := chromedp.Call(c, network.Enable, network.EnableParams{})
		require.NoError(t, err)
		_, err = chromedp.Call(c, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: ps})
		require.NoError(t, err)
	}

	gate1, gate2 := testenv.NewGate(t), testenv.NewGate(t)
	colour := strings.Join([]string{
		`printf '\033[1;34m==> building\033[0m\n'`,
		`printf 'compiling \033[33m3 packages\033[0m\n'`,
		`printf '\033[32mok\033[0m  sluice/logstore  0.4s\n'`,
		`printf '\033[31mred-alert\033[0m: a test failed once, passed on retry\n'`,
		`printf '<b>not bold</b>\n'`,
	}, "; ")
	bulk := `echo needle-in-the-haystack; i=1; while [ $i -le 20000 ]; do echo "filler line $i"; i=$((i+1)); done`
	follow := "echo before-gap; " + gate1.Wait() + "; echo after-gap-1; echo after-gap-2; " + gate2.Wait()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    steps:
      - setup: echo setup-done
      - colour: %q
      - bulk: %q
      - follow: %q
`, colour, bulk, follow)})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "logs", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "logs", api.StartEventRequest{Type: "commit", Branch: "main", SHA: repo.Head()})
	require.NoError(t, err)
	buildID := fmt.Sprintf("logs/main/%d", ev.Number)
	var logKey string
	// readLog reads a whole step log through the API.
	readLog := func(step string) []byte {
		var out []byte
		for off := int64(0); ; {
			c, err := e.API.ReadLog(ctx, logKey, step, off, 0)
			require.NoError(t, err)
			out = append(out, c.Data...)
			off = c.NextOffset
			if off == c.Size {
				return out
			}
		}
	}
	e.WaitFor("the follow step to print its first line", time.Minute, func() bool {
		b, err := e.API.GetBuild(ctx, buildID)
		if err != nil || b.LogKey == "" {
			return false
		}
		logKey = b.LogKey
		c, err := e.API.ReadLog(ctx, logKey, "follow", 0, 0)
		return err == nil && bytes.Contains(c.Data, []byte("before-gap\n"))
	})

	// Sign in, open the build page.
	run(chromedp.Navigate(e.APIURL+"/ui/login?next="+"/ui/builds/"+buildID),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.Submit(chromedp.CSS(`form.login`)),
		chromedp.WaitVisible(chromedp.CSS(`#log details.step`)),
	)
	_ = jsValue[int](bctx, t, `window.__sluiceMarker = 42`)
	index := func(step string) int {
		t.Helper()
		return jsValue[int](bctx, t, fmt.Sprintf(`parseInt(document.querySelector('details.step[data-step=%q]').getAttribute('data-index'), 10)`, step))
	}
	colourIdx, bulkIdx := index("colour"), index("bulk")

	// A coloured line: the SGR code became a class, the class a colour;
	// markup in the log stays text.
	red := jsValue[string](bctx, t, `(() => { const s = [...document.querySelectorAll('#log span.a-f1')].find(s => s.textContent === 'red-alert'); return s ? getComputedStyle(s).color : 'none'; })()`)
	require.Equal(t, "rgb(255, 123, 114)", red)
	bolds := jsValue[int](bctx, t, `document.querySelectorAll('#log b').length`)
	require.Zero(t, bolds, "<b> in the log is text")
	hasText := jsValue[bool](bctx, t, `document.getElementById('log').textContent.includes('<b>not bold</b>')`)
	require.True(t, hasText)

	// Finished steps fold; the running one is open. Unfolding shows the
	// lines.
	open := jsValue[[]bool](bctx, t, `['setup','colour','bulk','follow'].map(n => document.querySelector('details.step[data-step="'+n+'"]').open)`)
	require.Equal(t, []bool{false, false, false, true}, open)
	visible := jsValue[string](bctx, t, `document.getElementById('log').innerText`)
	require.NotContains(t, visible, "setup-done", "a folded step hides its lines")
	run(chromedp.Click(chromedp.CSS(`details.step[data-step="setup"] > summary`)),
		chromedp.Click(chromedp.CSS(`details.step[data-step="colour"] > summary`)))
	visible = jsValue[string](bctx, t, `document.getElementById('log').innerText`)
	require.Contains(t, visible, "setup-done")
	require.Contains(t, visible, "red-alert: a test failed once")

	// Each line has its time, written by the log store.
	stamp := jsValue[string](bctx, t, `document.querySelector('details.step[data-step="setup"] li time').getAttribute('datetime')`)
	at, err := time.Parse("2006-01-02T15:04:05.000Z", stamp)
	require.NoError(t, err)
	b, err := e.API.GetBuild(ctx, buildID)
	require.NoError(t, err)
	require.False(t, at.Before(b.StartTime.Truncate(time.Second)), "line time %s, build start %s", at, b.StartTime)

	// The follow loses its connection: the step prints meanwhile; back
	// online it resumes from its cursor, each line once, in order.
	block(e.APIURL + "/ui/builds/*/log-follow*")
	waitJS("the follow to notice it is cut off", `document.getElementById('log-follow').textContent === 'reconnecting…'`)
	gate1.Open()
	e.WaitFor("the step to print after the gap", time.Minute, func() bool {
		return bytes.Contains(readLog("follow"), []byte("after-gap-2\n"))
	})
	hasText = jsValue[bool](bctx, t, `document.getElementById('log').textContent.includes('after-gap-1')`)
	require.False(t, hasText, "cut off, the page has not seen the new lines")
	block()
	waitJS("the follow to resume", `document.getElementById('log').textContent.includes('after-gap-2')`)
	lines := jsValue[[]string](bctx, t, `[...document.querySelectorAll('details.step[data-step="follow"] li')].map(li => li.querySelector('.ln').textContent + ' ' + li.querySelector('.tx').textContent)`)
	require.Equal(t, []string{"1 before-gap", "2 after-gap-1", "3 after-gap-2"}, lines, "each line once, in order")
	marker := jsValue[int](bctx, t, `window.__sluiceMarker || 0`)
	require.Equal(t, 42, marker, "the lines came without reloading the page")
	b, err = e.API.GetBuild(ctx, buildID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusRunning, b.Status)

	// Search finds a line anywhere in the log.
	run(chromedp.SendKeys(chromedp.CSS(`#log-q`), "RED-alert"),
		chromedp.Click(chromedp.CSS(`#log-search button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#log-results a`)))
	found := jsValue[[]string](bctx, t, `[...document.querySelectorAll('#log-results li')].map(li => li.textContent)`)
	require.Equal(t, []string{"colour:4 red-alert: a test failed once, passed on retry"}, found)
	screenshot(bctx, t, shots, "log-viewer")

	// The bulk step shows its last page; a search result outside it is
	// one click away (the pages before it load).
	shown := jsValue[bool](bctx, t, fmt.Sprintf(`!!document.getElementById('L%d-1')`, bulkIdx))
	require.False(t, shown, "line 1 of bulk is not on its last page")
	shown = jsValue[bool](bctx, t, `document.querySelector('details.step[data-step="bulk"] button.earlier') !== null`)
	require.True(t, shown, "bulk offers its earlier lines")
	_ = jsValue[string](bctx, t, `document.getElementById('log-q').value = ''`)
	run(chromedp.SendKeys(chromedp.CSS(`#log-q`), "needle-in-the"),
		chromedp.Click(chromedp.CSS(`#log-search button[type=submit]`)))
	waitJS("the needle's result", `[...document.querySelectorAll('#log-results a')].some(a => a.textContent === 'bulk:1')`)
	run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#log-results a[href="#L%d-1"]`, bulkIdx))))
	waitJS("line 1 of bulk, highlighted", fmt.Sprintf(`(() => { const l = document.getElementById('L%d-1'); return !!l && l.classList.contains('hl') && l.closest('details').open; })()`, bulkIdx))
	text := jsValue[string](bctx, t, fmt.Sprintf(`document.querySelector('#L%d-1 .tx').textContent`, bulkIdx))
	require.Equal(t, "needle-in-the-haystack", text)
	count := jsValue[int](bctx, t, `document.querySelectorAll('details.step[data-step="bulk"] li').length`)
	require.Equal(t, 20001, count, "earlier pages joined the last one: every line once")

	// A link to a line opens the page there.
	run(chromedp.Navigate("about:blank"),
		chromedp.Navigate(fmt.Sprintf("%s/ui/builds/%s#L%d-5", e.APIURL, buildID, bulkIdx)))
	waitJS("the linked line", fmt.Sprintf(`(() => { const l = document.getElementById('L%d-5'); return !!l && l.classList.contains('hl'); })()`, bulkIdx))
	text = jsValue[string](bctx, t, fmt.Sprintf(`document.querySelector('#L%d-5 .tx').textContent`, bulkIdx))
	require.Equal(t, "filler line 4", text)
	text = jsValue[string](bctx, t, fmt.Sprintf(`document.querySelector('#L%d-2 .tx') ? 'open' : 'missing'`, colourIdx))
	require.Equal(t, "open", text)

	// The raw download is the stored log, byte for byte.
	for _, step := range []string{"colour", "bulk"} {
		b64 := jsValue[string](bctx, t, fmt.Sprintf(`
fetch(document.querySelector('details.step[data-step=%q] a.raw').href).then(r => r.arrayBuffer()).then(buf => {
  const u = new Uint8Array(buf); let s = '';
  for (let i = 0; i < u.length; i += 8192) s += String.fromCharCode.apply(null, u.subarray(i, i + 8192));
  return btoa(s);
})`, step), chromedp.EvalAwaitPromise)
		raw, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err)
		require.Equal(t, readLog(step), raw, "the raw download of %s is the stored log", step)
	}
	require.Contains(t, string(readLog("colour")), "\x1b[31mred-alert\x1b[0m", "the stored log keeps its escapes")

	gate2.Open()
	final := e.WaitEvent(ev.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, final.Status)
}

// jsValue evaluates js in the browser's page.
func jsValue[T any](bctx context.Context, t *testing.T, js string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[T](js, opts...))
	require.NoError(t, err, "%s", js)
	return v
}
