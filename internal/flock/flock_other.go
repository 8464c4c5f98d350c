//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package flock

import (
	"context"
	"errors"
)

// Held is unavailable on this platform.
type Held struct{}

// Lock fails: sluice's mirror cache needs flock(2).
func Lock(_ context.Context, path string) (*Held, error) {
	return nil, errors.New("lock " + path + ": file locking is not supported on this platform")
}

// Unlock does nothing.
func (l *Held) Unlock() error { return nil }
