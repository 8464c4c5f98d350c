package queue

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLength is the longest queue name ValidateName accepts, in
// characters. Names end up in Temporal task queue names, search attributes,
// CLI arguments and URLs; 64 keeps all of those readable.
const MaxNameLength = 64

// DefaultQueueName names the built-in queue a build runs on when neither its
// job (screwdriver.cd/executor) nor its pipeline names one.
const DefaultQueueName = "default"

// ValidateName checks a queue name against FlowForce's rule: it is not
// empty, at most MaxNameLength characters, made only of ASCII letters,
// digits, single spaces and the characters '_', '-' and '.', and it neither
// starts nor ends with a space. The error quotes the name, says exactly what
// is wrong and wraps ErrInvalidName.
//
// Only ASCII letters are accepted, stricter than FlowForce: two spellings of
// the same accented letter (NFC and NFD) would otherwise name two different
// queues that look identical in every UI.
func ValidateName(name string) error {
	bad := func(format string, args ...any) error {
		return newProblem(ErrInvalidName, fmt.Sprintf("queue name %q: ", name)+fmt.Sprintf(format, args...))
	}
	if name == "" {
		return bad("must not be empty")
	}
	if !utf8.ValidString(name) {
		return bad("is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > MaxNameLength {
		return bad("is %d characters long, the limit is %d", n, MaxNameLength)
	}
	pos := 0
	for _, r := range name {
		pos++
		if !nameRune(r) {
			return bad("character %q at position %d is not allowed (use letters, digits, single spaces, '_', '-' and '.')", r, pos)
		}
	}
	switch {
	case strings.HasPrefix(name, " "):
		return bad("starts with a space")
	case strings.HasSuffix(name, " "):
		return bad("ends with a space")
	case strings.Contains(name, "  "):
		return bad("contains two spaces in a row")
	}
	return nil
}

func nameRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	case r == ' ', r == '_', r == '-', r == '.':
		return true
	}
	return false
}
