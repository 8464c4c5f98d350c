package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
)

// addClientCommands adds the commands that talk to the API.
func (a *app) addClientCommands(root *cobra.Command) {
	pipelineCmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Validate, graph and manage pipelines",
		Long: `A pipeline is a named repository and branch whose screwdriver.yaml defines
jobs. validate and graph work on local files; the other subcommands talk to the
sluice API.`,
	}
	pipelineCmd.AddCommand(a.pipelineValidateCmd(), a.pipelineGraphCmd())
	pipelineCmd.AddCommand(a.pipelineCommands()...)
	root.AddCommand(pipelineCmd, a.eventCmd(), a.buildCmd(), a.queueCmd(), a.executorCmd(), a.scheduleCmd(), a.secretCmd(), a.artifactCmd(), a.auditCmd(), a.tokenCmd())
}

// args checks a command's positional arguments against their names, with
// errors that name the missing or extra argument.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		return cliout.Args(cmd.CommandPath()+" "+strings.Join(names, " "), names, got)
	}
}

// maxTransient is how many polls in a row may fail for a reason that may go
// away (the API restarting, a timeout) before a polling command gives up.
const maxTransient = 10

// transient reports whether a polling error may go away by itself: the API
// did not answer, or answered 5xx. 4xx answers are final.
func transient(err error) bool {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Status >= http.StatusInternalServerError
	}
	return !errors.Is(err, context.Canceled)
}

// poll calls fn every interval until it reports done or fails for good;
// up to maxTransient transient failures in a row are retried.
func poll(ctx context.Context, interval time.Duration, fn func(ctx context.Context) (bool, error)) error {
	failures := 0
	for {
		done, err := fn(ctx)
		switch {
		case err == nil:
			failures = 0
			if done {
				return nil
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case transient(err) && failures < maxTransient:
			failures++
		default:
			return err
		}
		if err := sleep(ctx, interval); err != nil {
			return err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// terminal reports whether the app's stdout is a terminal, and its width
// (0 when unknown).
func (a *app) terminal() (bool, int) {
	f, ok := a.stdout.(*os.File)
	if !ok {
		return false, 0
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false, 0
	}
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return true, 0
	}
	return true, w
}

// printLine writes v as one line of compact JSON (for streams of objects).
func (a *app) printLine(v any) error {
	return json.NewEncoder(a.stdout).Encode(v)
}

// done prints a short confirmation: msg in text, v in JSON.
func (a *app) done(v any, format string, args ...any) error {
	return a.print(v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format+"\n", args...)
		return err
	})
}

// interrupted is returned when Ctrl-C stops a command that waits; the
// server-side work goes on.
func interrupted(what string) error {
	return &exitError{code: exitInterrupted, err: errors.New(what)}
}

// limitFlag checks a --limit value.
func limitFlag(n int) error { return cliout.Limit("--limit", n, 1000) }
