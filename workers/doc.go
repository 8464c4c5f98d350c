// Package workers builds and runs sluice's Temporal workers.
//
// A controller runs the workflows and the orchestration activities on the
// controller task queue and makes sure the registry workflow exists. An
// executor runs builds: for every queue it serves it keeps a worker on that
// queue's task queue whose activity slots come from a queue.SlotPool, sized
// by the registry's answer to each heartbeat. A member outside the active
// rule gets zero slots and stops polling, so capacity follows the queue's
// rules without restarts; a slot that ran a build stays busy for the rule's
// min-gap. Controllers are queue members too, for rules that run builds on
// the controller (the fallback when every executor is gone).
package workers
