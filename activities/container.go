package activities

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sluice-ci/sluice/runner"
)

// Paths inside a build's container, as Screwdriver's launcher lays them out.
const (
	// containerSourceRoot holds the checkout: SD_SOURCE_DIR is
	// <containerSourceRoot>/<repository name>.
	containerSourceRoot = "/sd/workspace/src"
	// containerControlDir is where the runner's control directory (step
	// scripts, output FIFOs) is mounted.
	containerControlDir = "/sd/sluice"
)

// Container labels naming the Temporal namespace, executor, build and attempt
// of a container, so an executor that starts again finds the containers it
// left behind, and only those: executors of another sluice (another
// namespace) on the same host may share its name.
const (
	LabelNamespace = "sluice.namespace"
	LabelExecutor  = "sluice.executor"
	LabelBuild     = "sluice.build"
	LabelAttempt   = "sluice.attempt"
)

var reNotName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// sourceDir is SD_SOURCE_DIR inside a container: the repository's last path
// element (without .git) under containerSourceRoot.
func sourceDir(repo string) string {
	name := strings.TrimSuffix(path.Base(strings.TrimRight(strings.ReplaceAll(repo, ":", "/"), "/")), ".git")
	name = reNotName.ReplaceAllString(name, "_")
	if name == "" || name == "." || name == ".." {
		name = "source"
	}
	return containerSourceRoot + "/" + name
}

// containerEnv is the step environment inside a container: the build's
// variables without the executor's basics (PATH, HOME, ...), which the image
// defines, unless the job sets them.
func containerEnv(in RunBuildInput, dir, executor string, secrets map[string]string) []string {
	env := buildEnv(in, dir, executor, secrets)
	out := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, own := in.Environment[k]; !own && isBaseEnv(k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isBaseEnv(k string) bool {
	for _, b := range baseEnv {
		if b == k {
			return true
		}
	}
	return false
}

// Screwdriver's resource tiers: screwdriver.cd/cpu in CPUs, screwdriver.cd/ram
// in GB.
var (
	cpuTiers = map[string]float64{"LOW": 2, "HIGH": 6, "TURBO": 12}
	ramTiers = map[string]float64{"LOW": 2, "HIGH": 12, "TURBO": 16}
)

// containerResources maps the job's cpu and ram annotations (a tier or a
// positive number; "" sets no limit) to --cpus and --memory values.
func containerResources(cpu, ram string) (cpus, memory string, err error) {
	parse := func(name, v string, tiers map[string]float64) (float64, error) {
		if v == "" {
			return 0, nil
		}
		if n, ok := tiers[strings.ToUpper(strings.TrimSpace(v))]; ok {
			return n, nil
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || n <= 0 || n > 1024 {
			return 0, fmt.Errorf("annotation %s: want LOW, HIGH, TURBO or a positive number, got %q", name, v)
		}
		return n, nil
	}
	c, err := parse("screwdriver.cd/cpu", cpu, cpuTiers)
	if err != nil {
		return "", "", err
	}
	r, err := parse("screwdriver.cd/ram", ram, ramTiers)
	if err != nil {
		return "", "", err
	}
	if c > 0 {
		cpus = strconv.FormatFloat(c, 'f', -1, 64)
	}
	if r > 0 {
		memory = strconv.FormatInt(int64(r*1024), 10) + "m"
	}
	return cpus, memory, nil
}

// startContainer starts the container of one attempt with the workspace
// and the control directory mounted.
func (a *Activities) startContainer(ctx context.Context, in RunBuildInput, dir, ctl, executor string, files buildFiles) (*runner.Container, error) {
	cpus, memory, err := containerResources(in.CPU, in.RAM)
	if err != nil {
		return nil, err
	}
	src := sourceDir(in.Repo)
	name := fmt.Sprintf("sluice-%s-a%d-%s", reNotName.ReplaceAllString(in.BuildID, "_"), in.Attempt,
		strconv.FormatInt(time.Now().UnixNano(), 36))
	mounts := map[string]string{dir: src, ctl: containerControlDir, files.metaDir: containerMetaDir, files.artifactsDir: containerArtifactsDir}
	ro := map[string]string{}
	if files.self != "" {
		ro[files.self] = containerToolsDir + "/sluice"
		ro[files.binDir] = containerBinDir
	}
	ctr, err := runner.StartContainer(ctx, runner.ContainerOptions{
		Runtime: a.Runtime,
		Image:   in.Image,
		Name:    name,
		Labels: map[string]string{
			LabelNamespace: activity.GetInfo(ctx).Namespace,
			LabelExecutor:  executor, LabelBuild: in.BuildID, LabelAttempt: strconv.Itoa(in.Attempt),
		},
		Mounts:         mounts,
		ReadOnlyMounts: ro,
		Workdir:        src,
		CPUs:           cpus,
		Memory:         memory,
		Network:        a.ContainerNetwork,
	}, src, containerControlDir)
	if err != nil {
		return nil, err //nolint:wrapcheck // the runtime's message is the build's reason
	}
	if files.self != "" {
		ctr.PathPrefix = containerBinDir
	}
	return ctr, nil
}

// noticeSink writes a notice at the top of the first step log it opens.
type noticeSink struct {
	runner.LogSink
	notice string
	once   sync.Once
}

func (s *noticeSink) Open(step string) (io.WriteCloser, error) {
	w, err := s.LogSink.Open(step)
	if err != nil {
		return nil, err //nolint:wrapcheck // the sink's own error
	}
	var werr error
	s.once.Do(func() { _, werr = io.WriteString(w, s.notice) })
	if werr != nil {
		_ = w.Close()
		return nil, fmt.Errorf("write notice: %w", werr)
	}
	return w, nil
}

// removeDir removes a host directory, logging a failure.
func (a *Activities) removeDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		a.Logger.Warn("workspace_cleanup_failed", "dir", dir, "error", err)
	}
}
