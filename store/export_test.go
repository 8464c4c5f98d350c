package store

import "context"

// LatestVersion is the newest migration's version.
func LatestVersion() int { return migrations[len(migrations)-1].Version }

// Versions lists the migrations' versions.
func Versions() []int {
	out := make([]int, len(migrations))
	for i, m := range migrations {
		out[i] = m.Version
	}
	return out
}

// CountMigrations counts the rows of schema_migrations.
func (d *DB) CountMigrations(ctx context.Context) (int, error) {
	var n int
	err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n)
	return n, err
}

// AuditAppends counts the appends not answered yet and the transactions
// that committed audit records.
func (d *DB) AuditAppends() (waiting, commits int) {
	d.audits.mu.Lock()
	defer d.audits.mu.Unlock()
	return d.audits.waiting, d.audits.commits
}

// HoldAuditWrites keeps other connections from writing the audit trail
// until release: a transaction that holds SQLite's write lock, or
// PostgreSQL's lock on the table.
func (d *DB) HoldAuditWrites(ctx context.Context) (release func() error, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if d.backend == Postgres {
		if _, err := tx.ExecContext(ctx, `LOCK TABLE audit_log IN EXCLUSIVE MODE`); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
	} else if _, err := tx.ExecContext(ctx, `DELETE FROM audit_log WHERE id = 'none'`); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return tx.Rollback, nil
}
