package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Gate holds a host step until the test opens it, so a test that looks at a
// build while it runs does not race a fixed sleep on a loaded machine.
type Gate struct {
	t    *testing.T
	path string
}

// NewGate makes a closed gate in the test's temp dir. The test's cleanup
// opens it, so no step waits on it after the test.
func NewGate(t *testing.T) *Gate {
	t.Helper()
	g := &Gate{t: t, path: filepath.Join(t.TempDir(), "gate")}
	t.Cleanup(func() { _ = os.WriteFile(g.path, nil, 0o600) })
	return g
}

// Wait is a shell command that returns once the gate is open (or after
// five minutes, so a forgotten gate fails the test rather than hanging it).
func (g *Gate) Wait() string {
	return fmt.Sprintf("i=0; while [ ! -e %s ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; test -e %s", g.path, g.path)
}

// OpenCmd is a shell command that opens the gate from a step.
func (g *Gate) OpenCmd() string { return "touch " + g.path }

// Open lets every step waiting on the gate go on.
func (g *Gate) Open() {
	g.t.Helper()
	if err := os.WriteFile(g.path, nil, 0o600); err != nil {
		g.t.Fatalf("open gate %s: %v", g.path, err)
	}
}
