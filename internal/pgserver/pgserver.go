// Package pgserver starts a throwaway PostgreSQL server from Debian's
// binaries (initdb into a directory, pg_ctl on a free loopback port) for the
// end-to-end tests and the chaos run. As root, the server runs as the
// "postgres" user (PostgreSQL refuses to run as root).
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// ErrNotInstalled means PostgreSQL's server programs are not on this machine.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (Debian's postgresql package; .ci/run installs it)")

// Server is a running PostgreSQL server.
type Server struct {
	// URL is the postgres:// URL of its "temporal" database (created by
	// sluice's migration) as the superuser, without TLS.
	URL string

	dir, data, pgctl string
	as               []string
}

// bin finds a server program on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin (newest first).
func bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no %s", ErrNotInstalled, name)
}

// Start initialises a cluster in a new temporary directory and starts it;
// Stop stops it and removes the directory.
func Start(ctx context.Context) (*Server, error) {
	initdb, err := bin("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := bin("pg_ctl")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), pgctl: pgctl}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run it as", ErrNotInstalled)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // the postgres user must reach its data directory
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return nil, fmt.Errorf("runuser (util-linux) runs PostgreSQL as the postgres user: %w", err)
		}
		s.as = []string{runuser, "-u", "postgres", "--"}
	}
	if err := s.run(ctx, initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort(ctx)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300", port, dir)
	if err := s.run(ctx, pgctl, "-D", s.data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "start"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/temporal?sslmode=disable", port)
	return s, nil
}

// Stop stops the server at once and removes its directory.
func (s *Server) Stop(ctx context.Context) error {
	err := s.run(ctx, s.pgctl, "-D", s.data, "-m", "immediate", "-w", "stop")
	return errors.Join(err, os.RemoveAll(s.dir))
}

func (s *Server) run(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	full := append(append([]string{}, s.as...), args...)
	out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput() //nolint:gosec // PostgreSQL's own programs
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(args[0]), err, out)
	}
	return nil
}

func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("unexpected address %s", l.Addr())
	}
	return addr.Port, nil
}
