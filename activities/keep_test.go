package activities

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/runner"
)

// recordingBuildData keeps what it is given; saveMeta, when set, answers
// the metadata saves first.
type recordingBuildData struct {
	mu        sync.Mutex
	saveMeta  func() error
	artifact  func(path string) error
	metas     []MetaSave
	artifacts map[string]string
}

func (d *recordingBuildData) StartMeta(context.Context, MetaStart) ([]byte, error) {
	return []byte("{}"), nil
}

func (d *recordingBuildData) SaveMeta(_ context.Context, req MetaSave) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.saveMeta != nil {
		if err := d.saveMeta(); err != nil {
			return err
		}
	}
	d.metas = append(d.metas, req)
	return nil
}

func (d *recordingBuildData) SaveArtifact(_ context.Context, req ArtifactSave) error {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.artifact != nil {
		if err := d.artifact(req.Path); err != nil {
			return err
		}
	}
	if d.artifacts == nil {
		d.artifacts = map[string]string{}
	}
	d.artifacts[req.Path] = string(b) + " by " + req.Credential
	return nil
}

// diedWhileKeeping is an outbox entry saved by an executor that was
// killed after the steps ended and before it kept the build's metadata and
// artifacts (in root).
func diedWhileKeeping(t *testing.T, outbox, root string) pendingResult {
	t.Helper()
	artifacts := filepath.Join(root, "artifacts")
	require.NoError(t, os.MkdirAll(filepath.Join(artifacts, "dist"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(artifacts, "dist", "app"), []byte("binary"), 0o600))
	p := pendingResult{
		BuildID: "p/build/1", Attempt: 2, TaskToken: []byte("tok"), Saved: time.Now(), HeartbeatTimeout: 10 * time.Second,
		Result: RunBuildResult{Executor: "exec", Status: runner.StatusSuccess, LogKey: "p/build/1/2", Steps: []StepResult{{Name: "make"}}},
		Keep: &keepWork{
			Build: "p/build/1", Attempt: 2, Status: "SUCCESS", Credential: "cred-2",
			Meta: []byte(`{"version":"1.2.3"}`), ArtifactsDir: artifacts, Root: root,
		},
	}
	died := &Activities{Logger: discardLogger(), Outbox: outbox}
	_, err := died.saveResult(p)
	require.NoError(t, err)
	return p
}

// TestRestartedExecutorKeepsOutputsThenDelivers: an executor killed
// between the steps' end and keeping the build's outputs keeps them when
// it starts again, heartbeating the attempt meanwhile (the API may be down
// for a while), then delivers the result: the build does not run again.
func TestRestartedExecutorKeepsOutputsThenDelivers(t *testing.T) {
	t.Parallel()
	outbox, root := t.TempDir(), filepath.Join(t.TempDir(), "attempt-2.sd")
	diedWhileKeeping(t, outbox, root)

	down := 2
	data := &recordingBuildData{saveMeta: func() error {
		if down > 0 {
			down--
			return statusErr(503) // the controller behind the API is down
		}
		return nil
	}}
	rep := &fakeReporter{}
	restarted := &Activities{Logger: discardLogger(), Outbox: outbox, Reporter: rep, BuildData: data, ArtifactMax: 1 << 20}
	restarted.DeliverPending(t.Context())

	require.Zero(t, down, "the metadata save was retried through the outage")
	require.Equal(t, []MetaSave{{Build: "p/build/1", Attempt: 2, Status: "SUCCESS", Meta: []byte(`{"version":"1.2.3"}`), Credential: "cred-2"}}, data.metas)
	require.Equal(t, map[string]string{"dist/app": "binary by cred-2"}, data.artifacts)
	got := rep.results()
	require.Len(t, got, 1)
	require.Equal(t, runner.StatusSuccess, got[0].Status, got[0].Reason)
	require.Len(t, got[0].Steps, 2)
	require.Equal(t, artifactsLog, got[0].Steps[1].Name)
	require.Zero(t, got[0].Steps[1].ExitCode)
	rep.mu.Lock()
	require.Positive(t, rep.beats, "the attempt was heartbeaten while its outputs were kept")
	rep.mu.Unlock()
	require.NoDirExists(t, root, "the attempt's build files are gone once kept")
	entries, err := os.ReadDir(outbox)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestKeepFailureFailsTheBuild: artifacts the API refuses fail the build,
// with the reason and a failed artifacts step.
func TestKeepFailureFailsTheBuild(t *testing.T) {
	t.Parallel()
	outbox, root := t.TempDir(), filepath.Join(t.TempDir(), "attempt-2.sd")
	diedWhileKeeping(t, outbox, root)
	data := &recordingBuildData{artifact: func(string) error { return statusErr(413) }}
	rep := &fakeReporter{}
	restarted := &Activities{Logger: discardLogger(), Outbox: outbox, Reporter: rep, BuildData: data, ArtifactMax: 1 << 20}
	restarted.DeliverPending(t.Context())

	got := rep.results()
	require.Len(t, got, 1)
	require.Equal(t, runner.StatusFailure, got[0].Status)
	require.Contains(t, got[0].Reason, "artifacts: artifact dist/app")
	require.Equal(t, 1, got[0].Steps[1].ExitCode)
	require.Len(t, data.metas, 1, "the metadata is kept all the same")
}

// TestKeepWorkFor: a metadata file the steps broke fails the build; no API
// and no artifacts leave nothing to keep.
func TestKeepWorkFor(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f := buildFiles{root: root, metaDir: filepath.Join(root, "meta"), artifactsDir: filepath.Join(root, "artifacts")}
	require.NoError(t, os.MkdirAll(f.metaDir, 0o700))
	require.NoError(t, os.MkdirAll(f.artifactsDir, 0o700))
	in := RunBuildInput{BuildID: "p/j/1", Attempt: 1}

	res := RunBuildResult{Status: runner.StatusSuccess}
	require.Nil(t, (&Activities{}).keepWorkFor(in, f, &res, "c", true), "no API, no artifacts: nothing to keep")

	require.NoError(t, os.WriteFile(f.metaPath(), []byte("[1]"), 0o600))
	a := &Activities{BuildData: &recordingBuildData{}}
	res = RunBuildResult{Status: runner.StatusSuccess}
	require.Nil(t, a.keepWorkFor(in, f, &res, "c", true))
	require.Equal(t, runner.StatusFailure, res.Status)
	require.Contains(t, res.Reason, "$SD_META_PATH")

	require.NoError(t, os.WriteFile(f.metaPath(), []byte(`{"a":1}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(f.artifactsDir, "x"), []byte("x"), 0o600))
	res = RunBuildResult{Status: runner.StatusFailure, Reason: "step make failed"}
	k := a.keepWorkFor(in, f, &res, "c", false)
	require.NotNil(t, k)
	require.Equal(t, "FAILURE", k.Status)
	require.JSONEq(t, `{"a":1}`, string(k.Meta))
	require.Empty(t, k.ArtifactsDir, "an attempt Temporal gave up on uploads no artifacts")
	require.NotEmpty(t, a.keepWorkFor(in, f, &res, "c", true).ArtifactsDir)
}
