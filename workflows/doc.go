// Package workflows holds sluice's Temporal workflows, their inputs and
// results, the names of their signals, queries and updates, and the helpers
// that build their IDs.
//
// Four kinds of entity workflow cooperate (docs/architecture.md has the
// picture):
//
//   - RegistryWorkflow ("sluice-registry"): the queue definitions and the
//     executor registry. Members heartbeat into it with an update and get back
//     the slots they may offer per queue.
//   - PipelineWorkflow ("pipeline/<name>"): one per pipeline. It numbers
//     events, starts them, and owns the per-job lanes: at most one running
//     build per job, collapse, blockedBy, freeze windows and delay.
//   - EventWorkflow ("event/<pipeline>/<n>"): one per trigger. It reads the
//     spec at the event's commit and walks the job graph, starting builds.
//   - BuildWorkflow ("build/<pipeline>/<job>/<n>"): one per build. It waits
//     for its lane's grant, then dispatches the build to its queue's task
//     queue, where an executor with a free slot claims and runs it.
//
// Workflow code here is deterministic: time comes from workflow.Now, maps are
// iterated in sorted order, and the pure decision logic (lanes, queue plans)
// lives in plain functions that are unit-tested without Temporal.
package workflows
