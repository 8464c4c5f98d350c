// Command sluice is the sluice CLI: it runs the embedded stack (`sluice dev`),
// the controller, executor and API roles, and talks to the API for pipelines,
// events, builds, queues and executors.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sluice-ci/sluice/workers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	workers.NameBinary()
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "meta" {
		// Inside a build, `meta` is this binary (busybox style).
		args = append([]string{"meta"}, args...)
	}
	err := run(ctx, args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(exitCode(err))
	}
}
