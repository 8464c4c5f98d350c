package devstack

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// waitForFrontend polls the frontend until the namespace is served, so the
// caller's first workflow start does not race the server's start-up.
func waitForFrontend(ctx context.Context, addr, namespace string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("devstack: dial %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	svc := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = svc.DescribeNamespace(callCtx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		callCancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: frontend %s did not serve namespace %q within 60s: %w", addr, namespace, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
