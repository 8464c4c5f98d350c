package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mustParse parses YAML that must be valid. Tabs in the literal are turned into spaces
// so test YAML can be indented naturally.
func mustParse(t *testing.T, yaml string) *Spec {
	t.Helper()
	spec, err := Parse([]byte(strings.ReplaceAll(yaml, "\t", "    ")))
	require.NoError(t, err)
	return spec
}

// parseErr parses YAML that must be invalid and returns the error text.
func parseErr(t *testing.T, yaml string) string {
	t.Helper()
	_, err := Parse([]byte(strings.ReplaceAll(yaml, "\t", "    ")))
	require.Error(t, err)
	require.ErrorIs(t, err, ErrInvalidSpec)
	return err.Error()
}
