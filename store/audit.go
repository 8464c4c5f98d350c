package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"
)

// AuditRecord is one entry of the audit trail: who did what, when, to
// what. It never holds a secret's value (a secret's name at most).
type AuditRecord struct {
	// ID is unique and, with At, orders records that share a time.
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// Actor is who acted: a token's user, "webhook:<provider>:<sender>",
	// or "system" when authentication is off.
	Actor string `json:"actor"`
	// Action is what happened ("pipeline.create", "event.cancel", ...).
	Action string `json:"action"`
	// Pipeline is the pipeline acted on ("" for queues, executors and
	// sign-ins).
	Pipeline string `json:"pipeline,omitempty"`
	// Target names the thing acted on (an event, a build, a queue, a
	// secret's name...).
	Target string `json:"target,omitempty"`
	// Detail says more (the event an action started, fields changed).
	Detail string `json:"detail,omitempty"`
}

// AuditFilter selects audit records; zero fields select all.
type AuditFilter struct {
	Pipeline string
	Actor    string
	Action   string
	// Since keeps records at or after it (zero: all).
	Since time.Time
	// Before keeps records strictly before it (zero: all), for paging.
	Before time.Time
	// Limit bounds the records answered, newest first (0: 100).
	Limit int
}

// AuditTrail keeps the audit trail.
type AuditTrail interface {
	// AppendAudit records one entry (At zero: now; ID empty: a new one).
	AppendAudit(ctx context.Context, r AuditRecord) error
	// ListAudit answers the entries f selects, newest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
	// PruneAudit deletes the entries older than before and answers how
	// many it deleted.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}

var _ AuditTrail = (*DB)(nil)

func newAuditID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AppendAudit implements AuditTrail. It returns once the record is
// committed. Records appended while another commit is under way go
// together in the next one (group commit): a burst of audited requests
// (hundreds of event starts, a storm of webhook pushes) costs a
// transaction, and a sync to disk, per round rather than per record, which
// on SQLite (one writer, synchronous=FULL) would queue each request behind
// every other's sync.
func (d *DB) AppendAudit(ctx context.Context, r AuditRecord) error {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	if r.ID == "" {
		r.ID = newAuditID()
	}
	a := &auditAppend{rec: r, done: make(chan error, 1)}
	g := &d.audits
	g.mu.Lock()
	g.queued = append(g.queued, a)
	g.waiting++
	lead := !g.committing
	g.committing = true
	g.mu.Unlock()
	if lead {
		// The commit outlives the request that leads it: it commits the
		// others' records too.
		go d.commitAudits(context.WithoutCancel(ctx))
	}
	select {
	case err := <-a.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("store: record %s by %s in the audit trail: %w (it may still be recorded)", r.Action, r.Actor, ctx.Err())
	}
}

// auditGroup gathers the audit records waiting for a commit.
type auditGroup struct {
	mu         sync.Mutex
	queued     []*auditAppend
	committing bool
	// waiting counts the appends not answered yet (queued or being
	// committed); commits counts the transactions that committed.
	waiting, commits int
}

// auditAppend is one AppendAudit waiting for its record's commit.
type auditAppend struct {
	rec  AuditRecord
	done chan error
}

// Bounds of one group commit.
const (
	maxAuditBatch   = 500
	auditCommitTime = time.Minute
)

// commitAudits commits the queued records, a batch at a time, until none
// is left.
func (d *DB) commitAudits(base context.Context) {
	g := &d.audits
	for {
		g.mu.Lock()
		n := min(len(g.queued), maxAuditBatch)
		batch := g.queued[:n:n]
		g.queued = g.queued[n:]
		if n == 0 {
			g.queued = nil
			g.committing = false
		}
		g.mu.Unlock()
		if n == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(base, auditCommitTime)
		errs := make([]error, n)
		if err := d.insertAudits(ctx, batch); err != nil && n > 1 {
			// One bad record (a duplicate ID given by the caller) must not
			// cost the others theirs: each on its own, as if alone.
			for i, a := range batch {
				errs[i] = d.insertAudits(ctx, []*auditAppend{a})
			}
		} else {
			for i := range errs {
				errs[i] = err
			}
		}
		cancel()
		g.mu.Lock()
		g.waiting -= n
		g.mu.Unlock()
		for i, a := range batch {
			a.done <- errs[i]
		}
	}
}

// insertAudits inserts batch in one transaction.
func (d *DB) insertAudits(ctx context.Context, batch []*auditAppend) error {
	err := d.tx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO audit_log (id, at, actor, action, pipeline, target, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)`)
		if err != nil {
			return err
		}
		defer func() { _ = stmt.Close() }()
		for _, a := range batch {
			r := a.rec
			if _, err := stmt.ExecContext(ctx, r.ID, formatTime(r.At), r.Actor, r.Action, r.Pipeline, r.Target, r.Detail); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		d.audits.mu.Lock()
		d.audits.commits++
		d.audits.mu.Unlock()
		return nil
	}
	if len(batch) == 1 {
		r := batch[0].rec
		return fmt.Errorf("store: record %s by %s in the audit trail: %w", r.Action, r.Actor, err)
	}
	return fmt.Errorf("store: record %d entries in the audit trail: %w", len(batch), err)
}

// ListAudit implements AuditTrail.
func (d *DB) ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Pipeline != "" {
		add("pipeline = $%d", f.Pipeline)
	}
	if f.Actor != "" {
		add("actor = $%d", f.Actor)
	}
	if f.Action != "" {
		add("action = $%d", f.Action)
	}
	if !f.Since.IsZero() {
		add("at >= $%d", formatTime(f.Since))
	}
	if !f.Before.IsZero() {
		add("at < $%d", formatTime(f.Before))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT id, at, actor, action, pipeline, target, detail FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ") //nolint:gosec // G202: fixed conditions with placeholders
	}
	args = append(args, limit)
	q += fmt.Sprintf(" ORDER BY at DESC, id DESC LIMIT $%d", len(args)) //nolint:gosec // G202: placeholders only; the values are arguments
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: read the audit trail: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := []AuditRecord{}
	for rows.Next() {
		var r AuditRecord
		var at string
		if err := rows.Scan(&r.ID, &at, &r.Actor, &r.Action, &r.Pipeline, &r.Target, &r.Detail); err != nil {
			return nil, fmt.Errorf("store: read the audit trail: %w", err)
		}
		if r.At, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read the audit trail: %w", err)
	}
	return out, nil
}

// PruneAudit implements AuditTrail.
func (d *DB) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	res, err := d.db.ExecContext(ctx, `DELETE FROM audit_log WHERE at < $1`, formatTime(before))
	if err != nil {
		return 0, fmt.Errorf("store: prune the audit trail: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: prune the audit trail: %w", err)
	}
	return n, nil
}

// KeepAuditPruned deletes the audit records older than retention now and
// then every interval until ctx ends, reading the time from now (a test's
// clock); report hears each pass that deleted something or failed.
// Retention 0 keeps every record.
func KeepAuditPruned(ctx context.Context, a AuditTrail, retention, interval time.Duration, now func() time.Time, report func(removed int64, err error)) {
	if retention <= 0 || a == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := a.PruneAudit(ctx, now().Add(-retention))
		if (err != nil && ctx.Err() == nil) || n > 0 {
			report(n, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
