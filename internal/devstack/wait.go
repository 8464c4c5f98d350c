package devstack

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
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
		// The frontend answering is not enough: right after a restart the
		// membership ring may not list matching yet ("Not enough hosts").
		// Describing a task queue goes through matching.
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = svc.DescribeNamespace(callCtx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if last == nil {
			_, last = svc.DescribeTaskQueue(callCtx, &workflowservice.DescribeTaskQueueRequest{
				Namespace: namespace,
				TaskQueue: &taskqueuepb.TaskQueue{Name: "sluice-readiness-probe", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			})
		}
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
