package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// EventNumbers keeps, per pipeline name, the number its next event would
// have had when it was deleted: a pipeline created again under that name
// continues from it, so event and build IDs never repeat, even after
// Temporal's retention has purged the deleted pipeline's histories.
type EventNumbers interface {
	// KeepNextEvent records next for pipeline, unless a larger number is
	// recorded already.
	KeepNextEvent(ctx context.Context, pipeline string, next int) error
	// NextEvent returns the recorded number, or 0.
	NextEvent(ctx context.Context, pipeline string) (int, error)
}

// KeepNextEvent implements EventNumbers: one upsert that keeps the larger
// number, so concurrent writers (two API replicas) lose nothing.
func (d *DB) KeepNextEvent(ctx context.Context, pipeline string, next int) error {
	if next < 1 {
		return fmt.Errorf("store: next event %d of %s: must be at least 1", next, pipeline)
	}
	_, err := d.db.ExecContext(ctx, `
INSERT INTO event_numbers (pipeline, next_event, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (pipeline) DO UPDATE SET
	next_event = CASE WHEN excluded.next_event > event_numbers.next_event THEN excluded.next_event ELSE event_numbers.next_event END,
	updated_at = excluded.updated_at`, pipeline, next, formatTime(time.Now()))
	if err != nil {
		return fmt.Errorf("store: keep the next event number of %s: %w", pipeline, err)
	}
	return nil
}

// NextEvent implements EventNumbers.
func (d *DB) NextEvent(ctx context.Context, pipeline string) (int, error) {
	var n int
	err := d.db.QueryRowContext(ctx, `SELECT next_event FROM event_numbers WHERE pipeline = $1`, pipeline).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read the next event number of %s: %w", pipeline, err)
	}
	return n, nil
}
