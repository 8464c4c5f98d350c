// Package shared lets concurrent callers share a read that is under way.
package shared

import (
	"context"
	"sync"
	"time"
)

// Reads shares reads under way by key: a caller that asks while a read of
// its key runs waits for that read's answer instead of starting its own,
// so the answer is at most one round trip older than its own read would
// have been. A read runs with a context of its own (the first caller's
// values, not its deadline), which is cancelled once every caller waiting
// for it has given up. No answer is kept once its read ended, except the
// last one of a key read with DoKept (see Standing). The zero value is
// ready to use.
type Reads[K comparable, V any] struct {
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu    sync.Mutex
	reads map[K]*read[V]
	kept  map[K]keptAnswer[V]
}

// keptAnswer is a read's answer and when the read began.
type keptAnswer[V any] struct {
	v     V
	began time.Time
}

// Standing returns key's last answer that DoKept read without error, when
// its read began less than within ago.
func (s *Reads[K, V]) Standing(key K, within time.Duration) (V, bool) {
	s.mu.Lock()
	k, ok := s.kept[key]
	s.mu.Unlock()
	if !ok || s.now().Sub(k.began) >= within {
		var zero V
		return zero, false
	}
	return k.v, true
}

func (s *Reads[K, V]) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
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
	return s.do(ctx, key, fn, false)
}

// DoKept is Do, and the answer of a read it starts, when read without
// error, is key's last for Standing (unless a read begun later answered
// first).
func (s *Reads[K, V]) DoKept(ctx context.Context, key K, fn func(context.Context) (V, error)) (v V, joined bool, err error) {
	return s.do(ctx, key, fn, true)
}

func (s *Reads[K, V]) do(ctx context.Context, key K, fn func(context.Context) (V, error), keep bool) (v V, joined bool, err error) {
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
			began := s.now()
			v, err := fn(rctx)
			s.mu.Lock()
			r.v, r.err = v, err
			if keep && err == nil {
				s.keep(key, v, began)
			}
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

// keep records an answer as key's last, unless a later read's is kept
// already.
func (s *Reads[K, V]) keep(key K, v V, began time.Time) {
	if k, ok := s.kept[key]; ok && !k.began.Before(began) {
		return
	}
	if s.kept == nil {
		s.kept = map[K]keptAnswer[V]{}
	}
	s.kept[key] = keptAnswer[V]{v: v, began: began}
}
