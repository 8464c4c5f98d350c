// Package activities holds sluice's Temporal activities as methods on one
// struct of injected dependencies.
//
// Controller-side activities read a pipeline's spec at an event's commit
// (ResolveEvent), start events in pipelines that subscribe to a job
// (TriggerRemote) and keep periodic schedules in step with the spec
// (SyncSchedules). The executor-side activity, RunBuild, claims a build,
// checks its commit out into a fresh workspace and runs its steps as real
// processes, shipping step logs as they are written.
//
// Activities reach Temporal-level state only through the small interfaces
// declared here (Claimer, QueueLister, RemoteStarter, Scheduler, Executor);
// the workers package wires them. Imports flow one way: workflows import
// activities, never the reverse.
package activities
