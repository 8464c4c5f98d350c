package devstack

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"go.temporal.io/server/common/config"
	serverlog "go.temporal.io/server/common/log"
	postgresplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// Embedded schema directories (go.temporal.io/server/schema) of the
// PostgreSQL stores.
const (
	pgMainSchema       = "postgresql/v12/temporal"
	pgVisibilitySchema = "postgresql/v12/visibility"
)

// PostgresConfig parses a postgres:// URL into the main store's and the
// visibility store's SQL settings: the database of the URL holds the
// history, <database>_visibility the visibility records (both on the same
// server). Query parameters become connect attributes (sslmode=disable).
func PostgresConfig(raw string) (main, visibility config.SQL, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return main, visibility, fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return main, visibility, fmt.Errorf("scheme %q: want postgres://user:password@host:port/database", u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return main, visibility, errors.New("no host: want postgres://user:password@host:port/database")
	}
	if port == "" {
		port = "5432"
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = "temporal"
	}
	if strings.ContainsAny(db, "/ ") {
		return main, visibility, fmt.Errorf("database name %q", db)
	}
	attrs := map[string]string{}
	for k, v := range u.Query() {
		if len(v) > 0 {
			attrs[k] = v[0]
		}
	}
	password, _ := u.User.Password()
	main = config.SQL{
		PluginName:        postgresplugin.PluginName,
		ConnectAddr:       net.JoinHostPort(host, port),
		ConnectProtocol:   "tcp",
		User:              u.User.Username(),
		Password:          password,
		DatabaseName:      db,
		ConnectAttributes: attrs,
		MaxConns:          20,
		MaxIdleConns:      20,
	}
	visibility = main
	visibility.DatabaseName = db + "_visibility"
	visibility.ConnectAttributes = map[string]string{}
	for k, v := range attrs {
		visibility.ConnectAttributes[k] = v
	}
	return main, visibility, nil
}

// MigratePostgres creates the two databases when missing and brings their
// schemas to the version this server needs with Temporal's own embedded
// schemas and schema tool. It is idempotent: on an up-to-date database it
// changes nothing.
func MigratePostgres(main, visibility config.SQL) error {
	logger := serverlog.NewNoopLogger()
	for _, db := range []struct {
		cfg    config.SQL
		schema string
	}{{main, pgMainSchema}, {visibility, pgVisibilitySchema}} {
		cfg := db.cfg
		if err := createDatabase(cfg, logger); err != nil {
			return err
		}
		conn, err := sqltool.NewConnection(&cfg, logger)
		if err != nil {
			return fmt.Errorf("devstack: connect to PostgreSQL database %s at %s: %w", cfg.DatabaseName, cfg.ConnectAddr, err)
		}
		if _, err := conn.ReadSchemaVersion(); err != nil {
			// A new database: the version tables at 0.0, then every versioned step.
			setup := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger)
			if err := setup.Run(); err != nil {
				conn.Close()
				return fmt.Errorf("devstack: set up the schema version tables in %s: %w", cfg.DatabaseName, err)
			}
		}
		update := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: db.schema}, logger)
		err = update.Run()
		conn.Close()
		if err != nil {
			return fmt.Errorf("devstack: update the schema of %s: %w", cfg.DatabaseName, err)
		}
	}
	return nil
}

// createDatabase creates cfg's database through the server's "postgres"
// database unless it exists.
func createDatabase(cfg config.SQL, logger serverlog.Logger) error {
	err := sqltool.DoCreateDatabase(&cfg, "postgres", logger)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("devstack: create PostgreSQL database %s at %s: %w", cfg.DatabaseName, cfg.ConnectAddr, err)
	}
	return nil
}
