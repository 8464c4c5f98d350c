package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/queue"
)

// writeSecretFile writes dir/secrets.json as the file store of before did,
// its values sealed with key.
func writeSecretFile(t *testing.T, dir, key string, at time.Time, values map[string]map[string]string) string {
	t.Helper()
	sealer, _, err := NewSecretStore(nil, t.TempDir(), key)
	require.NoError(t, err)
	f := secretFile{Pipelines: map[string]map[string]secretRecord{}}
	for pipeline, secrets := range values {
		f.Pipelines[pipeline] = map[string]secretRecord{}
		for name, v := range secrets {
			sealed, err := sealer.seal(pipeline, name, v)
			require.NoError(t, err)
			f.Pipelines[pipeline][name] = secretRecord{Sealed: sealed, AllowInPR: name == "PR_OK", UpdatedAt: at, UpdatedBy: "ann"}
		}
	}
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	path := filepath.Join(dir, SecretFile)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// TestSecretStoreImportsTheJSONFile: the secrets file of before is imported
// at start-up and renamed, so the next start imports nothing; two replicas
// starting at once on the same directory both start and import each secret
// once; a secret set after the file was written keeps its newer value.
func TestSecretStoreImportsTheJSONFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	path := writeSecretFile(t, dir, "k", at, map[string]map[string]string{
		"app": {"NPM_TOKEN": "npm-value", "PR_OK": "pr-value"},
		"lib": {"NPM_TOKEN": "lib-value"},
	})

	// Two replicas start at once: both open, both try the import.
	var g errgroup.Group
	stores := make([]*SecretStore, 2)
	for i := range stores {
		g.Go(func() error {
			s, _, err := OpenSecretStore(dir, "k")
			stores[i] = s
			return err
		})
	}
	require.NoError(t, g.Wait())
	for _, s := range stores {
		t.Cleanup(func() { require.NoError(t, s.Close()) })
	}
	require.NoFileExists(t, path)
	require.FileExists(t, path+".imported")

	for _, s := range stores {
		vals, withheld, err := s.Resolve("app", []string{"NPM_TOKEN", "PR_OK"}, AudiencePR)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"PR_OK": "pr-value"}, vals, "the flags came along")
		require.Equal(t, []string{"NPM_TOKEN"}, withheld)
		vals, _, err = s.Resolve("lib", []string{"NPM_TOKEN"}, AudienceBranch)
		require.NoError(t, err)
		require.Equal(t, "lib-value", vals["NPM_TOKEN"])
	}
	list, err := stores[0].List("app")
	require.NoError(t, err)
	require.Equal(t, []Secret{
		{Pipeline: "app", Name: "NPM_TOKEN", UpdatedAt: at, UpdatedBy: "ann"},
		{Pipeline: "app", Name: "PR_OK", AllowInPR: true, UpdatedAt: at, UpdatedBy: "ann"},
	}, list)

	// A value set since, then a stale copy of the file imported again
	// (a replica with an old copy of the directory): the newer value stays.
	_, err = stores[0].Set(queue.Identity{User: "bob"}, "app", "NPM_TOKEN", SetSecretRequest{Value: "newer"}, at.Add(time.Hour))
	require.NoError(t, err)
	writeSecretFile(t, dir, "k", at, map[string]map[string]string{"app": {"NPM_TOKEN": "npm-value"}})
	n, err := stores[1].ImportFile(path)
	require.NoError(t, err)
	require.Zero(t, n)
	vals, _, err := stores[1].Resolve("app", []string{"NPM_TOKEN"}, AudienceBranch)
	require.NoError(t, err)
	require.Equal(t, "newer", vals["NPM_TOKEN"])

	// No file: nothing to do.
	n, err = stores[1].ImportFile(path)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestSecretStoreRefusesABadFile: a corrupt file, or one whose values the
// key cannot open, stops the start with an error naming the file; nothing
// is imported and the file stays for the operator.
func TestSecretStoreRefusesABadFile(t *testing.T) {
	t.Parallel()
	t.Run("corrupt", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, SecretFile)
		require.NoError(t, os.WriteFile(path, []byte(`{"pipelines":{}}}`), 0o600))
		_, _, err := OpenSecretStore(dir, "k")
		require.ErrorContains(t, err, "import "+path+": the file is corrupt")
		require.FileExists(t, path)
	})
	t.Run("another key", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := writeSecretFile(t, dir, "the old key", time.Now(), map[string]map[string]string{"app": {"A": "1", "B": "2"}})
		_, _, err := OpenSecretStore(dir, "a new key")
		require.ErrorContains(t, err, "import "+path)
		require.ErrorContains(t, err, "was SLUICE_SECRET_KEY changed?")
		require.FileExists(t, path)
		s, _, err := OpenSecretStore(filepath.Join(dir, "elsewhere"), "a new key")
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		n, err := s.ImportFile(path)
		require.Error(t, err)
		require.Zero(t, n)
		list, err := s.List("app")
		require.NoError(t, err)
		require.Empty(t, list, "nothing imported")
	})
}
