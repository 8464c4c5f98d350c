package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
	"github.com/sluice-ci/sluice/workflows"
)

// waitInterval is how often --wait asks for the event.
const waitInterval = time.Second

func (a *app) eventCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "event",
		Short: "Start, list, show, watch, approve, cancel and restart events",
		Long: `An event is one trigger of a pipeline at one commit; it runs the pipeline's jobs
as a graph, one build per job. EVENT is written <pipeline>/<number>, e.g. myapp/12.`,
	}
	cmd.AddCommand(a.eventStartCmd(), a.eventListCmd(), a.eventShowCmd(), a.eventWatchCmd(),
		a.eventApproveCmd(), a.eventCancelCmd(), a.eventRestartCmd(), a.eventRerunCmd())
	return cmd
}

func (a *app) eventStartCmd() *cobra.Command {
	var s cliout.EventStart
	var force, wait bool
	var params []string
	var metaFlags []string
	cmd := &cobra.Command{
		Use:   "start PIPELINE [flags]",
		Short: "Start an event and print its ID",
		Long: `Start an event of PIPELINE and print its ID on stdout (only the ID, so scripts
can capture it; with -o json the whole answer).

Without --type the event is manual, or a commit event when --sha or --branch is
given without --start-from. --sha defaults to the head of the branch.
--start-from starts the event at one job (and what follows it); --force starts
builds through freeze windows.

-p NAME=VALUE gives a pipeline parameter (the spec's top-level "parameters");
the others take their default. A name the spec does not declare, or a value
outside a parameter's list of choices, is refused and starts nothing. Builds
see each parameter as the environment variable SD_PARAM_<NAME>.

With --wait the command waits for the event to end and exits 0 only when it
succeeded (every build did); otherwise it prints the failing builds and why on
stderr and exits 1.`,
		Example: `  sluice event start myapp
  sluice event start myapp --branch main --wait
  id=$(sluice event start myapp --type pr --pr 12 --branch main --ref feature)
  sluice event start myapp --type tag --ref v1.2.0 --sha 3f2c1ab
  sluice event start myapp --start-from deploy --force
  sluice event start myapp -p target=staging -p dry_run=true
  sluice event start myapp --meta release.channel=beta --meta notes='{"ticket":42}'`,
		Args: args("PIPELINE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := s.Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			given, err := parseParams(params)
			if err != nil {
				return err
			}
			meta, err := parseMetaFlags(metaFlags)
			if err != nil {
				return err
			}
			started, err := a.client().StartEvent(ctx, argv[0], api.StartEventRequest{
				SHA: s.SHA, Branch: s.Branch, Type: s.Type, Ref: s.Ref, PR: s.PR, StartFrom: s.StartFrom, Force: force,
				Parameters: given, Meta: meta,
			})
			if err != nil {
				return err
			}
			return a.startedThenWait(ctx, started, wait)
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.SHA, "sha", "", "commit to build (default: the head of the branch)")
	f.StringVar(&s.Branch, "branch", "", "branch pushed, or a pull request's target branch (default: the pipeline's)")
	f.StringVar(&s.Type, "type", "", "event type: "+cliout.JoinOr(cliout.TriggerTypes)+" (default: manual, or commit with --sha/--branch)")
	f.StringVar(&s.Ref, "ref", "", "tag or release name, or a pull request's head branch")
	f.IntVar(&s.PR, "pr", 0, "pull request number (--type pr and pr-closed)")
	f.StringVar(&s.StartFrom, "start-from", "", "start the event at this job")
	f.BoolVar(&force, "force", false, "start builds through freeze windows")
	f.BoolVar(&wait, "wait", false, "wait for the event to end; exit 1 unless it succeeded")
	f.StringArrayVarP(&params, "param", "p", nil, "pipeline parameter NAME=VALUE (repeatable); others take the spec's default")
	f.StringArrayVar(&metaFlags, "meta", nil, "KEY=VALUE metadata every build of the event starts with (dotted KEY; a VALUE that parses as JSON is kept as JSON); repeatable")
	return cmd
}

// parseParams turns -p NAME=VALUE flags into a map: each needs a name and
// an "=", and a name may be given once.
func parseParams(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("-p %q: want NAME=VALUE", f)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("-p %s: given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

// parseMetaFlags reads --meta KEY=VALUE flags.
func parseMetaFlags(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError(fmt.Errorf("--meta %q: want KEY=VALUE", kv))
		}
		out[k] = v
	}
	return out, nil
}

// printStarted prints a started event's ID (text) or the answer (JSON).
func (a *app) printStarted(ev api.EventStarted) error {
	if ev.Duplicate && a.output != "json" {
		_, _ = fmt.Fprintf(a.stderr, "sluice: event %s was already started by this request\n", ev.ID) // a notice: nowhere to report its failure
	}
	if a.output != "json" {
		for _, w := range ev.Warnings {
			_, _ = fmt.Fprintf(a.stderr, "sluice: warning: %s\n", w) // a notice: nowhere to report its failure
		}
	}
	return a.print(ev, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, ev.ID)
		return err
	})
}

// waitNumberFor bounds how long the CLI waits for a busy pipeline to
// number an admitted event (a pipeline remembers its last 1,000
// admissions: one forgotten would otherwise be waited for for ever).
const waitNumberFor = 10 * time.Minute

// numberInterval is how often the CLI asks about a pending start: more often
// than waitInterval, since the answer is usually a fraction of a second away.
const numberInterval = 300 * time.Millisecond

// numbered is started once its pipeline numbered it. The API answers a
// start it could not number within SLUICE_ADMIT_WAIT as pending, with an
// admission ID; the start is kept and will run, and the CLI asks until
// the event has its number, so that it always prints the event's ID.
func (a *app) numbered(ctx context.Context, started api.EventStarted) (api.EventStarted, error) {
	if !started.Pending {
		return started, nil
	}
	if a.output != "json" {
		_, _ = fmt.Fprintf(a.stderr, "sluice: pipeline %s is busy: the start is admitted as %s; waiting for its number (an interrupt stops the waiting, not the start)\n", started.Pipeline, started.Admission) // a notice: nowhere to report its failure
	}
	wctx, cancel := context.WithTimeout(ctx, waitNumberFor)
	defer cancel()
	ev, err := a.client().Numbered(wctx, started, numberInterval)
	switch {
	case errors.Is(err, context.Canceled):
		return ev, interrupted(fmt.Sprintf("stopped waiting; the start admitted as %s goes on (sluice event list %s)", started.Admission, started.Pipeline))
	case errors.Is(err, context.DeadlineExceeded):
		return ev, fmt.Errorf("pipeline %s has not numbered the start admitted as %s within %s; `sluice event list %s` shows it once it has",
			started.Pipeline, started.Admission, waitNumberFor, started.Pipeline)
	case err != nil:
		return ev, err
	}
	if a.output != "json" {
		_, _ = fmt.Fprintf(a.stderr, "sluice: admitted as %s, numbered %s\n", started.Admission, ev.ID) // a notice: nowhere to report its failure
	}
	return ev, nil
}

// waitEvent polls an event until it ends and turns its outcome into the
// exit code.
func (a *app) waitEvent(ctx context.Context, id string) error {
	c := a.client()
	var ev api.Event
	err := poll(ctx, waitInterval, func(ctx context.Context) (bool, error) {
		var err error
		ev, err = c.GetEvent(ctx, id)
		return err == nil && cliout.Final(string(ev.Status)), err
	})
	if errors.Is(err, context.Canceled) {
		return interrupted(fmt.Sprintf("stopped waiting; event %s goes on (sluice event watch %s)", id, id))
	}
	if err != nil {
		return err
	}
	return eventExit(ev)
}

// eventExit is nil for a successful event, else an exit error whose message
// is the one-line summary of what failed.
func eventExit(ev api.Event) error {
	code, summary := cliout.Outcome(cliEvent(ev))
	if code == 0 {
		return nil
	}
	return &exitError{code: code, err: errors.New(summary)}
}

func cliBuild(b api.Build) cliout.Build {
	return cliout.Build{
		ID: b.ID, Job: b.Job, Status: string(b.Status), Reason: waitSummary(b, time.Now()) + b.Reason, Queue: b.Queue,
		Executor: b.Executor, Start: b.StartTime, End: b.EndTime,
	}
}

func cliEvent(ev api.Event) cliout.Event {
	out := cliout.Event{
		ID: ev.ID, Status: string(ev.Status), Reason: ev.Reason, SHA: ev.SHA,
		Trigger: cliout.Trigger{
			Kind: string(ev.Trigger.Kind), Branch: ev.Trigger.Branch, Ref: ev.Trigger.Ref,
			PR: ev.Trigger.PR, Remote: ev.Trigger.Remote, Sender: ev.Trigger.Sender,
		},
		StartFrom: ev.StartFrom, Parent: ev.Parent, Start: ev.StartTime, End: ev.EndTime, Warnings: ev.Warnings,
	}
	for _, j := range ev.Jobs {
		out.Jobs = append(out.Jobs, cliout.Job{Name: j.Job, Status: string(j.Status), Reason: j.Reason, Builds: j.Builds})
	}
	for _, b := range ev.Builds {
		out.Builds = append(out.Builds, cliBuild(b))
	}
	return out
}

func (a *app) eventListCmd() *cobra.Command {
	var limit int
	var f api.EventFilter
	var trigger string
	cmd := &cobra.Command{
		Use:     "list PIPELINE [--branch B] [--pr N] [--trigger KIND] [--limit N]",
		Short:   "List a pipeline's recent events, newest first",
		Example: "  sluice event list myapp\n  sluice event list myapp --limit 5 -o json\n  sluice event list myapp --trigger pr --branch main",
		Args:    args("PIPELINE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := limitFlag(limit); err != nil {
				return err
			}
			if f.PR < 0 {
				return fmt.Errorf("--pr %d: want a pull request number", f.PR)
			}
			if trigger != "" {
				f.Trigger = workflows.TriggerKind(strings.ToLower(trigger))
				if !f.Trigger.Valid() {
					return fmt.Errorf("--trigger %q: want commit, pr, pr-closed, release, tag, manual, periodic or remote", trigger)
				}
			}
			f.Limit = limit
			evs, err := a.client().ListEventsFiltered(cmd.Context(), argv[0], f)
			if err != nil {
				return err
			}
			if evs == nil {
				evs = []api.Event{}
			}
			return a.print(evs, func(w io.Writer) error {
				if len(evs) == 0 {
					_, err := fmt.Fprintf(w, "no events for pipeline %s (start one with: sluice event start %s)\n", argv[0], argv[0])
					return err
				}
				now := time.Now()
				t := cliout.NewTable(w, "ID", "STATUS", "SHA", "STARTED", "DURATION")
				for _, ev := range evs {
					t.Row(ev.ID, cliout.Status(string(ev.Status)), cliout.ShortSHA(ev.SHA), cliout.AgoOr(ev.StartTime, now),
						cliout.ElapsedText(ev.StartTime, ev.EndTime, now))
				}
				return t.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many events to list (1 to 1000)")
	cmd.Flags().StringVar(&f.Branch, "branch", "", "only events of this branch (a pull request's: the branch it targets)")
	cmd.Flags().IntVar(&f.PR, "pr", 0, "only events of this pull request")
	cmd.Flags().StringVar(&trigger, "trigger", "", "only events of this trigger: commit, pr, pr-closed, release, tag, manual, periodic, remote")
	return cmd
}

// eventArg checks and normalizes an EVENT argument.
func eventArg(s string) (string, error) { return cliout.EventID("EVENT", s) }

func (a *app) eventShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show EVENT",
		Short: "Show an event and its builds",
		Long: `Show an event: status and why, commit, trigger, and one row per build (or per
job that did not run, with the reason). With -o json the whole event.`,
		Example: "  sluice event show myapp/12\n  sluice event show myapp/12 -o json",
		Args:    args("EVENT"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := eventArg(argv[0])
			if err != nil {
				return err
			}
			ev, err := a.client().GetEvent(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.print(ev, func(w io.Writer) error { return writeEvent(w, ev, time.Now()) })
		},
	}
}

func writeEvent(w io.Writer, ev api.Event, now time.Time) error {
	e := cliEvent(ev)
	var f cliout.Fields
	f.Add("event", ev.ID)
	f.Add("status", cliout.Status(string(ev.Status)))
	f.Add("reason", ev.Reason)
	if ev.WaitCode != "" {
		f.Add("wait code", string(ev.WaitCode))
	}
	f.Add("sha", cliout.Or(ev.SHA, cliout.Dash))
	f.Add("trigger", e.Trigger.String())
	f.Add("acts for", ev.ActsFor)
	f.Add("base sha", ev.BaseSHA)
	if ap := ev.Approval; ap != nil {
		if ap.ApprovedBy != "" {
			f.Add("approved by", fmt.Sprintf("%s, %s (%s)", ap.ApprovedBy, cliout.Timestamp(ap.ApprovedAt, now), ap.Required))
		} else {
			f.Add("approval", "needed: "+ap.Required)
		}
	}
	if len(ev.StartJobs) > 0 {
		f.Add("start from", strings.Join(ev.StartJobs, ", "))
	} else {
		f.Add("start from", ev.StartFrom)
	}
	if ev.Parent > 0 {
		what := "restart of"
		if ev.Rerun {
			what = "re-run of"
		}
		f.Add(what, fmt.Sprintf("%s/%d", ev.Pipeline, ev.Parent))
	}
	f.Add("started", cliout.Timestamp(ev.StartTime, now))
	f.Add("duration", cliout.ElapsedText(ev.StartTime, ev.EndTime, now))
	f.Add("commit statuses", ev.Statuses)
	for _, name := range slices.Sorted(maps.Keys(ev.Parameters)) {
		f.Add("parameter", name+"="+ev.Parameters[name])
	}
	for _, warn := range ev.Warnings {
		f.Add("warning", warn)
	}
	if err := f.Write(w); err != nil {
		return err
	}
	rows := cliout.Rows(e)
	if len(rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t := cliout.NewTable(w, "ID", "JOB", "STATUS", "QUEUE", "EXECUTOR", "STARTED", "DURATION", "REASON")
	for _, r := range rows {
		t.Row(cliout.Or(r.ID, cliout.Dash), r.Label, cliout.Status(r.Status), cliout.Or(r.Queue, cliout.Dash),
			cliout.Or(r.Executor, cliout.Dash), cliout.AgoOr(r.Start, now), cliout.ElapsedText(r.Start, r.End, now),
			cliout.Or(r.Reason, cliout.Dash))
	}
	return t.Flush()
}

func (a *app) eventWatchCmd() *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch EVENT [--interval 1s]",
		Short: "Watch an event live until it ends",
		Long: `Show one line per job with its status, duration and a progress bar, redrawn
until the event ends. Progress is estimated from the job's recent successful
builds; a job without history shows a moving bar. When stdout is not a
terminal, a new block is printed only when something changed; with -o json,
the event is printed as one JSON line each time it changes.

Exits like 'event start --wait': 0 only when the event succeeded.`,
		Example: "  sluice event watch myapp/12\n  sluice event watch $(sluice event start myapp)",
		Args:    args("EVENT"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := eventArg(argv[0])
			if err != nil {
				return err
			}
			if interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %s: want at least 100ms", interval)
			}
			return a.watchEvent(cmd.Context(), id, interval)
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to refresh")
	return cmd
}

// watchEvent redraws an event until it ends.
func (a *app) watchEvent(ctx context.Context, id string, interval time.Duration) error {
	c := a.client()
	isTerm, width := a.terminal()
	typical := map[string]time.Duration{}
	var (
		last  api.Event
		prev  cliout.View
		lines int
		frame int
	)
	err := poll(ctx, interval, func(ctx context.Context) (bool, error) {
		ev, err := c.GetEvent(ctx, id)
		if err != nil {
			return false, err
		}
		last = ev
		for _, b := range ev.Builds {
			if _, ok := typical[b.Job]; !ok {
				typical[b.Job] = a.typicalDuration(ctx, c, ev.Pipeline, b.Job)
			}
		}
		view := cliout.Watch(cliEvent(ev), cliout.WatchOptions{Now: time.Now(), Frame: frame, Width: width, Typical: typical})
		frame++
		changed := view.Changed(prev)
		first := prev.Lines == nil
		prev = view
		switch {
		case a.output == "json":
			if changed {
				err = a.printLine(ev)
			}
		case isTerm:
			lines, err = cliout.Redraw(a.stdout, lines, view.Lines)
		case changed:
			sep := "\n"
			if first {
				sep = ""
			}
			_, err = fmt.Fprint(a.stdout, sep+strings.Join(view.Lines, "\n")+"\n")
		}
		return cliout.Final(string(ev.Status)), err
	})
	if errors.Is(err, context.Canceled) {
		return interrupted(fmt.Sprintf("stopped watching; event %s goes on", id))
	}
	if err != nil {
		return err
	}
	return eventExit(last)
}

// typicalDuration is the median duration of a job's recent successful
// builds; 0 when there is none (or the lookup fails: the bar then spins).
func (a *app) typicalDuration(ctx context.Context, c *api.Client, pipeline, job string) time.Duration {
	bs, err := c.ListBuilds(ctx, api.BuildFilter{Pipeline: pipeline, Job: job, Status: "SUCCESS", Limit: 5})
	if err != nil {
		return 0
	}
	ds := make([]time.Duration, 0, len(bs))
	for _, b := range bs {
		if !b.StartTime.IsZero() && !b.EndTime.IsZero() {
			ds = append(ds, b.EndTime.Sub(b.StartTime))
		}
	}
	return cliout.Typical(ds)
}

func (a *app) eventApproveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "approve EVENT",
		Short: "Approve a pull request's event that waits for approval",
		Long: `Approve an event that waits for approval: a pull request's event held back by
its pipeline's screwdriver.cd/restrictPR annotation (read from the base branch's
spec). Its builds start, and you are recorded as who approved it. Read the pull
request's changes first: its steps run with the pipeline's queues and secrets
for its jobs. Only a pipeline admin may approve; approving an event that does
not wait for approval is an error.`,
		Example: "  sluice event approve myapp/12",
		Args:    args("EVENT"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := eventArg(argv[0])
			if err != nil {
				return err
			}
			ap, err := a.client().ApproveEvent(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.done(map[string]any{"approved": id, "approval": ap}, "approved event %s", id)
		},
	}
}

func (a *app) eventCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel EVENT",
		Short: "Cancel an event and all its builds",
		Long: `Cancel an event: waiting builds end ABORTED at once, running builds are killed
and end ABORTED, and no further job starts.`,
		Example: "  sluice event cancel myapp/12",
		Args:    args("EVENT"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := eventArg(argv[0])
			if err != nil {
				return err
			}
			if err := a.client().CancelEvent(cmd.Context(), id); err != nil {
				return err
			}
			return a.done(map[string]string{"cancelled": id}, "cancelled event %s", id)
		},
	}
}

func (a *app) eventRestartCmd() *cobra.Command {
	var from []string
	var force, wait bool
	cmd := &cobra.Command{
		Use:   "restart EVENT --from JOB [--from JOB2 ...] [--force] [--wait]",
		Short: "Start a new event from one or more jobs of an earlier one",
		Long: `Start a new event at the given jobs, reusing EVENT's commit and trigger. Every job
that succeeded in EVENT, or that EVENT itself inherited along its restart chain,
counts for joins (the restarted jobs excepted). Prints the new event's ID; --wait
waits for it as 'event start --wait' does.`,
		Example: "  sluice event restart myapp/12 --from test\n  sluice event restart myapp/12 --from unit --from lint --wait",
		Args:    args("EVENT"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := eventArg(argv[0])
			if err != nil {
				return err
			}
			if len(from) == 0 {
				return errors.New("--from: required: the job to restart from")
			}
			for _, j := range from {
				if err := cliout.JobName("--from", j); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			started, err := a.client().RestartEvent(ctx, id, api.RestartEventRequest{From: from, Force: force})
			if err != nil {
				return err
			}
			return a.startedThenWait(ctx, started, wait)
		},
	}
	cmd.Flags().StringArrayVar(&from, "from", nil, "job to restart from (required; repeat for several)")
	cmd.Flags().BoolVar(&force, "force", false, "start builds through freeze windows")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the new event to end; exit 1 unless it succeeded")
	return cmd
}

func (a *app) eventRerunCmd() *cobra.Command {
	var force, wait bool
	cmd := &cobra.Command{
		Use:   "rerun EVENT [--force] [--wait]",
		Short: "Re-run the jobs of an event that failed, were aborted or did not run",
		Long: `Start a new event at EVENT's commit that runs exactly the jobs that failed, were
aborted or collapsed in EVENT, and (through the graph) the jobs that did not run
because of them. Every success of EVENT and of its restart chain is inherited, so
two failed parents of a join are re-run together and the join follows.`,
		Example: "  sluice event rerun myapp/12 --wait",
		Args:    args("EVENT"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := eventArg(argv[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			started, err := a.client().RerunEvent(ctx, id, api.RerunEventRequest{Force: force})
			if err != nil {
				return err
			}
			return a.startedThenWait(ctx, started, wait)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "start builds through freeze windows")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the new event to end; exit 1 unless it succeeded")
	return cmd
}

// startedThenWait prints a started event's ID (once numbered) and, with
// wait, waits for it.
func (a *app) startedThenWait(ctx context.Context, started api.EventStarted, wait bool) error {
	started, err := a.numbered(ctx, started)
	if err != nil {
		return err
	}
	if err := a.printStarted(started); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	return a.waitEvent(ctx, started.ID)
}
