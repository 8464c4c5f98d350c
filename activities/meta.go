package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/runner"
)

// BuildData is how an executor reads the metadata a build starts with and
// saves the metadata it ends with (Screwdriver's `meta`), through the API.
type BuildData interface {
	// StartMeta returns the JSON object the build starts with.
	StartMeta(ctx context.Context, req MetaStart) ([]byte, error)
	// SaveMeta keeps the metadata an attempt ended with.
	SaveMeta(ctx context.Context, req MetaSave) error
	// SaveArtifact keeps one file of an attempt's artifacts.
	SaveArtifact(ctx context.Context, req ArtifactSave) error
}

// ArtifactSave is one artifact of an attempt, sent with its credential.
type ArtifactSave struct {
	Build      string
	Attempt    int
	Credential string
	// Path is the file's path under the artifacts directory ('/'-separated).
	Path string
	Body io.Reader
}

// MetaStart asks for the metadata an attempt starts with. The executor
// presents the attempt's credential: the API, which reads the build's
// record to answer, then takes the attempt's log and metadata writes that
// follow within seconds without reading it again (api/attempts.go).
type MetaStart struct {
	Build      string
	Attempt    int
	Credential string
}

// MetaSave is one attempt's metadata, sent with its credential.
type MetaSave struct {
	Build      string
	Attempt    int
	Status     string
	Meta       []byte
	Credential string
}

// Paths inside a build's container for its metadata, artifacts and the
// sluice binary (Screwdriver's launcher puts /sd/meta and
// /sd/workspace/artifacts in the same places).
const (
	containerMetaDir      = "/sd/meta"
	containerArtifactsDir = "/sd/workspace/artifacts"
	// containerToolsDir holds the executor's own binary, mounted read-only.
	containerToolsDir = "/opt/sluice/exe"
	// containerBinDir is on the steps' PATH: meta and sluice.
	containerBinDir = "/opt/sluice/bin"
)

// metaFile is the metadata file's name in its directory (SD_META_PATH).
const metaFile = "meta.json"

// buildFiles are one attempt's metadata and artifacts directories on the
// executor's host (under <workspace>.sd, next to the checkout), and the
// directory of its steps' meta and sluice commands (the executor's, shared
// by its builds: toolsDir).
type buildFiles struct {
	root, metaDir, artifactsDir, binDir string
	// self is the sluice binary the steps' meta and sluice commands run.
	self string
}

func (f buildFiles) metaPath() string { return filepath.Join(f.metaDir, metaFile) }

// startMeta fetches, in the background from the claim on, the metadata
// the build starts with (an API call that reads its event: ≈10 ms), so
// that it overlaps the checkout; wait returns it. An API or controller
// that is down for a while delays the build; it does not fail it (the
// heartbeats go on meanwhile). Metadata the task brings
// (RunBuildInput.StartMeta) is used as it is.
func (a *Activities) startMeta(ctx context.Context, in RunBuildInput, credential string) (wait func() (buildmeta.Doc, error)) {
	if in.StartMeta != nil {
		return func() (buildmeta.Doc, error) { return in.StartMeta, nil }
	}
	if a.BuildData == nil {
		return func() (buildmeta.Doc, error) { return buildmeta.Doc{}, nil }
	}
	var (
		raw  []byte
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		err = retryAPI(ctx, func(ctx context.Context) error {
			b, err := a.BuildData.StartMeta(ctx, MetaStart{Build: in.BuildID, Attempt: in.Attempt, Credential: credential})
			if err == nil {
				raw = b
			}
			return err
		})
	}()
	return func() (buildmeta.Doc, error) {
		<-done
		if err != nil {
			return nil, fmt.Errorf("read the metadata build %s starts with: %w", in.BuildID, err)
		}
		doc, err := buildmeta.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("the metadata build %s starts with: %w", in.BuildID, err)
		}
		return doc, nil
	}
}

// prepareBuildFiles lays out an attempt's build files (the metadata file
// comes with writeStartMeta).
func (a *Activities) prepareBuildFiles(in RunBuildInput, dir string, inContainer bool) (buildFiles, error) {
	f := buildFiles{root: dir + ".sd", self: a.SelfBinary}
	f.metaDir = filepath.Join(f.root, "meta")
	f.artifactsDir = filepath.Join(f.root, "artifacts")
	if err := freshDir(f.root); err != nil {
		return f, fmt.Errorf("prepare %s: %w", f.root, err)
	}
	for _, d := range []string{f.metaDir, f.artifactsDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return f, fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	if a.SelfBinary != "" {
		target := a.SelfBinary
		if inContainer {
			target = containerToolsDir + "/sluice"
		}
		bin, err := toolsDir(a.WorkDir, target)
		if err != nil {
			return f, fmt.Errorf("prepare the meta and sluice commands: %w", err)
		}
		f.binDir = bin
	}
	if a.RunAs != nil && !inContainer {
		// A build running as another user writes its metadata and
		// artifacts: hand it the directories.
		for _, d := range []string{f.root, f.metaDir, f.artifactsDir} {
			if err := os.Chown(d, int(a.RunAs.UID), int(a.RunAs.GID)); err != nil {
				return f, fmt.Errorf("hand %s to the build's user: %w", d, err)
			}
		}
	}
	return f, nil
}

// toolsNames are the commands of a build's tools directory: each a
// symbolic link to the executor's binary.
var toolsNames = []string{"meta", "sluice"}

// toolsDirs are the tools directories made or checked by this process.
var toolsDirs sync.Map // path → struct{}

// toolsDir returns the directory, under the workspaces' root work, whose
// meta and sluice commands link to target (the executor's binary, or
// where a container mounts it), making it the first time. Every build of
// the executor puts it on its steps' PATH, where each had a directory and
// two links of its own, made and removed again (on a VM's disk a
// directory or a link costs ~0.4 ms of CPU). It is the executor's, 0755:
// a step running as another user cannot change it, a container mounts it
// read-only, and a step running as the executor's own user (trusted
// builds only) could change the executor's files anyway (docs/security.md).
func toolsDir(work, target string) (string, error) {
	sum := sha256.Sum256([]byte(target))
	dir := filepath.Join(work, ".sluice-tools", hex.EncodeToString(sum[:6]))
	if _, ok := toolsDirs.Load(dir); ok {
		return dir, nil
	}
	if !linksTo(dir, target) {
		// Made aside and renamed into place: a build never sees it half
		// made, and two executors sharing the workspaces make it once.
		if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
			return "", err //nolint:wrapcheck // the caller says what it prepares
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".new-")
		if err != nil {
			return "", err //nolint:wrapcheck // the caller says what it prepares
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		for _, name := range toolsNames {
			if err := os.Symlink(target, filepath.Join(tmp, name)); err != nil {
				return "", err //nolint:wrapcheck // the caller says what it prepares
			}
		}
		if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // the steps run its commands
			return "", err //nolint:wrapcheck // the caller says what it prepares
		}
		if err := os.Rename(tmp, dir); err != nil && !linksTo(dir, target) {
			return "", err //nolint:wrapcheck // the caller says what it prepares
		}
	}
	toolsDirs.Store(dir, struct{}{})
	return dir, nil
}

// linksTo reports whether dir's commands all link to target.
func linksTo(dir, target string) bool {
	for _, name := range toolsNames {
		if l, err := os.Readlink(filepath.Join(dir, name)); err != nil || l != target {
			return false
		}
	}
	return true
}

// writeStartMeta writes the metadata the build starts with (wait, from
// startMeta) where its steps find it; before any step runs.
func (a *Activities) writeStartMeta(f buildFiles, inContainer bool, wait func() (buildmeta.Doc, error)) error {
	doc, err := wait()
	if err != nil {
		return err
	}
	if err := buildmeta.CreateFile(f.metaPath(), doc); err != nil {
		return err
	}
	if a.RunAs != nil && !inContainer {
		if err := os.Chown(f.metaPath(), int(a.RunAs.UID), int(a.RunAs.GID)); err != nil {
			return fmt.Errorf("hand %s to the build's user: %w", f.metaPath(), err)
		}
	}
	return nil
}

// buildFileEnv are the variables that point the steps at the build files
// (host paths, or the container's when inContainer), and the steps' own
// credential for the API calls of `meta get --external` and `sluice
// artifact get`.
func (a *Activities) buildFileEnv(f buildFiles, in RunBuildInput, credential string, inContainer bool) map[string]string {
	env := map[string]string{
		"SD_META_DIR":         f.metaDir,
		"SD_META_PATH":        f.metaPath(),
		"SD_ARTIFACTS_DIR":    f.artifactsDir,
		"SD_BUILD_CREDENTIAL": credential,
	}
	if inContainer {
		env["SD_META_DIR"] = containerMetaDir
		env["SD_META_PATH"] = containerMetaDir + "/" + metaFile
		env["SD_ARTIFACTS_DIR"] = containerArtifactsDir
	}
	if a.APIURL != "" {
		env["SD_API_URL"] = strings.TrimRight(a.APIURL, "/") + "/"
	}
	return env
}

// withEnv sets vars in a KEY=value list, replacing earlier values; a
// non-empty pathPrefix goes in front of PATH.
func withEnv(env []string, vars map[string]string, pathPrefix string) []string {
	out := make([]string, 0, len(env)+len(vars))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := vars[k]; ok {
			continue
		}
		if k == "PATH" && pathPrefix != "" {
			kv = "PATH=" + pathPrefix + ":" + v
		}
		out = append(out, kv)
	}
	for _, k := range sortedKeys(vars) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// saveMetaTimeout bounds saving an attempt's metadata.
const saveMetaTimeout = time.Minute

// readEndMeta reads the metadata the attempt ended with from its file. A
// file the steps broke (not a JSON object, too large) fails the build.
func readEndMeta(f buildFiles) ([]byte, error) {
	doc, err := buildmeta.ReadFile(f.metaPath())
	if err != nil {
		return nil, fmt.Errorf("the build's metadata ($SD_META_PATH): %w", err)
	}
	b, err := buildmeta.Encode(doc)
	if err != nil {
		return nil, fmt.Errorf("the build's metadata ($SD_META_PATH): %w", err)
	}
	return b, nil
}

// saveMeta uploads the metadata the attempt ended with, retrying while
// the API (or the controller behind it) is down.
func (a *Activities) saveMeta(ctx context.Context, k *keepWork) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveMetaTimeout)
	defer cancel()
	err := retryAPI(ctx, func(ctx context.Context) error {
		return a.BuildData.SaveMeta(ctx, MetaSave{Build: k.Build, Attempt: k.Attempt, Status: k.Status, Meta: k.Meta, Credential: k.Credential})
	})
	if err != nil {
		return fmt.Errorf("save the build's metadata: %w", err)
	}
	return nil
}

// buildStatus is a runner status as a build status (SUCCESS, FAILURE,
// ABORTED).
func buildStatus(s runner.Status) string {
	switch s {
	case runner.StatusSuccess:
		return "SUCCESS"
	case runner.StatusAborted:
		return "ABORTED"
	}
	return "FAILURE"
}

// retryAPI calls f until it succeeds, ctx ends, or the API gives an answer
// that retrying cannot change (a status other than 5xx and 429): an API,
// or a controller its answer needs, that is down for a while delays the
// caller instead of failing it.
func retryAPI(ctx context.Context, f func(context.Context) error) error {
	wait := 200 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil || !retryableAPIError(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// retryableAPIError: no answer at all, a server error or too many
// requests.
func retryableAPIError(err error) bool {
	var answered interface{ StatusCode() int }
	if errors.As(err, &answered) {
		s := answered.StatusCode()
		return s >= 500 || s == 429
	}
	return true
}
