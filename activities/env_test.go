package activities

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envMap splits KEY=value pairs, failing on a repeated key.
func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, "malformed entry %q", kv)
		require.NotContains(t, m, k, "%s set twice", k)
		m[k] = v
	}
	return m
}

func TestBuildEnv(t *testing.T) {
	t.Parallel()
	in := RunBuildInput{
		BuildID: "app/test/4.2", Pipeline: "app", Job: "test", EventID: "app/4", Attempt: 3,
		SHA: "0123456789abcdef0123456789abcdef01234567", Branch: "main", Trigger: "commit",
		Environment: map[string]string{
			"ZED": "last", "AAA": "first", "GO_VERSION": "1.22",
			// A job cannot override what sluice sets.
			"SD_SHA": "forged", "SD_BUILD_ID": "forged", "SD_JOB_NAME": "forged", "CI": "false", "SLUICE": "no",
		},
	}
	env := buildEnv(in, "/work/app/test/4.2/attempt-3", "exec-a", nil)

	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	require.True(t, slices.IsSorted(keys), "sorted by name: %v", keys)

	got := envMap(t, env)
	for k, v := range map[string]string{
		"CI": "true", "SCREWDRIVER": "true", "SLUICE": "true",
		"SD_PIPELINE_NAME": "app", "SD_JOB_NAME": "test", "SD_BUILD_ID": "app/test/4.2", "SD_EVENT_ID": "app/4",
		"SD_SHA": in.SHA, "SD_BRANCH": "main", "SD_SOURCE_DIR": "/work/app/test/4.2/attempt-3",
		"SD_BUILD_ATTEMPT": "3", "SD_EXECUTOR": "exec-a", "SD_TRIGGER": "commit",
		"ZED": "last", "AAA": "first", "GO_VERSION": "1.22",
	} {
		require.Equal(t, v, got[k], "variable %s", k)
	}
	require.NotContains(t, got, "SD_PULL_REQUEST")

	in.PR = 17
	in.Environment = map[string]string{"SD_PULL_REQUEST": "1"}
	require.Equal(t, "17", envMap(t, buildEnv(in, "/w", "exec-a", nil))["SD_PULL_REQUEST"])
}

func TestBuildEnvInheritsOnlyTheBasics(t *testing.T) {
	t.Parallel()
	got := envMap(t, buildEnv(RunBuildInput{}, "/w", "exec-a", nil))
	sdOrCI := func(k string) bool {
		return strings.HasPrefix(k, "SD_") || k == "CI" || k == "SCREWDRIVER" || k == "SLUICE"
	}
	for k := range got {
		if sdOrCI(k) {
			continue
		}
		require.Contains(t, baseEnv, k, "%s comes from the executor's environment but is not a basic", k)
	}
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			require.Equal(t, v, got[k], "basic %s passes through", k)
		}
	}
	require.NotEmpty(t, got["PATH"])
}

// TestBuildEnvDefaultPath changes the process environment, so it cannot run
// in parallel.
func TestBuildEnvDefaultPath(t *testing.T) {
	t.Setenv("PATH", "")
	require.NoError(t, os.Unsetenv("PATH"))
	got := envMap(t, buildEnv(RunBuildInput{}, "/w", "exec-a", nil))
	require.Equal(t, "/usr/local/bin:/usr/bin:/bin", got["PATH"], "steps can find sh and friends without an executor PATH")

	// A job may set its own PATH.
	got = envMap(t, buildEnv(RunBuildInput{Environment: map[string]string{"PATH": "/opt/tools/bin"}}, "/w", "exec-a", nil))
	require.Equal(t, "/opt/tools/bin", got["PATH"])
}
