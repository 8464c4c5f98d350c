package workflows

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/sluice-ci/sluice/queue"
)

func withRuntime(hb Heartbeat, runtime string) Heartbeat {
	hb.Member.Runtime = runtime
	return hb
}

// Only container executors are granted the untrusted task queue of the
// queues they serve; the controller and host-runtime executors are not,
// even on the default queue's controller fallback, unless a rule says
// untrusted-on-host=true.
func TestRegistryUntrustedGrants(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	optIn := queue.Queue{Name: "lab", Rules: []queue.Rule{{RunOn: queue.RunOnExecutors, MaxParallel: 3, UntrustedOnHost: true}}}
	updateAt(env, time.Second, UpdateDefineQueue, DefineQueueRequest{Identity: admin, Mode: DefineCreate, Queue: optIn})
	ctlAlone := updateAt(env, 2*time.Second, UpdateHeartbeat, withRuntime(controller("ctl-1"), queue.RuntimeHost))
	host := updateAt(env, 3*time.Second, UpdateHeartbeat, withRuntime(executor("host-1", "*"), queue.RuntimeHost))
	box := updateAt(env, 4*time.Second, UpdateHeartbeat, withRuntime(executor("box-1", "default"), queue.RuntimeContainer))
	var hostGrant, boxGrant MemberGrant
	at(env, 5*time.Second, func() {
		hostGrant = query[MemberGrant](t, env, QueryMemberGrant, "host-1", "default")
		boxGrant = query[MemberGrant](t, env, QueryMemberGrant, "box-1", "default")
		members := query[[]queue.Member](t, env, QueryMembers)
		got := map[string]string{}
		for _, m := range members {
			got[m.Name] = m.Runtime
		}
		require.Equal(t, map[string]string{"ctl-1": "host", "host-1": "host", "box-1": "container"}, got)
	})
	next := runRegistry(t, env, RegistryInput{Liveness: 30 * time.Second}, time.Minute)

	c := memberView(t, ctlAlone)
	require.Equal(t, 1, c.Slots["default"].Allowed, "trusted builds fall back to the controller")
	require.Empty(t, c.Untrusted, "the controller never polls an untrusted task queue")

	h := memberView(t, host)
	require.Equal(t, 2, h.Slots["default"].Allowed)
	require.Equal(t, []string{"lab"}, sortedKeys(h.Untrusted), "a host executor takes forks' builds only where a rule opts in")
	require.Equal(t, 3, h.Untrusted["lab"].Allowed)
	require.Zero(t, hostGrant.Untrusted.Allowed)

	b := memberView(t, box)
	require.Equal(t, []string{"default"}, sortedKeys(b.Untrusted))
	require.Equal(t, 2, b.Untrusted["default"].Allowed, b.Untrusted["default"].Why)
	require.Equal(t, 2, boxGrant.Untrusted.Allowed)
	require.Contains(t, boxGrant.Untrusted.Why, "pull requests from forks: rule 1")

	require.Equal(t, queue.RuntimeContainer, next.State.Members["box-1"].Runtime, "the runtime is carried through continue-as-new")
}

// Every field of a member that a heartbeat reports is kept by the registry
// (State, LastSeen and DownSince/DownWhy are the registry's own), and every field of the
// registry's state survives continue-as-new: a field added to queue.Member,
// queue.Queue or queue.Rule and not carried fails here.
func TestRegistryStateCarried(t *testing.T) {
	t.Parallel()
	var sent queue.Member
	fillEveryField(t, reflect.ValueOf(&sent).Elem())
	sent.Name, sent.Role, sent.Runtime = "exec-full", queue.RoleExecutor, queue.RuntimeContainer
	env, _ := newEnv(t)
	hb := updateAt(env, time.Second, UpdateHeartbeat, Heartbeat{Member: sent})
	next := runRegistry(t, env, RegistryInput{Liveness: 30 * time.Second}, time.Minute)
	memberView(t, hb)
	kept := *next.State.Members["exec-full"]
	registryOwned := map[string]bool{"State": true, "StateReason": true, "LastSeen": true, "DownSince": true, "DownWhy": true}
	typ := reflect.TypeFor[queue.Member]()
	for i := range typ.NumField() {
		f := typ.Field(i).Name
		if registryOwned[f] {
			continue
		}
		require.Equal(t, reflect.ValueOf(sent).Field(i).Interface(), reflect.ValueOf(kept).Field(i).Interface(),
			"the registry drops queue.Member.%s from heartbeats", f)
	}

	st := RegistryState{}
	fillEveryField(t, reflect.ValueOf(&st).Elem())
	var q queue.Queue
	fillEveryField(t, reflect.ValueOf(&q).Elem())
	st.Queues = map[string]queue.Queue{"k": q}
	m := sent
	m.LastSeen = wfT0
	st.Members = map[string]*queue.Member{"k": &m}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(RegistryInput{Liveness: time.Second, State: &st})
	require.NoError(t, err)
	var back RegistryInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(payloads, &back))
	require.Equal(t, st, *back.State)
	require.True(t, back.State.Queues["k"].Rules[0].UntrustedOnHost)
}
