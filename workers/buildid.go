package workers

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"go.temporal.io/sdk/worker"
)

// NameBinary tells the Temporal SDK what to call this binary in the
// workflow tasks it completes (their build ID and the workflows' auto-reset
// points). Left to itself the SDK hashes the whole executable the first
// time a worker starts: sluice's is ~230 MB, a third of a second or more of
// CPU at every executor, controller and server start. The Go toolchain
// already wrote a hash of the binary's content into it, its build ID (`go
// tool buildid`); NameBinary reads that from the ELF note, a few bytes. On
// a system whose binaries are not ELF the SDK's hash stays.
func NameBinary() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if id, err := goBuildID(exe); err == nil {
		worker.SetBinaryChecksum("sluice@" + id)
	}
}

// goBuildID reads the Go build ID from the ELF executable at path.
func goBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return "", errors.New("no .note.go.buildid section")
	}
	note, err := s.Data()
	if err != nil {
		return "", err
	}
	return parseBuildIDNote(f.ByteOrder, note)
}

// parseBuildIDNote takes the build ID out of the Go linker's ELF note:
// name size, description size and type (4, 4 bytes each), the name
// "Go\x00\x00", then the build ID.
func parseBuildIDNote(order binary.ByteOrder, note []byte) (string, error) {
	const goNoteType = 4
	if len(note) < 16 {
		return "", fmt.Errorf("build ID note of %d bytes", len(note))
	}
	nameSize, descSize, typ := order.Uint32(note[0:]), order.Uint32(note[4:]), order.Uint32(note[8:])
	if nameSize != 4 || typ != goNoteType || !bytes.Equal(note[12:16], []byte("Go\x00\x00")) {
		return "", errors.New("not a Go build ID note")
	}
	desc := note[16:]
	if descSize == 0 || int64(descSize) > int64(len(desc)) {
		return "", fmt.Errorf("build ID note cut short: %d bytes for a %d-byte ID", len(desc), descSize)
	}
	return string(desc[:descSize]), nil
}
