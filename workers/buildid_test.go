package workers

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBinaryName(t *testing.T) {
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}
	clean := debug.BuildSetting{Key: "vcs.modified", Value: "false"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}

	assert.Equal(t, "sluice@0123456789abcdef0123456789abcdef01234567", binaryName([]debug.BuildSetting{rev, clean}),
		"a clean build is named by its commit")
	assert.Empty(t, binaryName([]debug.BuildSetting{rev, dirty}),
		"a build from a modified tree keeps the SDK's hash: two such builds of one commit differ")
	assert.Empty(t, binaryName([]debug.BuildSetting{rev}), "no vcs.modified stamp: not known to be clean")
	assert.Empty(t, binaryName([]debug.BuildSetting{clean}), "no commit stamp (a test binary)")
	assert.Empty(t, binaryName(nil))
}
