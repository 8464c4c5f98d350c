// Package shared lets concurrent callers share a read that is under way.
package shared

import (
	"context"
	"sync"
)

// Reads shares reads under way by key: a caller that asks while a read of
// its key runs waits for that read's answer instead of starting its own,
// so the answer is at most one round trip older than its own read would
// have been. No answer is kept once its read ended. A read runs with a
// context of its own (the first caller's values, not its deadline), which
// is cancelled once every caller waiting for it has given up. The zero
// value is ready to use.
type Reads[K comparable, V any] struct {
	mu    sync.Mutex
	reads map[K]*read[V]
}

type read[V any] struct {
	done    chan struct{}
	cancel  context.CancelFunc
	waiting int
	v       V
	err     error
}

// Do returns the answer of the read of key under way, or of fn started now
// for it; joined reports whether it shared a read under way. A caller whose
// ctx ends stops waiting and gets ctx's cause.
func (s *Reads[K, V]) Do(ctx context.Context, key K, fn func(context.Context) (V, error)) (v V, joined bool, err error) {
	s.mu.Lock()
	r := s.reads[key]
	joined = r != nil
	if r == nil {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r = &read[V]{done: make(chan struct{}), cancel: cancel}
		if s.reads == nil {
			s.reads = map[K]*read[V]{}
		}
		s.reads[key] = r
		go func() {
			v, err := fn(rctx)
			s.mu.Lock()
			r.v, r.err = v, err
			s.forget(key, r)
			s.mu.Unlock()
			cancel()
			close(r.done)
		}()
	}
	r.waiting++
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.v, joined, r.err
	case <-ctx.Done():
		s.mu.Lock()
		if r.waiting--; r.waiting == 0 {
			r.cancel()
			s.forget(key, r)
		}
		s.mu.Unlock()
		return v, joined, context.Cause(ctx)
	}
}

// Waiting is how many callers wait for the read of key under way (tests).
func (s *Reads[K, V]) Waiting(key K) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.reads[key]; r != nil {
		return r.waiting
	}
	return 0
}

// forget drops r as key's read under way, unless another took its place.
func (s *Reads[K, V]) forget(key K, r *read[V]) {
	if s.reads[key] == r {
		delete(s.reads, key)
	}
}
