package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
	"github.com/sluice-ci/sluice/pipeline"
)

// pipelineCommands are the pipeline subcommands that talk to the API.
func (a *app) pipelineCommands() []*cobra.Command {
	return []*cobra.Command{
		a.pipelineCreateCmd(), a.pipelineListCmd(), a.pipelineShowCmd(),
		a.pipelineUpdateCmd(), a.pipelineDeleteCmd(),
	}
}

// repoLocation makes a local --repo path absolute: the server resolves paths
// on its own file system, not from the caller's directory.
func repoLocation(repo string) (string, error) {
	if strings.TrimSpace(repo) == "" {
		return "", errors.New("--repo: required (a git URL, a local git repository or a directory)")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("--repo %s: resolve the current directory: %w", repo, err)
	}
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	return cliout.RepoLocation(repo, cwd, exists), nil
}

func (a *app) pipelineCreateCmd() *cobra.Command {
	var repo, branch, queueName, statuses string
	var admins []string
	var private bool
	var public bool
	cmd := &cobra.Command{
		Use:   "create NAME --repo REPO [--branch main] [--queue QUEUE] [--private]",
		Short: "Create a pipeline from a repository",
		Long: `Create a pipeline named NAME for REPO: a git URL, a local git repository or a
plain directory holding a screwdriver.yaml. A relative local path is made
absolute before it is sent (the server reads it on its own file system).
--queue names the default queue of jobs without screwdriver.cd/executor.
--private: REPO is read with the pipeline's own credentials, set once it
exists (sluice secret set NAME SLUICE_GITHUB_TOKEN, or SLUICE_DEPLOY_KEY for
an ssh URL), so it is not read now.`,
		Example: `  sluice pipeline create myapp --repo https://github.com/acme/myapp.git
  sluice pipeline create tools --repo . --branch develop --queue linux`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			loc, err := repoLocation(repo)
			if err != nil {
				return err
			}
			if queueName != "" {
				if err := cliout.QueueName("--queue", queueName); err != nil {
					return err
				}
			}
			p, err := a.client().CreatePipeline(cmd.Context(), api.CreatePipelineRequest{
				Name: argv[0], Repo: loc, Branch: branch, Queue: queueName, Statuses: statuses, Admins: admins, Private: private, Public: public,
			})
			if err != nil {
				return err
			}
			return a.print(p, func(w io.Writer) error {
				if _, err := fmt.Fprintf(w, "created pipeline %s (%s %s, branch %s)\n", p.Name, p.RepoKind, p.Repo, p.Branch); err != nil {
					return err
				}
				return writeSpecWarnings(w, p.Warnings)
			})
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "git URL, local git repository or directory (required)")
	cmd.Flags().StringVar(&branch, "branch", "main", "default branch: unfiltered ~commit triggers fire on it")
	cmd.Flags().StringVar(&queueName, "queue", "", "default queue of the pipeline's jobs (default: the built-in \"default\")")
	cmd.Flags().StringVar(&statuses, "statuses", "", statusesFlagHelp)
	cmd.Flags().StringSliceVar(&admins, "admin", nil, adminFlagHelp)
	cmd.Flags().BoolVar(&private, "private", false, "read REPO with the pipeline's own credentials (secrets), not now")
	cmd.Flags().BoolVar(&public, "public", false, publicFlagHelp)
	return cmd
}

func (a *app) pipelineListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List pipelines",
		Example: "  sluice pipeline list\n  sluice pipeline list -o json",
		Args:    args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := a.client().ListPipelines(cmd.Context())
			if err != nil {
				return err
			}
			if ps == nil {
				ps = []api.Pipeline{}
			}
			return a.print(ps, func(w io.Writer) error {
				if len(ps) == 0 {
					_, err := fmt.Fprintln(w, "no pipelines (create one with: sluice pipeline create NAME --repo REPO)")
					return err
				}
				now := time.Now()
				t := cliout.NewTable(w, "NAME", "REPO", "BRANCH", "QUEUE", "EVENTS", "LAST SHA", "CREATED")
				for _, p := range ps {
					t.Row(p.Name, p.Repo, p.Branch, cliout.Or(p.Queue, cliout.Dash), strconv.Itoa(p.Events),
						cliout.ShortSHA(p.LastSHA), cliout.AgoOr(p.CreatedAt, now))
				}
				return t.Flush()
			})
		},
	}
}

func (a *app) pipelineShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show a pipeline: settings, events, subscriptions, periodic jobs and lanes",
		Long: `Show a pipeline's settings, how many events it had, the default branch commit
last synced, the remote jobs it subscribes to (~sd@pipeline:job), its periodic
jobs (buildPeriodically, expanded cron) and each job's lane: the builds running
and the builds waiting.`,
		Example: "  sluice pipeline show myapp",
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			p, err := a.client().GetPipeline(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			return a.print(p, func(w io.Writer) error { return writePipeline(w, p, time.Now()) })
		},
	}
}

// adminFlagHelp documents --admin.
const adminFlagHelp = "who may administer the pipeline besides its owner: a user, or role:NAME (repeat or comma-separate)"

// publicFlagHelp documents --public.
const publicFlagHelp = "anyone may read the pipeline's status badges without a token (GET /api/v1/pipelines/NAME/badge.svg[?job=JOB]); nothing else becomes public"

// statusesFlagHelp documents --statuses.
const statusesFlagHelp = "where commit statuses go: github:OWNER/REPO, gitlab:GROUP/PROJECT, off, or \"\" to follow the repository URL (github.com, gitlab.com, SLUICE_GITHUB_API_URL's and SLUICE_GITLAB_URL's hosts)"

func writePipeline(w io.Writer, p api.Pipeline, now time.Time) error {
	var f cliout.Fields
	f.Add("name", p.Name)
	f.Add("repo", p.Repo+" ("+cliout.Or(p.RepoKind, "?")+")")
	f.Add("branch", p.Branch)
	f.Add("queue", cliout.Or(p.Queue, "default (built-in)"))
	f.Add("events", strconv.Itoa(p.Events))
	f.Add("last sha", cliout.Or(p.LastSHA, cliout.Dash))
	if !p.SpecSyncedAt.IsZero() {
		f.Add("spec synced", cliout.Timestamp(p.SpecSyncedAt, now))
	}
	f.Add("created", cliout.Timestamp(p.CreatedAt, now))
	f.Add("owner", p.Owner)
	f.Add("admins", strings.Join(p.Admins, ", "))
	f.Add("subscriptions", cliout.List(p.Subscriptions))
	f.Add("schedule error", p.ScheduleError)
	f.Add("commit statuses", cliout.Or(p.Statuses, "from the repository URL"))
	if p.Public {
		f.Add("public", "yes: anyone may read its status badges")
	}
	f.Add("last statuses", p.StatusesNote)
	if err := f.Write(w); err != nil {
		return err
	}
	if len(p.Periodic) > 0 {
		if _, err := fmt.Fprintln(w, "\nperiodic jobs:"); err != nil {
			return err
		}
		t := cliout.NewTable(w, "JOB", "CRON (UTC)")
		for _, j := range slices.Sorted(maps.Keys(p.Periodic)) {
			t.Row(j, p.Periodic[j])
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	if len(p.Parameters) > 0 {
		if _, err := fmt.Fprintln(w, "\nparameters (event start -p NAME=VALUE; builds see SD_PARAM_<NAME>):"); err != nil {
			return err
		}
		t := cliout.NewTable(w, "NAME", "DEFAULT", "CHOICES", "DESCRIPTION")
		for _, pr := range p.Parameters {
			t.Row(pr.Name, pr.Default, cliout.Or(strings.Join(pr.Choices, ", "), "any value"), cliout.Or(pr.Description, cliout.Dash))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	if len(p.Warnings) > 0 {
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
		if err := writeSpecWarnings(w, p.Warnings); err != nil {
			return err
		}
	}
	if len(p.Lanes) > 0 {
		if _, err := fmt.Fprintln(w, "\nlanes:"); err != nil {
			return err
		}
		t := cliout.NewTable(w, "JOB", "ACTIVE", "WAITING")
		for _, l := range p.Lanes {
			t.Row(l.Job, cliout.List(l.Active), cliout.List(l.Waiting))
		}
		return t.Flush()
	}
	return nil
}

func (a *app) pipelineUpdateCmd() *cobra.Command {
	var repo, branch, queueName, statuses string
	var admins []string
	var public bool
	cmd := &cobra.Command{
		Use:   "update NAME [--repo REPO] [--branch BRANCH] [--queue QUEUE]",
		Short: "Change a pipeline's repository, branch or default queue",
		Long: `Change a pipeline's settings; flags not given keep their value. --queue ""
clears the default queue (jobs then use the built-in "default").`,
		Example: `  sluice pipeline update myapp --branch release
  sluice pipeline update myapp --repo ../myapp --queue ""`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			var req api.UpdatePipelineRequest
			flags := cmd.Flags()
			if flags.Changed("repo") {
				loc, err := repoLocation(repo)
				if err != nil {
					return err
				}
				req.Repo = &loc
			}
			if flags.Changed("branch") {
				if strings.TrimSpace(branch) == "" {
					return errors.New("--branch: must not be empty")
				}
				req.Branch = &branch
			}
			if flags.Changed("queue") {
				if queueName != "" {
					if err := cliout.QueueName("--queue", queueName); err != nil {
						return err
					}
				}
				req.Queue = &queueName
			}
			if flags.Changed("statuses") {
				req.Statuses = &statuses
			}
			if flags.Changed("admin") {
				admins = slices.DeleteFunc(admins, func(a string) bool { return strings.TrimSpace(a) == "" })
				req.Admins = &admins
			}
			if flags.Changed("public") {
				req.Public = &public
			}
			if req.Repo == nil && req.Branch == nil && req.Queue == nil && req.Statuses == nil && req.Admins == nil && req.Public == nil {
				return fmt.Errorf("%w: give --repo, --branch, --queue, --statuses, --admin or --public", cliout.ErrNothingToChange)
			}
			p, err := a.client().UpdatePipeline(cmd.Context(), argv[0], req)
			if err != nil {
				return err
			}
			return a.print(p, func(w io.Writer) error {
				if _, err := fmt.Fprintf(w, "updated pipeline %s: repo %s, branch %s, queue %s\n", p.Name, p.Repo, p.Branch,
					cliout.Or(p.Queue, "default (built-in)")); err != nil {
					return err
				}
				return writeSpecWarnings(w, p.Warnings)
			})
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "git URL, local git repository or directory")
	cmd.Flags().StringVar(&branch, "branch", "", "default branch")
	cmd.Flags().StringVar(&queueName, "queue", "", "default queue (\"\" for the built-in default)")
	cmd.Flags().StringVar(&statuses, "statuses", "", statusesFlagHelp)
	cmd.Flags().StringSliceVar(&admins, "admin", nil, adminFlagHelp+" (replaces the list; --admin '' clears it)")
	cmd.Flags().BoolVar(&public, "public", false, publicFlagHelp+" (--public=false makes it private again)")
	return cmd
}

func (a *app) pipelineDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a pipeline",
		Long: `Delete a pipeline: its waiting builds end ABORTED, running builds finish, and
its periodic schedules are removed. Past events and builds stay listed.`,
		Example: "  sluice pipeline delete myapp",
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.client().DeletePipeline(cmd.Context(), argv[0]); err != nil {
				return err
			}
			return a.done(map[string]string{"deleted": argv[0]}, "deleted pipeline %s", argv[0])
		},
	}
}

// writeSpecWarnings prints a spec's warnings, one "warning: FIELD: MESSAGE"
// line each.
func writeSpecWarnings(w io.Writer, ws []pipeline.Warning) error {
	for _, x := range ws {
		if _, err := fmt.Fprintf(w, "warning: %s\n", x); err != nil {
			return err
		}
	}
	return nil
}
