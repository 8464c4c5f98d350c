package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/internal/pgserver"
)

// figure is one measurement: it gets a fresh stack and returns its line.
type figure struct {
	name    string
	timeout func(plan) time.Duration
	run     func(ctx context.Context, b *bench) (string, error)
}

// figures in the order they run.
var figures = []figure{
	{"latency", latencyBound, runLatency},
	{"throughput", throughputBound, runThroughput},
	{"throughput_pipelines", throughputBound, runThroughputPipelines},
	{"history", func(plan) time.Duration { return 5 * time.Minute }, runHistory},
	{"graph", func(plan) time.Duration { return 10 * time.Minute }, runGraph},
	{"collapse_storm", func(p plan) time.Duration { return 3*time.Minute + time.Duration(p.stormPushes)*time.Second }, runStorm},
	{"scale", func(p plan) time.Duration { return 5*time.Minute + time.Duration(p.scaleBuilds())*time.Second }, runScale},
	// The same latency and drain on a PostgreSQL-backed server (Debian's
	// postgresql, started for the run).
	{"latency_pg", func(p plan) time.Duration { return time.Minute + latencyBound(p) }, onPostgres("latency_pg", runLatency)},
	{"scale_pg", func(p plan) time.Duration { return 6*time.Minute + time.Duration(p.scaleBuilds())*time.Second }, onPostgres("scale_pg", runScale)},
	// Option B modelled in bare Temporal: what folding the build workflow
	// into the event would save.
	{"model_b", func(p plan) time.Duration {
		return 3*time.Minute + time.Duration(4*p.modelLatencyRuns()+4*p.rounds*p.modelEvents())*time.Second
	}, runModelB},
	{"registry", func(p plan) time.Duration { return 3*time.Minute + p.registryFor }, runRegistry},
}

// latencyBound: each event takes its turn with two bare runs.
func latencyBound(p plan) time.Duration {
	return 2*time.Minute + time.Duration(p.latencyEvents)*3*time.Second
}

// throughputBound: every round runs sluice's burst and two bare ones.
func throughputBound(p plan) time.Duration {
	return 3*time.Minute + time.Duration(p.rounds*p.throughputEvents)*1500*time.Millisecond
}

// bench is what a figure works with.
type bench struct {
	plan plan
	bin  string
	// root is the run's temporary directory; each stack takes a subdirectory.
	root string
	log  *slog.Logger
	// trace prints the last latency event's timeline.
	trace bool
	// dynamicConfig overrides the embedded server's settings (-dc).
	dynamicConfig map[string]any
	// buildsInEvents: pipelines run their builds inside their events
	// (-builds-in-events, PipelineConfig.BuildsInEvents).
	buildsInEvents bool
	// progress prints a human line on stderr.
	progress func(format string, args ...any)
	// pg, while a _pg figure runs, is the PostgreSQL server its stacks use
	// (started once per run, stopped at its end).
	pg      *pgserver.Server
	pgStart *pgserver.Server
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a reduced run of every figure (under 3 minutes)")
	only := fs.String("only", "", "comma-separated figures to run (default all: "+names()+")")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench process (server, controller, API) during -profile-figure")
	profileFigure := fs.String("profile-figure", "throughput", "the figure -cpuprofile covers")
	keep := fs.Bool("keep", false, "keep the temporary directory (databases, logs) after the run")
	verbose := fs.Bool("v", false, "log warnings of the server, controller and API to stderr")
	trace := fs.Bool("trace", false, "print on stderr the merged history timeline of the last latency event (and of a throughput burst's middle event), and the events by type of history's workflows and of scale's largest history")
	registryMembers := fs.Int("registry-members", 0, "members of the registry figure (default 500, 100 with -quick)")
	registryFor := fs.Duration("registry-for", 0, "how long the registry figure runs (default 5m, 30s with -quick)")
	registryMode := fs.String("registry-mode", "lease", "what the registry figure's members do at each check-in: lease (read grants by query, renew the lease when needed, as executors do) or update (a heartbeat update every time, as before leases)")
	buildsInEvents := fs.Bool("builds-in-events", true, "pipelines run their builds inside their events (docs/option-b.md, the default); -builds-in-events=false: a build workflow each, as pipelines created before")
	dc := fs.String("dc", "", "override Temporal dynamic config for experiments: key=value,... (ints, floats, bools, durations)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	overrides, err := parseDynamicConfig(*dc)
	if err != nil {
		return err
	}
	bin := getenv("SLUICE_BIN")
	if bin == "" {
		return errors.New("SLUICE_BIN is not set: run `make bench`, or build bin/sluice and set SLUICE_BIN to it")
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("SLUICE_BIN %s: %w", bin, err)
	}
	selected := figures
	if *only != "" {
		selected = nil
		for name := range strings.SplitSeq(*only, ",") {
			i := slices.IndexFunc(figures, func(f figure) bool { return f.name == strings.TrimSpace(name) })
			if i < 0 {
				return fmt.Errorf("-only: unknown figure %q (want %s)", name, names())
			}
			selected = append(selected, figures[i])
		}
	}
	root, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "bench: keeping", root)
	} else {
		defer func() { _ = os.RemoveAll(root) }()
	}
	if *registryMode != "lease" && *registryMode != "update" {
		return fmt.Errorf("-registry-mode: %q is neither lease nor update", *registryMode)
	}
	sink := io.Writer(io.Discard)
	if *verbose {
		sink = os.Stderr
	}
	b := &bench{
		plan: planFor(*quick, *registryMembers, *registryFor, *registryMode), bin: bin, root: root, trace: *trace, dynamicConfig: overrides,
		buildsInEvents: *buildsInEvents,
		log:            slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelWarn})),
		progress: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		},
	}
	mode := "full"
	if *quick {
		mode = "quick"
	}
	b.progress("bench %s run: %s", mode, strings.Join(figNames(selected), ", "))
	start := time.Now()
	var failed []string
	for _, f := range selected {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line, took, err := b.runFigure(ctx, f, *cpuProfile != "" && *profileFigure == f.name, *cpuProfile)
		if err != nil {
			b.progress("%s FAILED after %s: %v", f.name, took.Round(time.Second), err)
			fmt.Printf("%s error=%q\n", f.name, err.Error())
			failed = append(failed, f.name)
			continue
		}
		fmt.Println(line)
		b.progress("%s done in %s", f.name, took.Round(time.Second))
	}
	if b.pgStart != nil {
		if err := b.pgStart.Stop(context.WithoutCancel(ctx)); err != nil {
			b.progress("stop PostgreSQL: %v", err)
		}
	}
	b.progress("bench %s run took %s", mode, time.Since(start).Round(time.Second))
	if len(failed) > 0 {
		return fmt.Errorf("figures failed: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

func (b *bench) runFigure(ctx context.Context, f figure, profile bool, profilePath string) (string, time.Duration, error) {
	timeout := f.timeout(b.plan)
	fctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s: took longer than its bound of %s", f.name, timeout))
	defer cancel()
	b.progress("%s: starting (bound %s)", f.name, timeout)
	start := time.Now()
	if profile {
		out, err := os.Create(filepath.Clean(profilePath)) //nolint:gosec // the path is the caller's own -cpuprofile flag
		if err != nil {
			return "", 0, fmt.Errorf("cpuprofile: %w", err)
		}
		defer func() { _ = out.Close() }()
		if err := pprof.StartCPUProfile(out); err != nil {
			return "", 0, fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	line, err := f.run(fctx, b)
	if err != nil && fctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (%w)", context.Cause(fctx), err)
	}
	return line, time.Since(start), err
}

// onPostgres runs a figure on a PostgreSQL-backed Temporal server and names
// its line name (Debian's postgresql, started once for the run).
func onPostgres(name string, run func(context.Context, *bench) (string, error)) func(context.Context, *bench) (string, error) {
	return func(ctx context.Context, b *bench) (string, error) {
		if b.pgStart == nil {
			b.progress("%s: starting PostgreSQL", name)
			pg, err := pgserver.Start(ctx)
			if err != nil {
				return "", fmt.Errorf("PostgreSQL: %w", err)
			}
			b.pgStart = pg
		}
		b.pg = b.pgStart
		defer func() { b.pg = nil }()
		line, err := run(ctx, b)
		if err != nil {
			return "", err
		}
		_, rest, _ := strings.Cut(line, " ")
		return name + " " + rest + " temporal_db=postgres", nil
	}
}

// pgDatabase is url with its database replaced by db.
func pgDatabase(url, db string) string {
	i := strings.LastIndex(url, "/")
	q := ""
	if j := strings.Index(url[i:], "?"); j >= 0 {
		q = url[i+j:]
	}
	return url[:i+1] + db + q
}

func names() string { return strings.Join(figNames(figures), ",") }

func figNames(fs []figure) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.name)
	}
	return out
}

// parseDynamicConfig reads -dc: key=value pairs, values typed by their look.
func parseDynamicConfig(s string) (map[string]any, error) {
	out := map[string]any{}
	for kv := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-dc %q: want key=value", kv)
		}
		if i, err := strconv.Atoi(v); err == nil {
			out[k] = i
		} else if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = f
		} else if bv, err := strconv.ParseBool(v); err == nil {
			out[k] = bv
		} else if d, err := time.ParseDuration(v); err == nil {
			out[k] = d
		} else {
			out[k] = v
		}
	}
	return out, nil
}
