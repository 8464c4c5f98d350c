package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// postgresBin finds a PostgreSQL server program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin (newest first).
func postgresBin(name string) (string, error) {
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
	return "", fmt.Errorf("%s not found (Debian's postgresql package; .ci/run installs it)", name)
}

// StartPostgres starts a real PostgreSQL server (Debian's binaries: initdb
// into a temporary directory, pg_ctl on a free loopback port) for the test
// and returns its postgres:// URL; the server stops when the test ends. As
// root (PostgreSQL refuses to run as root) the server runs as the
// "postgres" user. The test is skipped, saying why, when PostgreSQL is not
// installed.
func StartPostgres(t testing.TB) string {
	t.Helper()
	initdb, err := postgresBin("initdb")
	if err != nil {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	pgctl, err := postgresBin("pg_ctl")
	if err != nil {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var as []string // the command prefix that runs as the server's user
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chmod(dir, 0o755)) //nolint:gosec // the postgres user must reach its data directory
		require.NoError(t, os.Chown(dir, uid, gid))
		runuser, err := exec.LookPath("runuser")
		require.NoError(t, err, "runuser (util-linux) runs PostgreSQL as the postgres user")
		as = []string{runuser, "-u", "postgres", "--"}
	}
	run := func(args ...string) error {
		full := append(append([]string{}, as...), args...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput() //nolint:gosec // test programs
		if err != nil {
			return fmt.Errorf("%v: %w\n%s", args, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	require.NoError(t, run(initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"))
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300", port, dir)
	require.NoError(t, run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "start"))
	t.Cleanup(func() {
		if err := run(pgctl, "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			t.Logf("stop PostgreSQL: %v", err)
		}
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/temporal?sslmode=disable", port)
}

// freePort returns a free TCP port on loopback.
func freePort(t testing.TB) int {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	require.True(t, ok)
	return addr.Port
}
