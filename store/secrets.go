package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Secret is one secret's record. Sealed is its value as the API sealed it
// (the store never sees a value).
type Secret struct {
	Pipeline      string
	Name          string
	Sealed        string
	AllowInPR     bool
	AllowInForkPR bool
	UpdatedAt     time.Time
	UpdatedBy     string
}

// Secrets keeps the pipelines' secrets.
type Secrets interface {
	// PutSecret inserts or replaces a secret.
	PutSecret(ctx context.Context, s Secret) error
	// ImportSecrets writes secrets in one transaction, each unless the
	// store holds that secret updated at the same time or later (so a
	// second import, or one racing another, changes nothing); it returns
	// how many it wrote.
	ImportSecrets(ctx context.Context, secrets []Secret) (int, error)
	// ListSecrets returns a pipeline's secrets sorted by name, without
	// their sealed values.
	ListSecrets(ctx context.Context, pipeline string) ([]Secret, error)
	// GetSecrets returns the secrets of pipeline among names, by name
	// (a name that is not set is absent).
	GetSecrets(ctx context.Context, pipeline string, names []string) (map[string]Secret, error)
	// DeleteSecret removes a secret and reports whether it existed.
	DeleteSecret(ctx context.Context, pipeline, name string) (bool, error)
	// DeletePipelineSecrets removes every secret of a pipeline and returns
	// how many there were.
	DeletePipelineSecrets(ctx context.Context, pipeline string) (int, error)
	// HasSecrets reports whether a pipeline has any secret.
	HasSecrets(ctx context.Context, pipeline string) (bool, error)
}

const upsertSecretRow = //nolint:gosec // SQL, not a credential
`INSERT INTO secrets (pipeline, name, sealed, allow_in_pr, allow_in_fork_pr, updated_at, updated_by)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (pipeline, name) DO UPDATE SET
	sealed = excluded.sealed, allow_in_pr = excluded.allow_in_pr, allow_in_fork_pr = excluded.allow_in_fork_pr,
	updated_at = excluded.updated_at, updated_by = excluded.updated_by`

func secretArgs(s Secret) []any {
	return []any{s.Pipeline, s.Name, s.Sealed, s.AllowInPR, s.AllowInForkPR, formatTime(s.UpdatedAt), s.UpdatedBy}
}

// PutSecret inserts or replaces a secret (one statement: concurrent
// writers of other secrets, or of the same one, lose nothing but the older
// value of that same secret).
func (d *DB) PutSecret(ctx context.Context, s Secret) error {
	if _, err := d.db.ExecContext(ctx, upsertSecretRow, secretArgs(s)...); err != nil {
		return fmt.Errorf("store: set secret %s of %s: %w", s.Name, s.Pipeline, err)
	}
	return nil
}

// ImportSecrets writes secrets in one transaction, each unless the store
// holds it updated at the same time or later.
func (d *DB) ImportSecrets(ctx context.Context, secrets []Secret) (int, error) {
	n := 0
	err := d.tx(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, s := range secrets {
			res, err := tx.ExecContext(ctx, upsertSecretRow+` WHERE secrets.updated_at < excluded.updated_at`, secretArgs(s)...)
			if err != nil {
				return fmt.Errorf("secret %s of %s: %w", s.Name, s.Pipeline, err)
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: import secrets: %w", err)
	}
	return n, nil
}

// ListSecrets returns a pipeline's secrets sorted by name, without their
// sealed values.
func (d *DB) ListSecrets(ctx context.Context, pipeline string) ([]Secret, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT name, allow_in_pr, allow_in_fork_pr, updated_at, updated_by
FROM secrets WHERE pipeline = $1 ORDER BY name`, pipeline)
	if err != nil {
		return nil, fmt.Errorf("store: list secrets of %s: %w", pipeline, err)
	}
	defer func() { _ = rows.Close() }()
	out := []Secret{}
	for rows.Next() {
		s := Secret{Pipeline: pipeline}
		var at string
		if err := rows.Scan(&s.Name, &s.AllowInPR, &s.AllowInForkPR, &at, &s.UpdatedBy); err != nil {
			return nil, fmt.Errorf("store: list secrets of %s: %w", pipeline, err)
		}
		if s.UpdatedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list secrets of %s: %w", pipeline, err)
	}
	return out, nil
}

// GetSecrets returns the secrets of pipeline among names, by name.
func (d *DB) GetSecrets(ctx context.Context, pipeline string, names []string) (map[string]Secret, error) {
	out := make(map[string]Secret, len(names))
	if len(names) == 0 {
		return out, nil
	}
	args := make([]any, 0, 1+len(names))
	args = append(args, pipeline)
	marks := make([]string, len(names))
	for i, n := range names {
		args = append(args, n)
		marks[i] = "$" + strconv.Itoa(i+2)
	}
	//nolint:gosec // placeholders only, no values
	query := `SELECT name, sealed, allow_in_pr, allow_in_fork_pr, updated_at, updated_by
FROM secrets WHERE pipeline = $1 AND name IN (` + strings.Join(marks, ", ") + `)`
	rows, err := d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: read secrets of %s: %w", pipeline, err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		s := Secret{Pipeline: pipeline}
		var at string
		if err := rows.Scan(&s.Name, &s.Sealed, &s.AllowInPR, &s.AllowInForkPR, &at, &s.UpdatedBy); err != nil {
			return nil, fmt.Errorf("store: read secrets of %s: %w", pipeline, err)
		}
		if s.UpdatedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out[s.Name] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read secrets of %s: %w", pipeline, err)
	}
	return out, nil
}

// DeleteSecret removes a secret and reports whether it existed.
func (d *DB) DeleteSecret(ctx context.Context, pipeline, name string) (bool, error) {
	res, err := d.db.ExecContext(ctx, `DELETE FROM secrets WHERE pipeline = $1 AND name = $2`, pipeline, name)
	if err != nil {
		return false, fmt.Errorf("store: delete secret %s of %s: %w", name, pipeline, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: delete secret %s of %s: %w", name, pipeline, err)
	}
	return n > 0, nil
}

// DeletePipelineSecrets removes every secret of a pipeline.
func (d *DB) DeletePipelineSecrets(ctx context.Context, pipeline string) (int, error) {
	res, err := d.db.ExecContext(ctx, `DELETE FROM secrets WHERE pipeline = $1`, pipeline)
	if err != nil {
		return 0, fmt.Errorf("store: delete the secrets of %s: %w", pipeline, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete the secrets of %s: %w", pipeline, err)
	}
	return int(n), nil
}

// HasSecrets reports whether a pipeline has any secret.
func (d *DB) HasSecrets(ctx context.Context, pipeline string) (bool, error) {
	var one int
	err := d.db.QueryRowContext(ctx, `SELECT 1 FROM secrets WHERE pipeline = $1 LIMIT 1`, pipeline).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: secrets of %s: %w", pipeline, err)
	}
	return true, nil
}
