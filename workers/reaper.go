package workers

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/runner"
)

// guardLife makes sure nothing a build of this member starts outlives the
// member: it kills what the records of the member's earlier lives still
// hold (a SIGKILLed or OOM-killed process whose reaper did not run), and
// starts the reaper of this life, which kills this life's recorded
// process groups and removes the member's containers when this process
// ends, however it ends. It returns this life's record directory.
func (o Options) guardLife(ctx context.Context, name, rt string, labels map[string]string) string {
	base := filepath.Join(o.Config.Workspaces(), ".sluice-groups", strings.ReplaceAll(name, "/", "_"))
	killed, err := runner.KillRecordedGroups(base)
	if len(killed) > 0 {
		o.Logger.InfoContext(ctx, "orphan_process_groups_killed", "member", name, "pgids", killed)
	}
	if err != nil {
		o.Logger.WarnContext(ctx, "orphan_process_group_cleanup_failed", "member", name, "error", err)
	}
	life := filepath.Join(base, "life-"+strconv.Itoa(os.Getpid()))
	if len(o.Reaper) == 0 {
		return life
	}
	pid, err := runner.StartReaper(o.Reaper, runner.ReaperConfig{Records: life, Runtime: rt, Labels: labels})
	if err != nil {
		// Builds still run; what a lost attempt leaves is then killed
		// when this member starts again.
		o.Logger.WarnContext(ctx, "reaper_not_started", "member", name, "error", err)
		return life
	}
	o.Logger.InfoContext(ctx, "reaper_started", "member", name, "pid", pid, "records", life)
	return life
}
