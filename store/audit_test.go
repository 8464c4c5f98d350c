package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/store"
)

func TestAuditTrail(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		d := b.open(t)
		// A fixed clock: nothing here depends on today's date.
		t0 := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
		add := func(at time.Time, actor, action, pipeline, target string) {
			t.Helper()
			require.NoError(t, d.AppendAudit(ctx, store.AuditRecord{At: at, Actor: actor, Action: action, Pipeline: pipeline, Target: target}))
		}
		add(t0.Add(-400*24*time.Hour), "alice", "pipeline.create", "app", "app")
		add(t0.Add(-10*24*time.Hour), "bob", "secret.set", "app", "NPM_TOKEN")
		add(t0.Add(-time.Hour), "alice", "queue.define", "", "fast")
		add(t0.Add(-time.Hour), "alice", "event.start", "web", "web/1") // same time: ordered by id

		all, err := d.ListAudit(ctx, store.AuditFilter{})
		require.NoError(t, err)
		require.Len(t, all, 4)
		require.Equal(t, "secret.set", all[2].Action, "newest first")
		require.Equal(t, "pipeline.create", all[3].Action)
		require.True(t, all[3].At.Equal(t0.Add(-400*24*time.Hour)), "times round-trip: %s", all[3].At)
		require.NotEmpty(t, all[0].ID)

		sel := func(f store.AuditFilter) []string {
			t.Helper()
			rs, err := d.ListAudit(ctx, f)
			require.NoError(t, err)
			out := []string{}
			for _, r := range rs {
				out = append(out, r.Action)
			}
			return out
		}
		require.ElementsMatch(t, []string{"pipeline.create", "secret.set"}, sel(store.AuditFilter{Pipeline: "app"}))
		require.ElementsMatch(t, []string{"pipeline.create", "queue.define", "event.start"}, sel(store.AuditFilter{Actor: "alice"}))
		require.Equal(t, []string{"secret.set"}, sel(store.AuditFilter{Action: "secret.set"}))
		require.ElementsMatch(t, []string{"queue.define", "event.start", "secret.set"}, sel(store.AuditFilter{Since: t0.Add(-30 * 24 * time.Hour)}))
		require.Equal(t, []string{"pipeline.create"}, sel(store.AuditFilter{Before: t0.Add(-30 * 24 * time.Hour)}))
		require.Len(t, sel(store.AuditFilter{Limit: 1}), 1)

		// Retention: a year before t0 removes only the 400-day-old record.
		n, err := d.PruneAudit(ctx, t0.Add(-365*24*time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.ElementsMatch(t, []string{"secret.set", "queue.define", "event.start"}, sel(store.AuditFilter{}))
	})
}

// TestAuditRecordsOfABurst: records appended while another replica holds
// the audit trail are committed together once it lets go, a transaction
// for the lot; one that cannot be recorded (an ID already taken) fails
// alone, and the others of its group are recorded.
func TestAuditRecordsOfABurst(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		d, other := b.open(t), b.open(t)
		at := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
		require.NoError(t, d.AppendAudit(ctx, store.AuditRecord{ID: "taken", At: at, Actor: "alice", Action: "pipeline.create", Pipeline: "app"}))
		// burst appends n records at once, with extra, while other holds
		// the trail, and lets go once every append waits.
		burst := func(n int, extra func() error) (*errgroup.Group, chan error) {
			t.Helper()
			release, err := other.HoldAuditWrites(ctx)
			require.NoError(t, err)
			var g errgroup.Group
			for i := range n {
				g.Go(func() error {
					return d.AppendAudit(ctx, store.AuditRecord{At: at, Actor: "hook", Action: "event.start", Pipeline: "app", Target: fmt.Sprintf("app/%d-%d", n, i+1)})
				})
			}
			want := n
			out := make(chan error, 1)
			if extra != nil {
				want++
				go func() { out <- extra() }()
			}
			require.Eventually(t, func() bool { w, _ := d.AuditAppends(); return w == want }, 30*time.Second, 5*time.Millisecond)
			require.NoError(t, release())
			return &g, out
		}
		_, before := d.AuditAppends()
		g, _ := burst(200, nil)
		require.NoError(t, g.Wait())
		_, after := d.AuditAppends()
		require.LessOrEqual(t, after-before, 2, "200 records in at most two transactions (the first may have gone alone)")

		g, taken := burst(20, func() error {
			return d.AppendAudit(ctx, store.AuditRecord{ID: "taken", At: at, Actor: "mallory", Action: "event.start", Pipeline: "app"})
		})
		require.NoError(t, g.Wait())
		require.ErrorContains(t, <-taken, "record event.start by mallory in the audit trail")

		all, err := d.ListAudit(ctx, store.AuditFilter{Limit: 500})
		require.NoError(t, err)
		require.Len(t, all, 1+200+20)
		targets := map[string]bool{}
		for _, r := range all {
			require.NotEqual(t, "mallory", r.Actor)
			targets[r.Target] = true
		}
		require.Len(t, targets, 1+200+20, "each record once")
	})
}

// TestKeepAuditPruned: the pruning loop cuts at its clock's time minus the
// retention, and retention 0 keeps everything.
func TestKeepAuditPruned(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		d := b.open(t)
		t0 := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
		for _, age := range []time.Duration{400 * 24 * time.Hour, 366 * 24 * time.Hour, 364 * 24 * time.Hour, time.Hour} {
			require.NoError(t, d.AppendAudit(t.Context(), store.AuditRecord{At: t0.Add(-age), Actor: "a", Action: "x"}))
		}
		clock := func() time.Time { return t0 }

		// Retention 0 returns at once, deleting nothing.
		store.KeepAuditPruned(t.Context(), d, 0, time.Hour, clock, func(int64, error) { t.Error("retention 0 prunes nothing") })

		ctx, cancel := context.WithCancel(t.Context())
		var removed int64
		store.KeepAuditPruned(ctx, d, 365*24*time.Hour, time.Hour, clock, func(n int64, err error) {
			require.NoError(t, err)
			removed += n
			cancel() // one pass is enough
		})
		require.EqualValues(t, 2, removed)
		left, err := d.ListAudit(t.Context(), store.AuditFilter{})
		require.NoError(t, err)
		require.Len(t, left, 2)
		for _, r := range left {
			require.True(t, r.At.After(t0.Add(-365*24*time.Hour)), "kept %s", r.At)
		}
	})
}
