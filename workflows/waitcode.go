package workflows

import (
	"slices"
	"strings"
)

// WaitCode says, for machines, why a build (or an event) waits; Reason says
// it for people. It is empty while nothing waits.
type WaitCode string

// Wait codes. The lanes set blocked-by, frozen, delayed and lane-order; a
// build dispatched to its queue waits slot-busy, which the API refines from
// the queue's current picture into no-member, never-served or min-gap; an
// event waiting for approval waits approval.
const (
	// WaitNoMember: no live member of the queue's rules may run the build
	// now (executors registered before, none live or active).
	WaitNoMember WaitCode = "no-member"
	// WaitSlotBusy: the queue's slots are busy, or builds ahead take them.
	WaitSlotBusy WaitCode = "slot-busy"
	// WaitBlockedBy: blockedBy, or a build of the same job
	// (blockedBySameJob), is running or waiting ahead.
	WaitBlockedBy WaitCode = "blocked-by"
	// WaitFrozen: a freeze window holds the build.
	WaitFrozen WaitCode = "frozen"
	// WaitDelayed: sluice.dev/delay holds the build.
	WaitDelayed WaitCode = "delayed"
	// WaitMinGap: a slot is free, but the active rule's min-gap spaces the
	// queue's starts.
	WaitMinGap WaitCode = "min-gap"
	// WaitApproval: the event waits for a pipeline admin's approval
	// (screwdriver.cd/restrictPR).
	WaitApproval WaitCode = "approval"
	// WaitLaneOrder: the build waits for its turn in its job's lane: an
	// earlier event's builds, or a granted build giving way.
	WaitLaneOrder WaitCode = "lane-order"
	// WaitNeverServed: no member the registry knows is selected by any
	// rule of the queue: no executor with the queue's labels (or, for a
	// pull request from a fork, no container executor) ever registered.
	// The build still waits.
	WaitNeverServed WaitCode = "never-served"
)

// WaitCodes lists every wait code, for validation, docs and metrics.
func WaitCodes() []WaitCode {
	return []WaitCode{
		WaitNoMember, WaitSlotBusy, WaitBlockedBy, WaitFrozen, WaitDelayed,
		WaitMinGap, WaitApproval, WaitLaneOrder, WaitNeverServed,
	}
}

// Valid reports whether c is a known wait code.
func (c WaitCode) Valid() bool { return slices.Contains(WaitCodes(), c) }

// WaitCodeOf is the code of a lane status message that carries none (sent
// by a pipeline run recorded before wait codes): it follows from the
// status and the reason's wording.
func WaitCodeOf(s Status, reason string) WaitCode {
	switch {
	case s == StatusFrozen:
		return WaitFrozen
	case s == StatusBlocked:
		return WaitBlockedBy
	case s == StatusQueued && strings.HasPrefix(reason, "delayed"):
		return WaitDelayed
	case s == StatusQueued || s == StatusCreated:
		return WaitLaneOrder
	}
	return ""
}
