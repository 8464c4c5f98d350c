package workers

import (
	"encoding/binary"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The build ID read from the binary is the one the Go toolchain reports;
// a binary that is not ELF (macOS, Windows) has none to read, and the
// SDK's hash names it.
func TestGoBuildIDOfThisBinary(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	got, err := goBuildID(exe)
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" || runtime.GOOS == "windows" {
		require.Error(t, err, "not an ELF binary")
		return
	}
	require.NoError(t, err)
	out, err := exec.CommandContext(t.Context(), "go", "tool", "buildid", exe).Output()
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(out)), got)
}

func TestParseBuildIDNote(t *testing.T) {
	t.Parallel()
	note := func(nameSize, descSize, typ uint32, name, desc string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, nameSize)
		b = binary.LittleEndian.AppendUint32(b, descSize)
		b = binary.LittleEndian.AppendUint32(b, typ)
		return append(append(b, name...), desc...)
	}
	id, err := parseBuildIDNote(binary.LittleEndian, note(4, 7, 4, "Go\x00\x00", "abc/def"))
	require.NoError(t, err)
	assert.Equal(t, "abc/def", id)

	for name, bad := range map[string][]byte{
		"too short":       []byte("Go"),
		"other note type": note(4, 7, 3, "Go\x00\x00", "abc/def"),
		"other owner":     note(4, 7, 4, "GNU\x00", "abc/def"),
		"cut short":       note(4, 70, 4, "Go\x00\x00", "abc/def"),
		"empty ID":        note(4, 0, 4, "Go\x00\x00", ""),
	} {
		_, err := parseBuildIDNote(binary.LittleEndian, bad)
		assert.Error(t, err, name)
	}
}
