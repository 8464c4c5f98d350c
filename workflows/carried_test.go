package workflows

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
)

// roundTrip encodes v as Temporal encodes a continue-as-new input and
// decodes it into a fresh value of the same type.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(t, err)
	var back T
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(payloads, &back))
	return back
}

// requireFieldsCarried fails when a field of the workflow's run state (typ)
// is neither in carried nor explained in drained: a field added later
// must say how it survives continue-as-new.
func requireFieldsCarried(t *testing.T, typ reflect.Type, carried map[string]bool, drained map[string]string) {
	t.Helper()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		_, d := drained[name]
		require.True(t, carried[name] || d, "%s.%s is neither carried through continue-as-new nor rebuilt after it", typ.Name(), name)
	}
}

// The registry continues as new with RegistryInput{Liveness, State}: every
// field of its run is one of them, and every field of the state (queues,
// members with their labels, queues served, running counts, last seen)
// survives the encoding.
func TestRegistryFieldsCarried(t *testing.T) {
	t.Parallel()
	requireFieldsCarried(t, reflect.TypeFor[registry](), map[string]bool{"liveness": true, "st": true},
		map[string]string{
			"clockDirty": "every run starts with it set: the lease clock looks for the next lease end",
			"plans":      "a cache of the queues' evaluation: every run starts without it and evaluates at its first check-in",
		})
	st := RegistryState{}
	fillEveryField(t, reflect.ValueOf(&st).Elem())
	require.NotEmpty(t, st.Members)
	for _, m := range st.Members {
		require.NotNil(t, m)
		require.NotEmpty(t, m.Name)
		require.False(t, m.LastSeen.IsZero())
	}
	in := RegistryInput{Liveness: 7 * time.Second, State: &st}
	back := roundTrip(t, in)
	require.Equal(t, in.Liveness, back.Liveness)
	require.Equal(t, st, *back.State)
}

// The status reporter continues as new with its input, which holds every
// context's wanted and posted state; its index is rebuilt from them.
func TestStatusReporterFieldsCarried(t *testing.T) {
	t.Parallel()
	requireFieldsCarried(t, reflect.TypeFor[statusReporter](), map[string]bool{"in": true},
		map[string]string{"index": "rebuilt from in.Contexts when the next run starts"})
	in := StatusInput{}
	fillEveryField(t, reflect.ValueOf(&in).Elem())
	require.NotNil(t, in.Contexts[0].Posted)
	require.Equal(t, in, roundTrip(t, in))
}
