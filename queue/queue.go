package queue

import (
	"fmt"
	"strings"
	"time"
)

// Queue is a named execution queue (FlowForce's sense): an ordered list of
// rules deciding which members run its builds, how many at once and with
// what rest between runs, plus who may assign jobs to it.
type Queue struct {
	// Name identifies the queue; see ValidateName.
	Name string `json:"name"`
	// Description is free text for people.
	Description string `json:"description,omitempty"`
	// Rules are evaluated in order; the first one with a live, active member
	// is the active rule (see Evaluate).
	Rules []Rule `json:"rules"`
	// UseRoles restricts who may assign jobs to the queue. Empty means every
	// authenticated user may (FlowForce's default "Queue - Use" for the
	// authenticated role); see CanUse.
	UseRoles []string `json:"use_roles,omitempty"`
	// MaxWait, when set, bounds how long a build waits on the queue for
	// an executor (from its dispatch to the queue until an executor claims
	// it): a build still unclaimed then ends FAILURE with cause refused.
	// 0 means builds wait as long as it takes.
	MaxWait time.Duration `json:"max_wait,omitempty"`
}

// MaxWaitLimit is the longest MaxWait a queue may set.
const MaxWaitLimit = 30 * 24 * time.Hour

// ValidationError lists every problem Queue.Validate found. errors.Is
// matches ErrInvalidQueue and the sentinel of each problem (ErrInvalidName,
// ErrInvalidRule); errors.As gives the list for an API response.
type ValidationError struct {
	// Queue is the queue's name as given, possibly invalid.
	Queue string
	// Problems holds one error per finding, in the order of the queue's
	// fields; rule problems start with "rule N: " (counting from 1).
	Problems []error
}

// Error returns `queue "gpu": rule 2: max-parallel must be ≥ 1 (got 0)` for
// one problem and `queue "gpu": 2 problems: ...; ...` for more.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	if len(parts) == 1 {
		return fmt.Sprintf("queue %q: %s", e.Queue, parts[0])
	}
	return fmt.Sprintf("queue %q: %d problems: %s", e.Queue, len(parts), strings.Join(parts, "; "))
}

// Unwrap returns ErrInvalidQueue followed by every problem.
func (e *ValidationError) Unwrap() []error {
	return append([]error{ErrInvalidQueue}, e.Problems...)
}

// Validate reports every problem with q at once as a *ValidationError: the
// name, a missing rule list, each invalid rule (named "rule N", counting
// from 1, as people number them) and empty or repeated use roles.
func (q Queue) Validate() error {
	var errs []error
	if err := ValidateName(q.Name); err != nil {
		errs = append(errs, err)
	}
	if len(q.Rules) == 0 {
		errs = append(errs, newProblem(ErrInvalidRule, "needs at least one rule"))
	}
	for i, r := range q.Rules {
		for _, p := range r.problems() {
			errs = append(errs, fmt.Errorf("rule %d: %w", i+1, p))
		}
	}
	seen := map[string]bool{}
	for i, role := range q.UseRoles {
		switch {
		case strings.TrimSpace(role) == "":
			errs = append(errs, newProblem(ErrInvalidQueue, fmt.Sprintf("use role %d is empty", i+1)))
		case seen[role]:
			errs = append(errs, newProblem(ErrInvalidQueue, fmt.Sprintf("use role %q is listed twice", role)))
		}
		seen[role] = true
	}
	switch {
	case q.MaxWait < 0:
		errs = append(errs, newProblem(ErrInvalidQueue, fmt.Sprintf("max-wait must not be negative (got %s)", q.MaxWait)))
	case q.MaxWait > 0 && q.MaxWait < time.Second:
		errs = append(errs, newProblem(ErrInvalidQueue, fmt.Sprintf("max-wait must be at least 1s, or 0 for no limit (got %s)", q.MaxWait)))
	case q.MaxWait > MaxWaitLimit:
		errs = append(errs, newProblem(ErrInvalidQueue, fmt.Sprintf("max-wait must be at most %s (got %s)", MaxWaitLimit, q.MaxWait)))
	}
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Queue: q.Name, Problems: errs}
}

// DefaultQueue returns the built-in queue named DefaultQueueName. Its first
// rule runs builds on executors, two at a time on each; when no executor is
// live it falls back to the controller, one build at a time. The fallback is
// deliberate: on a laptop or a fresh install with no executor running,
// builds still run instead of waiting forever, and the single slot keeps the
// controller responsive. Installations that must never build on the
// controller redefine the queue without the second rule.
func DefaultQueue() Queue {
	return Queue{
		Name:        DefaultQueueName,
		Description: "Built-in queue: executors, 2 builds each; falls back to the controller, 1 build at a time, when no executor is live.",
		Rules: []Rule{
			{RunOn: RunOnExecutors, MaxParallel: 2},
			{RunOn: RunOnController, MaxParallel: 1},
		},
	}
}
