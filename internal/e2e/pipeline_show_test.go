package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/workflows"
)

// TestShowPipelineAnswersFromTheLastSync: GET /api/v1/pipelines/{name}
// answers with the warnings and parameters of the spec its last spec sync
// read (the create's, then a commit event's of the default branch), and
// says when that sync was, without reading the repository: once the
// repository is gone, it still answers the same.
func TestShowPipelineAnswersFromTheLastSync(t *testing.T) {
	t.Parallel()
	e := server.NewEnv(t, testenv.Options{LocalExecutor: true})
	ctx := e.Context()
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
parameters:
  target: staging
shared: {image: alpine}
jobs:
  main: {requires: [~commit], steps: [{hello: echo hi}]}
`})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "shown", Repo: repo.Dir})
	require.NoError(t, err)
	p, err := e.API.GetPipeline(ctx, "shown")
	require.NoError(t, err)
	require.False(t, p.SpecSyncedAt.IsZero(), "the create synced the spec")
	require.Equal(t, []pipeline.Parameter{{Name: "target", Default: "staging"}}, p.Parameters)
	require.Empty(t, p.Warnings)
	created := p.SpecSyncedAt

	// A commit on the default branch changes the spec: its event syncs it.
	head := repo.Commit(map[string]string{"screwdriver.yaml": `
parameters:
  target: production
  region: eu
annotations:
  screwdriver.cd/buildCluster: aws
shared: {image: alpine}
jobs:
  main: {requires: [~commit], steps: [{hello: echo hi}]}
`}, "new spec")
	started, err := e.StartEvent(ctx, "shown", api.StartEventRequest{Branch: "main"})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	e.WaitFor("the event's spec sync", time.Minute, func() bool {
		p, err = e.API.GetPipeline(ctx, "shown")
		return err == nil && p.LastSHA == head
	})

	// The repository is gone: the answer is the last sync's.
	require.NoError(t, os.RemoveAll(repo.Dir))
	p, err = e.API.GetPipeline(ctx, "shown")
	require.NoError(t, err)
	require.Equal(t, head, p.LastSHA)
	require.False(t, p.SpecSyncedAt.Before(created), "synced at %s, created at %s", p.SpecSyncedAt, created)
	require.Equal(t, []pipeline.Parameter{{Name: "region", Default: "eu"}, {Name: "target", Default: "production"}}, p.Parameters)
	require.Len(t, p.Warnings, 1)
	require.Equal(t, "annotations.screwdriver.cd/buildCluster", p.Warnings[0].Field)

	// The CLI says when.
	stdout, stderr, code := sluice(t, []string{"SLUICE_API_URL=" + e.APIURL}, "pipeline", "show", "shown")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "spec synced")
	require.Contains(t, stdout, "warning: annotations.screwdriver.cd/buildCluster")
}
