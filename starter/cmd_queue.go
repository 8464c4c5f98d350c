package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/cliout"
)

const ruleHelp = `A rule is written run-on=controller|executors|any[,max-parallel=N][,min-gap=DURATION][,labels=KEY=VALUE]...[,untrusted-on-host=true]:
which members run the queue's builds, how many at once on each (default 1),
how long a slot stays busy after a build ends (default 0s), and which labels
an executor must carry. The active rule is the first with a live member.
Pull requests from forks run only on the rules' container executors (the
first rule with a live one); untrusted-on-host=true lets the rule's
controllers and host-runtime executors run them too.`

func (a *app) queueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Define queues and see why builds wait",
		Long: `A queue says which members run its builds, how many at once and with what gap,
through an ordered list of rules. Builds name a queue with the
screwdriver.cd/executor annotation, else the pipeline's default queue, else
"default".

` + ruleHelp,
	}
	cmd.AddCommand(a.queueCreateCmd(), a.queueUpdateCmd(), a.queueDeleteCmd(), a.queueListCmd(), a.queueStatusCmd())
	return cmd
}

func (a *app) queueCreateCmd() *cobra.Command {
	var desc, maxWait string
	var rules, roles []string
	cmd := &cobra.Command{
		Use:   "create NAME --rule RULE [--rule RULE]... [--description D] [--use-role ROLE]...",
		Short: "Define a queue",
		Long: `Define a queue named NAME (letters, digits, single spaces, '_', '-', '.') with
one or more rules, tried in order. --use-role restricts who may run jobs on the
queue to these roles (default: every authenticated user).

` + ruleHelp,
		Example: `  sluice queue create gpu --rule 'run-on=executors,max-parallel=2,labels=pool=gpu' --rule 'run-on=controller'
  sluice queue create deploy --description "one deploy at a time" --rule 'run-on=any,max-parallel=1,min-gap=30s' --use-role ops`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			name := argv[0]
			if err := cliout.QueueName("NAME", name); err != nil {
				return err
			}
			if len(rules) == 0 {
				return errors.New("--rule: at least one rule is required, e.g. --rule run-on=executors,max-parallel=2")
			}
			canon, err := cliout.Rules("--rule", rules)
			if err != nil {
				return err
			}
			if err := checkMaxWait(maxWait); err != nil {
				return err
			}
			q, err := a.client().CreateQueue(cmd.Context(), api.QueueRequest{
				Name: name, Description: desc,
				Rules: canon, UseRoles: cliout.Roles(roles), MaxWait: maxWait,
			})
			if err != nil {
				return err
			}
			return a.print(q, func(w io.Writer) error { return writeQueueSummary(w, "created", q) })
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "what the queue is for")
	cmd.Flags().StringArrayVar(&rules, "rule", nil, "a rule (repeat for fallbacks, in order); see above")
	cmd.Flags().StringArrayVar(&roles, "use-role", nil, "role allowed to use the queue (repeatable)")
	cmd.Flags().StringVar(&maxWait, "max-wait", "", maxWaitHelp)
	return cmd
}

const maxWaitHelp = "longest wait for an executor (e.g. 30m) before a build ends refused; 0 for no limit"

// checkMaxWait names --max-wait when its value is not a duration.
func checkMaxWait(v string) error {
	if v == "" {
		return nil
	}
	if _, err := time.ParseDuration(v); err != nil {
		return fmt.Errorf("--max-wait %q: want a duration such as 30m or 2h, or 0 for no limit", v)
	}
	return nil
}

func writeQueueSummary(w io.Writer, verb string, q api.Queue) error {
	active := "no active rule"
	if q.ActiveRule >= 0 && q.ActiveRule < len(q.Rules) {
		active = fmt.Sprintf("rule %d active", q.ActiveRule+1)
	}
	_, err := fmt.Fprintf(w, "%s queue %s: %s, %s (%s)\n", verb, q.Name, active, cliout.Plural(q.Slots, "slot"), cliout.OneLine(q.Why))
	return err
}

func (a *app) queueUpdateCmd() *cobra.Command {
	var desc, maxWait string
	var rules, roles []string
	cmd := &cobra.Command{
		Use:   "update NAME [--description D] [--rule RULE]... [--use-role ROLE]...",
		Short: "Change a queue's description, rules or roles",
		Long: `Change a queue; flags not given keep their current value. --rule given once or
more replaces all rules; --use-role replaces the roles (--use-role "" clears
them: everyone may use the queue). Changes take effect without restarts.

` + ruleHelp,
		Example: `  sluice queue update gpu --rule 'run-on=executors,max-parallel=4,labels=pool=gpu'
  sluice queue update gpu --description "A100 pool" --use-role ""`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			name := argv[0]
			flags := cmd.Flags()
			ch := cliout.QueueChange{Rules: rules, RulesSet: flags.Changed("rule"), UseRoles: roles, RolesSet: flags.Changed("use-role")}
			if flags.Changed("description") {
				ch.Description = &desc
			}
			c := a.client()
			qs, err := c.ListQueues(cmd.Context())
			if err != nil {
				return err
			}
			var cur *api.Queue
			for i := range qs {
				if qs[i].Name == name {
					cur = &qs[i]
				}
			}
			if cur == nil {
				return fmt.Errorf("queue %q does not exist (see sluice queue list)", name)
			}
			next, err := cliout.MergeQueue(cliout.QueueDef{
				Name: cur.Name, Description: cur.Description, Rules: cur.Rules,
				UseRoles: cur.UseRoles,
			}, ch)
			if err != nil {
				return err
			}
			mw := cur.MaxWait // kept unless --max-wait is given
			if flags.Changed("max-wait") {
				if err := checkMaxWait(maxWait); err != nil {
					return err
				}
				mw = maxWait
			}
			q, err := c.UpdateQueue(cmd.Context(), api.QueueRequest{
				Name: next.Name, Description: next.Description,
				Rules: next.Rules, UseRoles: next.UseRoles, MaxWait: mw,
			})
			if err != nil {
				return err
			}
			return a.print(q, func(w io.Writer) error { return writeQueueSummary(w, "updated", q) })
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "what the queue is for")
	cmd.Flags().StringArrayVar(&rules, "rule", nil, "a rule (repeat for fallbacks); replaces all rules")
	cmd.Flags().StringArrayVar(&roles, "use-role", nil, "role allowed to use the queue (repeatable); replaces the roles")
	cmd.Flags().StringVar(&maxWait, "max-wait", "", maxWaitHelp)
	return cmd
}

func (a *app) queueDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a queue no build waits on",
		Example: "  sluice queue delete gpu",
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.client().DeleteQueue(cmd.Context(), argv[0]); err != nil {
				return err
			}
			return a.done(map[string]string{"deleted": argv[0]}, "deleted queue %s", argv[0])
		},
	}
}

func (a *app) queueListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List queues with their rules, active rule and slots",
		Example: "  sluice queue list\n  sluice queue list -o json",
		Args:    args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			qs, err := a.client().ListQueues(cmd.Context())
			if err != nil {
				return err
			}
			if qs == nil {
				qs = []api.Queue{}
			}
			return a.print(qs, func(w io.Writer) error {
				if len(qs) == 0 {
					_, err := fmt.Fprintln(w, "no queues")
					return err
				}
				t := cliout.NewTable(w, "NAME", "ACTIVE", "SLOTS", "BUSY", "RULES")
				for _, q := range qs {
					t.Row(q.Name, activeRule(q), strconv.Itoa(q.Slots), strconv.Itoa(q.Busy), ruleLine(q, 0))
					for i := 1; i < len(q.Rules); i++ {
						t.Row("", "", "", "", ruleLine(q, i))
					}
				}
				return t.Flush()
			})
		},
	}
}

// activeRule is the active rule's number (from 1), or "none".
func activeRule(q api.Queue) string {
	if q.ActiveRule < 0 || q.ActiveRule >= len(q.Rules) {
		return "none"
	}
	return strconv.Itoa(q.ActiveRule + 1)
}

// ruleLine is rule i numbered, with a "*" when it is the active one.
func ruleLine(q api.Queue, i int) string {
	if i >= len(q.Rules) {
		return cliout.Dash
	}
	mark := " "
	if i == q.ActiveRule {
		mark = "*"
	}
	return fmt.Sprintf("%s%d. %s", mark, i+1, q.Rules[i])
}

func (a *app) queueStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Explain a queue: active rule and why, members and slots, backlog",
		Long: `Explain a queue: its rules with the active one marked (*) and why it is
active, the members of the active rule with their used and free slots, how
many builds wait for a slot (backlog) and how many are still held by their
job's lane (blocked, frozen, delayed), and the build waiting longest.`,
		Example: "  sluice queue status default\n  sluice queue status gpu -o json",
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			st, err := a.client().QueueStatus(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			return a.print(st, func(w io.Writer) error { return writeQueueStatus(w, st) })
		},
	}
}

func writeQueueStatus(w io.Writer, st api.QueueStatus) error {
	var f cliout.Fields
	f.Add("queue", st.Name)
	f.Add("description", st.Description)
	roles := "everyone"
	if len(st.UseRoles) > 0 {
		roles = cliout.List(st.UseRoles)
	}
	f.Add("use roles", roles)
	f.Add("active rule", activeRule(st.Queue))
	f.Add("why", st.Why)
	f.Add("untrusted", st.UntrustedWhy)
	f.Add("slots", fmt.Sprintf("%d (%d busy)", st.Slots, st.Busy))
	maxWait := "none: builds wait as long as it takes"
	if st.MaxWait != "" {
		maxWait = st.MaxWait + ", then a waiting build ends refused"
	}
	f.Add("max wait", maxWait)
	f.Add("backlog", cliout.Plural(st.Backlog, "build")+" waiting for a slot")
	f.Add("in lanes", cliout.Plural(st.Waiting, "build")+" blocked, frozen, delayed or created")
	if st.Oldest != "" {
		f.Add("oldest", fmt.Sprintf("%s, waiting %s", st.Oldest, cliout.Duration(st.OldestWait)))
	}
	if err := f.Write(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "\nrules:"); err != nil {
		return err
	}
	for i := range st.Rules {
		if _, err := fmt.Fprintf(w, "  %s\n", ruleLine(st.Queue, i)); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(w, "\nmembers:"); err != nil {
		return err
	}
	if len(st.Members) == 0 {
		_, err := fmt.Fprintln(w, "  none: no live member serves this queue")
		return err
	}
	t := cliout.NewTable(w, "NAME", "ROLE", "STATE", "LIVE", "USED", "FREE", "SLOTS")
	for _, m := range st.Members {
		t.Row(m.Name, m.Role, m.State, yesNo(m.Live), strconv.Itoa(m.Used), strconv.Itoa(m.Free), strconv.Itoa(m.Slots))
	}
	return t.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
