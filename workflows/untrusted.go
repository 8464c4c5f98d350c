package workflows

import "go.temporal.io/sdk/workflow"

// changeUntrustedQueue: builds of pull requests from forks are dispatched to
// their queue's untrusted task queue (UntrustedTaskQueue), which only
// container executors poll. A build dispatched before keeps its queue's
// task queue, so its history replays.
const changeUntrustedQueue = "untrusted-queue"

// taskQueue is the Temporal task queue the build is dispatched to: its
// queue's untrusted one for a pull request from a fork, its queue's own
// otherwise. GetVersion is asked only for forks' builds, so other builds'
// histories do not change.
func (b *build) taskQueue(ctx workflow.Context) string {
	if b.state.Fork && (b.in.Lean || workflow.GetVersion(ctx, changeUntrustedQueue, workflow.DefaultVersion, 1) >= 1) {
		return UntrustedTaskQueue(b.in.Queue)
	}
	return QueueTaskQueue(b.in.Queue)
}
