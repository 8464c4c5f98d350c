package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/internal/pgserver"
	"github.com/sluice-ci/sluice/store"
)

// One PostgreSQL server for the package's tests (started by the first that
// needs it); each test opens a database of its own, which Open creates.
var pg struct {
	once sync.Once
	srv  *pgserver.Server
	err  error
	n    atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg.srv != nil {
		if err := pg.srv.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		}
	}
	os.Exit(code)
}

// backend opens stores of one kind on one fresh database.
type backend struct {
	name string
	// url is SLUICE_DB and path the SQLite file: open opens a new *sql.DB
	// on the same database each time.
	url, path string
}

func (b backend) open(t *testing.T) *store.DB {
	t.Helper()
	d, err := store.Open(t.Context(), b.url, b.path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// backends are SQLite (always) and PostgreSQL (when it is installed; else
// that subtest is skipped, saying why).
func backends(t *testing.T) []func(t *testing.T) backend {
	t.Helper()
	return []func(t *testing.T) backend{
		func(t *testing.T) backend {
			t.Helper()
			return backend{name: store.SQLite, path: filepath.Join(t.TempDir(), "sluice.db")}
		},
		func(t *testing.T) backend {
			t.Helper()
			pg.once.Do(func() { pg.srv, pg.err = pgserver.Start(context.Background()) })
			if errors.Is(pg.err, pgserver.ErrNotInstalled) {
				t.Skipf("%v", pg.err)
			}
			require.NoError(t, pg.err)
			u, err := url.Parse(pg.srv.URL)
			require.NoError(t, err)
			u.Path = "/sluice_" + strconv.FormatInt(pg.n.Add(1), 10)
			return backend{name: store.Postgres, url: u.String()}
		},
	}
}

// each runs test on every backend.
func each(t *testing.T, test func(t *testing.T, b backend)) {
	t.Helper()
	for i, mk := range backends(t) {
		t.Run([]string{store.SQLite, store.Postgres}[i], func(t *testing.T) {
			t.Parallel()
			test(t, mk(t))
		})
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, url, want string }{
		{"empty is SQLite", "", ""},
		{"postgres", "postgres://u:p@db:5432/sluice?sslmode=disable", ""},
		{"postgresql", "postgresql://db/sluice", ""},
		{"mysql", "mysql://u:p@db/sluice", `got scheme "mysql"`},
		{"a path", "/var/lib/sluice.db", `got scheme ""`},
		{"no host", "postgres:///sluice", "names no host"},
		{"no database", "postgres://u:hunter2@db:5432/", "names no database"},
		{"not a URL", "postgres://u:hunter2@db:port/x", "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := store.CheckURL(tc.url)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrBadURL)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "hunter2", "the error never shows the password")
		})
	}
}

// TestMigrations: a new database gets every migration; opening it again,
// or from several processes at once (here: several *sql.DB), applies none
// twice.
func TestMigrations(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		var g errgroup.Group
		dbs := make([]*store.DB, 4)
		for i := range dbs {
			g.Go(func() error {
				d, err := store.Open(t.Context(), b.url, b.path)
				dbs[i] = d
				return err
			})
		}
		require.NoError(t, g.Wait())
		for _, d := range dbs {
			require.NoError(t, d.Close())
		}
		d := b.open(t)
		require.Equal(t, b.name, d.Backend())
		v, err := d.SchemaVersion(t.Context())
		require.NoError(t, err)
		require.Equal(t, store.LatestVersion(), v)
		n, err := d.CountMigrations(t.Context())
		require.NoError(t, err)
		require.Equal(t, len(store.Versions()), n, "each migration recorded once")
	})
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		d := b.open(t)
		at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
		has, err := d.HasSecrets(ctx, "app")
		require.NoError(t, err)
		require.False(t, has)
		list, err := d.ListSecrets(ctx, "app")
		require.NoError(t, err)
		require.Empty(t, list)

		put := func(s store.Secret) {
			t.Helper()
			require.NoError(t, d.PutSecret(ctx, s))
		}
		put(store.Secret{Pipeline: "app", Name: "B", Sealed: "sealed-b", UpdatedAt: at, UpdatedBy: "ann"})
		put(store.Secret{Pipeline: "app", Name: "A", Sealed: "sealed-a", AllowInPR: true, AllowInForkPR: true, UpdatedAt: at})
		put(store.Secret{Pipeline: "other", Name: "A", Sealed: "other-a", UpdatedAt: at})
		// Set again: replaced.
		put(store.Secret{Pipeline: "app", Name: "B", Sealed: "sealed-b2", AllowInPR: true, UpdatedAt: at.Add(time.Second), UpdatedBy: "bob"})

		list, err = d.ListSecrets(ctx, "app")
		require.NoError(t, err)
		require.Equal(t, []store.Secret{
			{Pipeline: "app", Name: "A", AllowInPR: true, AllowInForkPR: true, UpdatedAt: at},
			{Pipeline: "app", Name: "B", AllowInPR: true, UpdatedAt: at.Add(time.Second), UpdatedBy: "bob"},
		}, list, "sorted, without sealed values")

		got, err := d.GetSecrets(ctx, "app", []string{"A", "B", "GHOST"})
		require.NoError(t, err)
		require.Equal(t, map[string]store.Secret{
			"A": {Pipeline: "app", Name: "A", Sealed: "sealed-a", AllowInPR: true, AllowInForkPR: true, UpdatedAt: at},
			"B": {Pipeline: "app", Name: "B", Sealed: "sealed-b2", AllowInPR: true, UpdatedAt: at.Add(time.Second), UpdatedBy: "bob"},
		}, got)
		got, err = d.GetSecrets(ctx, "app", nil)
		require.NoError(t, err)
		require.Empty(t, got)

		found, err := d.DeleteSecret(ctx, "app", "A")
		require.NoError(t, err)
		require.True(t, found)
		found, err = d.DeleteSecret(ctx, "app", "A")
		require.NoError(t, err)
		require.False(t, found)
		n, err := d.DeletePipelineSecrets(ctx, "app")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		has, err = d.HasSecrets(ctx, "app")
		require.NoError(t, err)
		require.False(t, has)
		has, err = d.HasSecrets(ctx, "other")
		require.NoError(t, err)
		require.True(t, has, "another pipeline's secrets stay")
	})
}

// TestConcurrentWritersLoseNothing: two stores on one database (two API
// replicas) set secrets at the same moment; every one is kept.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		one, two := b.open(t), b.open(t)
		const perReplica = 50
		at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		var g errgroup.Group
		for i := range perReplica {
			for r, d := range []*store.DB{one, two} {
				g.Go(func() error {
					name := fmt.Sprintf("R%d_%02d", r, i)
					return d.PutSecret(ctx, store.Secret{Pipeline: "app", Name: name, Sealed: "v-" + name, UpdatedAt: at})
				})
				// Both also write the same secret: one value wins whole.
				g.Go(func() error {
					return d.PutSecret(ctx, store.Secret{Pipeline: "app", Name: "SHARED", Sealed: fmt.Sprintf("r%d-%d", r, i), UpdatedAt: at})
				})
			}
		}
		require.NoError(t, g.Wait())
		for _, d := range []*store.DB{one, two} {
			list, err := d.ListSecrets(ctx, "app")
			require.NoError(t, err)
			require.Len(t, list, 2*perReplica+1)
		}
		got, err := two.GetSecrets(ctx, "app", []string{"R0_07", "R1_49"})
		require.NoError(t, err)
		require.Equal(t, "v-R0_07", got["R0_07"].Sealed)
		require.Equal(t, "v-R1_49", got["R1_49"].Sealed)
	})
}

// TestImportSecrets: an import writes what the store lacks or holds older,
// and repeated (or racing another replica's) changes nothing.
func TestImportSecrets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		d := b.open(t)
		old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		// Set after the file was written: the import keeps it.
		require.NoError(t, d.PutSecret(ctx, store.Secret{Pipeline: "app", Name: "NEWER", Sealed: "db", UpdatedAt: old.Add(time.Hour)}))
		// Older than the file's: the import replaces it.
		require.NoError(t, d.PutSecret(ctx, store.Secret{Pipeline: "app", Name: "OLDER", Sealed: "db", UpdatedAt: old.Add(-time.Hour)}))
		file := []store.Secret{
			{Pipeline: "app", Name: "NEWER", Sealed: "file", UpdatedAt: old},
			{Pipeline: "app", Name: "OLDER", Sealed: "file", UpdatedAt: old},
			{Pipeline: "app", Name: "ONLY_FILE", Sealed: "file", AllowInPR: true, UpdatedAt: old, UpdatedBy: "ann"},
			{Pipeline: "lib", Name: "TOKEN", Sealed: "file", UpdatedAt: old},
		}
		var g errgroup.Group
		counts := make([]int, 2)
		for i, s := range []*store.DB{d, b.open(t)} {
			g.Go(func() error {
				n, err := s.ImportSecrets(ctx, file)
				counts[i] = n
				return err
			})
		}
		require.NoError(t, g.Wait())
		require.Equal(t, 3, counts[0]+counts[1], "the racing imports wrote each secret once: %v", counts)
		n, err := d.ImportSecrets(ctx, file)
		require.NoError(t, err)
		require.Zero(t, n, "imported again: nothing")

		got, err := d.GetSecrets(ctx, "app", []string{"NEWER", "OLDER", "ONLY_FILE"})
		require.NoError(t, err)
		require.Equal(t, "db", got["NEWER"].Sealed)
		require.Equal(t, "file", got["OLDER"].Sealed)
		require.Equal(t, store.Secret{Pipeline: "app", Name: "ONLY_FILE", Sealed: "file", AllowInPR: true, UpdatedAt: old, UpdatedBy: "ann"}, got["ONLY_FILE"])
		has, err := d.HasSecrets(ctx, "lib")
		require.NoError(t, err)
		require.True(t, has)
	})
}

// TestSQLiteFilesOwnerOnly: the database and its journal files hold
// sealed secrets and are readable by their owner only.
func TestSQLiteFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "sluice.db")
	d, err := store.OpenSQLite(t.Context(), path)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	require.NoError(t, d.PutSecret(t.Context(), store.Secret{Pipeline: "app", Name: "A", Sealed: "x", UpdatedAt: time.Now()}))
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
}

// TestOpenRefusesBadInput: a bad SLUICE_DB is refused before anything
// opens, and an unreachable PostgreSQL is an error naming it without its
// password.
func TestOpenRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, err := store.Open(t.Context(), "mysql://u:p@db/sluice", "")
	require.ErrorIs(t, err, store.ErrBadURL)
	_, err = store.Open(t.Context(), "", "")
	require.ErrorContains(t, err, "no SQLite file")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = store.Open(ctx, "postgres://u:hunter2@127.0.0.1:1/sluice?sslmode=disable&connect_timeout=2", "")
	require.ErrorContains(t, err, "PostgreSQL postgres://127.0.0.1:1/sluice")
	require.NotContains(t, err.Error(), "hunter2")
}

// N19: the next event number of a deleted pipeline is kept, only ever
// raised, and two writers at once keep the larger.
func TestEventNumbers(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		d := b.open(t)
		n, err := d.NextEvent(ctx, "app")
		require.NoError(t, err)
		require.Zero(t, n, "nothing recorded")
		require.NoError(t, d.KeepNextEvent(ctx, "app", 42))
		require.NoError(t, d.KeepNextEvent(ctx, "app", 7), "a smaller number never lowers it")
		n, err = d.NextEvent(ctx, "app")
		require.NoError(t, err)
		require.Equal(t, 42, n)
		require.ErrorContains(t, d.KeepNextEvent(ctx, "app", 0), "next event 0 of app: must be at least 1")

		var wg sync.WaitGroup
		for i := 1; i <= 20; i++ {
			wg.Go(func() {
				if err := d.KeepNextEvent(ctx, "busy", 100+i); err != nil {
					t.Errorf("keep %d: %v", 100+i, err)
				}
			})
		}
		wg.Wait()
		n, err = d.NextEvent(ctx, "busy")
		require.NoError(t, err)
		require.Equal(t, 120, n)
		n, err = d.NextEvent(ctx, "other")
		require.NoError(t, err)
		require.Zero(t, n)
	})
}
