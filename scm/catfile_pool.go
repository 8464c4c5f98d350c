package scm

import (
	"context"
	"os"
	"sync"
	"time"
)

// A controller reads every event's spec and commit with a cat-file
// session on the pipeline's mirror; starting git for each read cost more
// than the read (a process, git's start-up, its configuration: a read
// took 2.7-3.1 ms here, 0.2-0.3 ms through a kept session). A session is
// kept after a read, one per mirror, and taken by the next read; it ends
// after catFileIdle without one. A long-lived session sees what later fetches bring: git
// looks its packs up again when an object is not in those it knows, and
// the questions name commits by sha, never by ref. A session kept for a
// directory that was replaced since (a damaged mirror renewed) is closed
// rather than used.

// catFileIdle is how long a kept session waits for its next read.
const catFileIdle = 30 * time.Second

// maxKeptCatFiles bounds the sessions kept at once (a process each): a
// controller of many pipelines keeps those of the busiest, the others
// start git for a read as before.
const maxKeptCatFiles = 32

// keptCatFiles holds the idle session of each repository.
var keptCatFiles = struct {
	mu    sync.Mutex
	byDir map[string]*catFile
}{byDir: map[string]*catFile{}}

// takeCatFile returns a session on dir for one read under ctx: the one
// kept for dir, or a new one. When ctx ends during the read, the session
// is killed (its answer may be half read) and not kept.
func takeCatFile(ctx context.Context, dir string) (*catFile, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keptCatFiles.mu.Lock()
	s := keptCatFiles.byDir[dir]
	delete(keptCatFiles.byDir, dir)
	keptCatFiles.mu.Unlock()
	if s != nil {
		s.idle.Stop() // its closing, if under way, finds it taken
		if st, err := os.Stat(dir); err != nil || !os.SameFile(st, s.dirInfo) {
			// The repository was set aside and made again (a damaged
			// mirror renewed): the session reads the old one.
			_ = s.close()
			s = nil
		}
	}
	if s == nil {
		var err error
		if s, err = startCatFile(ctx, dir); err != nil {
			return nil, err
		}
	}
	s.ctx = ctx
	// The process, not s.cmd, which a broken session clears meanwhile.
	proc := s.cmd.Process
	s.stop = context.AfterFunc(ctx, func() { _ = proc.Kill() })
	return s, nil
}

// release ends one read (err: how it ended): a session that answered
// every question and was not killed is kept for the next read on its
// repository (unless one is kept already, or maxKeptCatFiles are), any
// other is closed; the result is err, or the session's own error when it
// exited badly.
func (s *catFile) release(err error) error {
	killed := !s.stop()
	if err != nil || killed || s.cmd == nil {
		if cerr := s.close(); err == nil {
			err = cerr
		}
		return err
	}
	keptCatFiles.mu.Lock()
	if keptCatFiles.byDir[s.dir] != nil || len(keptCatFiles.byDir) >= maxKeptCatFiles {
		keptCatFiles.mu.Unlock()
		return s.close()
	}
	keptCatFiles.byDir[s.dir] = s
	s.idle = time.AfterFunc(catFileIdle, func() {
		keptCatFiles.mu.Lock()
		mine := keptCatFiles.byDir[s.dir] == s
		if mine {
			delete(keptCatFiles.byDir, s.dir)
		}
		keptCatFiles.mu.Unlock()
		if mine {
			_ = s.close()
		}
	})
	keptCatFiles.mu.Unlock()
	return nil
}
