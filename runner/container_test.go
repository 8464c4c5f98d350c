package runner_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/runner"
)

// startContainer starts a podman container of the test image with the
// spec's workspace and a control directory mounted, removed at cleanup.
func startContainer(t *testing.T, spec *runner.Spec) *runner.Container {
	t.Helper()
	return startContainerOn(t, spec, "")
}

// startContainerOn is startContainer on a network ("" the runtime's default).
func startContainerOn(t *testing.T, spec *runner.Spec, network string) *runner.Container {
	t.Helper()
	return startContainerOf(t, spec, testenv.TestImage, network)
}

// startContainerOf starts a container of image for spec.
func startContainerOf(t *testing.T, spec *runner.Spec, image, network string) *runner.Container {
	t.Helper()
	testenv.Podman(t)
	spec.ControlDir = filepath.Join(t.TempDir(), "ctl")
	require.NoError(t, os.MkdirAll(spec.ControlDir, 0o700))
	name := "sluice-runner-test-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	c, err := runner.StartContainer(t.Context(), runner.ContainerOptions{
		Runtime: runner.RuntimePodman, Image: image, Name: name,
		Labels:  map[string]string{"sluice.test": "runner"},
		Mounts:  map[string]string{spec.Dir: "/sd/workspace/src/repo", spec.ControlDir: "/sd/sluice"},
		Workdir: "/sd/workspace/src/repo",
		Network: network,
	}, "/sd/workspace/src/repo", "/sd/sluice")
	require.NoError(t, err)
	t.Cleanup(func() { _ = runner.RemoveContainer(context.Background(), runner.RuntimePodman, c.ID) })
	spec.Container = c
	return c
}

func TestRunInContainer(t *testing.T) {
	spec, sink := setup(t,
		step("inside", "cat "+testenv.TestImageMarker+"; pwd; echo from-step > made.txt; export FOO=bar; mkdir sub; cd sub"),
		step("next", `echo "$FOO|$(pwd)|$SLUICE_TEST_VAR"; exit 3`),
		step("teardown-x", `echo "$FOO|$(pwd)"`),
	)
	spec.Env = append(spec.Env, "SLUICE_TEST_VAR=from spec")
	startContainer(t, &spec)

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status, res.Reason)
	require.Equal(t, `step "next" exited with code 3`, res.Reason)
	require.Equal(t, "sluice-test-image\n/sd/workspace/src/repo\n", sink.log("inside"))
	require.Equal(t, "bar|/sd/workspace/src/repo/sub|from spec\n", sink.log("next"))
	require.Equal(t, "bar|/sd/workspace/src/repo/sub\n", sink.log("teardown-x"))
	b, err := os.ReadFile(filepath.Join(spec.Dir, "made.txt"))
	require.NoError(t, err)
	require.Equal(t, "from-step\n", string(b), "the workspace is the host's")
}

func TestRunInContainerCancel(t *testing.T) {
	spec, sink := setup(t,
		step("service", "sleep 600 &"),
		step("wait", "touch started; sleep 600"),
		step("teardown-x", "echo tore down"),
	)
	c := startContainer(t, &spec)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	done := make(chan runner.Result, 1)
	go func() { done <- runner.Run(ctx, spec) }()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(spec.Dir, "started"))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	var res runner.Result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}

	require.Equal(t, runner.StatusAborted, res.Status)
	require.Equal(t, `aborted in step "wait"`, res.Reason)
	require.Equal(t, "tore down\n", sink.log("teardown-x"))
	out, err := exec.CommandContext(t.Context(), "podman", "exec", c.ID, "ps", "-o", "pid,args").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NotContains(t, string(out), "sleep 600", "the build's processes are gone from the container")
}

func TestRunInContainerTimeout(t *testing.T) {
	spec, sink := setup(t,
		step("slow", "export KEPT=yes; sleep 600"),
		step("teardown-x", `echo "${KEPT-unset}"`),
	)
	spec.Timeout = 500 * time.Millisecond
	startContainer(t, &spec)

	start := time.Now()
	res := runner.Run(t.Context(), spec)

	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, runner.StatusTimeout, res.Status, res.Reason)
	require.Equal(t, `timed out after 500ms in step "slow"`, res.Reason)
	require.Equal(t, "unset\n", sink.log("teardown-x"), "the killed step's exports are lost; teardown runs in a fresh shell")
}

func TestRunInVanishedContainer(t *testing.T) {
	spec, sink := setup(t, step("a", "true"), step("teardown-x", "true"))
	c := startContainer(t, &spec)
	require.NoError(t, runner.RemoveContainer(t.Context(), runner.RuntimePodman, c.ID))

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusFailure, res.Status, res.Reason)
	require.NotZero(t, res.Steps[0].ExitCode)
	require.Contains(t, sink.log("a"), "sluice: podman exec: ", "the runtime's message is in the step log")
	require.Contains(t, res.Steps[0].Err, "podman exec")
}

// Build containers run without most capabilities and cannot gain privileges
// (review: "--cap-drop=ALL plus the few capabilities builds need, a pids
// limit and no-new-privileges").
func TestContainerIsConfined(t *testing.T) {
	spec, sink := setup(t, step("caps", `grep -E '^(CapEff|NoNewPrivs)' /proc/self/status`))
	startContainer(t, &spec)

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	out := sink.log("caps")
	require.Contains(t, out, "CapEff:\t00000000000004fb", "CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE only")
	require.Contains(t, out, "NoNewPrivs:\t1")
}

func TestContainerRefusesAnOptionAsImage(t *testing.T) {
	t.Parallel()
	_, err := runner.StartContainer(t.Context(), runner.ContainerOptions{Runtime: runner.RuntimePodman, Image: "--privileged", Name: "x"}, "/w", "/c")
	var ie *runner.ImageError
	require.ErrorAs(t, err, &ie)
	require.Contains(t, err.Error(), "not an image reference")
}

// SLUICE_CONTAINER_NETWORK: a build container joins the network named (here
// "none": loopback only), and a network that would share the host's or
// another container's is refused before anything runs.
func TestContainerJoinsItsNetwork(t *testing.T) {
	spec, sink := setup(t, step("net", `ls /sys/class/net`))
	startContainerOn(t, &spec, "none")

	res := runner.Run(t.Context(), spec)

	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, "lo\n", sink.log("net"))

	for _, network := range []string{"host", "container:temporal", "--privileged"} {
		_, err := runner.StartContainer(t.Context(), runner.ContainerOptions{Runtime: runner.RuntimePodman, Image: "alpine", Name: "x", Network: network}, "/w", "/c")
		require.ErrorContains(t, err, "container network", network)
	}
}

// N7: an image whose USER is not root runs its steps all the same (they
// used to fail at once: "can't create /sd/sluice/status-0: Permission
// denied"), as the executor, so every file they leave in the workspace is
// the executor's to remove.
func TestRunInNonRootImage(t *testing.T) {
	t.Parallel()
	spec, sink := setup(t, step("write", "id -u; echo made > made.txt; mkdir -p deep/er; echo x > deep/er/f"))
	startContainerOf(t, &spec, testenv.TestImageNonRoot, "")
	res := runner.Run(t.Context(), spec)
	require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
	require.Equal(t, strconv.Itoa(os.Geteuid())+"\n", sink.log("write"), "the step runs as the executor")
	info, err := os.Stat(filepath.Join(spec.Dir, "deep", "er", "f"))
	require.NoError(t, err)
	require.Equal(t, uint32(os.Geteuid()), info.Sys().(*syscall.Stat_t).Uid, "the executor owns what the build left")
	require.NoError(t, os.RemoveAll(spec.Dir), "the workspace can be removed")
}

func TestContainerUserArgs(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"--user", "0:0"}, runner.ContainerUserArgs(runner.RuntimeDocker, 0, 0))
	require.Equal(t, []string{"--user", "0:0"}, runner.ContainerUserArgs(runner.RuntimePodman, 0, 0))
	require.Equal(t, []string{"--user", "10001:10001"}, runner.ContainerUserArgs(runner.RuntimeDocker, 10001, 10001))
	require.Equal(t, []string{"--userns=keep-id", "--user", "1000:1000"}, runner.ContainerUserArgs(runner.RuntimePodman, 1000, 1000))
}
