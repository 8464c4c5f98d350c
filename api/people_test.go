package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/queue"
)

// The people: section maps a person's name and groups to the union of
// their grants; a mistake names the grant at fault and loads nothing.
func TestPeopleGrants(t *testing.T) {
	t.Parallel()
	tokens, err := api.ParseTokens([]byte(`
tokens:
  - {user: ci, token: ci-token-0123456789abc}
people:
  user-claim: preferred_username
  grants:
    - {group: ops, privileges: [manage-executors]}
    - {group: release, roles: [release], privileges: [manage-pipelines]}
    - {user: dana, roles: [release, qa], privileges: [define-queues]}
`))
	require.NoError(t, err)
	g := tokens.People()
	require.Equal(t, "preferred_username", g.UserClaim)
	require.Equal(t, "groups", g.GroupsClaim, "the default")
	require.Equal(t, queue.Identity{User: "dana", Roles: []string{"qa", "release"}, Privileges: []string{"define-queues", "manage-executors", "manage-pipelines"}},
		g.Identity("dana", []string{"release", "ops", "other"}))
	require.Equal(t, queue.Identity{User: "eve"}, g.Identity("eve", []string{"other"}), "no grant: no roles, no privileges")
	require.Equal(t, []string{"ops", "release"}, g.Relevant([]string{"release", "other", "ops"}))
	require.NoError(t, g.Check("dana"))
	require.ErrorContains(t, g.Check("ci"), "user of sluice's tokens file")
	require.ErrorContains(t, g.Check("system"), "user of sluice's tokens file")
	require.ErrorContains(t, g.Check(""), `no "preferred_username" claim`)

	// Without a people: section, defaults and no grants.
	plain, err := api.ParseTokens([]byte("tokens:\n  - {user: ci, token: ci-token-0123456789abc}\n"))
	require.NoError(t, err)
	require.Equal(t, "email", plain.People().UserClaim)
	require.Equal(t, queue.Identity{User: "a@example.com"}, plain.People().Identity("a@example.com", []string{"ops"}))

	for _, tc := range []struct{ name, people, want string }{
		{"neither user nor group", "    - {privileges: [manage-executors]}", "people.grants[0]: set user or group"},
		{"both", "    - {user: a, group: b}", "people.grants[0]: set user or group, not both"},
		{"unknown privilege", "    - {group: ops, privileges: [root]}", `people.grants[0]: unknown privilege "root"`},
		{"a token user", "    - {user: ci, privileges: [define-queues]}", `people.grants[0]: user "ci" is a user of the tokens file`},
		{"empty role", "    - {group: ops, roles: [' ']}", "people.grants[0]: empty role"},
		{"unknown field", "    - {group: ops, privilege: [define-queues]}", "field privilege not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := api.ParseTokens([]byte("tokens:\n  - {user: ci, token: ci-token-0123456789abc}\npeople:\n  grants:\n" + tc.people + "\n"))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
