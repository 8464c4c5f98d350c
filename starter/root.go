package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/workers"
)

// app is what every command shares: the environment, the output streams and
// the global flags.
type app struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	// output is "text" or "json" (--output).
	output string
	// apiURL overrides SLUICE_API_URL (--api-url).
	apiURL string
	// flags maps environment variables to values given as flags.
	flags map[string]string
	// flagOf names the flag that sets an environment variable.
	flagOf map[string]string
}

// errSilent marks an error already reported to the user (exit code 1, no
// extra message).
var errSilent = errors.New("")

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit codes, documented in `sluice --help`.
const (
	exitFailed      = 1   // what was asked for failed: an event ended FAILURE, a spec is invalid
	exitUsage       = 2   // the command line is wrong: unknown command or flag, bad arguments
	exitUnreachable = 3   // the sluice API or Temporal could not be reached
	exitInterrupted = 130 // interrupted (Ctrl-C)
)

const exitCodesHelp = `Exit codes:
  0    success
  1    what was asked for failed (an event ended FAILURE, a spec is invalid)
  2    usage error (unknown command or flag, bad arguments)
  3    the sluice API or Temporal could not be reached
  130  interrupted (Ctrl-C); work already started on the server goes on`

func exitCode(err error) int {
	var ee *exitError
	var unreachable *api.UnreachableError
	var dial *workers.DialError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &unreachable), errors.As(err, &dial):
		return exitUnreachable
	}
	return exitFailed
}

// usageError marks a mistake in the command line (exit code 2).
func usageError(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitUsage, err: err}
}

// run builds the command tree and executes it with args.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	a := &app{getenv: getenv, stdin: os.Stdin, stdout: stdout, stderr: stderr, flags: map[string]string{}, flagOf: map[string]string{}}
	root := a.rootCmd() //nolint:contextcheck // rootCmd only builds the command tree; ExecuteContext hands ctx to each command through cmd.Context()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if errors.Is(err, errSilent) {
		return &exitError{code: exitCode(err), err: errors.New("failed")}
	}
	switch {
	case err == nil:
	case strings.HasPrefix(err.Error(), "unknown command "):
		return usageError(err) // cobra's own, for the root command
	case strings.HasPrefix(err.Error(), "--"):
		// Every check of a flag's value names the flag first ("--attempt 0:
		// want 1 or more"): a usage mistake.
		return usageError(err)
	}
	return err
}

// strictTree makes every command's usage mistakes exit 2, and a command
// that only groups subcommands refuse an unknown one (with suggestions)
// instead of printing its help and exiting 0.
func strictTree(cmd *cobra.Command) {
	if orig := cmd.Args; orig != nil {
		cmd.Args = func(c *cobra.Command, args []string) error { return usageError(orig(c, args)) }
	}
	cmd.SuggestionsMinimumDistance = 2
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil && cmd.HasParent() {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError(fmt.Errorf("%s (see '%s --help')", msg, c.CommandPath()))
		}
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	for _, sub := range cmd.Commands() {
		strictTree(sub)
	}
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "sluice: a durable CI pipeline orchestrator on Temporal",
		Long: `sluice runs screwdriver.yaml pipelines on Temporal. Builds wait in durable
queues until an executor with a free slot takes them; nothing is dropped when
executors are offline or full.

Start everything on this machine with 'sluice dev', then use the other
commands against its API (SLUICE_API_URL, default http://localhost:8080).

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&a.apiURL, "api-url", "", "sluice API base URL (env SLUICE_API_URL, default http://localhost:8080)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if a.output != "text" && a.output != "json" {
			return usageError(fmt.Errorf("--output %q: want text or json", a.output))
		}
		return nil
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.Version = buildVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(a.devCmd(), a.workerCmd(), a.apiCmd(), a.temporalCmd(), a.configCmd(), a.versionCmd(), a.healthCmd(), a.reapCmd(), a.metaCmd())
	a.addClientCommands(root)
	strictTree(root)
	return root
}

// env reads a variable, flags first.
func (a *app) env(name string) string {
	if v, ok := a.flags[name]; ok {
		return v
	}
	return a.getenv(name)
}

// config loads the configuration from flags and environment; errors name
// the flag or variable at fault.
func (a *app) config() (*config.Config, error) {
	if a.apiURL != "" {
		a.flags["SLUICE_API_URL"] = a.apiURL
		a.flagOf["SLUICE_API_URL"] = "api-url"
	}
	cfg, err := config.Load(a.env)
	if err != nil {
		msg := err.Error()
		for env, flag := range a.flagOf {
			if _, set := a.flags[env]; set {
				msg = strings.ReplaceAll(msg, env+":", "--"+flag+" ("+env+"):")
			}
		}
		return nil, errors.New(msg)
	}
	return cfg, nil
}

// configFlag adds a string flag that overrides the environment variable env.
func (a *app) configFlag(cmd *cobra.Command, flag, env, usage string) {
	def := ""
	for _, f := range config.Fields() {
		if f.Env == env {
			def = f.Default
			if usage == "" {
				usage = f.Desc
			}
		}
	}
	a.flagOf[env] = flag
	v := &envFlag{a: a, env: env, def: def}
	cmd.Flags().Var(v, flag, fmt.Sprintf("%s (env %s)", usage, env))
}

// envFlag is a pflag.Value that writes into app.flags.
type envFlag struct {
	a   *app
	env string
	def string
}

func (f *envFlag) String() string { return f.def }
func (f *envFlag) Set(s string) error {
	f.a.flags[f.env] = s
	return nil
}
func (f *envFlag) Type() string { return "string" }

// client returns an API client for SLUICE_API_URL or --api-url.
func (a *app) client() *api.Client {
	url := a.apiURL
	if url == "" {
		url = a.getenv("SLUICE_API_URL")
	}
	if url == "" {
		url = "http://localhost:8080"
	}
	c := api.NewClient(url)
	c.Token = a.getenv("SLUICE_TOKEN") // the same variable as config.Config.Token
	return c
}

// print writes v as JSON with --output json, else calls text.
func (a *app) print(v any, text func(w io.Writer) error) error {
	if a.output == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(a.stdout)
}

// logger builds the process logger from the configuration.
func (a *app) logger(cfg *config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: parseLevel(cfg.LogLevel)}
	var h slog.Handler = slog.NewTextHandler(a.stderr, opts)
	if strings.EqualFold(cfg.LogFormat, "json") {
		h = slog.NewJSONHandler(a.stderr, opts)
	}
	return slog.New(h)
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}
