package queue

import (
	"fmt"
	"slices"
	"strings"
)

// PrivilegeDefineQueues lets an identity create, change and delete queues
// (FlowForce's "Define execution queues" privilege).
const PrivilegeDefineQueues = "define-queues"

// PrivilegeAll grants every privilege and the use of every queue, whatever
// its UseRoles. Only the System identity should carry it.
const PrivilegeAll = "*"

// SystemUser is the user name of the System identity.
const SystemUser = "system"

// Identity is who asks for something: an authenticated user with roles and
// privileges, as the API's authentication layer resolved them. An Identity
// with an empty User is anonymous (unauthenticated) and is refused every
// action.
type Identity struct {
	// User is the authenticated user name; empty means anonymous.
	User string `json:"user"`
	// Roles are the user's roles; queues restrict use by role.
	Roles []string `json:"roles,omitempty"`
	// Privileges are global rights such as PrivilegeDefineQueues.
	Privileges []string `json:"privileges,omitempty"`
}

// System returns the identity of the system itself: user SystemUser with
// PrivilegeAll, so it may define and use every queue. Use it for the
// orchestrator's own actions (creating DefaultQueue at start-up) and as the
// identity of every request when authentication is turned off for local
// development: with auth off, everyone is the system, which is the honest
// description of an unprotected install. It is a plain value, so it
// survives serialisation into workflow inputs.
func System() Identity {
	return Identity{User: SystemUser, Privileges: []string{PrivilegeAll}}
}

// Has reports whether id carries privilege, directly or through
// PrivilegeAll.
func (id Identity) Has(privilege string) bool {
	return slices.Contains(id.Privileges, privilege) || slices.Contains(id.Privileges, PrivilegeAll)
}

// CanDefine returns nil when id may create, change or delete queues: it is
// authenticated and has PrivilegeDefineQueues. Otherwise the error names the
// user and the missing privilege and wraps ErrForbidden.
func CanDefine(id Identity) error {
	if id.User == "" {
		return newProblem(ErrForbidden, fmt.Sprintf("anonymous user may not define queues: log in as a user with privilege %q", PrivilegeDefineQueues))
	}
	if !id.Has(PrivilegeDefineQueues) {
		return newProblem(ErrForbidden, fmt.Sprintf("user %q may not define queues: missing privilege %q", id.User, PrivilegeDefineQueues))
	}
	return nil
}

// CanUse returns nil when id may assign jobs to q: any authenticated user
// when q.UseRoles is empty, otherwise a user holding at least one of those
// roles (or PrivilegeAll). The error names the user, the queue and the
// allowed roles and wraps ErrForbidden.
func CanUse(id Identity, q Queue) error {
	if id.User == "" {
		return newProblem(ErrForbidden, fmt.Sprintf("anonymous user may not use queue %s: log in first", queueLabel(q.Name)))
	}
	if len(q.UseRoles) == 0 || id.Has(PrivilegeAll) {
		return nil
	}
	for _, r := range id.Roles {
		if slices.Contains(q.UseRoles, r) {
			return nil
		}
	}
	has := "no roles"
	if len(id.Roles) > 0 {
		has = "roles " + strings.Join(id.Roles, ", ")
	}
	return newProblem(ErrForbidden, fmt.Sprintf("user %q may not use queue %s: it is restricted to roles %s, and the user has %s",
		id.User, queueLabel(q.Name), strings.Join(q.UseRoles, ", "), has))
}
