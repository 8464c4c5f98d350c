//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Held is an exclusive advisory lock (flock(2)) on a lock file. flock
// locks belong to the open file description, so two goroutines of one process
// exclude each other just as two processes do.
type Held struct {
	f *os.File
}

// Lock takes an exclusive lock on path (created if needed), polling until
// it is free or ctx ends.
func Lock(ctx context.Context, path string) (*Held, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &Held{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-timer.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// Unlock releases the lock.
func (l *Held) Unlock() error {
	errUnlock := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return errors.Join(errUnlock, l.f.Close())
}
