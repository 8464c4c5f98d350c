package workers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/config"
)

func TestHostIsolationSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := func(runAs, dataDir, workDir string, dev bool) Options {
		return Options{
			Config: &config.Config{ExecutorRunAs: runAs, DataDir: dataDir, WorkDir: workDir},
			Logger: slog.New(slog.DiscardHandler), Name: "exec-1", Dev: dev,
		}
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")

	if os.Geteuid() != 0 {
		_, err := hostIsolation(ctx, opts("65534", data, "/tmp/w", false), "executor")
		require.ErrorContains(t, err, "needs this executor to run as root")
		_, err = hostIsolation(ctx, opts("root", data, "", false), "executor")
		require.ErrorContains(t, err, "not root")
		ra, err := hostIsolation(ctx, opts("", data, "", false), "executor")
		require.NoError(t, err, "a non-root executor runs builds as itself (with a warning)")
		require.Nil(t, ra)
		return
	}
	_, err := hostIsolation(ctx, opts("", data, "", false), "executor")
	require.ErrorContains(t, err, "SLUICE_EXECUTOR_RUN_AS")
	require.ErrorContains(t, err, "runs as root on the host runtime")
	for _, o := range []Options{opts("", data, "", true), opts("root", data, "", false)} {
		ra, err := hostIsolation(ctx, o, "executor")
		require.NoError(t, err, "sluice dev and an explicit root only warn")
		require.Nil(t, ra)
	}
	ra, err := hostIsolation(ctx, opts("", data, "", false), "controller")
	require.NoError(t, err, "a controller warns")
	require.Nil(t, ra)

	_, err = hostIsolation(ctx, opts("65534", data, "", false), "executor")
	require.ErrorContains(t, err, "must lie outside SLUICE_DATA_DIR")
	_, err = hostIsolation(ctx, opts("65534", data, filepath.Join(data, "ws"), false), "executor")
	require.ErrorContains(t, err, "must lie outside SLUICE_DATA_DIR")
	_, err = hostIsolation(ctx, opts("65534", data, filepath.Join(dir, "ws"), false), "executor")
	require.ErrorContains(t, err, "cannot be entered by 65534", "t.TempDir is 0700")

	_, err = hostIsolation(ctx, opts("no-such-user-x", data, "", false), "executor")
	require.ErrorContains(t, err, `SLUICE_EXECUTOR_RUN_AS: no user "no-such-user-x"`)
}
