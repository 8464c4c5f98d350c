package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migration is one version of the schema: statements that run on both
// databases (portable SQL: TEXT, BOOLEAN, composite primary keys).
type migration struct {
	Version int
	Name    string
	SQL     []string
}

// migrations is the schema's history, oldest first. Append only: a
// released migration never changes, and each one only adds (tables,
// columns with defaults, indexes), so an older sluice still works on a
// newer schema.
var migrations = []migration{
	{Version: 1, Name: "secrets", SQL: []string{`
CREATE TABLE secrets (
	pipeline         TEXT    NOT NULL,
	name             TEXT    NOT NULL,
	sealed           TEXT    NOT NULL,
	allow_in_pr      BOOLEAN NOT NULL DEFAULT FALSE,
	allow_in_fork_pr BOOLEAN NOT NULL DEFAULT FALSE,
	updated_at       TEXT    NOT NULL,
	updated_by       TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (pipeline, name)
)`}},
	{Version: 2, Name: "event numbers", SQL: []string{`
CREATE TABLE event_numbers (
	pipeline   TEXT    NOT NULL PRIMARY KEY,
	next_event INTEGER NOT NULL,
	updated_at TEXT    NOT NULL
)`}},
	{Version: 3, Name: "build meta", SQL: []string{`
CREATE TABLE build_meta (
	build      TEXT    NOT NULL PRIMARY KEY,
	pipeline   TEXT    NOT NULL,
	job        TEXT    NOT NULL,
	pr         INTEGER NOT NULL DEFAULT 0,
	event      INTEGER NOT NULL,
	attempt    INTEGER NOT NULL,
	status     TEXT    NOT NULL,
	meta       TEXT    NOT NULL,
	updated_at TEXT    NOT NULL
)`, `CREATE INDEX build_meta_job ON build_meta (pipeline, job, pr, status, event)`, `
CREATE TABLE event_meta (
	id         TEXT NOT NULL PRIMARY KEY,
	pipeline   TEXT NOT NULL,
	meta       TEXT NOT NULL,
	created_at TEXT NOT NULL
)`}},
	{Version: 4, Name: "audit trail", SQL: []string{
		`
CREATE TABLE audit_log (
	id       TEXT NOT NULL PRIMARY KEY,
	at       TEXT NOT NULL,
	actor    TEXT NOT NULL,
	action   TEXT NOT NULL,
	pipeline TEXT NOT NULL DEFAULT '',
	target   TEXT NOT NULL DEFAULT '',
	detail   TEXT NOT NULL DEFAULT ''
)`, `CREATE INDEX audit_log_at ON audit_log (at, id)`,
		`CREATE INDEX audit_log_pipeline ON audit_log (pipeline, at)`,
		`CREATE INDEX audit_log_actor ON audit_log (actor, at)`,
	}},
	{Version: 5, Name: "personal tokens", SQL: []string{`
CREATE TABLE personal_tokens (
	id         TEXT NOT NULL PRIMARY KEY,
	user_name  TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	sha256     TEXT NOT NULL UNIQUE,
	claim_groups TEXT NOT NULL DEFAULT '[]',
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	revoked_at TEXT NOT NULL DEFAULT ''
)`, `CREATE INDEX personal_tokens_user ON personal_tokens (user_name, created_at)`}},
}

// migrationLock is the PostgreSQL advisory lock key that serializes
// sluice's migrations ("sluice" as a number).
const migrationLock = 0x736c75696365

// migrate applies the migrations the database lacks, in one transaction
// under a lock, so two processes starting at once apply each one once.
func (d *DB) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return d.tx(ctx, func(tx *sql.Tx) error {
		if d.backend == Postgres {
			// Held until the transaction ends. (SQLite's transaction
			// already holds the write lock: BEGIN IMMEDIATE.)
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
				return fmt.Errorf("migration lock: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at TEXT    NOT NULL
)`); err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				_ = rows.Close()
				return fmt.Errorf("schema_migrations: %w", err)
			}
			applied[v] = true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		_ = rows.Close()
		for _, m := range migrations {
			if applied[m.Version] {
				continue
			}
			for _, stmt := range m.SQL {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, formatTime(time.Now())); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		return nil
	})
}

// SchemaVersion is the newest migration the database has applied.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := d.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	return int(v.Int64), nil
}
