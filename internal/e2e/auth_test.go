package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// TestTokenAuthentication runs an installation whose API requires tokens:
// no token is 401; a user without define-queues gets 403; a user may run a
// pipeline on the default queue and read its logs, which an executor process
// shipped with its own token; the same user's event that names a queue
// restricted to another role fails before any build starts, and an admin's
// runs.
func TestTokenAuthentication(t *testing.T) {
	t.Parallel()
	const (
		adminToken = "admin-token-0123456789"
		devToken   = "dev-token-0123456789"
		execToken  = "executor-token-0123456789"
	)
	e := server.NewEnv(t, testenv.Options{Token: adminToken, Tokens: `
tokens:
  - {user: root, token: ` + adminToken + `, roles: [release], privileges: [define-queues, manage-executors]}
  - {user: dana, token: ` + devToken + `, roles: [dev]}
  - {user: exec-pool, token: ` + execToken + `}
`})
	ctx := e.Context()
	var ae *api.Error

	_, err := api.NewClient(e.APIURL).ListQueues(ctx)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.Status)
	require.Contains(t, ae.Message, "missing Authorization header")

	dana := api.NewClient(e.APIURL)
	dana.Token = devToken
	_, err = dana.CreateQueue(ctx, api.QueueRequest{Name: "prod", Rules: []string{"run-on=executors"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Message, `user "dana" may not define queues`)
	_, err = e.API.CreateQueue(ctx, api.QueueRequest{Name: "prod", Rules: []string{"run-on=executors"}, UseRoles: []string{"release"}})
	require.NoError(t, err)

	e.StartExecutor(testenv.ExecutorOptions{Name: "exec-1", Queues: []string{"default", "prod"}, Env: []string{"SLUICE_TOKEN=" + execToken}})
	e.WaitExecutorLive("exec-1")

	app := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  main:\n    requires: [~commit]\n    steps: [{run: 'echo built by the executor'}]\n"})
	rel := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": "shared: {image: alpine}\njobs:\n  ship:\n    requires: [~commit]\n    steps: [{run: 'echo shipped'}]\n    annotations: {screwdriver.cd/executor: prod}\n"})
	_, err = dana.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "app", Repo: app.Dir})
	require.NoError(t, err)
	// dana administers the release pipeline too, but its job's queue is
	// restricted to a role she lacks.
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "release", Repo: rel.Dir, Admins: []string{"dana"}})
	require.NoError(t, err)

	started, err := dana.StartEvent(ctx, "app", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev := e.WaitEvent(started.ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)
	require.Equal(t, "exec-1", ev.Builds[0].Executor)
	b, err := dana.GetBuild(ctx, ev.Builds[0].ID)
	require.NoError(t, err)
	e.WaitFor("the log shipped with the executor's token", 10*time.Second, func() bool {
		ch, err := dana.ReadLog(ctx, b.LogKey, "run", 0, 0)
		return err == nil && ch.Complete && strings.Contains(string(ch.Data), "built by the executor")
	})

	started, err = dana.StartEvent(ctx, "release", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev = e.WaitEvent(started.ID, time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	require.Contains(t, ev.Reason, `user "dana" may not use queue prod`)
	require.Empty(t, ev.Builds, "no build starts")

	started, err = e.StartEvent(ctx, "release", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	ev = e.WaitEvent(started.ID, time.Minute)
	require.Equal(t, workflows.StatusSuccess, ev.Status, ev.Reason)

	// A use list changed moments after an event read the queues applies
	// to the next event: the controller reuses a read for a second
	// (queue.GrantStands), and the update answers only once it lapsed.
	_, err = e.API.UpdateQueue(ctx, api.QueueRequest{Name: "prod", Rules: []string{"run-on=executors"}, UseRoles: []string{"release", "dev"}})
	require.NoError(t, err)
	started, err = dana.StartEvent(ctx, "release", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	e.WaitFor("dana's event to resolve", time.Minute, func() bool {
		bs, err := dana.ListBuilds(ctx, api.BuildFilter{Event: started.ID})
		return err == nil && len(bs) == 1
	})
	_, err = e.API.UpdateQueue(ctx, api.QueueRequest{Name: "prod", Rules: []string{"run-on=executors"}, UseRoles: []string{"release"}})
	require.NoError(t, err)
	revoked, err := dana.StartEvent(ctx, "release", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusSuccess, e.WaitEvent(started.ID, time.Minute).Status, "allowed when it resolved")
	ev = e.WaitEvent(revoked.ID, time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status)
	require.Contains(t, ev.Reason, `user "dana" may not use queue prod`)
	require.Empty(t, ev.Builds, "no build starts")
}
