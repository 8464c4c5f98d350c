// Package e2e tests sluice end to end: a real in-process Temporal server, the
// HTTP API over real HTTP, real git repositories, real executor processes
// running real `sh` steps. It is the only test package that links the
// Temporal server, which keeps `make test` fast to build.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sluice-ci/sluice/internal/testenv"
)

var server *testenv.Server

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	s, err := testenv.StartServer(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start Temporal:", err)
		return 1
	}
	server = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stop Temporal:", err)
	}
	return code
}
