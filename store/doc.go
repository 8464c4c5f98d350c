// Package store keeps sluice's own records (today: pipeline secrets, sealed
// by the API) in a SQL database: SQLite in the data directory by default
// (embedded, for one API process or several on one host), PostgreSQL with
// SLUICE_DB=postgres://… (for API replicas on several hosts).
//
// Open runs the schema migrations at start-up: a versioned list of SQL
// statements recorded in the schema_migrations table, applied in one
// transaction under a lock (a PostgreSQL advisory lock, SQLite's BEGIN
// IMMEDIATE), so two processes that start at once apply each migration
// once. Migrations only add: an older sluice keeps working on a newer
// schema during a rolling upgrade.
//
// Every write is one statement or one transaction (upserts), so writers in
// several processes lose nothing. The store never sees a secret's value,
// only what the API sealed.
package store
