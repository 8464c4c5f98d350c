package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/queue"
)

// People: persons who sign in to the pages with OpenID Connect (oidc.go),
// hold a signed session cookie (sessions.go) and may mint personal tokens
// for the CLI (personal_tokens.go). What a person may do comes from the
// tokens file's people: section, next to the API tokens:
//
//	people:
//	  user-claim: email        # the claim that names the person (default email)
//	  groups-claim: groups     # the claim whose values grants match (default groups)
//	  grants:
//	    - group: ci-admins     # a value of the groups claim
//	      roles: [app-team]
//	      privileges: [manage-pipelines]
//	    - user: alice@example.com
//	      privileges: [define-queues]
//
// A person's roles and privileges are the union of the grants that name
// them or one of their groups; a person no grant names signs in with none
// (they read, as any token does, and administer only pipelines whose
// admins name them). Person names and the tokens file's users are apart: a
// sign-in whose name is a user of the file (or "system") is refused, so an
// identity provider cannot hand out a machine's token identity.
type peopleSection struct {
	UserClaim   string       `yaml:"user-claim"`
	GroupsClaim string       `yaml:"groups-claim"`
	Grants      []grantEntry `yaml:"grants"`
}

type grantEntry struct {
	User       string   `yaml:"user"`
	Group      string   `yaml:"group"`
	Roles      []string `yaml:"roles"`
	Privileges []string `yaml:"privileges"`
}

// Grants maps people (their user claim and groups claim) to roles and
// privileges.
type Grants struct {
	// UserClaim and GroupsClaim name the ID token claims read.
	UserClaim, GroupsClaim string
	grants                 []grantEntry
	// reserved are the user names a person may not take: the tokens
	// file's users and the system.
	reserved map[string]bool
}

// parseGrants checks a people: section; reserved are the tokens file's
// users.
func parseGrants(s peopleSection, reserved map[string]bool) (*Grants, error) {
	g := &Grants{UserClaim: s.UserClaim, GroupsClaim: s.GroupsClaim, grants: s.Grants, reserved: reserved}
	if g.UserClaim == "" {
		g.UserClaim = "email"
	}
	if g.GroupsClaim == "" {
		g.GroupsClaim = "groups"
	}
	var errs []error
	for i, e := range s.Grants {
		where := fmt.Sprintf("people.grants[%d]", i)
		switch {
		case e.User == "" && e.Group == "":
			errs = append(errs, fmt.Errorf("%s: set user or group", where))
			continue
		case e.User != "" && e.Group != "":
			errs = append(errs, fmt.Errorf("%s: set user or group, not both", where))
			continue
		case e.User != "" && reserved[e.User]:
			errs = append(errs, fmt.Errorf("%s: user %q is a user of the tokens file (or the system): people and token users are kept apart", where, e.User))
			continue
		}
		for _, r := range e.Roles {
			if strings.TrimSpace(r) == "" {
				errs = append(errs, fmt.Errorf("%s: empty role", where))
			}
		}
		for _, p := range e.Privileges {
			if !slices.Contains(KnownPrivileges, p) {
				errs = append(errs, fmt.Errorf("%s: unknown privilege %q (known: %s)", where, p, strings.Join(KnownPrivileges, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

// Check refuses a person's name that is empty, the system's, or a user
// of the tokens file.
func (g *Grants) Check(user string) error {
	switch {
	case strings.TrimSpace(user) == "":
		return fmt.Errorf("the identity provider sent no %q claim to name you by", g.UserClaim)
	case user == queue.SystemUser || g.reserved[user]:
		return fmt.Errorf("%s %q is a user of sluice's tokens file (or the system): people cannot sign in under it", g.UserClaim, user)
	}
	return nil
}

// Relevant keeps the groups some grant names (what a session or a
// personal token needs to remember), sorted.
func (g *Grants) Relevant(groups []string) []string {
	var out []string
	for _, e := range g.grants {
		if e.Group != "" && slices.Contains(groups, e.Group) && !slices.Contains(out, e.Group) {
			out = append(out, e.Group)
		}
	}
	slices.Sort(out)
	return out
}

// Identity is a person's identity: their name and the union of the roles
// and privileges of the grants that name them or one of their groups.
func (g *Grants) Identity(user string, groups []string) queue.Identity {
	id := queue.Identity{User: user}
	for _, e := range g.grants {
		if (e.User != "" && e.User == user) || (e.Group != "" && slices.Contains(groups, e.Group)) {
			for _, r := range e.Roles {
				if !slices.Contains(id.Roles, r) {
					id.Roles = append(id.Roles, r)
				}
			}
			for _, p := range e.Privileges {
				if !slices.Contains(id.Privileges, p) {
					id.Privileges = append(id.Privileges, p)
				}
			}
		}
	}
	slices.Sort(id.Roles)
	slices.Sort(id.Privileges)
	return id
}

// People signs people in to the pages. Personal tokens live in the
// handler's secret store (Deps.Secrets).
type People struct {
	// Grants maps people to roles and privileges (Tokens.People()).
	Grants *Grants
	// OIDC is the identity provider people sign in with (nil: none; the
	// pages then take API tokens only).
	OIDC *OIDC
	// SessionKey signs the session cookies (at least 16 bytes: with a
	// shorter one, no session starts and no cookie is taken for one).
	SessionKey []byte
	// SessionTTL is how long a session lasts (default 12h).
	SessionTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (p *People) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *People) sessionTTL() time.Duration {
	if p.SessionTTL > 0 {
		return p.SessionTTL
	}
	return 12 * time.Hour
}
