//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package scm

import (
	"context"
	"errors"
)

// fileLock is unavailable on this platform.
type fileLock struct{}

// lockFile fails: sluice's mirror cache needs flock(2).
func lockFile(_ context.Context, path string) (*fileLock, error) {
	return nil, errors.New("lock " + path + ": file locking is not supported on this platform")
}

// unlock does nothing.
func (l *fileLock) unlock() error { return nil }
