// Command bench measures sluice against bare Temporal baselines on the same
// embedded server — a no-op workflow + activity, and a comparable one whose
// activity does an executor's checkout and sluice's bench step in `sh -c`
// (baseline.go), the
// two taking turns with sluice (compare.go): trigger-to-step and dispatch
// latency, build throughput on one pipeline and over many with the API's
// accept latency and CPU per build, history events per build, a 200-job
// graph and a matrix, a webhook push storm that builds collapse, 5,000
// queued builds draining onto executors, and the registry under many
// members with its CPU. Every figure runs on a fresh stack configured like
// `sluice dev` (SQLite file with WAL) with real executor processes
// ($SLUICE_BIN worker --role executor) running real steps, and prints one
// key=value line on stdout; progress goes to stderr. `make bench` runs it;
// `make bench QUICK=1` runs a reduced version.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-ci/sluice/workers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	workers.NameBinary()
	err := run(ctx, os.Args, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
