package workflows

// Status is a build's or an event's status, with Screwdriver's names.
type Status string

// Statuses. Every non-final status carries a human reason.
const (
	StatusCreated   Status = "CREATED"
	StatusQueued    Status = "QUEUED"
	StatusBlocked   Status = "BLOCKED"
	StatusFrozen    Status = "FROZEN"
	StatusRunning   Status = "RUNNING"
	StatusSuccess   Status = "SUCCESS"
	StatusFailure   Status = "FAILURE"
	StatusAborted   Status = "ABORTED"
	StatusCollapsed Status = "COLLAPSED"
	// StatusSkipped marks a job of an event that did not run (events only).
	StatusSkipped Status = "SKIPPED"
)

// Final reports whether no further change follows.
func (s Status) Final() bool {
	switch s {
	case StatusSuccess, StatusFailure, StatusAborted, StatusCollapsed, StatusSkipped:
		return true
	}
	return false
}

// Waiting reports whether a build with this status has not started yet.
func (s Status) Waiting() bool {
	switch s {
	case StatusCreated, StatusQueued, StatusBlocked, StatusFrozen:
		return true
	}
	return false
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	switch s {
	case StatusCreated, StatusQueued, StatusBlocked, StatusFrozen, StatusRunning,
		StatusSuccess, StatusFailure, StatusAborted, StatusCollapsed, StatusSkipped:
		return true
	}
	return false
}
