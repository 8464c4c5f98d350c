package main

import (
	"github.com/spf13/cobra"
)

func (a *app) scheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Pause, unpause or trigger a periodic job's schedule",
		Long: `Jobs with screwdriver.cd/buildPeriodically run from a Temporal Schedule, one per
job (visible on the Temporal Web UI's Schedules page). Pause stops new runs,
unpause resumes them, trigger runs the job once now.`,
	}
	for _, act := range []struct{ name, short, done string }{
		{"pause", "Pause a periodic job's schedule", "paused"},
		{"unpause", "Resume a periodic job's schedule", "unpaused"},
		{"trigger", "Run a periodic job once now", "triggered"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:     act.name + " PIPELINE JOB",
			Short:   act.short,
			Example: "  sluice schedule " + act.name + " myapp nightly",
			Args:    args("PIPELINE", "JOB"),
			RunE: func(cmd *cobra.Command, argv []string) error {
				if err := a.client().ScheduleAction(cmd.Context(), argv[0], argv[1], act.name); err != nil {
					return err
				}
				return a.done(map[string]string{"pipeline": argv[0], "job": argv[1], "action": act.name},
					"%s the schedule of %s/%s", act.done, argv[0], argv[1])
			},
		})
	}
	return cmd
}
