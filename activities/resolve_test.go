package activities_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
)

func TestResolveEventFindsTheCommit(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	tests := []struct {
		name string
		in   activities.ResolveEventInput
		want string
	}{
		{name: "default branch", in: activities.ResolveEventInput{}, want: r.second},
		{name: "branch", in: activities.ResolveEventInput{Ref: "feature"}, want: r.feature},
		{name: "full branch ref", in: activities.ResolveEventInput{Ref: "refs/heads/feature"}, want: r.feature},
		{name: "full sha kept", in: activities.ResolveEventInput{SHA: r.first, Ref: "feature"}, want: r.first},
		{name: "short sha expanded", in: activities.ResolveEventInput{SHA: r.feature[:10], Ref: "main"}, want: r.feature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			in := tt.in
			in.Pipeline, in.Repo = "app", r.dir
			out, err := h.resolve(t, in)
			require.NoError(t, err)
			require.Equal(t, tt.want, out.SHA)
			require.Empty(t, out.SpecError)
			require.NotNil(t, out.Spec)
			require.Contains(t, out.Spec.Jobs, "main")
			require.Contains(t, out.Spec.Jobs, "deploy")
			require.Equal(t, []queue.Queue{queue.DefaultQueue()}, out.Queues)
		})
	}
}

func TestResolveEventSpecProblemsAreResults(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	tests := []struct {
		name string
		ref  string
		sha  string
		want []string
	}{
		{
			name: "spec does not parse", ref: "broken", sha: r.broken,
			want: []string{"screwdriver.yaml at " + r.broken[:12] + " is invalid:\n"},
		},
		{
			name: "no spec in the commit", ref: "nospec", sha: r.none,
			want: []string{"screwdriver.yaml not found in " + r.dir + " at " + r.none[:12]},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			out, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir, Ref: tt.ref, WantChanges: true})
			require.NoError(t, err, "a bad spec fails the event, not the activity")
			require.Equal(t, tt.sha, out.SHA, "the commit is known even when its spec is not")
			require.Nil(t, out.Spec)
			for _, w := range tt.want {
				require.Contains(t, out.SpecError, w)
			}
			require.Empty(t, out.ChangedFiles)
		})
	}
}

func TestResolveEventChangedFiles(t *testing.T) {
	t.Parallel()
	r := setupRepoSpec(t, strings.Replace(validSpec, "    requires: [~commit]\n", "    requires: [~commit]\n    sourcePaths: [src/]\n", 1))
	plain := setupRepo(t)
	tests := []struct {
		name string
		repo string
		in   activities.ResolveEventInput
		want []string
	}{
		{name: "not wanted", in: activities.ResolveEventInput{SHA: r.second, Before: r.first}},
		{
			name: "no sourcePaths to match", repo: plain.dir,
			in: activities.ResolveEventInput{SHA: plain.second, Before: plain.first, WantChanges: true},
		},
		{
			name: "diff from before", in: activities.ResolveEventInput{SHA: r.second, Before: r.first, WantChanges: true},
			want: []string{"docs/guide.md", "src/app.go"},
		},
		{
			name: "commit's own diff", in: activities.ResolveEventInput{Ref: "feature", WantChanges: true},
			want: []string{"README"},
		},
		{
			name: "across several commits", in: activities.ResolveEventInput{SHA: r.feature, Before: r.first, WantChanges: true},
			want: []string{"README", "docs/guide.md", "src/app.go"},
		},
		{
			name: "known by the trigger",
			in:   activities.ResolveEventInput{SHA: r.second, Before: r.first, WantChanges: true, ChangedFiles: []string{"given.txt"}},
			want: []string{"given.txt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			in := tt.in
			in.Pipeline, in.Repo = "app", r.dir
			if tt.repo != "" {
				in.Repo = tt.repo
			}
			out, err := h.resolve(t, in)
			require.NoError(t, err)
			require.Empty(t, out.SpecError)
			require.ElementsMatch(t, tt.want, out.ChangedFiles)
			if tt.want == nil {
				require.Nil(t, out.ChangedFiles, "nil: not known, so sourcePaths would keep every job")
			}
		})
	}
}

func TestResolveEventPlainDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"screwdriver.yaml": validSpec, "main.sh": "echo hi\n"})
	h := setup(t)
	// A plain directory has no branches: the event's branch is ignored.
	first, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: dir, Ref: "main"})
	require.NoError(t, err)
	require.NotEmpty(t, first.SHA)
	require.Empty(t, first.SpecError)
	require.NotNil(t, first.Spec)
	require.Contains(t, first.Spec.Jobs, "main")

	same, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: dir})
	require.NoError(t, err)
	require.Equal(t, first.SHA, same.SHA, "unchanged content resolves to the same snapshot")

	writeFiles(t, dir, map[string]string{"main.sh": "echo changed\n"})
	changed, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: dir, Ref: "main"})
	require.NoError(t, err)
	require.NotEqual(t, first.SHA, changed.SHA)

	// A snapshot named explicitly is read as it was.
	again, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: dir, SHA: first.SHA})
	require.NoError(t, err)
	require.Equal(t, first.SHA, again.SHA)
	require.NotNil(t, again.Spec)
}

func TestResolveEventRepoErrors(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	tests := []struct {
		name string
		in   activities.ResolveEventInput
		want string
	}{
		{name: "unknown repository", in: activities.ResolveEventInput{Repo: filepath.Join(r.dir, "no-such-repo")}, want: "no-such-repo"},
		{name: "option-like location", in: activities.ResolveEventInput{Repo: "--upload-pack=evil"}, want: "starts with '-'"},
		{name: "unknown branch", in: activities.ResolveEventInput{Repo: r.dir, Ref: "no-such-branch"}, want: `resolve "no-such-branch"`},
		{name: "unknown short sha", in: activities.ResolveEventInput{Repo: r.dir, SHA: "abcdef0"}, want: `resolve "abcdef0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			in := tt.in
			in.Pipeline = "app"
			_, err := h.resolve(t, in)
			app := requireAppError(t, err, activities.ErrTypeRepo)
			require.Contains(t, app.Error(), tt.want)
		})
	}
}

func TestResolveEventQueues(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)

	t.Run("without a lister", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		h.acts.Queues = nil
		out, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir})
		require.NoError(t, err)
		require.Nil(t, out.Queues)
		require.NotNil(t, out.Spec)
	})
	t.Run("read beside the repository, and dropped when the spec cannot be read", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		q := &blockedQueues{started: make(chan struct{}), stopped: make(chan struct{})}
		h.acts.Queues = q
		out, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir, SHA: r.none})
		require.NoError(t, err, "the answer does not wait for a registry that has not answered")
		require.Contains(t, out.SpecError, "screwdriver.yaml not found")
		require.Nil(t, out.Queues)
		<-q.started
		select {
		case <-q.stopped:
		case <-time.After(30 * time.Second):
			t.Fatal("the registry's read goes on after the activity returned")
		}
	})
	t.Run("registry unavailable is retried", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		h.acts.Queues = fakeQueues{err: errors.New("registry query timed out")}
		_, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir})
		require.ErrorContains(t, err, "list queues: registry query timed out")
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		require.False(t, app.NonRetryable())
	})
}

func TestResolveEventPullRequestTakesBaseSettings(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)
	const baseSpec = `jobs:
  main:
    image: alpine
    requires: [~pr]
    annotations: {screwdriver.cd/executor: pr-pool}
    secrets: [NPM_TOKEN]
    steps:
      - test: echo hello
`
	const headSpec = `annotations: {screwdriver.cd/chainPR: true}
jobs:
  main:
    image: alpine
    requires: [~pr]
    annotations: {screwdriver.cd/executor: release-q}
    secrets: [NPM_TOKEN, DEPLOY_KEY]
    steps:
      - pwn: env
`
	git(t, r.dir, "checkout", "-q", "-b", "target", r.second)
	writeFiles(t, r.dir, map[string]string{"screwdriver.yaml": baseSpec})
	git(t, r.dir, "commit", "-q", "-am", "base spec")
	target := git(t, r.dir, "rev-parse", "HEAD")
	git(t, r.dir, "checkout", "-q", "-b", "pr-head")
	writeFiles(t, r.dir, map[string]string{"screwdriver.yaml": headSpec})
	git(t, r.dir, "commit", "-q", "-am", "the pull request asks for more")
	head := git(t, r.dir, "rev-parse", "HEAD")
	git(t, r.dir, "checkout", "-q", "main")

	h := setup(t)
	out, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir, SHA: head, BaseRef: "target"})
	require.NoError(t, err)
	require.Empty(t, out.SpecError)
	require.Equal(t, head, out.SHA)
	require.Equal(t, target, out.BaseSHA)
	job := out.Spec.Jobs["main"]
	require.Equal(t, "pwn", job.Permutations[0].Commands[0].Name, "the steps come from the head")
	require.Equal(t, "pr-pool", job.Settings.Executor, "the queue comes from the base")
	require.Equal(t, []string{"NPM_TOKEN"}, job.Permutations[0].Secrets, "the secrets come from the base")
	require.False(t, out.Spec.ChainPR(), "chainPR comes from the base")

	// Without a base (any other event) the head's own settings hold.
	out, err = h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir, SHA: head})
	require.NoError(t, err)
	require.Equal(t, "release-q", out.Spec.Jobs["main"].Settings.Executor)

	for _, tc := range []struct{ base, want string }{
		{base: "broken", want: "screwdriver.yaml on branch broken at " + r.broken[:12] + " is invalid"},
		{base: "nospec", want: "screwdriver.yaml not found on branch nospec at " + r.none[:12]},
		{base: "no-such-branch", want: `branch "no-such-branch" of ` + r.dir},
	} {
		out, err := h.resolve(t, activities.ResolveEventInput{Pipeline: "app", Repo: r.dir, SHA: head, BaseRef: tc.base})
		require.NoError(t, err, "a base spec that cannot be read fails the event, not the activity")
		require.Nil(t, out.Spec, "never the head's settings instead")
		require.Contains(t, out.SpecError, "a pull request runs with the settings of its base branch's spec, which cannot be read: ")
		require.Contains(t, out.SpecError, tc.want)
	}
}
