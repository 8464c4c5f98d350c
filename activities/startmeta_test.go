package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/runner"
)

// startMetaData answers StartMeta after delay with meta, or with err.
type startMetaData struct {
	delay time.Duration
	meta  string
	err   error
	calls atomic.Int32
	asked atomic.Pointer[activities.MetaStart]
}

func (d *startMetaData) StartMeta(ctx context.Context, req activities.MetaStart) ([]byte, error) {
	d.calls.Add(1)
	d.asked.Store(&req)
	select {
	case <-time.After(d.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []byte(d.meta), d.err
}

func (d *startMetaData) SaveMeta(context.Context, activities.MetaSave) error { return nil }

func (d *startMetaData) SaveArtifact(context.Context, activities.ArtifactSave) error { return nil }

// notFound is an API answer that is not retried.
type notFound struct{}

func (notFound) Error() string   { return "404 build app/main/7 not found" }
func (notFound) StatusCode() int { return 404 }

// The metadata a build starts with is fetched from the claim on, beside
// the checkout: a slow answer still reaches the first step, and a refused
// one fails the build before any step, saying so.
func TestRunBuildStartsWithItsMetadata(t *testing.T) {
	t.Parallel()
	r := setupRepo(t)

	t.Run("slow answer", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		data := &startMetaData{delay: 300 * time.Millisecond, meta: `{"release":{"channel":"beta"}}`}
		h.acts.BuildData = data
		out := filepath.Join(t.TempDir(), "meta")
		res, err := h.runBuild(t, buildInput(r, step("read", "cat $SD_META_PATH > "+out)))
		require.NoError(t, err)
		require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
		require.JSONEq(t, `{"release":{"channel":"beta"}}`, readFile(t, out))
		require.Equal(t, int32(1), data.calls.Load())
		// Asked for the claimed attempt, with the credential whose hash
		// the claim carried.
		asked := data.asked.Load()
		require.Equal(t, "app/main/7", asked.Build)
		require.Equal(t, 1, asked.Attempt)
		require.Equal(t, []string{activities.CredentialHash(asked.Credential)}, h.claimer.gotHashes())
	})
	t.Run("brought by the task", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		data := &startMetaData{meta: `{"from":"the API"}`}
		h.acts.BuildData = data
		out := filepath.Join(t.TempDir(), "meta")
		in := buildInput(r, step("read", "cat $SD_META_PATH > "+out))
		in.StartMeta = map[string]any{"build": map[string]any{"buildId": "app/main/7"}}
		res, err := h.runBuild(t, in)
		require.NoError(t, err)
		require.Equal(t, runner.StatusSuccess, res.Status, res.Reason)
		require.JSONEq(t, `{"build":{"buildId":"app/main/7"}}`, readFile(t, out))
		require.Zero(t, data.calls.Load(), "the API is not asked for what the task brought")
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		h.acts.BuildData = &startMetaData{err: notFound{}}
		out := filepath.Join(t.TempDir(), "ran")
		res, err := h.runBuild(t, buildInput(r, step("mark", "touch "+out)))
		require.NoError(t, err)
		require.Equal(t, runner.StatusFailure, res.Status)
		require.Equal(t, "metadata: read the metadata build app/main/7 starts with: 404 build app/main/7 not found", res.Reason)
		_, statErr := os.Stat(out)
		require.ErrorIs(t, statErr, os.ErrNotExist, "no step ran")
	})
}
