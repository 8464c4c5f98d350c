package queue

import (
	"errors"
	"strings"
)

// ErrInvalidName is wrapped by every error that rejects a queue name.
var ErrInvalidName = errors.New("queue: invalid name")

// ErrInvalidRule is wrapped by every error that rejects a rule, whether it
// came from ParseRule, Rule.Validate or Queue.Validate.
var ErrInvalidRule = errors.New("queue: invalid rule")

// ErrInvalidQueue is wrapped by the error Queue.Validate returns.
var ErrInvalidQueue = errors.New("queue: invalid queue")

// ErrForbidden is wrapped by CanDefine and CanUse when an identity lacks the
// privilege or the role an action needs.
var ErrForbidden = errors.New("queue: forbidden")

// problem is one human-readable finding that wraps a sentinel. Its text is
// the finding alone, so callers can prefix context ("rule 2: ...") without
// the sentinel's text repeating in every line.
type problem struct {
	kind error
	msg  string
}

// Error returns the finding alone.
func (p *problem) Error() string { return p.msg }

// Unwrap returns the sentinel the finding belongs to.
func (p *problem) Unwrap() error { return p.kind }

func newProblem(kind error, msg string) error {
	return &problem{kind: kind, msg: msg}
}

// problems is a list of findings reported at once. Its text joins them with
// "; " so a whole list fits on one log line or one CLI error line.
type problems []error

// Error joins the findings with "; ".
func (ps problems) Error() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the findings, so errors.Is sees each one's sentinel.
func (ps problems) Unwrap() []error { return ps }

// join returns nil for no findings, the finding itself for one, and a
// problems list otherwise.
func join(ps []error) error {
	switch len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	default:
		return problems(ps)
	}
}
