package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestImage is the image PodmanImage builds: Debian's static busybox as
// /bin/busybox with the usual applets linked to it, and TestImageMarker.
const TestImage = "localhost/sluice-test-busybox"

// TestImageNonRoot is TestImage with USER 1000: an image whose builds run
// as a non-root user unless the runtime says otherwise.
const TestImageNonRoot = "localhost/sluice-test-busybox-user1000"

// TestImageMarker is a file only TestImage has; its content is "sluice-test-image\n".
const TestImageMarker = "/etc/sluice-test-image"

// busyboxPath is where Debian's busybox-static installs the binary.
const busyboxPath = "/bin/busybox"

var podmanOnce struct {
	sync.Once
	skip string
}

// Podman makes podman usable by this test process and the processes it
// starts, and builds TestImage, once per process; it skips t with the reason
// when podman cannot run a container here. No registry is needed: the image
// is imported from a root filesystem built from the host's static busybox.
//
// The containers.conf it writes (exported as CONTAINERS_CONF unless already
// set) lifts the ulimits and pids limit a nested container cannot set and
// selects runc.
func Podman(t testing.TB) {
	t.Helper()
	podmanOnce.Do(func() { podmanOnce.skip = preparePodman() })
	if podmanOnce.skip != "" {
		t.Skip(podmanOnce.skip)
	}
}

func preparePodman() string {
	if _, err := exec.LookPath("podman"); err != nil {
		return "podman is not installed (apt-get install podman runc busybox-static uidmap fuse-overlayfs slirp4netns)"
	}
	if _, err := os.Stat(busyboxPath); err != nil {
		return "no static busybox at " + busyboxPath + " (apt-get install busybox-static)"
	}
	if os.Getenv("CONTAINERS_CONF") == "" {
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-test-podman-%d", os.Getuid()))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "podman: " + err.Error()
		}
		conf := filepath.Join(dir, "containers.conf")
		const body = "[containers]\ndefault_ulimits = []\npids_limit = 0\n\n[engine]\nruntime = \"runc\"\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return "podman: " + err.Error()
		}
		if err := os.Setenv("CONTAINERS_CONF", conf); err != nil { //nolint:usetesting // process-wide on purpose: shared by every test and child process
			return "podman: " + err.Error()
		}
	}
	rootfs, err := busyboxRootfs()
	if err != nil {
		return "build test image: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	imp := exec.CommandContext(ctx, "podman", "import", "-", TestImage)
	imp.Stdin = bytes.NewReader(rootfs)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Sprintf("podman import: %v: %s", err, strings.TrimSpace(string(out)))
	}
	imp = exec.CommandContext(ctx, "podman", "import", "--change", "USER=1000", "-", TestImageNonRoot)
	imp.Stdin = bytes.NewReader(rootfs)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Sprintf("podman import (USER 1000): %v: %s", err, strings.TrimSpace(string(out)))
	}
	out, err := exec.CommandContext(ctx, "podman", "run", "--rm", TestImage, "cat", TestImageMarker).CombinedOutput()
	if err != nil || string(out) != "sluice-test-image\n" {
		return fmt.Sprintf("podman cannot run a container here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// busyboxRootfs is a tar of the test image's root filesystem.
func busyboxRootfs() ([]byte, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, d := range []string{"bin/", "etc/", "tmp/", "sd/", "root/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := add(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode}, nil); err != nil {
			return nil, err
		}
	}
	if err := add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}, bin); err != nil {
		return nil, err
	}
	for _, applet := range []string{"sh", "cat", "echo", "ls", "sleep", "mkdir", "pwd", "test", "env", "kill", "ps", "rm", "true", "false", "touch", "grep", "sed", "wc"} {
		if err := add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox"}, nil); err != nil {
			return nil, err
		}
	}
	marker := []byte("sluice-test-image\n")
	if err := add(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(TestImageMarker, "/"), Mode: 0o644, Size: int64(len(marker))}, marker); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
