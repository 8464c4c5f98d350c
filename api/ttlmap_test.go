package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTTLMap: a value lasts its ttl; a full map drops the expired first,
// and everything when none has expired.
func TestTTLMap(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var c ttlMap[string, int]
	_, ok := c.get("a", t0)
	require.False(t, ok, "the zero value holds nothing")
	c.put("a", 1, t0, time.Second, 3)
	c.put("b", 2, t0.Add(500*time.Millisecond), time.Second, 3)
	v, ok := c.get("a", t0.Add(999*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, 1, v)
	_, ok = c.get("a", t0.Add(time.Second))
	require.False(t, ok, "expired at put + ttl")

	c.put("c", 3, t0.Add(time.Second), time.Second, 3)
	c.put("d", 4, t0.Add(time.Second), time.Second, 3) // full: a (expired) goes
	require.Len(t, c.m, 3)
	for k, want := range map[string]int{"b": 2, "c": 3, "d": 4} {
		v, ok := c.get(k, t0.Add(time.Second))
		require.True(t, ok, k)
		require.Equal(t, want, v, k)
	}
	c.put("e", 5, t0.Add(time.Second), time.Second, 3) // full, none expired: all go
	require.Len(t, c.m, 1)
	v, ok = c.get("e", t0.Add(time.Second))
	require.True(t, ok)
	require.Equal(t, 5, v)
}
