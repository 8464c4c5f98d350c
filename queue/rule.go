package queue

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RunOn says which kind of cluster member a rule selects.
type RunOn string

const (
	// RunOnController selects controllers only (FlowForce's "master only").
	RunOnController RunOn = "controller"
	// RunOnExecutors selects executors only (FlowForce's "any worker only").
	RunOnExecutors RunOn = "executors"
	// RunOnAny selects controllers and executors alike (FlowForce's "master
	// or any worker").
	RunOnAny RunOn = "any"
)

// Valid reports whether r is one of RunOnController, RunOnExecutors or
// RunOnAny.
func (r RunOn) Valid() bool {
	switch r {
	case RunOnController, RunOnExecutors, RunOnAny:
		return true
	}
	return false
}

const (
	// DefaultMaxParallel is the max parallel runs ParseRule uses when the
	// input leaves max-parallel out. One is FlowForce's conservative default,
	// right for heavy builds.
	DefaultMaxParallel = 1
	// MaxMaxParallel is the largest max parallel runs a rule may ask for on
	// one member.
	MaxMaxParallel = 1000
	// MaxLabelLength is the longest label key or value a rule accepts.
	MaxLabelLength = 63
)

// Rule is one line of a queue's ordered rule list: which members run the
// queue's builds, how many at once on each, and how long a slot rests after
// a build ends.
//
// MinGap travels in JSON as integer nanoseconds (time.Duration's encoding).
type Rule struct {
	// RunOn selects controllers, executors or both.
	RunOn RunOn `json:"run_on"`
	// MaxParallel is the number of slots on each selected member, 1 to
	// MaxMaxParallel.
	MaxParallel int `json:"max_parallel"`
	// MinGap keeps a slot occupied for this long after a build on it ends
	// (FlowForce's "minimum time between runs"). Zero means no rest.
	MinGap time.Duration `json:"min_gap"`
	// Labels, when set, restrict the rule to members carrying every one of
	// these labels with the same value.
	Labels map[string]string `json:"labels,omitempty"`
	// UntrustedOnHost lets the rule's controllers and host-runtime
	// executors run pull requests from forks too. Without it those builds
	// go only to the rule's container executors (see EvaluateUntrusted): a
	// step on the host can read the member's credentials.
	UntrustedOnHost bool `json:"untrusted_on_host,omitempty"`
}

// Rule keys in the CLI form ParseRule reads and Rule.String writes.
const (
	keyRunOn       = "run-on"
	keyMaxParallel = "max-parallel"
	keyMinGap      = "min-gap"
	keyLabels      = "labels"
	keyUntrusted   = "untrusted-on-host"
)

const ruleForm = "run-on=controller|executors|any[,max-parallel=N][,min-gap=DURATION][,labels=KEY=VALUE]...[,untrusted-on-host=true]"

// ParseRule parses the CLI form of a rule:
//
//	run-on=executors,max-parallel=4,min-gap=5s,labels=pool=gpu,labels=zone=a
//
// run-on is required; max-parallel defaults to DefaultMaxParallel and min-gap
// to zero. labels may repeat, one KEY=VALUE each; a member qualifies only when
// it carries every listed label. untrusted-on-host=true (or false, the
// default) sets UntrustedOnHost. Spaces around entries are ignored. Every
// problem in the input is reported at once, each naming the key and the
// value, and the error wraps ErrInvalidRule. A rule with no labels has a nil
// Labels map.
func ParseRule(s string) (Rule, error) {
	r := Rule{MaxParallel: DefaultMaxParallel}
	if strings.TrimSpace(s) == "" {
		return Rule{}, fmt.Errorf("parse rule %q: %w", s, newProblem(ErrInvalidRule, "rule is empty; want "+ruleForm))
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, newProblem(ErrInvalidRule, fmt.Sprintf(format, args...)))
	}
	seen := map[string]bool{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			bad("entry %d is empty", i+1)
			continue
		}
		key, value, ok := strings.Cut(entry, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok {
			bad("entry %q has no value; want key=value", entry)
			continue
		}
		if key == keyRunOn || key == keyMaxParallel || key == keyMinGap || key == keyUntrusted {
			if seen[key] {
				bad("%s given twice (%s=%s again)", key, key, value)
				continue
			}
			seen[key] = true
		}
		switch key {
		case keyRunOn:
			r.RunOn = RunOn(value)
			if !r.RunOn.Valid() {
				bad("run-on=%q must be one of controller, executors, any", value)
			}
		case keyMaxParallel:
			n, err := strconv.Atoi(value)
			if err != nil {
				bad("max-parallel=%q is not a whole number", value)
				continue
			}
			r.MaxParallel = n
			if msg := maxParallelProblem(n); msg != "" {
				bad("%s", msg)
			}
		case keyMinGap:
			d, err := time.ParseDuration(value)
			if err != nil {
				bad("min-gap=%q is not a duration (write it with a unit, like 0s, 5s or 2m)", value)
				continue
			}
			r.MinGap = d
			if d < 0 {
				bad("min-gap must not be negative (got %s)", d)
			}
		case keyLabels:
			lk, lv, ok := strings.Cut(value, "=")
			if !ok {
				bad("labels=%q must be KEY=VALUE", value)
				continue
			}
			if msg := labelProblem(lk, lv); msg != "" {
				bad("labels=%q: %s", value, msg)
				continue
			}
			if _, dup := r.Labels[lk]; dup {
				bad("label %q given twice (labels=%s again)", lk, value)
				continue
			}
			if r.Labels == nil {
				r.Labels = map[string]string{}
			}
			r.Labels[lk] = lv
		case keyUntrusted:
			switch value {
			case "true":
				r.UntrustedOnHost = true
			case "false":
			default:
				bad("untrusted-on-host=%q must be true or false", value)
			}
		default:
			bad("unknown key %q in %q (known keys: run-on, max-parallel, min-gap, labels, untrusted-on-host)", key, entry)
		}
	}
	if !seen[keyRunOn] {
		bad("run-on is required (controller, executors or any)")
	}
	if err := join(errs); err != nil {
		return Rule{}, fmt.Errorf("parse rule %q: %w", s, err)
	}
	return r, nil
}

// String writes r in the CLI form ParseRule reads, with every key present
// (untrusted-on-host only when true), labels sorted by key, so
// ParseRule(r.String()) returns r for every valid r.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=%s,%s=%d,%s=%s", keyRunOn, r.RunOn, keyMaxParallel, r.MaxParallel, keyMinGap, r.MinGap)
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		fmt.Fprintf(&b, ",%s=%s=%s", keyLabels, k, r.Labels[k])
	}
	if r.UntrustedOnHost {
		fmt.Fprintf(&b, ",%s=true", keyUntrusted)
	}
	return b.String()
}

// Validate reports every problem with r at once: an unknown run-on, max
// parallel runs outside 1..MaxMaxParallel, a negative gap, malformed labels.
// Each problem wraps ErrInvalidRule.
func (r Rule) Validate() error {
	return join(r.problems())
}

func (r Rule) problems() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, newProblem(ErrInvalidRule, fmt.Sprintf(format, args...)))
	}
	switch {
	case r.RunOn == "":
		bad("run-on is required (controller, executors or any)")
	case !r.RunOn.Valid():
		bad("run-on=%q must be one of controller, executors, any", string(r.RunOn))
	}
	if msg := maxParallelProblem(r.MaxParallel); msg != "" {
		bad("%s", msg)
	}
	if r.MinGap < 0 {
		bad("min-gap must not be negative (got %s)", r.MinGap)
	}
	// Sorted keys: a fixed order.
	//workflowcheck:ignore
	keys := slices.Sorted(maps.Keys(r.Labels))
	for _, k := range keys {
		if msg := labelProblem(k, r.Labels[k]); msg != "" {
			bad("label %q=%q: %s", k, r.Labels[k], msg)
		}
	}
	return errs
}

// Selects reports whether r picks member m for queue: m's role matches
// RunOn, m serves the queue (see Member.Serves) and m carries every label of
// the rule. Liveness and state are not considered here; Evaluate does that.
func (r Rule) Selects(m Member, queue string) bool {
	switch r.RunOn {
	case RunOnController:
		if m.Role != RoleController {
			return false
		}
	case RunOnExecutors:
		if m.Role != RoleExecutor {
			return false
		}
	case RunOnAny:
		if m.Role != RoleController && m.Role != RoleExecutor {
			return false
		}
	default:
		return false
	}
	if !m.Serves(queue) {
		return false
	}
	// Order-independent: every label must match.
	//workflowcheck:ignore
	for k, v := range r.Labels {
		if got, ok := m.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// summary is the short description used in WaitReason: "executors labels
// pool=gpu" or "controller".
func (r Rule) summary() string {
	s := string(r.RunOn)
	if len(r.Labels) > 0 {
		s += " labels " + r.labelList()
	}
	return s
}

// detail is the description used in Plan.Why: "executors, max-parallel=4,
// min-gap=5s, labels pool=gpu".
func (r Rule) detail() string {
	s := fmt.Sprintf("%s, max-parallel=%d", r.RunOn, r.MaxParallel)
	if r.MinGap != 0 {
		s += fmt.Sprintf(", min-gap=%s", r.MinGap)
	}
	if len(r.Labels) > 0 {
		s += ", labels " + r.labelList()
	}
	if r.UntrustedOnHost {
		s += ", untrusted-on-host"
	}
	return s
}

func (r Rule) labelList() string {
	// Sorted keys: a fixed order.
	//workflowcheck:ignore
	keys := slices.Sorted(maps.Keys(r.Labels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + r.Labels[k]
	}
	return strings.Join(parts, ",")
}

func maxParallelProblem(n int) string {
	switch {
	case n < 1:
		return fmt.Sprintf("max-parallel must be ≥ 1 (got %d)", n)
	case n > MaxMaxParallel:
		return fmt.Sprintf("max-parallel must be ≤ %d (got %d)", MaxMaxParallel, n)
	}
	return ""
}

// labelProblem checks one label pair. Keys and values are 1 to
// MaxLabelLength characters of ASCII letters, digits and '_', '-', '.', '/',
// which keeps the CLI form unambiguous (no ',' or '=' inside).
func labelProblem(key, value string) string {
	if msg := labelPartProblem(key); msg != "" {
		return "key " + msg
	}
	if msg := labelPartProblem(value); msg != "" {
		return "value " + msg
	}
	return ""
}

func labelPartProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	pos := 0
	for _, c := range s {
		pos++
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' || c == '/'
		if !ok {
			return fmt.Sprintf("has %q at position %d (use letters, digits, '_', '-', '.', '/')", c, pos)
		}
	}
	if len(s) > MaxLabelLength {
		return fmt.Sprintf("is %d characters long, the limit is %d", len(s), MaxLabelLength)
	}
	return ""
}
