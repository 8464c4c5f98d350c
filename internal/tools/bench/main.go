// Command bench measures sluice against a bare Temporal baseline on the same
// embedded server: trigger-to-step latency, build throughput, history events
// per build, a 200-job graph and a matrix, a webhook push storm that builds
// collapse, and 5,000 queued builds draining onto executors. Every figure
// runs on a fresh stack configured like `sluice dev` (SQLite file with WAL)
// with real executor processes ($SLUICE_BIN worker --role executor) running
// real steps, and prints one key=value line on stdout; progress goes to
// stderr. `make bench` runs it; `make bench QUICK=1` runs a reduced version.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
