package api

import (
	"maps"
	"sync"
	"time"
)

// ttlMap keeps values for a while each (put's ttl), at most max of them
// (put's): when full, the expired go first, and everything when none has
// expired. Its zero value is ready to use.
type ttlMap[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

// get returns k's value, if it has not expired at now.
func (c *ttlMap[K, V]) get(k K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.v, ok && now.Before(e.expires)
}

// put keeps v for k until now+ttl, in a map of at most max entries.
func (c *ttlMap[K, V]) put(k K, v V, now time.Time, ttl time.Duration, maxLen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]ttlEntry[V]{}
	}
	if len(c.m) >= maxLen {
		maps.DeleteFunc(c.m, func(_ K, e ttlEntry[V]) bool { return !now.Before(e.expires) })
		if len(c.m) >= maxLen {
			clear(c.m)
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}
