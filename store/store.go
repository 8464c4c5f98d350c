package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/sluice-ci/sluice/internal/flock"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Backends.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// ErrBadURL means SLUICE_DB is neither empty nor a PostgreSQL URL.
var ErrBadURL = errors.New("store: want empty (SQLite in the data directory) or a postgres:// URL")

// Store is sluice's own records behind one interface: each kind of record
// is a small interface of its own (Secrets now; metadata, an artifact
// index or an audit trail later), all kept by one database.
type Store interface {
	Secrets
	EventNumbers
	Meta
	AuditTrail
	// Backend is SQLite or Postgres.
	Backend() string
	// Close releases the database.
	Close() error
}

// DB is a Store on a SQL database (SQLite or PostgreSQL).
type DB struct {
	db      *sql.DB
	backend string
	where   string // for messages: a path, or the URL without its password
	// audits are the audit records waiting for their group commit.
	audits auditGroup
}

var _ Store = (*DB)(nil)

// CheckURL reports a SLUICE_DB value Open would refuse: empty (SQLite) and
// postgres:// or postgresql:// URLs with a host and a database are fine.
// The error never repeats the URL (it may hold a password).
func CheckURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: the value does not parse as a URL", ErrBadURL)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("%w, got scheme %q", ErrBadURL, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("%w: the URL names no host (postgres://user:password@host:5432/sluice)", ErrBadURL)
	}
	if strings.Trim(u.Path, "/") == "" {
		return fmt.Errorf("%w: the URL names no database (postgres://user:password@host:5432/sluice)", ErrBadURL)
	}
	return nil
}

// Open opens sluice's store and brings its schema up to date: PostgreSQL
// when dbURL is a postgres:// URL (its database is created when missing),
// else SQLite in the file sqlitePath (created when missing).
func Open(ctx context.Context, dbURL, sqlitePath string) (*DB, error) {
	if dbURL == "" {
		return OpenSQLite(ctx, sqlitePath)
	}
	return OpenPostgres(ctx, dbURL)
}

// OpenSQLite opens (or creates) the SQLite database in path. Several
// processes may open the same file: writes wait for each other (WAL
// journal, a busy timeout, transactions that take the write lock first).
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: no SQLite file")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: SQLite file %q: a path with ? or # is not supported", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	// The file holds sealed secrets: only its owner reads it (SQLite gives
	// its -wal and -shm files the database file's mode).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: SQLite %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("store: SQLite %s: %w", path, err)
	}
	// Two processes (or two stores of one process) opening a new file at
	// once: switching it to WAL takes a lock SQLite does not wait for
	// (SQLITE_BUSY at once, not after the busy timeout). The first
	// connection and the migrations run under a lock file instead.
	held, err := flock.Lock(ctx, path+".open-lock")
	if err != nil {
		return nil, fmt.Errorf("store: SQLite %s: %w", path, err)
	}
	defer func() { _ = held.Unlock() }()
	dsn := path + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: SQLite %s: %w", path, err)
	}
	d := &DB{db: db, backend: SQLite, where: path}
	if err := d.start(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}

// OpenPostgres opens the PostgreSQL database dbURL names, creating it when
// it does not exist (which needs the CREATEDB privilege; create it by hand
// otherwise).
func OpenPostgres(ctx context.Context, dbURL string) (*DB, error) {
	if err := CheckURL(dbURL); err != nil {
		return nil, err
	}
	if dbURL == "" {
		return nil, ErrBadURL
	}
	u, _ := url.Parse(dbURL) // CheckURL parsed it
	u.User = nil
	where := u.Redacted()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, fmt.Errorf("store: PostgreSQL %s: %w", where, err)
	}
	db.SetMaxOpenConns(10)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	d := &DB{db: db, backend: Postgres, where: where}
	err = d.ping(ctx)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "3D000" { // invalid_catalog_name: no such database
		if err := createDatabase(ctx, dbURL); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("store: PostgreSQL %s: create the database: %w", where, err)
		}
		err = d.ping(ctx)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: PostgreSQL %s: %w", where, err)
	}
	if err := d.start(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}

func (d *DB) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return d.db.PingContext(ctx)
}

// createDatabase creates the database dbURL names, through the server's
// maintenance database "postgres". Another process creating it at the same
// moment is no error.
func createDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	name := strings.Trim(u.Path, "/")
	u.Path = "/postgres"
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P04" || pe.Code == "23505") { // duplicate_database, or the race inside it
		return nil
	}
	return err
}

// Backend is SQLite or Postgres.
func (d *DB) Backend() string { return d.backend }

// String names the database (its file, or its URL without the password).
func (d *DB) String() string { return d.backend + " " + d.where }

// Close releases the database.
func (d *DB) Close() error { return d.db.Close() }

// start brings the schema up to date.
func (d *DB) start(ctx context.Context) error {
	if err := d.migrate(ctx); err != nil {
		return fmt.Errorf("store: %s: %w", d, err)
	}
	return nil
}

// tx runs fn in a transaction: on SQLite it holds the write lock from its
// start (BEGIN IMMEDIATE, the _txlock of the DSN), so two processes'
// transactions run one after the other; fn's error rolls it back.
func (d *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// timeLayout stores times as fixed-width UTC text, readable in both
// databases and ordered as text.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bad time %q: %w", s, err)
	}
	return t.UTC(), nil
}
