package workers

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/devstack"
	"github.com/sluice-ci/sluice/workflows"
)

// TestRegisterSearchAttributesWaitsUntilUsable runs a real server configured
// as production ones are, without refreshing its search attribute caches on
// every read: once RegisterSearchAttributes returns, a workflow can start with
// every sluice attribute and visibility answers queries on them.
func TestRegisterSearchAttributesWaitsUntilUsable(t *testing.T) {
	searchAttributesUsable(t, devstack.Options{
		Namespace:     "prod-like",
		DynamicConfig: map[string]any{"system.forceSearchAttributesCacheRefreshOnRead": false},
	})
}

// TestPreRegisteredSearchAttributes: an embedded server whose namespace was
// created with sluice's search attributes (sluice dev, sluice temporal)
// caches them like a production server and uses them from its first
// request.
func TestPreRegisteredSearchAttributes(t *testing.T) {
	searchAttributesUsable(t, devstack.Options{Namespace: "prod-like", SearchAttributes: workflows.SearchAttributes()})
}

func searchAttributesUsable(t *testing.T, opts devstack.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, err := devstack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = stack.Stop() })
	cfg := &config.Config{TemporalNamespace: "prod-like"}
	c, err := Dial(ctx, cfg, stack.FrontendAddress(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer c.Close()

	start := time.Now()
	require.NoError(t, RegisterSearchAttributes(ctx, c, "prod-like"))
	t.Logf("search attributes usable after %s", time.Since(start).Round(time.Millisecond))

	sa := temporal.NewSearchAttributes(
		workflows.SAPipeline.ValueSet("p"), workflows.SAJob.ValueSet("j"), workflows.SAEvent.ValueSet("p/1"),
		workflows.SASHA.ValueSet("abc"), workflows.SABranch.ValueSet("main"), workflows.SAStatus.ValueSet("QUEUED"),
		workflows.SAQueue.ValueSet("default"), workflows.SAExecutor.ValueSet("local"), workflows.SAPriority.ValueSet(1),
		workflows.SADispatchedAt.ValueSet(time.Now()), workflows.SASubscriptions.ValueSet([]string{"a"}),
		workflows.SAPR.ValueSet(3), workflows.SAQueues.ValueSet([]string{"default"}), workflows.SACause.ValueSet("succeeded"),
		workflows.SAOpenBuilds.ValueSet([]string{"QUEUED@default"}),
	)
	require.Equal(t, len(workflows.SearchAttributes()), sa.Size(), "the test sets every sluice search attribute")
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "probe", TaskQueue: "nobody-polls", TypedSearchAttributes: sa,
	}, "Probe")
	require.NoError(t, err, "a workflow starts with every sluice search attribute")
	require.NoError(t, c.TerminateWorkflow(ctx, "probe", "", "done"))
	_, err = c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: "prod-like", Query: searchAttributesProbe(),
	})
	require.NoError(t, err)
	// Visibility finds the probe by an attribute.
	require.Eventually(t, func() bool {
		res, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: "prod-like", Query: workflows.SAPipeline.GetName() + " = 'p' AND " + workflows.SAPR.GetName() + " = 3",
		})
		return err == nil && res.GetCount() == 1
	}, 30*time.Second, 100*time.Millisecond, "visibility indexes the probe's attributes")

	// A second controller finds them registered and usable.
	require.NoError(t, RegisterSearchAttributes(ctx, c, "prod-like"))
}

func TestCompressOnlyBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		setting, address string
		want             bool
	}{
		{"auto", "127.0.0.1:7233", false},
		{"auto", "127.0.0.2:7233", false},
		{"auto", "[::1]:7233", false},
		{"auto", "localhost:7233", false},
		{"auto", "temporal.example:7233", true},
		{"auto", "10.0.0.5:7233", true},
		{"auto", "[2001:db8::1]:7233", true},
		{"auto", "temporal", true},
		{"gzip", "127.0.0.1:7233", true},
		{"none", "temporal.example:7233", false},
	} {
		require.Equal(t, tc.want, Compress(tc.setting, tc.address), "%s to %s", tc.setting, tc.address)
	}
}
