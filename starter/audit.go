package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/config"
	"github.com/sluice-ci/sluice/internal/cliout"
	"github.com/sluice-ci/sluice/store"
)

func (a *app) auditCmd() *cobra.Command {
	var q api.AuditQuery
	cmd := &cobra.Command{
		Use:   "audit [--pipeline P] [--user U] [--action A] [--since DURATION|TIME] [--limit N]",
		Short: "Show the audit trail: who did what and when",
		Long: `audit lists the audit trail, newest first: pipelines created, updated,
repointed and deleted, secrets set and deleted (names only, never values),
events started (by hand or by a webhook), cancelled, restarted, re-run and
approved, builds cancelled, queues defined and deleted, executors drained and
activated, schedules paused and triggered, and sign-ins to the pages.

Holders of manage-pipelines read the whole trail; a pipeline's admins read
that pipeline's records with --pipeline. Records older than
SLUICE_AUDIT_RETENTION (default 365 days) are deleted by the API.`,
		Example: `  sluice audit --since 24h
  sluice audit --pipeline myapp --user alice
  sluice audit --action secret.set --since 2026-11-01 -o json`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Since != "" {
				if _, err := api.ParseSince(q.Since, time.Now()); err != nil {
					return usageError(fmt.Errorf("--%w", err))
				}
			}
			if q.Before != "" {
				if _, err := time.Parse(time.RFC3339Nano, q.Before); err != nil {
					return usageError(fmt.Errorf("--before %q: want a time (RFC 3339, e.g. 2026-11-26T14:00:00Z)", q.Before))
				}
			}
			if q.Limit < 0 || q.Limit > api.MaxAuditLimit {
				return usageError(fmt.Errorf("--limit %d: want a number from 1 to %d", q.Limit, api.MaxAuditLimit))
			}
			rs, err := a.client().Audit(cmd.Context(), q)
			if err != nil {
				return err
			}
			if rs == nil {
				rs = []api.AuditRecord{}
			}
			return a.print(rs, func(w io.Writer) error {
				if len(rs) == 0 {
					_, err := fmt.Fprintln(w, "no audit records match")
					return err
				}
				now := time.Now()
				t := cliout.NewTable(w, "WHEN", "WHO", "ACTION", "PIPELINE", "TARGET", "DETAIL")
				for _, r := range rs {
					t.Row(r.At.UTC().Format("2006-01-02 15:04:05")+" ("+cliout.Ago(r.At, now)+")", r.Actor, r.Action,
						cliout.Or(r.Pipeline, cliout.Dash), cliout.Or(r.Target, cliout.Dash), cliout.Or(r.Detail, cliout.Dash))
				}
				return t.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&q.Pipeline, "pipeline", "", "only this pipeline's records")
	cmd.Flags().StringVar(&q.User, "user", "", "only what this user (or webhook:github:<sender>) did")
	cmd.Flags().StringVar(&q.Action, "action", "", "only this action (pipeline.create, secret.set, event.cancel, executor.drain, ...)")
	cmd.Flags().StringVar(&q.Since, "since", "", "only records since a duration ago (90m, 24h, 30d) or a time (2026-11-26T14:00:00Z, 2026-11-26)")
	cmd.Flags().StringVar(&q.Before, "before", "", "only records older than this time (RFC 3339): page back from the oldest record shown")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, fmt.Sprintf("at most this many records (default %d, at most %d)", api.DefaultAuditLimit, api.MaxAuditLimit))
	return cmd
}

// pruneAudit deletes audit records older than SLUICE_AUDIT_RETENTION,
// hourly, as logs are.
func pruneAudit(ctx context.Context, cfg *config.Config, secrets *api.SecretStore, log *slog.Logger) {
	if secrets == nil {
		return
	}
	store.KeepAuditPruned(ctx, secrets.AuditTrail(), cfg.AuditRetention, time.Hour, time.Now, func(n int64, err error) {
		if err != nil {
			log.Warn("audit_prune_failed", "error", err)
			return
		}
		log.Info("audit_pruned", "records", n, "retention", cfg.AuditRetention.String())
	})
}
