package api

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

func renderPage(t *testing.T, name string, data any) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, webTemplates.ExecuteTemplate(&b, name, pageData{Title: "t", Data: data}))
	return b.String()
}

// The event and build pages link the commit and the pull request to the
// forge the repository URL names, and show the change's details.
func TestEventAndBuildPagesLinkToTheForge(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sha := "0123456789abcdef0123456789abcdef01234567"
	ev := Event{
		ID: "app/3", Pipeline: "app", Number: 3, SHA: sha, Status: workflows.StatusSuccess, StartTime: start, EndTime: start.Add(time.Minute),
		Trigger: workflows.Trigger{Kind: workflows.TriggerPR, Branch: "main", Ref: "feature", PR: 7, Title: "Add <the> widget", Author: "carol"},
		Commit:  &scm.Commit{Author: "Carol C", Message: "widget: add it\n\nbody"},
	}
	html := renderPage(t, "event.html", &eventPage{Event: ev, Repo: "git@github.com:acme/app.git"})
	require.Contains(t, html, `href="https://github.com/acme/app/pull/7"`)
	require.Contains(t, html, `href="https://github.com/acme/app/commit/`+sha+`"`)
	require.Contains(t, html, "Add &lt;the&gt; widget", "the title is escaped")
	require.Contains(t, html, `<dd id="event-author">carol</dd>`, "the webhook's author before the commit's")
	require.Contains(t, html, "widget: add it\n\nbody")
	require.Contains(t, html, `<time datetime="2030-01-02T03:04:05Z">2030-01-02 03:04:05 UTC</time>`)

	gitlab := renderPage(t, "event.html", &eventPage{Event: ev, Repo: "https://gitlab.com/grp/app.git"})
	require.Contains(t, gitlab, `href="https://gitlab.com/grp/app/-/merge_requests/7"`)
	local := renderPage(t, "event.html", &eventPage{Event: ev, Repo: "/srv/git/app"})
	require.NotContains(t, local, "github.com")
	require.Contains(t, local, "PR #7")

	b := Build{
		ID: "app/PR-7:test/3", Pipeline: "app", Job: "PR-7:test", Event: "app/3", PR: 7, Branch: "main", SHA: sha,
		Status: workflows.StatusFailure, Cause: workflows.CauseFailed, CauseInfo: &workflows.CauseInfo{Step: "unit", ExitCode: 2},
		CreateTime: start, StartTime: start.Add(time.Second), EndTime: start.Add(time.Minute),
		AttemptList: []workflows.Attempt{{Number: 1, Executor: "exec-a", Start: start.Add(time.Second), End: start.Add(time.Minute), Outcome: "failure"}},
		Steps: []workflows.StepOutcome{
			{Name: "setup", Start: start.Add(time.Second), End: start.Add(3 * time.Second)},
			{Name: "unit", ExitCode: 2, Start: start.Add(3 * time.Second), End: start.Add(time.Minute)},
			{Name: "after", Skipped: true},
		},
	}
	page := renderPage(t, "build.html", &buildPage{Build: b, Repo: "https://github.com/acme/app"})
	require.Contains(t, page, `href="https://github.com/acme/app/pull/7"`)
	require.Contains(t, page, `<code>failed</code>: step <code>unit</code> exit 2`)
	require.Contains(t, page, `<td class="took">2s</td>`)
	require.Contains(t, page, `<td class="took">57s</td>`)
	require.Contains(t, page, `<td>skipped</td>`)
	require.Contains(t, page, `<td>exec-a</td>`)
	require.NotContains(t, page, "Temporal", "no Temporal UI configured: no link")

	// With the Temporal UI, the build links to the workflow that runs it:
	// its event's.
	b.Workflow = "event/app/3"
	var linked strings.Builder
	require.NoError(t, webTemplates.ExecuteTemplate(&linked, "build.html", pageData{Title: "t", UI: "http://ui/namespaces/default/workflows/", Data: &buildPage{Build: b}}))
	require.Contains(t, linked.String(), `<a href="http://ui/namespaces/default/workflows/event%2Fapp%2F3">workflow event/app/3</a>`)
}

// The list pages render their rows and keep the filter in the links.
func TestListPagesRender(t *testing.T) {
	t.Parallel()
	q := url.Values{"pipeline": {"app"}, "status": {"FAILURE"}}
	html := renderPage(t, "builds.html", &buildListPage{
		Q: q, Statuses: buildStatuses, Causes: workflows.Causes(), Pipelines: []string{"app"}, Repos: map[string]string{"app": "https://github.com/acme/app"},
		Builds: []Build{{ID: "app/test/3", Pipeline: "app", Status: workflows.StatusFailure, Branch: "main", SHA: "abc", Cause: workflows.CauseFailed}},
		Next:   pageURL("/ui/builds", q, "tok"),
	})
	require.Contains(t, html, `<option selected>app</option>`)
	require.Contains(t, html, `<option selected>FAILURE</option>`)
	require.Contains(t, html, `data-build="app/test/3"`)
	require.Contains(t, html, `href="/ui/builds?page=tok&amp;pipeline=app&amp;status=FAILURE"`)
	require.Contains(t, html, `href="https://github.com/acme/app/commit/abc"`)

	evs := renderPage(t, "events.html", &eventListPage{
		Pipeline: Pipeline{Name: "app", Repo: "https://github.com/acme/app"}, Q: url.Values{"trigger": {"pr"}}, Triggers: triggerKinds,
		Events: []Event{{ID: "app/3", Pipeline: "app", Number: 3, Status: workflows.StatusSuccess, Trigger: workflows.Trigger{Kind: workflows.TriggerPR, PR: 7, Title: "T", Branch: "main"}}},
	})
	require.Contains(t, evs, `<option selected>pr</option>`)
	require.Contains(t, evs, `href="https://github.com/acme/app/pull/7"`)

	idx := renderPage(t, "index.html", &indexPage{Dashboard: []dashRow{
		{Pipeline: Pipeline{Name: "app", Branch: "main"}, Branches: []Event{{ID: "app/4", Pipeline: "app", Number: 4, Status: workflows.StatusSuccess, Trigger: workflows.Trigger{Branch: "main", Kind: workflows.TriggerCommit}}}},
		{Pipeline: Pipeline{Name: "empty", Branch: "main"}},
		{Pipeline: Pipeline{Name: "broken"}, Error: "visibility down"},
	}})
	require.Contains(t, idx, `data-branch="main" data-status="SUCCESS"`)
	require.Contains(t, idx, "no event yet")
	require.Contains(t, idx, "visibility down")
}

func TestLastPerBranch(t *testing.T) {
	t.Parallel()
	evs := []Event{
		{Number: 5, Trigger: workflows.Trigger{Kind: workflows.TriggerPR, PR: 2, Branch: "main"}},
		{Number: 4, Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "feature"}},
		{Number: 3, Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "main"}},
		{Number: 2, Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "feature"}},
		{Number: 1, Trigger: workflows.Trigger{Kind: workflows.TriggerCommit, Branch: "main"}},
	}
	got := lastPerBranch(evs, "main")
	require.Len(t, got, 2)
	require.Equal(t, 3, got[0].Number, "the pipeline's branch first, pull requests left out")
	require.Equal(t, 4, got[1].Number)
}

func TestPageURL(t *testing.T) {
	t.Parallel()
	q := url.Values{"a": {"1"}, "empty": {""}, "page": {"old"}, "done": {"x"}}
	require.Equal(t, "/ui/builds?a=1&page=new", pageURL("/ui/builds", q, "new"))
	require.Equal(t, "/ui/builds?a=1", pageURL("/ui/builds", q, ""))
	require.Equal(t, "/ui/builds", pageURL("/ui/builds", nil, ""))
}
