package devstack

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPostgresConfig(t *testing.T) {
	t.Parallel()
	main, vis, err := PostgresConfig("postgres://temporal:pw@db.internal/history?sslmode=disable")
	require.NoError(t, err)
	require.Equal(t, "postgres12", main.PluginName)
	require.Equal(t, "db.internal:5432", main.ConnectAddr)
	require.Equal(t, "temporal", main.User)
	require.Equal(t, "pw", main.Password)
	require.Equal(t, "history", main.DatabaseName)
	require.Equal(t, "history_visibility", vis.DatabaseName)
	require.Equal(t, map[string]string{"sslmode": "disable"}, vis.ConnectAttributes)
	vis.ConnectAttributes["x"] = "y"
	require.NotContains(t, main.ConnectAttributes, "x", "the two stores do not share their attributes")

	main, _, err = PostgresConfig("postgresql://u@127.0.0.1:6543")
	require.NoError(t, err)
	require.Equal(t, "temporal", main.DatabaseName, "the default database")
	require.Equal(t, "127.0.0.1:6543", main.ConnectAddr)

	for _, bad := range []string{"mysql://u@h/db", "postgres:///db", "postgres://u@h/a/b", "::"} {
		_, _, err := PostgresConfig(bad)
		require.Error(t, err, bad)
	}
}
