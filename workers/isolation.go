package workers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-ci/sluice/runner"
)

// hostIsolation applies SLUICE_EXECUTOR_RUN_AS for a member whose builds run
// on the host runtime and returns the user they run as (nil: the member's
// own). With a user to switch to, the data directory is made 0700 (the
// secret key, outbox and mirrors stay out of the builds' reach) and the
// workspace root, outside it, is made reachable. An executor running as
// root with no setting refuses to start: its builds could read its token
// (/proc/<pid>/environ) and its data; "root" accepts that, and `sluice dev`
// (o.Dev) and controllers only warn.
func hostIsolation(ctx context.Context, o Options, role string) (*runner.RunAs, error) {
	cfg := o.Config
	ra, err := runner.ParseRunAs(cfg.ExecutorRunAs)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_EXECUTOR_RUN_AS: %w", err)
	}
	euid := os.Geteuid()
	if ra == nil {
		switch {
		case cfg.ExecutorRunAs == runner.RunAsRoot || (cfg.ExecutorRunAs != "" && euid == 0):
			if euid != 0 {
				return nil, fmt.Errorf("SLUICE_EXECUTOR_RUN_AS=%s: this %s runs as uid %d, not root; unset it (builds then run as uid %d) or name the user builds run as", cfg.ExecutorRunAs, role, euid, euid)
			}
			o.Logger.WarnContext(ctx, "host_builds_run_as_root", "member", o.Name,
				"detail", "SLUICE_EXECUTOR_RUN_AS=root: builds on the host run as root and can read this worker's token, environment and data directory; run only trusted code here")
		case euid == 0 && role == "executor" && !o.Dev:
			return nil, fmt.Errorf("executor %s runs as root on the host runtime: its builds would run as root and could read its token and data directory. "+
				"Set SLUICE_EXECUTOR_RUN_AS to the user builds run as (a user name or uid[:gid], e.g. 65534), or SLUICE_EXECUTOR_RUN_AS=root to accept that (trusted code only), "+
				"or run builds in containers (SLUICE_EXECUTOR_RUNTIME=docker or podman)", o.Name)
		default:
			o.Logger.WarnContext(ctx, "host_builds_not_isolated", "member", o.Name, "uid", euid,
				"detail", "builds on the host run as this worker's user and can read its token (/proc/<pid>/environ) and data directory: run only trusted code here, or set SLUICE_EXECUTOR_RUN_AS (docs/security.md)")
		}
		return nil, nil //nolint:nilnil // no switch
	}
	if euid != 0 {
		return nil, fmt.Errorf("SLUICE_EXECUTOR_RUN_AS=%s: running builds as another user needs this %s to run as root (it runs as uid %d)", cfg.ExecutorRunAs, role, euid)
	}
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_DATA_DIR: %w", err)
	}
	work, err := filepath.Abs(cfg.Workspaces())
	if err != nil {
		return nil, fmt.Errorf("SLUICE_WORK_DIR: %w", err)
	}
	if rel, err := filepath.Rel(data, work); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("SLUICE_EXECUTOR_RUN_AS=%s: the workspaces (%s) must lie outside SLUICE_DATA_DIR (%s), which builds must not read: set SLUICE_WORK_DIR, e.g. /var/tmp/sluice-work", cfg.ExecutorRunAs, work, data)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("SLUICE_DATA_DIR: %w", err)
	}
	if err := os.Chmod(data, 0o700); err != nil { //nolint:gosec // a directory: its owner enters it
		return nil, fmt.Errorf("SLUICE_DATA_DIR: make it 0700: %w", err)
	}
	// The workspace root: builds may enter it, not list it.
	if err := os.MkdirAll(work, 0o711); err != nil {
		return nil, fmt.Errorf("SLUICE_WORK_DIR: %w", err)
	}
	if err := os.Chmod(work, 0o711); err != nil { //nolint:gosec // builds enter it, never list it
		return nil, fmt.Errorf("SLUICE_WORK_DIR: %w", err)
	}
	if err := ra.Traversable(work); err != nil {
		return nil, fmt.Errorf("SLUICE_WORK_DIR: builds run as %s could not reach their workspaces: %w", ra, err)
	}
	o.Logger.InfoContext(ctx, "host_builds_run_as", "member", o.Name, "user", ra.String(), "data_dir", data, "work_dir", work)
	return ra, nil
}
