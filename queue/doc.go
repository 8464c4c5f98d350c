// Package queue holds sluice's execution queues: what a queue is, which
// cluster members run its builds right now, and how many at once.
//
// The model is FlowForce's. A Queue has a validated name (ValidateName), a
// description and an ordered list of Rules. A Rule says where builds run
// (RunOnController, RunOnExecutors or RunOnAny), how many run at once on
// each member it selects (MaxParallel), how long a slot rests after a build
// (MinGap), and optionally which labels a member must carry. Rules have a
// CLI form, read by ParseRule and written by Rule.String:
//
//	run-on=executors,max-parallel=4,min-gap=0s,labels=pool=gpu
//
// Members are the controllers and executors of the cluster, with a role,
// labels, the queues they serve, an administrative state (active, inactive,
// draining) and the time they were last seen. Evaluate picks a queue's
// active rule: the first rule that selects a live, active member. When all
// executors of a queue die, the next rule takes over — typically a stricter
// rule on the controller — and when they return the first rule wins again.
// The resulting Plan gives the slots (MaxParallel × live members), the
// slots each member may open, and a sentence saying why. WaitReason turns a
// plan into the reason a queued build shows ("waiting for a slot on queue
// gpu: 4/4 busy, 7 ahead").
//
// Everything above is pure and deterministic: no clock, no I/O, no map
// iteration order in results; time is passed in. Workflows may call it
// directly, and the same inputs always give the same Plan.
//
// SlotPool is the one stateful piece, used inside an executor process (never
// in workflow code): it hands out the executor's slots for one queue,
// honours the per-slot minimum gap, and adapts at once when SetLimit follows
// a new Plan. Its Clock is injected; package queuetest has a manual clock
// for tests.
//
// Permissions follow FlowForce too: defining queues needs
// PrivilegeDefineQueues (CanDefine); assigning a job to a queue needs use
// permission (CanUse), which every authenticated user has unless the queue
// restricts it to roles. System is the all-powerful identity of the
// orchestrator itself and of every request when authentication is off.
//
// Decisions worth knowing:
//
//   - Names accept ASCII letters only (FlowForce accepts any letter), so two
//     Unicode spellings of one name cannot become two queues.
//   - A member is live while now-LastSeen ≤ timeout (inclusive); never seen
//     means dead; a LastSeen in the future (clock skew) means live.
//   - Only members in StateActive activate a rule or get slots; an empty
//     state is not active. Draining members keep their running builds and
//     are listed in Plan.Draining, with 0 new slots.
//   - The built-in DefaultQueue falls back to the controller so builds never
//     get stuck on an install with no executor running.
//   - A new SlotPool has limit 0: an executor takes no build of a queue
//     until a Plan says it may.
//   - Anonymous identities (empty User) may do nothing, not even use an
//     unrestricted queue; "every authenticated user" means a non-empty User.
//
// Errors wrap the sentinels ErrInvalidName, ErrInvalidRule, ErrInvalidQueue
// and ErrForbidden; test them with errors.Is. Validation reports every
// problem at once.
package queue
