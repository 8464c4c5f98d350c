package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// devProcess is a `sluice dev` process on its own ports and data directory.
type devProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	out     *bytes.Buffer
	mu      *sync.Mutex
	done    chan struct{}
	apiURL  string
	uiURL   string
	dataDir string
}

// freePort answers a TCP port free on 127.0.0.1 for a process the test
// starts. The port comes from 10000-19999: below the kernel's ephemeral range
// (where an outgoing connection of a parallel test could take a port
// between its two uses, e.g. while a server is down to be restarted) and
// below the 20000-32767 the embedded Temporal servers take for membership.
// A port is handed out once per test binary: a port is free again as soon
// as it is answered, so two answers in a row (one test's frontend and Web
// UI ports, or two parallel tests') could otherwise be the same.
func freePort(t *testing.T) int {
	t.Helper()
	start := rand.IntN(10000)
	for i := range 10000 {
		port := 10000 + (start+i)%10000
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return port
	}
	t.Fatal("no free port in 10000-19999 on 127.0.0.1")
	return 0
}

// handedOut are the ports freePort answered.
var handedOut sync.Map

func TestFreePortsDistinct(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 200 {
		p := freePort(t)
		require.False(t, seen[p], "port %d answered twice", p)
		seen[p] = true
	}
}

type syncBuffer struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w syncBuffer) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

// startDev runs `sluice dev` and waits until /readyz answers 200.
func startDev(t *testing.T, dataDir string, temporalPort, apiPort, uiPort int) *devProcess {
	t.Helper()
	d := &devProcess{
		t: t, out: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{}), dataDir: dataDir,
		apiURL: fmt.Sprintf("http://127.0.0.1:%d", apiPort), uiURL: fmt.Sprintf("http://127.0.0.1:%d", uiPort),
	}
	d.cmd = exec.Command(testenv.Binary(t), "dev", "--data-dir", dataDir,
		"--temporal-port", strconv.Itoa(temporalPort), "--ui-port", strconv.Itoa(uiPort),
		"--api-addr", fmt.Sprintf("127.0.0.1:%d", apiPort))
	// Steps run on the host: the specs' images are not pulled (no registry).
	d.cmd.Env = append(os.Environ(), "SLUICE_EXECUTOR_RUNTIME=host", "SLUICE_MEMBER_HEARTBEAT=500ms", "SLUICE_EXECUTOR_LIVENESS=3s",
		"SLUICE_BUILD_HEARTBEAT_TIMEOUT=5s", "SLUICE_WORK_DIR="+filepath.Join(dataDir, "work"), "SLUICE_LOCAL_REPOS=/")
	w := syncBuffer{mu: d.mu, buf: d.out}
	d.cmd.Stdout, d.cmd.Stderr = w, w
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now()
	require.NoError(t, d.cmd.Start())
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
		if t.Failed() {
			t.Logf("sluice dev output:\n%s", d.output())
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(d.apiURL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-d.done:
			t.Fatalf("sluice dev exited early:\n%s", d.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice dev not ready within 2 minutes:\n%s", d.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("sluice dev ready in %s", time.Since(started).Round(time.Millisecond))
	return d
}

func (d *devProcess) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// stop sends SIGINT (Ctrl-C) and waits for a clean exit.
func (d *devProcess) stop() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("sluice dev did not stop within 60s of Ctrl-C:\n%s", d.output())
	}
	require.True(d.t, d.cmd.ProcessState.Success(), "sluice dev exits 0 on Ctrl-C:\n%s", d.output())
}

// cli runs the sluice binary against the dev process's API.
func (d *devProcess) cli(args ...string) (string, error) {
	cmd := exec.Command(testenv.Binary(d.t), append([]string{"--api-url", d.apiURL}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDevRestartSurvival runs `sluice dev` as a real process: the Web UI and
// /readyz answer; a pipeline and an event are started through the CLI;
// stopping dev (Ctrl-C) mid-event and starting it again on the same data
// directory completes the event, with no build lost and none run twice to
// completion.
func TestDevRestartSurvival(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	tp, ap, up := freePort(t), freePort(t), freePort(t)
	dev := startDev(t, dataDir, tp, ap, up)

	resp, err := http.Get(dev.uiURL + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the Temporal Web UI answers")

	rec := filepath.Join(dir, "records")
	spec := fmt.Sprintf(`
shared: {image: alpine}
jobs:
  first:
    requires: [~commit]
    steps:
      - work: %q
  second:
    requires: [first]
    steps:
      - work: %q
  third:
    requires: [second]
    steps:
      - work: %q
`, record(rec, "sleep 2"), record(rec, "sleep 4"), record(rec, "sleep 1"))
	repo := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": spec})
	out, err := dev.cli("pipeline", "create", "survivor", "--repo", repo.Dir)
	require.NoError(t, err, out)
	out, err = dev.cli("event", "start", "survivor", "--type", "commit", "--branch", "main")
	require.NoError(t, err, out)
	eventID := strings.TrimSpace(out)
	require.Equal(t, "survivor/1", eventID)

	// Stop mid-event: while the second job runs.
	c := api.NewClient(dev.apiURL)
	require.Eventually(t, func() bool {
		b, err := c.GetBuild(context.Background(), "survivor/second/1")
		return err == nil && b.Status == workflows.StatusRunning
	}, time.Minute, 100*time.Millisecond)
	dev.stop()

	dev = startDev(t, dataDir, tp, ap, up)
	out, err = dev.cli("event", "show", eventID, "-o", "json")
	require.NoError(t, err, out)
	var ev api.Event
	require.NoError(t, json.Unmarshal([]byte(out), &ev))
	require.Equal(t, eventID, ev.ID, "the event started before the restart is still there")

	out, err = dev.cli("event", "start", "survivor", "--type", "commit", "--branch", "main", "--wait")
	require.NoError(t, err, "a new event after the restart succeeds: %s", out)
	ev = waitDevEvent(t, c, eventID)
	require.Equal(t, workflows.StatusSuccess, ev.Status, "%+v", ev)
	second := buildOf(t, ev, "second")
	b, err := c.GetBuild(context.Background(), second.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b.AttemptList), 2, "the interrupted build was dispatched again: %+v", b.AttemptList)

	completed := map[string]int{}
	for _, s := range readSpans(t, rec) {
		completed[s.Job+" "+s.Event]++
	}
	for _, job := range []string{"first", "second", "third"} {
		require.Equal(t, 1, completed[job+" "+eventID], "job %s of %s completed exactly once", job, eventID)
	}
	logs, err := dev.cli("build", "logs", "survivor/third/1")
	require.NoError(t, err, logs)
	dev.stop()
}

func waitDevEvent(t *testing.T, c *api.Client, id string) api.Event {
	t.Helper()
	var ev api.Event
	require.Eventually(t, func() bool {
		var err error
		ev, err = c.GetEvent(context.Background(), id)
		return err == nil && ev.Status.Final()
	}, 2*time.Minute, 200*time.Millisecond)
	return ev
}
