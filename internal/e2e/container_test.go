package e2e

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// readStepLog reads a whole step log of a build's attempt.
func readStepLog(t *testing.T, e *testenv.Env, buildID string, attempt int, step string) string {
	t.Helper()
	c, err := e.API.ReadLog(e.Context(), activities.LogKey(buildID, attempt), step, 0, 1<<20)
	require.NoError(t, err, "log of %s step %s", buildID, step)
	return string(c.Data)
}

// containersOf lists the podman containers labelled as the build's.
func containersOf(t *testing.T, buildID string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "podman", "ps", "-a", "-q",
		"--filter", "label="+activities.LabelBuild+"="+buildID).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// containerEnv is one installation with a podman executor serving queue
// "pod" and a host executor serving queue "onhost", selected by the
// runtime label each registers.
func containerEnv(t *testing.T) *testenv.Env {
	t.Helper()
	testenv.Podman(t)
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	for q, rt := range map[string]string{"pod": "podman", "onhost": "host"} {
		_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: q, Rules: []string{"run-on=executors,max-parallel=2,labels=runtime=" + rt}})
		require.NoError(t, err)
	}
	e.StartExecutor(testenv.ExecutorOptions{Name: "pod-1", Queues: []string{"*"}, Env: []string{"SLUICE_EXECUTOR_RUNTIME=podman"}})
	e.StartExecutor(testenv.ExecutorOptions{Name: "host-1", Queues: []string{"*"}})
	e.WaitExecutorLive("pod-1")
	e.WaitExecutorLive("host-1")
	es, err := e.API.ListExecutors(ctx)
	require.NoError(t, err)
	labels := map[string]string{}
	for _, x := range es {
		labels[x.Name] = x.Labels["runtime"]
	}
	require.Equal(t, "podman", labels["pod-1"])
	require.Equal(t, "host", labels["host-1"])
	return e
}

func TestContainerRuntime(t *testing.T) {
	t.Parallel()
	e := containerEnv(t)
	ctx := e.Context()
	steps := `
      - carry: export FOO=bar; mkdir -p sub; cd sub
      - read: echo "$FOO|${PWD##*/}"`
	spec := fmt.Sprintf(`
shared:
  image: %s
jobs:
  inpod:
    requires: [~commit]
    annotations: {screwdriver.cd/executor: pod}
    secrets: [POD_SECRET]
    steps:
      - secret: echo "s=$POD_SECRET"; test "$POD_SECRET" = 'pod-secret-value' && echo same
      - marker: cat %s
      - source: test "$(pwd)" = "$SD_SOURCE_DIR" && cat "$SD_SOURCE_DIR/hello.txt" && echo made > "$SD_SOURCE_DIR/made.txt"
      - next: cat "$SD_SOURCE_DIR/made.txt"%s
  onhost:
    requires: [~commit]
    annotations: {screwdriver.cd/executor: onhost}
    steps:%s
`, testenv.TestImage, testenv.TestImageMarker, steps, steps)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec, "hello.txt": "hello from the commit\n"})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "ctr", Repo: repo.Dir})
	require.NoError(t, err)
	_, err = e.API.SetSecret(ctx, "ctr", "POD_SECRET", api.SetSecretRequest{Value: "pod-secret-value"})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "ctr", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)

	final := e.WaitEvent(ev.ID, 2*time.Minute)
	pod, host := buildOf(t, final, "inpod"), buildOf(t, final, "onhost")
	require.Equal(t, workflows.StatusSuccess, pod.Status, pod.Reason)
	require.Equal(t, workflows.StatusSuccess, host.Status, host.Reason)
	require.Equal(t, "pod-1", pod.Executor)
	require.Equal(t, "host-1", host.Executor)

	require.Equal(t, "s=***\nsame\n", readStepLog(t, e, pod.ID, 1, "secret"), "the secret reaches the container, masked in the log")
	require.Equal(t, "sluice-test-image\n", readStepLog(t, e, pod.ID, 1, "marker"), "the step runs inside the image")
	require.Equal(t, "hello from the commit\n", readStepLog(t, e, pod.ID, 1, "source"), "SD_SOURCE_DIR holds the checkout")
	require.Equal(t, "made\n", readStepLog(t, e, pod.ID, 1, "next"), "a file written by one step is read by the next")
	require.Equal(t, "bar|sub\n", readStepLog(t, e, pod.ID, 1, "read"), "export and cd carry over in the container")
	require.Empty(t, containersOf(t, pod.ID), "the container is removed after the build")

	hostCarry := readStepLog(t, e, host.ID, 1, "carry")
	require.Contains(t, hostCarry, "image "+testenv.TestImage+" is not used")
	require.Contains(t, hostCarry, "runs steps in a shell on its host")
	require.Equal(t, "bar|sub\n", readStepLog(t, e, host.ID, 1, "read"), "export and cd carry over on the host")
}

func TestContainerCancelAndMissingImage(t *testing.T) {
	t.Parallel()
	e := containerEnv(t)
	ctx := e.Context()
	spec := fmt.Sprintf(`
shared:
  image: %s
  annotations: {screwdriver.cd/executor: pod, screwdriver.cd/cpu: LOW, screwdriver.cd/ram: 1}
jobs:
  long:
    requires: [~commit]
    steps:
      - bg: sleep 600 &
      - wait: sleep 600
  missing:
    requires: [~commit]
    image: localhost/sluice-no-such-image
    steps:
      - never: 'true'
`, testenv.TestImage)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "ctrcancel", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "ctrcancel", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	longID := "ctrcancel/long/" + strconv.Itoa(ev.Number)

	e.WaitFor("the long build's wait step", time.Minute, func() bool {
		ids := containersOf(t, longID)
		if len(ids) != 1 {
			return false
		}
		out, _ := exec.CommandContext(t.Context(), "podman", "exec", ids[0], "ps", "-o", "args").Output()
		return strings.Count(string(out), "sleep 600") == 2
	})
	limits, err := exec.CommandContext(t.Context(), "podman", "inspect", "--format",
		"{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}", containersOf(t, longID)[0]).Output()
	require.NoError(t, err)
	require.Equal(t, "2000000000 1073741824\n", string(limits), "cpu LOW is 2 CPUs, ram 1 is 1 GB")
	cancelled := time.Now()
	require.NoError(t, e.API.CancelBuild(ctx, longID))
	e.WaitFor("the container to be gone", 30*time.Second, func() bool { return len(containersOf(t, longID)) == 0 })
	t.Logf("container removed %s after the cancel", time.Since(cancelled).Round(time.Millisecond))

	final := e.WaitEvent(ev.ID, time.Minute)
	require.Equal(t, workflows.StatusAborted, buildOf(t, final, "long").Status)
	missing := buildOf(t, final, "missing")
	require.Equal(t, workflows.StatusFailure, missing.Status)
	require.Contains(t, missing.Reason, "cannot start a container of image localhost/sluice-no-such-image")
	require.Contains(t, missing.Reason, "localhost/sluice-no-such-image:latest", "the runtime's own message")
	require.Equal(t, 1, missing.Attempts, "an unusable image is the build's failure, not an executor loss")
}

func TestContainerOrphansRemovedOnRestart(t *testing.T) {
	t.Parallel()
	testenv.Podman(t)
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	podEnv := []string{"SLUICE_EXECUTOR_RUNTIME=podman"}
	// A queue of executors only: when the restarted executor's lost build
	// comes back to it before the registry has it up again, the build waits
	// for it instead of falling back to the controller (the default queue's
	// last rule), which runs builds on its host, not in podman.
	_, err := e.API.CreateQueue(ctx, api.QueueRequest{Name: "pods", Rules: []string{"run-on=executors,max-parallel=2"}})
	require.NoError(t, err)
	exec1 := e.StartExecutor(testenv.ExecutorOptions{Name: "podorph-1", Env: podEnv, Queues: []string{"pods"}})
	e.WaitExecutorLive("podorph-1")
	spec := fmt.Sprintf("shared: {image: %s}\njobs:\n  long:\n    requires: [~commit]\n    annotations: {screwdriver.cd/executor: pods}\n    steps:\n      - wait: sleep 600\n", testenv.TestImage)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "ctrorph", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "ctrorph", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	longID := "ctrorph/long/" + strconv.Itoa(ev.Number)
	var first string
	e.WaitFor("the build's container", time.Minute, func() bool {
		ids := containersOf(t, longID)
		if len(ids) == 1 {
			first = ids[0]
		}
		return first != ""
	})
	t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", "-t", "0", first).Run() }) //nolint:noctx // cleanup after the test's context ended

	// Without its reaper (killed too), a SIGKILLed executor leaves its
	// container behind until it starts again.
	for _, pid := range reapersOf(t, "podorph-1") {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	exec1.Kill()
	require.Contains(t, containersOf(t, longID), first, "a SIGKILLed executor with no reaper leaves its container behind")

	exec2 := e.StartExecutor(testenv.ExecutorOptions{Name: "podorph-1", Env: podEnv, Queues: []string{"pods"}})
	e.WaitFor("the orphan container to be removed", 20*time.Second, func() bool {
		for _, id := range containersOf(t, longID) {
			if strings.HasPrefix(first, id) || strings.HasPrefix(id, first) {
				return false
			}
		}
		return true
	})

	// The build is dispatched again to the restarted executor; stopping
	// that executor gracefully removes the new container too.
	e.WaitFor("the build's second container", time.Minute, func() bool { return len(containersOf(t, longID)) == 1 })
	exec2.Stop()
	e.WaitFor("a stopping executor to remove its build's container", 30*time.Second, func() bool { return len(containersOf(t, longID)) == 0 })
	require.NoError(t, e.API.CancelBuild(ctx, longID))
	e.WaitEvent(ev.ID, time.Minute)
}

// N5: a SIGKILLed executor's container is removed by its reaper, without
// waiting for the executor to come back: the lost attempt does not run on
// beside the next one.
func TestContainerRemovedWhenItsExecutorDies(t *testing.T) {
	t.Parallel()
	testenv.Podman(t)
	e := server.NewEnv(t, testenv.Options{})
	ctx := e.Context()
	exec1 := e.StartExecutor(testenv.ExecutorOptions{Name: "podreap-1", Env: []string{"SLUICE_EXECUTOR_RUNTIME=podman"}})
	e.WaitExecutorLive("podreap-1")
	spec := fmt.Sprintf("shared: {image: %s}\njobs:\n  long:\n    requires: [~commit]\n    steps:\n      - wait: sleep 600\n", testenv.TestImage)
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	_, err := e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "ctrreap", Repo: repo.Dir})
	require.NoError(t, err)
	ev, err := e.StartEvent(ctx, "ctrreap", api.StartEventRequest{Type: "commit", Branch: "main"})
	require.NoError(t, err)
	longID := "ctrreap/long/" + strconv.Itoa(ev.Number)
	var first string
	e.WaitFor("the build's container", time.Minute, func() bool {
		if ids := containersOf(t, longID); len(ids) == 1 {
			first = ids[0]
		}
		return first != ""
	})
	t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", "-t", "0", first).Run() }) //nolint:noctx // cleanup after the test's context ended

	exec1.Kill()
	e.WaitFor("the reaper to remove the container", 30*time.Second, func() bool { return len(containersOf(t, longID)) == 0 })
	require.NoError(t, e.API.CancelBuild(ctx, longID))
	e.WaitEvent(ev.ID, time.Minute)
}
