package cliout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Dash is what an empty table cell or field shows.
const Dash = "-"

// Duration formats d compactly for tables: "0.4s", "9.9s", "42s", "3m04s",
// "2h05m", "3d04h". Units are truncated, never rounded up, so a value never
// reads "60s". A negative d formats as "0.0s".
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < 10*time.Second:
		d = d.Truncate(100 * time.Millisecond)
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// Rough formats d in its largest whole unit: "5s", "3m", "2h", "4d".
func Rough(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// Ago says how long before now t was: "never" for the zero time, "just now"
// within a second, "5s ago", "3m ago"; a time after now reads "in 5s".
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d > -time.Second && d < time.Second:
		return "just now"
	case d < 0:
		return "in " + Rough(-d)
	default:
		return Rough(d) + " ago"
	}
}

// AgoOr is Ago, with Dash for the zero time.
func AgoOr(t, now time.Time) string {
	if t.IsZero() {
		return Dash
	}
	return Ago(t, now)
}

// Elapsed is how long something that started at start ran: until end, or
// until now while end is zero. ok is false when it never started.
func Elapsed(start, end, now time.Time) (d time.Duration, ok bool) {
	if start.IsZero() {
		return 0, false
	}
	if end.IsZero() {
		end = now
	}
	return max(0, end.Sub(start)), true
}

// ElapsedText is Elapsed formatted with Duration, or Dash when it never
// started.
func ElapsedText(start, end, now time.Time) string {
	d, ok := Elapsed(start, end, now)
	if !ok {
		return Dash
	}
	return Duration(d)
}

// Timestamp formats t as a UTC RFC 3339 time followed by how long ago it was:
// "2026-05-01T12:00:00Z (3m ago)"; Dash for the zero time.
func Timestamp(t, now time.Time) string {
	if t.IsZero() {
		return Dash
	}
	return t.UTC().Format(time.RFC3339) + " (" + Ago(t, now) + ")"
}

// Status formats a status in capitals; Dash when empty.
func Status(s string) string {
	if s == "" {
		return Dash
	}
	return strings.ToUpper(s)
}

// ShortSHA shortens a commit to 7 characters, as git does.
func ShortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return Or(sha, Dash)
}

// Or returns s, or def when s is empty.
func Or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// OneLine folds line breaks and tabs into single spaces so a value fits one
// table cell or one line of a summary.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Truncate shortens s to at most n characters, ending with "…" when cut.
// n ≤ 0 means no limit.
func Truncate(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Pairs formats a map as "k=v,k2=v2" sorted by key; Dash when empty.
func Pairs[V any](m map[string]V) string {
	if len(m) == 0 {
		return Dash
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// List joins items with ","; Dash when empty.
func List(items []string) string {
	if len(items) == 0 {
		return Dash
	}
	return strings.Join(items, ",")
}

// JoinOr joins choices for an error message: "a", "a or b", "a, b or c".
func JoinOr(choices []string) string {
	switch len(choices) {
	case 0:
		return ""
	case 1:
		return choices[0]
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

// Trigger describes what started an event.
type Trigger struct {
	Kind   string
	Branch string
	Ref    string
	PR     int
	Remote string
	Sender string
}

// String describes the trigger in a few words: "commit on main",
// "pr #12 (feature → main)", "tag v1.2", "remote sd@lib:publish", "manual".
func (t Trigger) String() string {
	var s string
	switch t.Kind {
	case "":
		return Dash
	case "pr", "pr-closed":
		s = fmt.Sprintf("%s #%d", t.Kind, t.PR)
		switch {
		case t.Ref != "" && t.Branch != "":
			s += fmt.Sprintf(" (%s → %s)", t.Ref, t.Branch)
		case t.Branch != "":
			s += " (→ " + t.Branch + ")"
		}
	case "tag", "release":
		s = t.Kind + " " + Or(t.Ref, "?")
	case "remote":
		s = "remote " + Or(t.Remote, "?")
	default:
		s = t.Kind
		if t.Branch != "" {
			s += " on " + t.Branch
		}
	}
	if t.Sender != "" && t.Kind == "manual" {
		s += " by " + t.Sender
	}
	return s
}

// Plural counts things: "no attempts", "1 attempt", "2 attempts".
func Plural(n int, word string) string {
	switch n {
	case 0:
		return "no " + word + "s"
	case 1:
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// NonZero returns the entries of m that are not zero (nil when none).
func NonZero(m map[string]int) map[string]int {
	var out map[string]int
	for k, v := range m {
		if v != 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[k] = v
		}
	}
	return out
}
