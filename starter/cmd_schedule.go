package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
)

func (a *app) scheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Show, pause, unpause or trigger a periodic job's schedule",
		Long: `Jobs with screwdriver.cd/buildPeriodically run from a Temporal Schedule, one per
job (visible on the Temporal Web UI's Schedules page). Pause stops new runs,
unpause resumes them, trigger runs the job once now. Show lists the latest due
times with what became of each: the event it started, or skipped and why.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "show PIPELINE JOB",
		Short:   "List a periodic job's latest due times and what became of each",
		Example: "  sluice schedule show myapp nightly\n  sluice schedule show myapp nightly -o json",
		Args:    args("PIPELINE", "JOB"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			v, err := a.client().Schedule(cmd.Context(), argv[0], argv[1])
			if err != nil {
				return err
			}
			return a.print(v, func(w io.Writer) error { return writeSchedule(w, v) })
		},
	})
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

func writeSchedule(w io.Writer, v api.ScheduleView) error {
	var f cliout.Fields
	f.Add("schedule", v.Pipeline+"/"+v.Job)
	f.Add("cron", v.Cron+" (UTC)")
	paused := "no"
	if v.Paused {
		paused = "yes"
	}
	f.Add("paused", paused)
	f.Add("note", v.Note)
	f.Add("temporal counts", fmt.Sprintf("%d missed (catch-up window), %d skipped (overlap)", v.MissedCatchupWindow, v.OverlapSkipped))
	if err := f.Write(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t := cliout.NewTable(w, "DUE", "OUTCOME", "EVENT", "STATUS", "REASON")
	for _, o := range v.Occurrences {
		t.Row(o.Due.UTC().Format(time.RFC3339), o.Outcome, cliout.Or(o.Event, cliout.Dash), cliout.Or(string(o.Status), cliout.Dash), cliout.Or(o.Reason, cliout.Dash))
	}
	return t.Flush()
}
