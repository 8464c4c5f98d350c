package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/steprecords"
)

// queueName is the queue every chaos build runs on: executors only, two
// builds at a time on each, so the controller never runs a build itself
// (the built-in default queue falls back to it when no executor is live).
const queueName = "chaos"

// jobs are the three jobs of every chaos pipeline.
var jobs = []string{"a", "b", "c"}

// shape is a pipeline's graph: a chain a → b → c, or a fan-out a → (b, c).
type shape string

const (
	chain shape = "chain"
	fan   shape = "fan"
)

// pipelineSpec is a screwdriver.yaml of three one-step jobs. Each step
// appends "<build> <attempt> start <unix nanos> <executor>" to rec, sleeps
// 1–3 s and appends the same line with "end". Collapse and the one-build-
// per-job rule are off, so every event runs all its jobs.
func pipelineSpec(sh shape, index int, rec string) string {
	var b strings.Builder
	b.WriteString("shared:\n  image: alpine\n  annotations:\n")
	b.WriteString("    screwdriver.cd/collapseBuilds: false\n")
	b.WriteString("    screwdriver.cd/blockedBySameJob: false\n")
	fmt.Fprintf(&b, "    screwdriver.cd/executor: %s\n", queueName)
	b.WriteString("jobs:\n")
	for i, job := range jobs {
		requires := "[~commit]"
		switch {
		case i == 0:
		case sh == chain:
			requires = "[" + jobs[i-1] + "]"
		default:
			requires = "[" + jobs[0] + "]"
		}
		secs := 1 + (index+i)%3
		fmt.Fprintf(&b, "  %s:\n    requires: %s\n    steps:\n      - work: %q\n", job, requires, recordCommand(rec, secs))
	}
	return b.String()
}

// recordCommand is the step: record the start, sleep, record the end. Each
// record is one short echo appended with O_APPEND, so lines from concurrent
// steps on different executors never interleave.
func recordCommand(rec string, secs int) string {
	return steprecords.Command(rec, fmt.Sprintf("sleep %d", secs))
}

// makeRepo creates a git repository on branch main holding the spec.
func makeRepo(ctx context.Context, dir, spec string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "screwdriver.yaml"), []byte(spec), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"commit", "-q", "-m", "chaos pipeline"},
	} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=sluice-chaos", "GIT_AUTHOR_EMAIL=chaos@sluice.invalid",
			"GIT_COMMITTER_NAME=sluice-chaos", "GIT_COMMITTER_EMAIL=chaos@sluice.invalid", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, out)
		}
	}
	return nil
}

// retry calls fn until it succeeds, the context ends or limit passes.
func retry(ctx context.Context, limit time.Duration, fn func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := fn(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startEvent starts the next commit event of a pipeline, which must become
// event number want. A start whose answer is lost (the controller or the
// server died under it) may still have happened, so before trying again it
// asks the pipeline how many events it has: retrying blindly could start an
// event twice.
func startEvent(ctx context.Context, c *api.Client, pipeline string, want int) (string, error) {
	var id string
	// admitted: the API admitted the start but answered before the
	// pipeline numbered it (pending); it will be numbered, so never again.
	admitted := ""
	err := retry(ctx, 3*time.Minute, func(ctx context.Context) error {
		p, err := c.GetPipeline(ctx, pipeline)
		if err != nil {
			return err
		}
		switch {
		case p.Events == want:
			id = fmt.Sprintf("%s/%d", pipeline, want)
			return nil
		case p.Events != want-1:
			return fmt.Errorf("pipeline %s has %d events, expected %d or %d", pipeline, p.Events, want-1, want)
		case admitted != "":
			return fmt.Errorf("pipeline %s has not numbered admission %s yet", pipeline, admitted)
		}
		ev, err := c.StartEvent(ctx, pipeline, api.StartEventRequest{Type: "commit", Branch: "main"})
		if err != nil {
			return err
		}
		if ev.Pending {
			admitted = ev.Admission
			return fmt.Errorf("pipeline %s admitted %s, not numbered yet", pipeline, admitted)
		}
		if ev.Number != want {
			return fmt.Errorf("pipeline %s started event %d, expected %d", pipeline, ev.Number, want)
		}
		id = ev.ID
		return nil
	})
	return id, err
}
