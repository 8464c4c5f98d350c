package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
	"github.com/sluice-ci/sluice/workflows"
)

// followInterval is how often `build logs --follow` polls.
const followInterval = 500 * time.Millisecond

func (a *app) buildCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build",
		Short: "List, show and cancel builds, and read their logs",
		Long: `A build is one run of one job (one matrix permutation) in one event. BUILD is
written <pipeline>/<job>/<event>[.<permutation>], e.g. myapp/test/12.`,
	}
	cmd.AddCommand(a.buildListCmd(), a.buildShowCmd(), a.buildCancelCmd(), a.buildLogsCmd(), a.buildArtifactsCmd())
	return cmd
}

func (a *app) buildListCmd() *cobra.Command {
	var f api.BuildFilter
	var status, cause, since, until string
	cmd := &cobra.Command{
		Use:   "list [--pipeline P] [--job J] [--status S] [--cause C] [--event E] [--queue Q] [--pr N] [--branch B] [--executor X] [--since T] [--until T] [--limit N]",
		Short: "List builds, newest first",
		Example: `  sluice build list --pipeline myapp
  sluice build list --status queued --queue gpu
  sluice build list --cause executor-lost --pipeline myapp
  sluice build list --event myapp/12 -o json
  sluice build list --pipeline myapp --branch main --status failure --since 7d`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := limitFlag(f.Limit); err != nil {
				return err
			}
			if f.PR < 0 {
				return fmt.Errorf("--pr %d: want a pull request number", f.PR)
			}
			if status != "" {
				s, err := cliout.ParseStatus("--status", status)
				if err != nil {
					return err
				}
				f.Status = workflows.Status(s)
			}
			if cause != "" {
				c := workflows.Cause(strings.ToLower(cause))
				if !c.Valid() {
					return fmt.Errorf("--cause %q: want %s", cause, cliout.JoinOr(causeNames()))
				}
				f.Cause = c
			}
			if f.Event != "" {
				id, err := cliout.EventID("--event", f.Event)
				if err != nil {
					return err
				}
				f.Event = id
			}
			if f.Queue != "" {
				if err := cliout.QueueName("--queue", f.Queue); err != nil {
					return err
				}
			}
			var err error
			if f.Since, err = api.ParseListTime("--since", since, time.Now()); err != nil {
				return err
			}
			if f.Until, err = api.ParseListTime("--until", until, time.Now()); err != nil {
				return err
			}
			bs, err := a.client().ListBuilds(cmd.Context(), f)
			if err != nil {
				return err
			}
			if bs == nil {
				bs = []api.Build{}
			}
			return a.print(bs, func(w io.Writer) error {
				if len(bs) == 0 {
					_, err := fmt.Fprintln(w, "no builds match")
					return err
				}
				now := time.Now()
				t := cliout.NewTable(w, "ID", "STATUS", "QUEUE", "EXECUTOR", "STARTED", "DURATION", "REASON")
				for _, b := range bs {
					t.Row(b.ID, cliout.Status(string(b.Status)), cliout.Or(b.Queue, cliout.Dash), cliout.Or(b.Executor, cliout.Dash),
						cliout.AgoOr(b.StartTime, now), cliout.ElapsedText(b.StartTime, b.EndTime, now), cliout.Or(waitSummary(b, now)+b.Reason, cliout.Dash))
				}
				return t.Flush()
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Pipeline, "pipeline", "", "only builds of this pipeline")
	fl.StringVar(&f.Job, "job", "", "only builds of this job")
	fl.StringVar(&status, "status", "", "only builds with this status: "+cliout.JoinOr(cliout.BuildStatuses))
	fl.StringVar(&cause, "cause", "", "only ended builds with this end cause: "+cliout.JoinOr(causeNames()))
	fl.StringVar(&f.Event, "event", "", "only builds of this event (<pipeline>/<number>)")
	fl.StringVar(&f.Queue, "queue", "", "only builds on this queue")
	fl.IntVar(&f.PR, "pr", 0, "only builds of this pull request (their jobs read PR-<n>:<job>)")
	fl.StringVar(&f.Branch, "branch", "", "only builds of this branch (a pull request's: the branch it targets)")
	fl.StringVar(&f.Executor, "executor", "", "only builds this executor ran")
	fl.StringVar(&since, "since", "", "only builds created at or after this time (2026-11-26T10:00:00Z, 2026-11-26, or ago: 2h, 7d)")
	fl.StringVar(&until, "until", "", "only builds created before this time (same forms as --since)")
	fl.IntVar(&f.Limit, "limit", 50, "how many builds to list (1 to 1000)")
	return cmd
}

func (a *app) buildShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show BUILD",
		Short: "Show a build: status and why, times, attempts and steps",
		Long: `Show everything about a build: status and reason (for a waiting build, what it
waits for), queue, executor, times, the Temporal workflow that runs it (its
event's, unless its pipeline starts a workflow per build), every attempt
(dispatch to an executor) with its outcome, and every step with its exit code
and duration.`,
		Example: "  sluice build show myapp/test/12\n  sluice build show myapp/test/12 -o json",
		Args:    args("BUILD"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			b, err := a.client().GetBuild(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			return a.print(b, func(w io.Writer) error { return writeBuild(w, b, time.Now()) })
		},
	}
}

func writeBuild(w io.Writer, b api.Build, now time.Time) error {
	var f cliout.Fields
	f.Add("build", b.ID)
	f.Add("pipeline", b.Pipeline)
	f.Add("job", b.Job)
	if b.PR > 0 {
		f.Add("pull request", "#"+strconv.Itoa(b.PR))
	}
	f.Add("event", b.Event)
	f.Add("status", cliout.Status(string(b.Status)))
	if b.Status.Waiting() && b.Reason != "" {
		f.Add("waiting", b.Reason)
		if b.WaitCode != "" {
			f.Add("wait code", string(b.WaitCode))
		}
		if b.Position > 0 {
			f.Add("position", strconv.Itoa(b.Position))
		}
		if b.WaitCode != "" {
			f.Add("estimated start", estimateText(b, now))
		}
		if !b.QueuedTime.IsZero() {
			f.Add("waited", cliout.Duration(now.Sub(b.QueuedTime)))
		}
	} else {
		f.Add("reason", b.Reason)
	}
	if b.Cause != "" {
		f.Add("cause", causeText(b.Cause, b.CauseInfo))
	}
	f.Add("queue", b.Queue)
	if b.Priority > 0 {
		f.Add("priority", strconv.Itoa(b.Priority))
	}
	f.Add("executor", b.Executor)
	f.Add("sha", b.SHA)
	if !b.CreateTime.IsZero() {
		f.Add("created", cliout.Timestamp(b.CreateTime, now))
	}
	if !b.QueuedTime.IsZero() {
		f.Add("queued", cliout.Timestamp(b.QueuedTime, now))
	}
	if !b.StartTime.IsZero() {
		f.Add("started", cliout.Timestamp(b.StartTime, now))
		f.Add("duration", cliout.ElapsedText(b.StartTime, b.EndTime, now))
	}
	if !b.EndTime.IsZero() {
		f.Add("ended", cliout.Timestamp(b.EndTime, now))
	}
	if !b.WaitUntil.IsZero() {
		f.Add("wait until", cliout.Timestamp(b.WaitUntil, now))
	}
	f.Add("collapsed into", b.CollapsedInto)
	f.Add("log key", b.LogKey)
	// Where to find it in the Temporal UI: its event's workflow, or its own.
	f.Add("temporal workflow", b.Workflow)
	if err := f.Write(w); err != nil {
		return err
	}
	if len(b.AttemptList) > 0 {
		if _, err := fmt.Fprintln(w, "\nattempts:"); err != nil {
			return err
		}
		t := cliout.NewTable(w, "#", "EXECUTOR", "START", "END", "DURATION", "OUTCOME")
		for _, at := range b.AttemptList {
			t.Row(strconv.Itoa(at.Number), cliout.Or(at.Executor, cliout.Dash), cliout.AgoOr(at.Start, now),
				cliout.AgoOr(at.End, now), cliout.ElapsedText(at.Start, at.End, now), cliout.Or(at.Outcome, cliout.Dash))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	if len(b.Steps) > 0 {
		if _, err := fmt.Fprintln(w, "\nsteps:"); err != nil {
			return err
		}
		t := cliout.NewTable(w, "STEP", "EXIT", "DURATION")
		for _, s := range b.Steps {
			exit := strconv.Itoa(s.ExitCode)
			if s.Skipped {
				exit = "skipped"
			}
			t.Row(s.Name, exit, cliout.ElapsedText(s.Start, s.End, now))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	return writeMeta(w, b.Meta)
}

// writeMeta prints a build's metadata as indented JSON under "meta:".
func writeMeta(w io.Writer, meta json.RawMessage) error {
	if len(meta) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, meta, "  ", "  "); err != nil {
		return fmt.Errorf("the build's metadata: %w", err)
	}
	_, err := fmt.Fprintf(w, "\nmeta:\n  %s\n", buf.String())
	return err
}

func (a *app) buildCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel BUILD",
		Short: "Cancel a build",
		Long: `Cancel a build: a waiting build ends ABORTED at once, a running build's
processes are killed and it ends ABORTED.`,
		Example: "  sluice build cancel myapp/test/12",
		Args:    args("BUILD"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.client().CancelBuild(cmd.Context(), argv[0]); err != nil {
				return err
			}
			return a.done(map[string]string{"cancelled": argv[0]}, "cancelled build %s", argv[0])
		},
	}
}

func (a *app) buildLogsCmd() *cobra.Command {
	var follow bool
	var step string
	var attempt int
	cmd := &cobra.Command{
		Use:   "logs BUILD [--follow] [--step NAME] [--attempt N]",
		Short: "Print a build's step logs",
		Long: `Print the logs of a build's steps (of its latest attempt, or of --attempt N),
each after a "==> step NAME <==" header when more than one step is printed.
With --follow, keep printing the running step and the steps that follow until
the build ends (a build that has not started yet is waited for). With -o json,
each piece of log is a JSON line {"step","offset","text"}.`,
		Example: `  sluice build logs myapp/test/12
  sluice build logs myapp/test/12 --follow
  sluice build logs myapp/test/12 --step test --attempt 1`,
		Args: args("BUILD"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if cmd.Flags().Changed("attempt") && attempt < 1 {
				return fmt.Errorf("--attempt %d: want 1 or more", attempt)
			}
			if cmd.Flags().Changed("step") && step == "" {
				return errors.New("--step: must not be empty")
			}
			src := &apiLogs{c: a.client(), build: argv[0], attempt: attempt, follow: follow}
			var sink cliout.LogSink = &cliout.TextSink{W: a.stdout}
			if a.output == "json" {
				sink = &cliout.JSONSink{W: a.stdout}
			}
			f := &cliout.LogFollower{
				Build: argv[0], Source: src, Sink: sink, Step: step, Follow: follow,
				Wait: func(ctx context.Context) error { return sleep(ctx, followInterval) }, FinalGrace: 6,
			}
			err := f.Run(cmd.Context())
			if errors.Is(err, context.Canceled) {
				return interrupted("stopped following logs")
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the build ends")
	cmd.Flags().StringVar(&step, "step", "", "print only this step")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "read this attempt's logs (default: the latest)")
	return cmd
}

// apiLogs is a cliout.LogSource over the API.
type apiLogs struct {
	c       *api.Client
	build   string
	attempt int
	// follow waits for a build its running event has not created yet.
	follow bool
	// transient counts failed polls in a row.
	transient int
}

func (s *apiLogs) State(ctx context.Context) (cliout.LogState, error) {
	b, err := s.c.GetBuild(ctx, s.build)
	if api.IsNotFound(err) && s.follow {
		if st, ok := s.notCreated(ctx); ok {
			return st, nil
		}
	}
	for err != nil && ctx.Err() == nil && transient(err) && s.transient < maxTransient {
		s.transient++
		if err := sleep(ctx, followInterval); err != nil {
			return cliout.LogState{}, err
		}
		b, err = s.c.GetBuild(ctx, s.build)
	}
	if err != nil {
		return cliout.LogState{}, err
	}
	s.transient = 0
	st := cliout.LogState{Key: b.LogKey, Final: b.Status.Final(), Status: string(b.Status), Reason: b.Reason}
	if s.attempt > 0 {
		last := 0
		if n := len(b.AttemptList); n > 0 {
			last = b.AttemptList[n-1].Number
		}
		if s.attempt > last {
			switch {
			case st.Final:
				return st, fmt.Errorf("--attempt %d: build %s has %s", s.attempt, b.ID, cliout.Plural(last, "attempt"))
			case !s.follow:
				return st, fmt.Errorf("--attempt %d: build %s has %s so far (status %s)", s.attempt, b.ID,
					cliout.Plural(last, "attempt"), b.Status)
			}
			st.Key = "" // --follow: wait until it is dispatched that often
		} else {
			st.Key = activities.LogKey(b.ID, s.attempt)
		}
	}
	return st, nil
}

// notCreated reports a build that does not exist yet as waiting, while its
// event runs (its job has not been reached).
func (s *apiLogs) notCreated(ctx context.Context) (cliout.LogState, bool) {
	id, ok := cliout.EventOfBuild(s.build)
	if !ok {
		return cliout.LogState{}, false
	}
	ev, err := s.c.GetEvent(ctx, id)
	if err != nil || cliout.Final(string(ev.Status)) {
		return cliout.LogState{}, false
	}
	return cliout.LogState{Status: "not created yet", Reason: "event " + id + " is " + string(ev.Status)}, true
}

func (s *apiLogs) Steps(ctx context.Context, key string) ([]cliout.LogStep, error) {
	steps, err := s.c.LogSteps(ctx, key)
	if api.IsNotFound(err) {
		return nil, cliout.ErrNoLogs
	}
	if err != nil {
		return nil, err
	}
	out := make([]cliout.LogStep, len(steps))
	for i, st := range steps {
		out[i] = cliout.LogStep{Name: st.Name, Size: st.Size, Complete: st.Complete}
	}
	return out, nil
}

func (s *apiLogs) Read(ctx context.Context, key, step string, offset int64) (cliout.LogChunk, error) {
	ch, err := s.c.ReadLog(ctx, key, step, offset, 0)
	if err != nil {
		return cliout.LogChunk{}, err
	}
	return cliout.LogChunk{Data: ch.Data, NextOffset: ch.NextOffset, Size: ch.Size, Complete: ch.Complete}, nil
}

// causeNames lists the end causes, for flags and messages.
func causeNames() []string {
	out := make([]string, 0, len(workflows.Causes()))
	for _, c := range workflows.Causes() {
		out = append(out, string(c))
	}
	return out
}

// causeText is an end cause with its details: "failed (step test, exit
// code 2)".
func causeText(c workflows.Cause, info *workflows.CauseInfo) string {
	if info == nil {
		return string(c)
	}
	var parts []string
	if info.Step != "" {
		parts = append(parts, "step "+info.Step)
	}
	if info.ExitCode != 0 {
		parts = append(parts, "exit code "+strconv.Itoa(info.ExitCode))
	}
	if info.By != "" {
		parts = append(parts, "by "+info.By)
	}
	if info.Build != "" {
		parts = append(parts, "by build "+info.Build)
	}
	if info.Executor != "" {
		parts = append(parts, fmt.Sprintf("executor %s, attempt %d", info.Executor, info.Attempt))
	}
	if len(parts) == 0 {
		return string(c)
	}
	return string(c) + " (" + strings.Join(parts, ", ") + ")"
}

// estimateText is a waiting build's estimated start: "in 5m (2026-11-23
// 10:05:00 UTC)", "now", or "unknown: <why>".
func estimateText(b api.Build, now time.Time) string {
	switch {
	case b.EstimatedStart.IsZero():
		return "unknown: " + cliout.Or(b.EstimateNote, "no estimate")
	case !b.EstimatedStart.After(now):
		return "now"
	}
	return fmt.Sprintf("in %s (%s)", cliout.Duration(b.EstimatedStart.Sub(now)), b.EstimatedStart.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// waitSummary is the wait code, place in line and estimate of a waiting
// build in one short phrase, for tables.
func waitSummary(b api.Build, now time.Time) string {
	if b.WaitCode == "" {
		return ""
	}
	s := "[" + string(b.WaitCode)
	if b.Position > 0 {
		s += fmt.Sprintf(" #%d", b.Position)
	}
	if !b.EstimatedStart.IsZero() {
		s += ", starts " + estimateText(b, now)
	}
	return s + "] "
}
