package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// PersonalToken is a token a person signed in on the pages minted for the
// CLI. The store keeps its SHA-256, never the token.
type PersonalToken struct {
	// ID names the token in lists and revocations (not secret).
	ID string
	// User is the person (the user claim they signed in with).
	User string
	// Name is the person's label for it ("laptop").
	Name string
	// SHA256 is the hex SHA-256 of the token.
	SHA256 string
	// Groups are the person's claim values (groups) that the tokens file
	// maps to roles or privileges, as they were at sign-in: the token's
	// identity is computed from them and the file at each use.
	Groups    []string
	CreatedAt time.Time
	ExpiresAt time.Time
	// RevokedAt is when it was revoked (zero: it was not).
	RevokedAt time.Time
}

// PersonalTokens keeps people's personal tokens.
type PersonalTokens interface {
	// CreatePersonalToken inserts a new token.
	CreatePersonalToken(ctx context.Context, t PersonalToken) error
	// PersonalTokenBySHA256 finds a token by its hash (found false: none).
	PersonalTokenBySHA256(ctx context.Context, sha256Hex string) (PersonalToken, bool, error)
	// ListPersonalTokens returns a user's tokens, newest first.
	ListPersonalTokens(ctx context.Context, user string) ([]PersonalToken, error)
	// RevokePersonalToken revokes the user's token id at the given time
	// and reports whether the user has such a token (revoking one already
	// revoked keeps its first revocation time).
	RevokePersonalToken(ctx context.Context, user, id string, at time.Time) (bool, error)
}

var _ PersonalTokens = (*DB)(nil)

const personalTokenColumns = `id, user_name, name, sha256, claim_groups, created_at, expires_at, revoked_at` //nolint:gosec // G101: column names

// CreatePersonalToken inserts a new token.
func (d *DB) CreatePersonalToken(ctx context.Context, t PersonalToken) error {
	groups := t.Groups
	if groups == nil {
		groups = []string{}
	}
	g, err := json.Marshal(groups)
	if err != nil {
		return fmt.Errorf("store: personal token of %s: %w", t.User, err)
	}
	revoked := ""
	if !t.RevokedAt.IsZero() {
		revoked = formatTime(t.RevokedAt)
	}
	if _, err := d.db.ExecContext(ctx, `INSERT INTO personal_tokens (`+personalTokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		t.ID, t.User, t.Name, t.SHA256, string(g), formatTime(t.CreatedAt), formatTime(t.ExpiresAt), revoked); err != nil {
		return fmt.Errorf("store: create personal token of %s: %w", t.User, err)
	}
	return nil
}

type rowScanner interface{ Scan(dest ...any) error }

func scanPersonalToken(row rowScanner) (PersonalToken, error) {
	var t PersonalToken
	var groups, created, expires, revoked string
	if err := row.Scan(&t.ID, &t.User, &t.Name, &t.SHA256, &groups, &created, &expires, &revoked); err != nil {
		return t, err //nolint:wrapcheck // the callers wrap it
	}
	var err error
	if t.CreatedAt, err = parseTime(created); err != nil {
		return t, err
	}
	if t.ExpiresAt, err = parseTime(expires); err != nil {
		return t, err
	}
	if revoked != "" {
		if t.RevokedAt, err = parseTime(revoked); err != nil {
			return t, err
		}
	}
	if err := json.Unmarshal([]byte(groups), &t.Groups); err != nil {
		return t, fmt.Errorf("store: personal token %s: bad groups: %w", t.ID, err)
	}
	return t, nil
}

// PersonalTokenBySHA256 finds a token by its hash.
func (d *DB) PersonalTokenBySHA256(ctx context.Context, sha256Hex string) (PersonalToken, bool, error) {
	t, err := scanPersonalToken(d.db.QueryRowContext(ctx, `SELECT `+personalTokenColumns+` FROM personal_tokens WHERE sha256 = $1`, sha256Hex))
	if errors.Is(err, sql.ErrNoRows) {
		return PersonalToken{}, false, nil
	}
	if err != nil {
		return PersonalToken{}, false, fmt.Errorf("store: find personal token: %w", err)
	}
	return t, true, nil
}

// ListPersonalTokens returns a user's tokens, newest first.
func (d *DB) ListPersonalTokens(ctx context.Context, user string) ([]PersonalToken, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+personalTokenColumns+` FROM personal_tokens WHERE user_name = $1 ORDER BY created_at DESC, id`, user)
	if err != nil {
		return nil, fmt.Errorf("store: list personal tokens of %s: %w", user, err)
	}
	defer func() { _ = rows.Close() }()
	var out []PersonalToken
	for rows.Next() {
		t, err := scanPersonalToken(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list personal tokens of %s: %w", user, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list personal tokens of %s: %w", user, err)
	}
	return out, nil
}

// RevokePersonalToken revokes the user's token id.
func (d *DB) RevokePersonalToken(ctx context.Context, user, id string, at time.Time) (bool, error) {
	res, err := d.db.ExecContext(ctx, `UPDATE personal_tokens SET revoked_at = CASE WHEN revoked_at = '' THEN $1 ELSE revoked_at END WHERE user_name = $2 AND id = $3`,
		formatTime(at), user, id)
	if err != nil {
		return false, fmt.Errorf("store: revoke personal token %s of %s: %w", id, user, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: revoke personal token %s of %s: %w", id, user, err)
	}
	return n > 0, nil
}
