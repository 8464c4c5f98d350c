package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPipelineSpec(t *testing.T) {
	t.Parallel()
	chainSpec := pipelineSpec(chain, 0, "/tmp/rec")
	require.Contains(t, chainSpec, "requires: [a]")
	require.Contains(t, chainSpec, "requires: [b]")
	require.Contains(t, chainSpec, "screwdriver.cd/collapseBuilds: false")
	require.Contains(t, chainSpec, "screwdriver.cd/blockedBySameJob: false")
	fanSpec := pipelineSpec(fan, 1, "/tmp/rec")
	require.Equal(t, 2, strings.Count(fanSpec, "requires: [a]"))
	require.Contains(t, fanSpec, `$SD_BUILD_ID $SD_BUILD_ATTEMPT start`)
}
