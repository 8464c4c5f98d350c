package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The runtimes an executor can run builds with.
const (
	// RuntimeHost runs steps in a shell on the executor's host.
	RuntimeHost = "host"
	// RuntimeDocker runs each build in a docker container of the job's image.
	RuntimeDocker = "docker"
	// RuntimePodman runs each build in a podman container of the job's image.
	RuntimePodman = "podman"
	// RuntimeAuto picks docker if `docker info` answers, else podman if
	// `podman info` answers, else host.
	RuntimeAuto = "auto"
)

// ErrUnknownRuntime is returned for a runtime name ChooseRuntime does not know.
var ErrUnknownRuntime = errors.New("runner: unknown runtime (want host, docker, podman or auto)")

// probeTimeout bounds each `<runtime> info` probe.
const probeTimeout = 10 * time.Second

// ChooseRuntime resolves want (host, docker, podman or auto; "" is auto) to
// the runtime to use and says why. An explicitly requested container
// runtime that does not answer is an error, not a silent fallback.
func ChooseRuntime(ctx context.Context, want string) (name, why string, err error) {
	switch want {
	case RuntimeHost:
		return RuntimeHost, "requested", nil
	case RuntimeDocker, RuntimePodman:
		if perr := probe(ctx, want); perr != nil {
			return "", "", fmt.Errorf("runtime %s requested but unusable: %w", want, perr)
		}
		return want, "requested", nil
	case RuntimeAuto, "":
	default:
		return "", "", fmt.Errorf("%w: %q", ErrUnknownRuntime, want)
	}
	var whyNot []string
	for _, rt := range []string{RuntimeDocker, RuntimePodman} {
		perr := probe(ctx, rt)
		if perr == nil {
			return rt, strings.Join(append(whyNot, rt+" info answered"), "; "), nil
		}
		whyNot = append(whyNot, rt+": "+perr.Error())
	}
	return RuntimeHost, "no container runtime: " + strings.Join(whyNot, "; "), nil
}

func probe(ctx context.Context, rt string) error {
	if _, err := exec.LookPath(rt); err != nil {
		return errors.New("not installed")
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := runtimeCmd(ctx, rt, "info").CombinedOutput() //nolint:gosec // rt is docker or podman
	if err != nil {
		return fmt.Errorf("%s info failed: %s", rt, lastLine(out, err))
	}
	return nil
}

// ContainerOptions describes the container of one build attempt.
type ContainerOptions struct {
	// Runtime is RuntimeDocker or RuntimePodman.
	Runtime string
	// Image is the job's image.
	Image string
	// Name is the container's name (unique per attempt).
	Name string
	// Labels are set on the container (build, attempt, executor), so an
	// executor can find the containers it left behind.
	Labels map[string]string
	// Mounts bind host directories (key) at container paths (value).
	Mounts map[string]string
	// ReadOnlyMounts bind host files or directories (key) at container
	// paths (value), read-only.
	ReadOnlyMounts map[string]string
	// Workdir is the container's working directory.
	Workdir string
	// CPUs and Memory, if set, become --cpus and --memory.
	CPUs, Memory string
	// Network, if set, is the network the container joins (--network;
	// SLUICE_CONTAINER_NETWORK), checked by CheckNetwork.
	Network string
}

var reNetwork = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// CheckNetwork checks a build containers' network name: "" (the runtime's
// default), or a network's name; "host" (the executor host's own network)
// and container:<id> (another container's) are refused, since they would
// give builds what the network is meant to keep from them.
func CheckNetwork(name string) error {
	switch {
	case name == "":
		return nil
	case name == "host" || strings.HasPrefix(name, "container:") || strings.HasPrefix(name, "ns:"):
		return fmt.Errorf("%q would share a network namespace the builds must not reach: name a network of their own", name)
	case !reNetwork.MatchString(name):
		return fmt.Errorf("want a network name (letters, digits, '_', '.', '-'), got %q", name)
	}
	return nil
}

// ImageError is a container that could not be created, with the runtime's
// own message: the image does not exist or cannot be pulled, or the runtime
// refused the options.
type ImageError struct {
	Image   string
	Message string
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("cannot start a container of image %s: %s", e.Image, e.Message)
}

// containerHardening confines every build container: no capabilities but
// the few that builds running as root use (installing packages, changing
// owners, dropping to another user), no privilege gain through setuid
// binaries, and a bound on processes (a fork bomb stays inside).
var containerHardening = []string{
	"--cap-drop=ALL",
	"--cap-add=CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,SETGID,SETUID,NET_BIND_SERVICE",
	"--security-opt=no-new-privileges",
	"--pids-limit=4096",
}

// ContainerUserArgs makes a build's container run as the executor (N7),
// whatever the image's USER says: its steps write the executor's control
// files, and every file they leave in the mounted workspace belongs to the
// executor, which removes the workspace after the build. An executor
// running as root runs its containers as root; a non-root executor on
// podman (rootless) maps its own uid into the container (keep-id), on
// docker it runs them as its uid:gid.
func ContainerUserArgs(runtime string, uid, gid int) []string {
	user := strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
	switch {
	case uid == 0:
		return []string{"--user", "0:0"}
	case runtime == RuntimePodman:
		return []string{"--userns=keep-id", "--user", user}
	default:
		return []string{"--user", user}
	}
}

// keepAlive is the container's main process: it idles until the container is
// removed; the build's shells are exec'ed next to it.
const keepAlive = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"

// StartContainer starts the detached container of a build attempt (removed
// by RemoveContainer) and returns how Run reaches it.
func StartContainer(ctx context.Context, o ContainerOptions, dir, controlDir string) (*Container, error) {
	if o.Image == "" || strings.HasPrefix(o.Image, "-") || strings.ContainsAny(o.Image, " \t\n") {
		return nil, &ImageError{Image: o.Image, Message: "not an image reference"}
	}
	args := []string{"run", "-d", "--rm", "--name", o.Name, "--entrypoint", "sh", "-w", o.Workdir}
	args = append(args, containerHardening...)
	args = append(args, ContainerUserArgs(o.Runtime, os.Geteuid(), os.Getegid())...)
	for _, k := range sortedKeys(o.Labels) {
		args = append(args, "--label", k+"="+o.Labels[k])
	}
	for _, host := range sortedKeys(o.Mounts) {
		// --mount, not -v: a pull request's workspace path holds a ':'
		// (build IDs like app/PR-7:test/1), which -v reads as a separator.
		if strings.Contains(host, ",") || strings.Contains(o.Mounts[host], ",") {
			return nil, fmt.Errorf("cannot mount %s at %s in a container: the path holds a ','", host, o.Mounts[host])
		}
		args = append(args, "--mount", "type=bind,source="+host+",target="+o.Mounts[host])
	}
	for _, host := range sortedKeys(o.ReadOnlyMounts) {
		if strings.Contains(host, ",") || strings.Contains(o.ReadOnlyMounts[host], ",") {
			return nil, fmt.Errorf("cannot mount %s at %s in a container: the path holds a ','", host, o.ReadOnlyMounts[host])
		}
		args = append(args, "--mount", "type=bind,source="+host+",target="+o.ReadOnlyMounts[host]+",readonly")
	}
	if o.CPUs != "" {
		args = append(args, "--cpus", o.CPUs)
	}
	if o.Memory != "" {
		args = append(args, "--memory", o.Memory)
	}
	if o.Network != "" {
		if err := CheckNetwork(o.Network); err != nil {
			return nil, fmt.Errorf("container network: %w", err)
		}
		args = append(args, "--network", o.Network)
	}
	args = append(args, o.Image, "-c", keepAlive)
	out, err := runtimeCmd(ctx, o.Runtime, args...).Output() //nolint:gosec // the image and options are the job's
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, &ImageError{Image: o.Image, Message: lastLine(ee.Stderr, err)}
		}
		return nil, fmt.Errorf("%s run: %w", o.Runtime, err)
	}
	id := strings.TrimSpace(string(out))
	return &Container{Runtime: o.Runtime, ID: id, Dir: dir, ControlDir: controlDir}, nil
}

// RemoveContainer kills and removes the container at once.
func RemoveContainer(ctx context.Context, runtime, id string) error {
	args := []string{"rm", "-f", id}
	if runtime == RuntimePodman {
		args = []string{"rm", "-f", "-t", "0", id}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if out, err := runtimeCmd(ctx, runtime, args...).CombinedOutput(); err != nil { //nolint:gosec // fixed arguments
		return fmt.Errorf("%s rm %s: %s", runtime, id, lastLine(out, err))
	}
	return nil
}

// RemoveLabelled removes every container (running or not) carrying all the
// labels and returns their IDs.
func RemoveLabelled(ctx context.Context, runtime string, labels map[string]string) ([]string, error) {
	if len(labels) == 0 {
		return nil, errors.New("remove labelled containers: no labels given")
	}
	args := []string{"ps", "-a", "-q"}
	for _, k := range sortedKeys(labels) {
		args = append(args, "--filter", "label="+k+"="+labels[k])
	}
	out, err := runtimeCmd(ctx, runtime, args...).Output() //nolint:gosec // the runtime's own arguments
	if err != nil {
		return nil, fmt.Errorf("%s ps: %w", runtime, err)
	}
	var removed []string
	var errs []error
	for _, id := range strings.Fields(string(out)) {
		if err := RemoveContainer(ctx, runtime, id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}

// lastLine is the runtime's error message: the last non-empty line of its
// output, else err.
func lastLine(out []byte, err error) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if l := strings.TrimSpace(string(lines[len(lines)-1])); l != "" {
		return strings.TrimPrefix(l, "Error: ")
	}
	return err.Error()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runtimeCmd is a container runtime command with RuntimeEnv as its
// environment.
func runtimeCmd(ctx context.Context, runtime string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, runtime, args...) //nolint:gosec // runtime is docker or podman; the callers own the arguments
	c.Env = RuntimeEnv()
	return c
}
