package devstack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestComposeDynamicConfigAgrees: the compose stack's Temporal server
// (deploy/temporal/dynamicconfig.yaml) sets the settings sluice relies on
// as the embedded server does; only the search attribute cache differs (a
// production server caches them; devstack refreshes them for tests).
func TestComposeDynamicConfigAgrees(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "temporal", "dynamicconfig.yaml"))
	require.NoError(t, err)
	var compose map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	embedded := defaultDynamicConfig(true)
	for key, want := range embedded {
		switch key {
		case "system.forceSearchAttributesCacheRefreshOnRead":
			require.NotContains(t, compose, key, "a production server caches its search attributes")
			continue
		case "matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions":
			continue // one partition suits one embedded node, not a cluster
		}
		got, ok := compose[key]
		require.True(t, ok, "deploy/temporal/dynamicconfig.yaml does not set %s", key)
		require.Len(t, got, 1, key)
		require.EqualValues(t, want, got[0].Value, key)
	}
	require.Equal(t, false, embedded["system.forceSearchAttributesCacheRefreshOnRead"])
	require.Equal(t, true, defaultDynamicConfig(false)["system.forceSearchAttributesCacheRefreshOnRead"])
}
