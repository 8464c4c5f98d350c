package queue

import (
	"slices"
	"time"
)

// GrantStands is how long the registry's answers stand after their query
// was sent: a member acts on a yes to a build (workflows.QueryMemberGrant)
// for the queue's builds that reach it within that time without asking
// again (workers.Agent), and events resolved within it use the queue
// definitions read (activities.ResolveEvent). Whoever changes a member's
// state or the queues waits that long before saying it is done (api), so
// that nothing starts on an older answer afterwards.
const GrantStands = time.Second

// Role says what kind of process a cluster member is.
type Role string

const (
	// RoleController is a process running the orchestration workflows
	// (FlowForce's master). Controllers serve every queue.
	RoleController Role = "controller"
	// RoleExecutor is a worker process that runs builds for the queues it
	// serves.
	RoleExecutor Role = "executor"
)

// MemberState is the administrative state of a member (Azkaban's
// activate/deactivate, plus drain).
type MemberState string

const (
	// StateActive members take new builds.
	StateActive MemberState = "active"
	// StateInactive members take no builds; an operator deactivated them.
	StateInactive MemberState = "inactive"
	// StateDraining members finish the builds they run and take no new ones.
	StateDraining MemberState = "draining"
)

// Runtimes a member reports (Member.Runtime): where its builds' steps run.
const (
	// RuntimeHost members run steps as their own user on their host: a step
	// can read the member's environment and data directory. Controllers
	// count as host.
	RuntimeHost = "host"
	// RuntimeContainer members run each build in a container of the job's
	// image (docker or podman).
	RuntimeContainer = "container"
)

// AllQueues in Member.Queues means the member serves every queue.
const AllQueues = "*"

// DefaultLiveness is a reasonable liveness timeout for Evaluate when members
// heartbeat every few seconds: a member missing for longer is dead.
const DefaultLiveness = 30 * time.Second

// Member is one registered process of the cluster, as the registry sees it.
// Names are unique within a cluster; the registry enforces it.
type Member struct {
	// Name identifies the member, e.g. "exec-a".
	Name string `json:"name"`
	// Role is RoleController or RoleExecutor.
	Role Role `json:"role"`
	// Host is where the member runs, for people.
	Host string `json:"host,omitempty"`
	// Labels describe the member (pool=gpu, zone=a); rules select on them.
	Labels map[string]string `json:"labels,omitempty"`
	// Queues lists the queue names an executor serves; AllQueues ("*")
	// means every queue. Controllers serve every queue whatever this says.
	Queues []string `json:"queues,omitempty"`
	// State is the administrative state. Only StateActive members take new
	// builds; an empty or unknown state counts as not active.
	State MemberState `json:"state"`
	// StateReason says why the registry changed State on its own (an
	// executor drained for losing builds); an operator's change clears it.
	StateReason string `json:"state_reason,omitempty"`
	// LastSeen is the time of the member's last heartbeat (lease renewal);
	// zero means never.
	LastSeen time.Time `json:"last_seen"`
	// DownSince, when set, is when the registry learned that the member is
	// down before its lease ran out: it left (a graceful stop) or a build it
	// ran stopped heartbeating. The member is not live until its next
	// heartbeat clears it. DownWhy says which, for people.
	DownSince time.Time `json:"down_since,omitzero"`
	DownWhy   string    `json:"down_why,omitempty"`
	// Running counts the builds running on the member, per queue name.
	Running map[string]int `json:"running,omitempty"`
	// Runtime is RuntimeHost or RuntimeContainer; empty (a member from
	// before runtimes were reported) counts as host.
	Runtime string `json:"runtime,omitempty"`
}

// Isolated reports whether m may run untrusted code (a pull request from a
// fork) on any rule: it is an executor whose builds run in containers.
// Controllers and host-runtime executors are not: a step there can read the
// member's credentials.
func (m Member) Isolated() bool {
	return m.Role == RoleExecutor && m.Runtime == RuntimeContainer
}

// Live reports whether m was seen within timeout before now: LastSeen is set
// and now-LastSeen ≤ timeout. The bound is inclusive, so a member seen
// exactly timeout ago is still live. A LastSeen after now (clock skew
// between hosts) counts as live.
//
// A member marked down (DownSince set) is not live whatever LastSeen says.
func (m Member) Live(now time.Time, timeout time.Duration) bool {
	if m.LastSeen.IsZero() || !m.DownSince.IsZero() {
		return false
	}
	return now.Sub(m.LastSeen) <= timeout
}

// Serves reports whether m takes builds of queue: controllers serve every
// queue; an executor serves the queues it lists, or all of them when it
// lists AllQueues.
func (m Member) Serves(queue string) bool {
	if m.Role == RoleController {
		return true
	}
	return slices.Contains(m.Queues, queue) || slices.Contains(m.Queues, AllQueues)
}
