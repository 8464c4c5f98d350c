package pipeline

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidSpec is matched (errors.Is) by every *ValidationError returned by Parse.
var ErrInvalidSpec = errors.New("pipeline: invalid spec")

// ErrAlwaysFrozen is returned by FreezeWindows.NextOpen when the windows leave no free
// minute within the search horizon (FreezeHorizon): in practice they cover all time.
var ErrAlwaysFrozen = errors.New("pipeline: freeze windows cover all time")

// ErrUnknownFormat is returned by Render for a format other than json, dot or mermaid.
var ErrUnknownFormat = errors.New("pipeline: unknown graph format")

// Problem is one thing wrong with a spec. Message is the full human text (Screwdriver's
// wording where Screwdriver has one) and itself names the job and the field; Job and
// Field repeat them for programs ("" when the problem is not about one job or field).
type Problem struct {
	// Job is the job (or "stages.<name>" for a stage) the problem is about, "" if none.
	Job string `json:"job,omitempty"`
	// Field is the dotted field path inside the job or document, e.g. "requires[1]".
	Field string `json:"field,omitempty"`
	// Message is the complete, human readable description.
	Message string `json:"message"`
	// Line and Column locate the YAML node the problem is about (1-based;
	// 0 when the problem is about the file as a whole).
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// String returns the problem's message, preceded by "LINE:COLUMN: " when the
// problem has a place in the file.
func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%d:%d: %s", p.Line, p.Column, p.Message)
	}
	return p.Message
}

// ValidationError reports every problem found in a spec at once.
type ValidationError struct {
	// Problems lists the problems in document order.
	Problems []Problem `json:"problems"`
}

// Error joins the problems (each with its line and column) with newlines.
func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.Is(err, ErrInvalidSpec) succeed.
func (e *ValidationError) Unwrap() error { return ErrInvalidSpec }
