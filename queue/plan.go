package queue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// NoRule is Plan.RuleIndex when no rule of the queue has a live, active
// member.
const NoRule = -1

// maxListed caps how many member names or notes one sentence of Plan.Why
// lists before it says "and N more".
const maxListed = 5

// Plan is the result of Evaluate: which rule of a queue is active right now,
// on which members, with how many slots.
type Plan struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// RuleIndex is the index in Queue.Rules of the active rule, counting from
	// 0, or NoRule.
	RuleIndex int `json:"rule_index"`
	// Rule is a copy of the active rule; the zero Rule when none is active.
	// Executors read Rule.MinGap to configure their SlotPool.
	Rule Rule `json:"rule"`
	// Members are the names of the live, active members the active rule
	// selects, sorted; they take new builds.
	Members []string `json:"members"`
	// Draining are the names of live members the active rule selects that
	// are draining: they finish their builds but take no new ones.
	Draining []string `json:"draining,omitempty"`
	// Slots is Rule.MaxParallel × len(Members): how many builds of the queue
	// may run at once.
	Slots int `json:"slots"`
	// Allowed maps the name of every member given to Evaluate to the new
	// slots it may open for this queue: Rule.MaxParallel for Members, 0 for
	// everyone else (other rules, dead, inactive and draining members). An
	// executor sets its SlotPool limit from its own entry.
	Allowed map[string]int `json:"allowed"`
	// Busy counts the queue's builds running on live members (any state), from
	// Member.Running. Builds on dead members are not counted: they will be
	// dispatched again.
	Busy int `json:"busy"`
	// Why explains the decision in one line for people.
	Why string `json:"why"`
	// Untrusted marks the plan of the queue's untrusted builds (pull
	// requests from forks), made by EvaluateUntrusted.
	Untrusted bool `json:"untrusted,omitempty"`
}

// Active reports whether some rule is active, that is whether the queue can
// run builds at all right now.
func (p Plan) Active() bool { return p.RuleIndex != NoRule }

// Evaluate picks the active rule of q (FlowForce's fallback): the first rule
// that selects at least one member that is live (seen within liveness before
// now, see Member.Live) and in StateActive. Inactive and draining members do
// not activate a rule. The plan's slots are the rule's MaxParallel times its
// live active members.
//
// Evaluate is pure and deterministic: members are considered in name order,
// the result does not depend on the order of members or on map iteration,
// and time comes only from now. It does not validate q; a rule whose
// MaxParallel is below 1 yields no slots.
func Evaluate(q Queue, members []Member, now time.Time, liveness time.Duration) Plan {
	return evaluate(q, members, now, liveness, false)
}

// UntrustedReason is why a pull request from a fork waits while no member
// may run it; WaitReason puts it first.
const UntrustedReason = "pull requests from forks run only on container executors"

// EvaluateUntrusted is Evaluate for the queue's untrusted builds (pull
// requests from forks): a rule selects only the members that may run a
// stranger's code, that is container executors (Member.Isolated), plus its
// controllers and host-runtime executors when the rule has UntrustedOnHost.
// So the default queue's controller fallback never applies to them, and
// while no such member is live the plan has no active rule: the builds wait.
// Busy counts the queue's builds on live members that some rule allows.
func EvaluateUntrusted(q Queue, members []Member, now time.Time, liveness time.Duration) Plan {
	return evaluate(q, members, now, liveness, true)
}

// mayRunUntrusted reports whether rule r lets m run untrusted builds.
func mayRunUntrusted(r Rule, m Member) bool { return m.Isolated() || r.UntrustedOnHost }

func evaluate(q Queue, members []Member, now time.Time, liveness time.Duration, untrusted bool) Plan {
	sorted := slices.Clone(members)
	slices.SortStableFunc(sorted, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Role, b.Role), cmp.Compare(a.Host, b.Host))
	})

	plan := Plan{Queue: q.Name, RuleIndex: NoRule, Members: []string{}, Allowed: make(map[string]int, len(sorted)), Untrusted: untrusted}
	for _, m := range sorted {
		plan.Allowed[m.Name] = 0
		if m.Live(now, liveness) && (!untrusted || q.AllowsUntrusted(m)) {
			plan.Busy += max(0, m.Running[q.Name])
		}
	}

	var skipped []string
	for i, r := range q.Rules {
		var active, draining []string
		var notes []string
		for _, m := range sorted {
			if !r.Selects(m, q.Name) {
				continue
			}
			if untrusted && !mayRunUntrusted(r, m) {
				notes = append(notes, hostNote(m))
				continue
			}
			live := m.Live(now, liveness)
			switch {
			case live && m.State == StateActive:
				active = append(active, m.Name)
			case live && m.State == StateDraining:
				draining = append(draining, m.Name)
				notes = append(notes, m.Name+" is draining")
			case !live:
				notes = append(notes, deadNote(m, now))
			case m.State == StateInactive:
				notes = append(notes, m.Name+" is inactive")
			default:
				notes = append(notes, fmt.Sprintf("%s has state %q", m.Name, string(m.State)))
			}
		}
		if len(active) == 0 {
			if len(notes) == 0 {
				notes = []string{nobodyNote(r, q.Name, untrusted)}
			}
			skipped = append(skipped, fmt.Sprintf("rule %d has no live member (%s)", i+1, list(notes)))
			continue
		}
		perMember := max(0, r.MaxParallel)
		plan.RuleIndex = i
		plan.Rule = r
		plan.Members = active
		plan.Draining = draining
		plan.Slots = perMember * len(active)
		for _, name := range active {
			plan.Allowed[name] = perMember
		}
		what := fmt.Sprintf("rule %d (%s): %d live %s %s", i+1, r.detail(), len(active), plural(len(active), "member", "members"), list(active))
		if len(draining) > 0 {
			what += fmt.Sprintf("; draining %s", list(draining))
		}
		if len(skipped) > 0 {
			what = strings.Join(skipped, ", ") + ", falling back to " + what
		}
		plan.Why = untrustedPrefix(untrusted) + what
		return plan
	}

	switch {
	case len(q.Rules) == 0:
		plan.Why = "no live member for any rule: the queue has no rules"
	default:
		plan.Why = "no live member for any rule: " + strings.Join(skipped, ", ")
	}
	plan.Why = untrustedPrefix(untrusted) + plan.Why
	return plan
}

func untrustedPrefix(untrusted bool) string {
	if untrusted {
		return "pull requests from forks: "
	}
	return ""
}

// AllowsUntrusted reports whether some rule of q selects m and lets it run
// untrusted builds (m is a container executor, or the rule has
// UntrustedOnHost); liveness and state are not considered.
func (q Queue) AllowsUntrusted(m Member) bool {
	for _, r := range q.Rules {
		if r.Selects(m, q.Name) && mayRunUntrusted(r, m) {
			return true
		}
	}
	return false
}

func hostNote(m Member) string {
	if m.Role == RoleController {
		return m.Name + " is a controller"
	}
	return m.Name + " runs builds on the host"
}

// WaitReason explains in one line why a build of queue q is not running yet,
// given the current plan, how many of the queue's slots are busy and how
// many builds are ahead of it:
//
//	waiting for a slot on queue gpu: 4/4 busy, 7 ahead
//	no live member of queue gpu (rules: executors labels pool=gpu; controller)
//
// When the plan runs on a fallback rule the text says so, since that often
// explains a longer wait. Negative counts are treated as zero.
//
// For a plan of EvaluateUntrusted with no active rule the text starts with
// UntrustedReason:
//
//	pull requests from forks run only on container executors: none is live on queue default (rules: executors; controller)
func WaitReason(q Queue, plan Plan, busy int, ahead int) string {
	busy, ahead = max(0, busy), max(0, ahead)
	name := queueLabel(q.Name)
	if !plan.Active() && plan.Untrusted {
		rules := make([]string, len(q.Rules))
		for i, r := range q.Rules {
			rules[i] = r.summary()
		}
		return fmt.Sprintf("%s: none is live on queue %s (rules: %s)", untrustedReason(q), name, strings.Join(rules, "; "))
	}
	if !plan.Active() {
		if len(q.Rules) == 0 {
			return fmt.Sprintf("no live member of queue %s (it has no rules)", name)
		}
		rules := make([]string, len(q.Rules))
		for i, r := range q.Rules {
			rules[i] = r.summary()
		}
		return fmt.Sprintf("no live member of queue %s (rules: %s)", name, strings.Join(rules, "; "))
	}
	var s string
	if busy+ahead >= plan.Slots {
		s = fmt.Sprintf("waiting for a slot on queue %s: %d/%d busy, ", name, busy, plan.Slots)
		if ahead == 0 {
			s += "next in line"
		} else {
			s += fmt.Sprintf("%d ahead", ahead)
		}
	} else {
		s = fmt.Sprintf("a slot is free on queue %s: %d/%d busy, %d ahead", name, busy, plan.Slots, ahead)
	}
	if plan.RuleIndex > 0 {
		s += fmt.Sprintf(" (on fallback rule %d: %s)", plan.RuleIndex+1, plan.Rule.detail())
	}
	return s
}

// untrustedReason is UntrustedReason, naming the queue's opt-in when a
// rule has one.
func untrustedReason(q Queue) string {
	for _, r := range q.Rules {
		if r.UntrustedOnHost {
			return UntrustedReason + " and on rules with untrusted-on-host=true"
		}
	}
	return UntrustedReason
}

// queueLabel quotes a queue name only when it holds a space, so the common
// case reads "queue gpu" and the rare one stays unambiguous.
func queueLabel(name string) string {
	if name == "" || strings.Contains(name, " ") {
		return fmt.Sprintf("%q", name)
	}
	return name
}

func deadNote(m Member, now time.Time) string {
	if !m.DownSince.IsZero() {
		return fmt.Sprintf("%s is down (%s, %s ago)", m.Name, m.DownWhy, now.Sub(m.DownSince).Round(time.Second))
	}
	if m.LastSeen.IsZero() {
		return m.Name + " never seen"
	}
	return fmt.Sprintf("%s last seen %s ago", m.Name, now.Sub(m.LastSeen).Round(time.Second))
}

func nobodyNote(r Rule, queue string, untrusted bool) string {
	var s string
	switch {
	case untrusted && !r.UntrustedOnHost && r.RunOn != RunOnController:
		s = "no container executor serves queue " + queueLabel(queue)
		if len(r.Labels) > 0 {
			s += " with labels " + r.labelList()
		}
		return s
	case untrusted && !r.UntrustedOnHost:
		return "controllers take no pull requests from forks"
	}
	switch r.RunOn {
	case RunOnController:
		s = "no controller registered"
	case RunOnExecutors:
		s = "no executor serves queue " + queueLabel(queue)
	case RunOnAny:
		s = "no controller or executor serves queue " + queueLabel(queue)
	default:
		return fmt.Sprintf("run-on=%q selects nobody", string(r.RunOn))
	}
	if len(r.Labels) > 0 {
		s += " with labels " + r.labelList()
	}
	return s
}

// list joins up to maxListed items with ", " and summarises the rest.
func list(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(items)-maxListed)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// NeverServed reports whether no member given (the registry's members:
// it forgets those silent for a day) is selected by any rule of q, so no
// build of q has anywhere to run: no executor with the queue's labels ever
// registered. With untrusted, only members that may run pull requests
// from forks count (container executors, or a rule with
// untrusted-on-host=true). Liveness and state are not considered: a dead
// or drained member still served the queue.
func NeverServed(q Queue, members []Member, untrusted bool) bool {
	for _, m := range members {
		for _, r := range q.Rules {
			if r.Selects(m, q.Name) && (!untrusted || mayRunUntrusted(r, m)) {
				return false
			}
		}
	}
	return true
}
