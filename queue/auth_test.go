package queue_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/queue"
)

func TestCanDefine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		id      queue.Identity
		wantErr string
	}{
		{name: "has the privilege", id: queue.Identity{User: "ada", Privileges: []string{"other", queue.PrivilegeDefineQueues}}},
		{name: "system", id: queue.System()},
		{
			name: "lacks the privilege", id: queue.Identity{User: "bob", Roles: []string{"admin"}, Privileges: []string{"define-jobs"}},
			wantErr: `user "bob" may not define queues: missing privilege "define-queues"`,
		},
		{
			name: "no privileges", id: queue.Identity{User: "bob"},
			wantErr: `user "bob" may not define queues: missing privilege "define-queues"`,
		},
		{
			name: "anonymous even with the privilege", id: queue.Identity{Privileges: []string{queue.PrivilegeDefineQueues}},
			wantErr: `anonymous user may not define queues: log in as a user with privilege "define-queues"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := queue.CanDefine(tt.id)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, queue.ErrForbidden)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestCanUse(t *testing.T) {
	t.Parallel()
	open := queue.Queue{Name: "default"}
	gpu := queue.Queue{Name: "gpu", UseRoles: []string{"ml", "infra"}}
	tests := []struct {
		name    string
		id      queue.Identity
		queue   queue.Queue
		wantErr string
	}{
		{name: "open queue, any user", id: queue.Identity{User: "bob"}, queue: open},
		{name: "restricted queue, matching role", id: queue.Identity{User: "ada", Roles: []string{"dev", "ml"}}, queue: gpu},
		{name: "system uses restricted queues", id: queue.System(), queue: gpu},
		{
			name: "restricted queue, other roles", id: queue.Identity{User: "bob", Roles: []string{"dev", "qa"}}, queue: gpu,
			wantErr: `user "bob" may not use queue gpu: it is restricted to roles ml, infra, and the user has roles dev, qa`,
		},
		{
			name: "restricted queue, no roles", id: queue.Identity{User: "bob"}, queue: gpu,
			wantErr: `user "bob" may not use queue gpu: it is restricted to roles ml, infra, and the user has no roles`,
		},
		{
			name: "define privilege does not grant use", id: queue.Identity{User: "bob", Privileges: []string{queue.PrivilegeDefineQueues}}, queue: gpu,
			wantErr: `user "bob" may not use queue gpu: it is restricted to roles ml, infra, and the user has no roles`,
		},
		{
			name: "anonymous on an open queue", id: queue.Identity{}, queue: open,
			wantErr: "anonymous user may not use queue default: log in first",
		},
		{
			name: "anonymous with a matching role", id: queue.Identity{Roles: []string{"ml"}}, queue: gpu,
			wantErr: "anonymous user may not use queue gpu: log in first",
		},
		{
			name: "role names are case-sensitive", id: queue.Identity{User: "ada", Roles: []string{"ML"}}, queue: gpu,
			wantErr: `user "ada" may not use queue gpu: it is restricted to roles ml, infra, and the user has roles ML`,
		},
		{
			name: "queue name with a space is quoted", id: queue.Identity{User: "bob"}, queue: queue.Queue{Name: "gpu pool", UseRoles: []string{"ml"}},
			wantErr: `user "bob" may not use queue "gpu pool": it is restricted to roles ml, and the user has no roles`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := queue.CanUse(tt.id, tt.queue)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, queue.ErrForbidden)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestSystemIdentity(t *testing.T) {
	t.Parallel()
	sys := queue.System()
	require.Equal(t, queue.SystemUser, sys.User)
	require.True(t, sys.Has(queue.PrivilegeDefineQueues))
	require.True(t, sys.Has("anything-added-later"))

	// The identity survives a trip through a workflow input.
	data, err := json.Marshal(sys)
	require.NoError(t, err)
	var back queue.Identity
	require.NoError(t, json.Unmarshal(data, &back))
	require.NoError(t, queue.CanDefine(back))
	require.NoError(t, queue.CanUse(back, queue.Queue{Name: "gpu", UseRoles: []string{"ml"}}))

	// Returned by value: changing one copy does not change the next.
	sys.Privileges[0] = "none"
	require.True(t, queue.System().Has(queue.PrivilegeDefineQueues))
}
