package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/runner"
)

// reaperCommand is how a worker starts its reaper: this binary's hidden
// reap subcommand.
func reaperCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil // no reaper; a restart still cleans up
	}
	return []string{exe, "reap"}
}

// reapCmd is the reaper a worker starts (runner.StartReaper): it waits for
// its standard input to end, which happens when the worker is gone however
// it ended, then kills the process groups the worker recorded and removes
// its containers. Not for people.
func (a *app) reapCmd() *cobra.Command {
	var c runner.ReaperConfig
	var labels []string
	cmd := &cobra.Command{
		Use:    "reap",
		Short:  "kill what a dead worker's builds left running (started by workers)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Records == "" {
				return usageError(errors.New("--records is required"))
			}
			c.Labels = map[string]string{}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return usageError(fmt.Errorf("--label %q: want key=value", l))
				}
				c.Labels[k] = v
			}
			runner.IgnoreStopSignals()
			done, err := runner.RunReaper(context.WithoutCancel(cmd.Context()), os.Stdin, c)
			if len(done.Groups) > 0 || len(done.Containers) > 0 {
				fmt.Fprintf(os.Stderr, "sluice reap: the worker is gone: killed process groups %v, removed containers %v\n", done.Groups, done.Containers)
			}
			if err != nil {
				return fmt.Errorf("reap: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&c.Records, "records", "", "directory of the worker life's process group records")
	cmd.Flags().StringVar(&c.Runtime, "runtime", "", "container runtime whose labelled containers to remove")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "key=value label of the worker's containers (repeatable)")
	return cmd
}
