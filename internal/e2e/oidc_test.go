package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestOIDCSignInInBrowser signs people in through an in-process OpenID
// Connect provider in headless chromium. Mallory, whom no grant names, sees
// no cancel button on a running build and her forged POST, sent from her
// own page with her own session's CSRF token, is refused 403 (the build
// runs on). Olga, whose group maps to the pipeline's admin role, sees the
// button and cancels the build. She mints a personal token on the tokens
// page, the CLI cancels an event with it and lists it (without its value),
// and after she revokes it on the page the CLI is refused. A screenshot of the sign-in page.
func TestOIDCSignInInBrowser(t *testing.T) {
	t.Parallel()
	idp, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Shutdown() })
	const rootToken = "root-token-oidc-0123456789"
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Token: rootToken, Tokens: `
tokens:
  - {user: root, token: ` + rootToken + `, privileges: [define-queues, manage-executors, manage-pipelines]}
people:
  grants:
    - {group: app-team, roles: [app-team]}
`, OIDC: &api.OIDCConfig{Issuer: idp.Issuer(), ClientID: idp.ClientID, ClientSecret: idp.ClientSecret, Name: "MockID"}})
	ctx := e.Context()
	shots := t.TempDir()
	bctx := browser(t)

	gate := testenv.NewGate(t)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": fmt.Sprintf(`
shared: {image: alpine}
jobs:
  main:
    requires: [~commit]
    steps: [{m: '%s'}]
`, gate.Wait())})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: repo.Dir, Admins: []string{"role:app-team"}})
	require.NoError(t, err)
	start := func() (event, build string) {
		t.Helper()
		started, err := e.StartEvent(ctx, "app", api.StartEventRequest{Type: "commit", Branch: "main"})
		require.NoError(t, err)
		build = fmt.Sprintf("app/main/%d", started.Number)
		e.WaitFor("main to run", time.Minute, func() bool {
			b, err := e.API.GetBuild(ctx, build)
			return err == nil && b.Status == workflows.StatusRunning
		})
		return started.ID, build
	}
	_, build := start()
	buildPage := e.APIURL + "/ui/builds/" + build

	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(within(bctx, t, time.Minute), steps...))
	}
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return n
	}
	text := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Evaluate[string](js))
		require.NoError(t, err)
		return s
	}
	// signIn signs the person in with the provider from the sign-in page
	// and waits for the page they land on.
	signIn := func(user *mockoidc.MockUser, next string) {
		t.Helper()
		idp.QueueUser(user)
		run(chromedp.Navigate(e.APIURL+"/ui/login?next="+next), chromedp.WaitVisible(chromedp.CSS(`a.oidc-login`)))
		run(chromedp.Click(chromedp.CSS(`a.oidc-login`)), chromedp.WaitVisible(chromedp.CSS(`a.person`)))
		require.Equal(t, user.Email+" · tokens", text(`document.querySelector("a.person").innerText`))
	}

	t.Run("the sign-in page", func(t *testing.T) {
		run(chromedp.Navigate(e.APIURL+"/ui/login"), chromedp.WaitVisible(chromedp.CSS(`a.oidc-login`)))
		require.Equal(t, "Sign in with MockID", text(`document.querySelector("a.oidc-login").innerText`))
		require.Equal(t, 1, eval(`document.querySelectorAll("input[name=token]").length`), "the API token form stays")
		screenshot(bctx, t, shots, "oidc-sign-in")
	})

	t.Run("a person without the privilege", func(t *testing.T) {
		signIn(&mockoidc.MockUser{Subject: "m", Email: "mallory@example.com", EmailVerified: true, Groups: []string{"interns"}}, "/ui/builds/"+build)
		run(chromedp.Navigate(buildPage), chromedp.WaitVisible(chromedp.CSS(`#build-status`)))
		require.Zero(t, eval(`document.querySelectorAll("form.action").length`), "mallory sees no cancel button")
		// A forged POST from her own page, with her own session's valid
		// CSRF token: the API route's policy refuses it.
		status := eval(`fetch("/ui/builds/` + build + `/cancel", {method: "POST", redirect: "manual",
			body: new URLSearchParams({csrf: document.querySelector('meta[name="csrf-token"]').content})}).then(r => r.status)`)
		require.Equal(t, 403, status)
		b, err := e.API.GetBuild(ctx, build)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusRunning, b.Status, "the refused POST changed nothing")
		run(chromedp.Click(chromedp.CSS(`form.logout button`)), chromedp.WaitVisible(chromedp.CSS(`a.oidc-login`)))
	})

	t.Run("a person with the privilege cancels the build", func(t *testing.T) {
		signIn(&mockoidc.MockUser{Subject: "o", Email: "olga@example.com", EmailVerified: true, Groups: []string{"app-team"}}, "/ui/builds/"+build)
		run(chromedp.Navigate(buildPage), chromedp.WaitVisible(chromedp.CSS(`#cancel-build`)))
		run(chromedp.Click(chromedp.CSS(`#cancel-build`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
		loc, err := chromedp.Run(within(bctx, t, time.Minute), chromedp.Location())
		require.NoError(t, err)
		require.Equal(t, buildPage+"?done=cancelled", loc)
		e.WaitFor("the build to end ABORTED", time.Minute, func() bool {
			b, err := e.API.GetBuild(ctx, build)
			return err == nil && b.Status == workflows.StatusAborted
		})
	})

	t.Run("a personal token for the CLI", func(t *testing.T) {
		run(chromedp.Navigate(e.APIURL+"/ui/tokens"), chromedp.WaitVisible(chromedp.CSS(`form.mint`)),
			chromedp.SendKeys(chromedp.CSS(`form.mint input[name=name]`), "laptop"),
			chromedp.Click(chromedp.CSS(`form.mint button`)), chromedp.WaitVisible(chromedp.CSS(`input.minted-token`)))
		token := text(`document.querySelector("input.minted-token").value`)
		require.Regexp(t, `^sluice_pt_`, token)
		screenshot(bctx, t, shots, "personal-tokens")

		env := []string{"SLUICE_API_URL=" + e.APIURL, "SLUICE_TOKEN=" + token}
		event, _ := start()
		_, stderr, code := sluice(t, env, "event", "cancel", event)
		require.Zero(t, code, stderr)
		ev := e.WaitEvent(event, time.Minute)
		require.Equal(t, workflows.StatusAborted, ev.Status)
		out, stderr, code := sluice(t, env, "token", "list")
		require.Zero(t, code, stderr)
		require.Regexp(t, `laptop\s.*\sactive`, out)
		require.NotContains(t, out, token)

		// The page shown again lists the token, not its value; revoking
		// it there ends it.
		run(chromedp.Navigate(e.APIURL+"/ui/tokens"), chromedp.WaitVisible(chromedp.CSS(`table.tokens button.danger`)))
		require.NotContains(t, text(`document.body.innerHTML`), token)
		run(chromedp.Click(chromedp.CSS(`table.tokens button.danger`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
		_, stderr, code = sluice(t, env, "pipeline", "list")
		require.NotZero(t, code)
		require.Contains(t, stderr, "revoked")
	})

	t.Run("the audit trail has the sign-ins and the token's life", func(t *testing.T) {
		recs, err := e.API.Audit(ctx, api.AuditQuery{User: "olga@example.com"})
		require.NoError(t, err)
		var got []string
		for _, r := range recs {
			got = append(got, r.Action+" "+r.Detail)
		}
		require.Contains(t, got, "signin oidc")
		var mint, revoke int
		for _, r := range recs {
			switch r.Action {
			case api.AuditTokenMint:
				mint++
				require.Contains(t, r.Detail, `name="laptop"`)
			case api.AuditTokenRevoke:
				revoke++
			}
			require.NotContains(t, r.Detail, "sluice_pt_", "no token value in the trail")
		}
		require.Equal(t, 1, mint, "%v", got)
		require.Equal(t, 1, revoke, "%v", got)
		mallory, err := e.API.Audit(ctx, api.AuditQuery{User: "mallory@example.com", Action: api.AuditSignIn})
		require.NoError(t, err)
		require.Len(t, mallory, 1, "her sign-in is recorded too")
	})
}
