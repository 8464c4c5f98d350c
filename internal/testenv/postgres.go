package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/internal/pgserver"
)

// StartPostgres starts a real PostgreSQL server for the test (see pgserver)
// and returns its postgres:// URL; it stops when the test ends. The test is
// skipped, saying why, when PostgreSQL is not installed.
func StartPostgres(t testing.TB) string {
	t.Helper()
	s, err := pgserver.Start(t.Context())
	if errors.Is(err, pgserver.ErrNotInstalled) {
		t.Skipf("%v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Logf("stop PostgreSQL: %v", err)
		}
	})
	return s.URL
}
