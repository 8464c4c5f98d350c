package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// BuildMeta is the metadata a build ended with (Screwdriver's `meta`): a
// JSON object, as the build's executor uploaded it when the build ended.
type BuildMeta struct {
	// Build is the build's ID ("<pipeline>/<job>/<event>[.k]", a pull
	// request's job as PR-<n>:<job>).
	Build    string
	Pipeline string
	// Job is the job's name (without a pull request's PR-<n>: prefix); PR
	// is the pull request (0: none).
	Job     string
	PR      int
	Event   int
	Attempt int
	// Status is the attempt's outcome as its executor reported it
	// (SUCCESS, FAILURE, ABORTED).
	Status string
	// Meta is the JSON object.
	Meta      []byte
	UpdatedAt time.Time
}

// Meta keeps build and event metadata.
type Meta interface {
	// PutBuildMeta inserts or replaces a build's metadata (a later attempt's
	// replaces an earlier one's; an earlier attempt's, arriving late, is
	// dropped).
	PutBuildMeta(ctx context.Context, m BuildMeta) error
	// GetBuildMeta returns a build's metadata (found false: none saved).
	GetBuildMeta(ctx context.Context, build string) (BuildMeta, bool, error)
	// LastSuccessfulMeta returns the metadata of the newest build (by
	// event number) of a pipeline's job, outside pull requests, whose
	// attempt succeeded.
	LastSuccessfulMeta(ctx context.Context, pipeline, job string) (BuildMeta, bool, error)
	// PutEventMeta records the metadata an event starts with under id (a
	// random reference the event carries).
	PutEventMeta(ctx context.Context, id, pipeline string, meta []byte) error
	// GetEventMeta returns the metadata recorded under id.
	GetEventMeta(ctx context.Context, id string) ([]byte, bool, error)
}

var _ Meta = (*DB)(nil)

// PutBuildMeta implements Meta (one upsert).
func (d *DB) PutBuildMeta(ctx context.Context, m BuildMeta) error {
	if m.UpdatedAt.IsZero() {
		m.UpdatedAt = time.Now()
	}
	_, err := d.db.ExecContext(ctx, `
INSERT INTO build_meta (build, pipeline, job, pr, event, attempt, status, meta, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (build) DO UPDATE SET
	attempt = excluded.attempt, status = excluded.status, meta = excluded.meta, updated_at = excluded.updated_at
WHERE build_meta.attempt <= excluded.attempt`,
		m.Build, m.Pipeline, m.Job, m.PR, m.Event, m.Attempt, m.Status, string(m.Meta), formatTime(m.UpdatedAt))
	if err != nil {
		return fmt.Errorf("store: save the metadata of build %s: %w", m.Build, err)
	}
	return nil
}

const buildMetaColumns = `build, pipeline, job, pr, event, attempt, status, meta, updated_at`

func scanBuildMeta(row *sql.Row) (BuildMeta, bool, error) {
	var m BuildMeta
	var meta, at string
	err := row.Scan(&m.Build, &m.Pipeline, &m.Job, &m.PR, &m.Event, &m.Attempt, &m.Status, &meta, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return BuildMeta{}, false, nil
	}
	if err != nil {
		return BuildMeta{}, false, err
	}
	m.Meta = []byte(meta)
	m.UpdatedAt, err = parseTime(at)
	return m, err == nil, err
}

// GetBuildMeta implements Meta.
func (d *DB) GetBuildMeta(ctx context.Context, build string) (BuildMeta, bool, error) {
	m, ok, err := scanBuildMeta(d.db.QueryRowContext(ctx, `SELECT `+buildMetaColumns+` FROM build_meta WHERE build = $1`, build))
	if err != nil {
		return BuildMeta{}, false, fmt.Errorf("store: read the metadata of build %s: %w", build, err)
	}
	return m, ok, nil
}

// LastSuccessfulMeta implements Meta.
func (d *DB) LastSuccessfulMeta(ctx context.Context, pipeline, job string) (BuildMeta, bool, error) {
	m, ok, err := scanBuildMeta(d.db.QueryRowContext(ctx, `SELECT `+buildMetaColumns+` FROM build_meta
WHERE pipeline = $1 AND job = $2 AND pr = 0 AND status = 'SUCCESS'
ORDER BY event DESC, build DESC LIMIT 1`, pipeline, job))
	if err != nil {
		return BuildMeta{}, false, fmt.Errorf("store: read the last successful metadata of %s:%s: %w", pipeline, job, err)
	}
	return m, ok, nil
}

// PutEventMeta implements Meta.
func (d *DB) PutEventMeta(ctx context.Context, id, pipeline string, meta []byte) error {
	_, err := d.db.ExecContext(ctx, `INSERT INTO event_meta (id, pipeline, meta, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET meta = excluded.meta`, id, pipeline, string(meta), formatTime(time.Now()))
	if err != nil {
		return fmt.Errorf("store: save event metadata of %s: %w", pipeline, err)
	}
	return nil
}

// GetEventMeta implements Meta.
func (d *DB) GetEventMeta(ctx context.Context, id string) ([]byte, bool, error) {
	var meta string
	err := d.db.QueryRowContext(ctx, `SELECT meta FROM event_meta WHERE id = $1`, id).Scan(&meta)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read event metadata %s: %w", id, err)
	}
	return []byte(meta), true, nil
}
