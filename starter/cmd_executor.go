package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
)

func (a *app) executorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "List executors; activate, deactivate or drain them",
		Long: `Executors are the worker processes that run builds (controllers are listed
too). An active executor takes builds; an inactive one takes none; a draining
one finishes its running builds and takes no new ones.`,
	}
	cmd.AddCommand(a.executorListCmd(),
		a.executorActionCmd("activate", "Let an executor take builds again", "active"),
		a.executorActionCmd("deactivate", "Stop an executor from taking builds", "inactive"),
		a.executorActionCmd("drain", "Let an executor finish its builds and take no new ones", "draining"))
	return cmd
}

func (a *app) executorListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List executors and controllers",
		Example: "  sluice executor list\n  sluice executor list -o json",
		Args:    args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			es, err := a.client().ListExecutors(cmd.Context())
			if err != nil {
				return err
			}
			if es == nil {
				es = []api.Executor{}
			}
			sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
			return a.print(es, func(w io.Writer) error {
				if len(es) == 0 {
					_, err := fmt.Fprintln(w, "no executors registered")
					return err
				}
				now := time.Now()
				t := cliout.NewTable(w, "NAME", "ROLE", "RUNTIME", "HOST", "STATE", "LIVE", "LAST SEEN", "RUNNING", "LABELS", "QUEUES")
				for _, e := range es {
					t.Row(e.Name, e.Role, e.Runtime, cliout.Or(e.Host, cliout.Dash), e.State, yesNo(e.Live), cliout.Ago(e.LastSeen, now),
						cliout.Pairs(cliout.NonZero(e.Running)), cliout.Pairs(e.Labels), cliout.List(e.Queues))
				}
				if err := t.Flush(); err != nil {
					return err
				}
				// Why sluice changed a state on its own, under the table.
				for _, e := range es {
					if e.StateReason != "" {
						if _, err := fmt.Fprintf(w, "%s: %s\n", e.Name, e.StateReason); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	}
}

func (a *app) executorActionCmd(action, short, state string) *cobra.Command {
	return &cobra.Command{
		Use:     action + " NAME",
		Short:   short,
		Example: "  sluice executor " + action + " exec-a",
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			e, err := a.client().ExecutorAction(cmd.Context(), argv[0], action)
			if err != nil {
				return err
			}
			return a.print(e, func(w io.Writer) error {
				note := ""
				if action == "drain" {
					note = " (it finishes its running builds, takes no new ones, then turns inactive)"
				}
				_, err := fmt.Fprintf(w, "executor %s is %s%s\n", e.Name, cliout.Or(e.State, state), note)
				return err
			})
		},
	}
}
