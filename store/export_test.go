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
