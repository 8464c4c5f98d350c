package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-ci/sluice/runner"
)

// TestComposeKeepsBuildsOffTheControlPlane: in docker-compose.yml Temporal
// and PostgreSQL are only on internal networks and publish no port, and the
// build containers of the docker executor join a network that none of the
// stack's services but that executor is on (review finding A: build code
// reached temporal:7233 and postgres:5432).
func TestComposeKeepsBuildsOffTheControlPlane(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Networks    []string          `yaml:"networks"`
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
		Networks map[string]struct {
			Internal bool   `yaml:"internal"`
			Name     string `yaml:"name"`
		} `yaml:"networks"`
	}
	require.NoError(t, yaml.Unmarshal(b, &compose))

	for _, svc := range []string{"temporal", "postgres"} {
		s, ok := compose.Services[svc]
		require.True(t, ok, svc)
		require.NotEmpty(t, s.Networks, "%s joins the default network", svc)
		for _, n := range s.Networks {
			require.True(t, compose.Networks[n].Internal, "%s is on network %s, which is not internal", svc, n)
		}
		require.Empty(t, s.Ports, "%s publishes a port", svc)
	}

	net := compose.Services["sluice-executor-1"].Environment["SLUICE_CONTAINER_NETWORK"]
	require.NoError(t, runner.CheckNetwork(net))
	require.NotEmpty(t, net, "the docker executor's build containers name no network")
	var key string
	for k, n := range compose.Networks {
		if n.Name == net || (n.Name == "" && k == net) {
			key = k
		}
	}
	require.NotEmpty(t, key, "network %s is not declared", net)
	require.False(t, compose.Networks[key].Internal, "builds fetch their dependencies")
	for name, s := range compose.Services {
		if name != "sluice-executor-1" && name != "sluice-api" {
			require.False(t, slices.Contains(s.Networks, key), "%s is on the builds' network", name)
		}
	}
	// The API, which checks every request's token or build credential, is
	// where the builds' meta and artifact commands go.
	require.Contains(t, compose.Services["sluice-api"].Networks, key, "container builds reach the API")
	require.Equal(t, "http://sluice-api:8080", compose.Services["sluice-executor-1"].Environment["SLUICE_BUILD_API_URL"])

	// Each worker sends a token of its own: one can be revoked alone, and
	// a token taken from one executor's builds is not every worker's.
	seen := map[string]string{}
	for _, name := range []string{"sluice-executor-1", "sluice-executor-2", "sluice-controller"} {
		tok := compose.Services[name].Environment["SLUICE_TOKEN"]
		require.True(t, strings.HasPrefix(tok, "${SLUICE_") && strings.Contains(tok, ":?"), "%s's token is a required variable: %q", name, tok)
		v, _, _ := strings.Cut(strings.TrimPrefix(tok, "${"), ":")
		require.NotContains(t, seen, v, "%s and %s share the token %s", name, seen[v], v)
		seen[v] = name
	}
	require.NotContains(t, compose.Services["sluice-api"].Environment, "SLUICE_TOKEN", "the API sends no worker token")
}
