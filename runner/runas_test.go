package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// TestRunAsIsolatesTheStep: with Spec.RunAs a step runs as that uid (65534,
// "nobody": no user is created), cannot read a 0700 directory of the
// executor nor /proc/<executor>/environ (where its token is), gets none of
// the executor's variables, and can write its workspace, its HOME and the
// shell state that carries over to the next shell, but not the control
// directory or a file its checkout shares with the executor's mirror.
func TestRunAsIsolatesTheStep(t *testing.T) { //nolint:paralleltest // sets the process environment
	if os.Geteuid() != 0 {
		t.Skipf("running a step as another uid needs root; this test runs as uid %d", os.Geteuid())
	}
	t.Setenv("SLUICE_TOKEN", "executor-token-0123456789")
	ra, err := runner.ParseRunAs("65534")
	require.NoError(t, err)
	require.Equal(t, uint32(65534), ra.UID)

	base, err := os.MkdirTemp("", "sluice-runas-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o711))
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(data, "secret.key"), []byte("THE-SECRET-KEY"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(data, "object"), []byte("shared object\n"), 0o444))
	ws := filepath.Join(base, "work", "p", "job", "1", "attempt-1")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "src", "checkout.txt"), []byte("checked out\n"), 0o644))
	require.NoError(t, os.Link(filepath.Join(data, "object"), filepath.Join(ws, "object")))
	require.NoError(t, os.Symlink(filepath.Join(data, "secret.key"), filepath.Join(ws, "link")))
	ctl := ws + ".ctl"
	require.NoError(t, os.Mkdir(ctl, 0o700))

	sink := newMemSink()
	res := runner.Run(context.Background(), runner.Spec{
		Dir: ws, ControlDir: ctl, RunAs: ra, Logs: sink, KillGrace: 500 * time.Millisecond,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "DATA=" + data, "CTL=" + ctl, "WS=" + ws},
		Steps: []runner.Step{
			step("who", "id -u; id -g; id -G"),
			step("data", `cat "$DATA/secret.key" 2>/dev/null && echo LEAK-FILE; ls "$DATA" 2>/dev/null && echo LEAK-LIST; cat link 2>/dev/null && echo LEAK-LINK; echo data-done`),
			step("environ", `cat /proc/$PPID/environ 2>/dev/null && echo LEAK-ENVIRON; echo "token=${SLUICE_TOKEN:-unset}"`),
			step("workspace", `echo more >> src/checkout.txt && touch new && mkdir -p sub/dir && cd sub && export CARRIED=yes && echo ws-ok`),
			step("home", `touch "$HOME/.cache-test" && echo "home-ok $HOME"`),
			step("control", `touch "$CTL/planted" 2>/dev/null && echo LEAK-CTL; { echo more >> "$WS/object"; } 2>/dev/null && echo LEAK-OBJECT; echo ctl-done`),
			step("exit", "exit 0"), // the next step runs in a new shell, restored from the saved state
			step("restored", `echo "cwd=$(pwd) carried=$CARRIED"`),
		},
	})
	require.Equal(t, runner.StatusSuccess, res.Status, "%s\n%v", res.Reason, sink.logs)
	require.Equal(t, "65534\n65534\n65534\n", sink.log("who"))
	require.Equal(t, "data-done\n", sink.log("data"))
	require.Equal(t, "token=unset\n", sink.log("environ"))
	require.Equal(t, "ws-ok\n", sink.log("workspace"))
	require.Equal(t, "home-ok "+filepath.Join(ctl, "home")+"\n", sink.log("home"))
	require.Equal(t, "ctl-done\n", sink.log("control"))
	require.Equal(t, "cwd="+filepath.Join(ws, "sub")+" carried=yes\n", sink.log("restored"))

	b, err := os.ReadFile(filepath.Join(ws, "src", "checkout.txt"))
	require.NoError(t, err)
	require.Equal(t, "checked out\nmore\n", string(b))
	fi, err := os.Stat(filepath.Join(data, "object"))
	require.NoError(t, err)
	require.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "the file shared with the mirror stays the executor's")
	fi, err = os.Stat(filepath.Join(data, "secret.key"))
	require.NoError(t, err)
	require.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "a link in the workspace is not followed")
}

func TestParseRunAs(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "root", "0", "0:0"} {
		ra, err := runner.ParseRunAs(s)
		require.NoError(t, err, s)
		require.Nil(t, ra, "%q runs builds as the executor's own user", s)
	}
	ra, err := runner.ParseRunAs("1234:5678")
	require.NoError(t, err)
	require.Equal(t, runner.RunAs{UID: 1234, GID: 5678, Name: "1234:5678"}, *ra)
	for _, s := range []string{"-1", "12:ab", "a b", "1:2:3", "Robert'); DROP"} {
		_, err := runner.ParseRunAs(s)
		require.ErrorContains(t, err, "want a user name or uid[:gid]", s)
	}
	_, err = runner.ParseRunAs("no-such-user-here")
	require.ErrorContains(t, err, `no user "no-such-user-here"`)
}
