// Command chaos runs a real sluice installation as separate processes — the
// Temporal server (`sluice temporal`, SQLite file), the API, a controller and
// three executors — pushes 100 three-job events through it, and meanwhile
// SIGKILLs and restarts executors, the controller and the Temporal server.
// Every step appends start and end records to a file; at the end the
// records alone must show every build of every event completed, and none
// completed twice. `make chaos` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/pgserver"
	"github.com/sluice-ci/sluice/internal/steprecords"
	"github.com/sluice-ci/sluice/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	events, pipelines, executors int
	controllerRestarts           int
	serverRestarts               int
	killEvery                    time.Duration
	killAfterEnd                 time.Duration
	eventEvery                   time.Duration
	deadline                     time.Duration
	seed                         uint64
	keep                         bool
	// db is the Temporal server's persistence: sqlite or postgres.
	db string
	// buildsInEvents: the API creates pipelines whose events run their
	// builds (SLUICE_BUILDS_IN_EVENTS).
	buildsInEvents bool
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.events, "events", 100, "events to run (three jobs each)")
	fs.IntVar(&o.pipelines, "pipelines", 4, "pipelines the events are spread over (chains and fan-outs alternate)")
	fs.IntVar(&o.executors, "executors", 3, "executor processes")
	fs.IntVar(&o.controllerRestarts, "controller-restarts", 2, "times to SIGKILL and restart the controller")
	fs.IntVar(&o.serverRestarts, "server-restarts", 2, "times to SIGKILL and restart the Temporal server")
	fs.DurationVar(&o.killEvery, "kill-every", 9*time.Second, "mean time between executor kills")
	fs.DurationVar(&o.eventEvery, "event-every", 500*time.Millisecond, "time between event starts")
	fs.DurationVar(&o.killAfterEnd, "kill-after-end", 0,
		"aim executor kills this long after a step's end record (the window before its result reaches Temporal); 0: random times")
	fs.DurationVar(&o.deadline, "deadline", 15*time.Minute, "give up (and fail) after this long")
	fs.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, records, databases) even on success")
	fs.BoolVar(&o.buildsInEvents, "builds-in-events", true, "the pipelines' events run their builds themselves (SLUICE_BUILDS_IN_EVENTS on the API; false: a build workflow each)")
	fs.StringVar(&o.db, "db", "sqlite", "the Temporal server's persistence: sqlite (a file) or postgres (a throwaway PostgreSQL server, killed with nothing else)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.db != "sqlite" && o.db != "postgres" {
		return o, fmt.Errorf("-db %q: want sqlite or postgres", o.db)
	}
	if o.events < 1 || o.pipelines < 1 || o.executors < 1 {
		return o, errors.New("-events, -pipelines and -executors must be at least 1")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return o, nil
}

// harness is one chaos run.
type harness struct {
	o     options
	out   io.Writer
	rng   *rand.Rand
	dir   string
	rec   string
	begin time.Time

	// pgURL is the Temporal server's PostgreSQL ("" on SQLite).
	pgURL string

	temporal, api, controller *proc
	executors                 []*proc
	client                    *api.Client

	// gate is held for writing while the controller or the server is down
	// on purpose; event starts hold it for reading, so a start is never in
	// flight across a planned outage (an unanswered start may or may not
	// have happened; see startEvent).
	gate sync.RWMutex

	executorKills, controllerKills, serverKills atomic.Int64
	// autoDrains counts the executors the registry drained for losing
	// builds (3 in 10 minutes), which the harness, as an operator would,
	// activates again: it kills them on purpose.
	autoDrains atomic.Int64
	// killedAt lists when each executor was SIGKILLed.
	killedAt map[string][]time.Time
	// unsent are the results killed executors held undelivered in their
	// outbox when they died (steprecords.Evidence.Unsent).
	unsent  map[string]time.Time
	outages []string
	outMu   sync.Mutex
	// orphans checks that no step process of a killed executor outlives
	// it by more than orphanGrace.
	orphans orphanCheck
}

func (h *harness) logf(format string, args ...any) {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	_, _ = fmt.Fprintf(h.out, "[%6.1fs] %s\n", time.Since(h.begin).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	bin := getenv("SLUICE_BIN")
	if bin == "" {
		return errors.New("SLUICE_BIN is not set: run `make chaos`, or build bin/sluice and set SLUICE_BIN to its absolute path")
	}
	dir, err := os.MkdirTemp("", "sluice-chaos-")
	if err != nil {
		return err
	}
	h := &harness{o: o, out: out, rng: rand.New(rand.NewPCG(o.seed, o.seed>>1|1)), dir: dir, //nolint:gosec // chaos timing, not security
		rec: filepath.Join(dir, "records"), begin: time.Now(), killedAt: map[string][]time.Time{}, unsent: map[string]time.Time{}}
	h.logf("chaos: %d events on %d pipelines, %d executors; seed %d; dir %s", o.events, o.pipelines, o.executors, o.seed, dir)
	for _, k := range []string{"SLUICE_BUILD_HEARTBEAT_TIMEOUT", "SLUICE_EXECUTOR_LIVENESS", "SLUICE_MEMBER_HEARTBEAT", "SLUICE_BUILD_MAX_ATTEMPTS"} {
		if v := getenv(k); v != "" {
			h.logf("%s=%s (from the environment)", k, v)
		}
	}

	if o.db == "postgres" {
		pg, err := pgserver.Start(ctx)
		if err != nil {
			return err
		}
		defer func() {
			if err := pg.Stop(context.WithoutCancel(ctx)); err != nil {
				h.logf("stop PostgreSQL: %v", err)
			}
		}()
		h.pgURL = pg.URL
		h.logf("Temporal on PostgreSQL (%s)", strings.SplitN(pg.URL, "?", 2)[0])
	}

	ctx, cancel := context.WithTimeout(ctx, o.deadline)
	defer cancel()
	err = h.run(ctx, bin)
	h.stopAll()
	if err == nil && !o.keep {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			h.logf("remove %s: %v", dir, rmErr)
		}
	} else {
		h.logf("kept %s (records, process logs under logs/, databases)", dir)
	}
	h.logf("took %s", time.Since(h.begin).Round(time.Second))
	return err
}

func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// setup starts every process, creates the queue and the pipelines.
func (h *harness) setup(ctx context.Context, bin string) ([]string, error) {
	tp, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	ap, err := freePort(ctx)
	for err == nil && ap == tp {
		ap, err = freePort(ctx) // a port is free again once answered
	}
	if err != nil {
		return nil, err
	}
	logs := filepath.Join(h.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	apiURL := "http://127.0.0.1:" + strconv.Itoa(ap)
	common := []string{
		"TEMPORAL_ADDRESS=127.0.0.1:" + strconv.Itoa(tp),
		"TEMPORAL_NAMESPACE=default",
		"SLUICE_API_URL=" + apiURL,
		"SLUICE_LOG_LEVEL=info",
		// Chaos checks dispatch under failures: steps run on the host (no
		// image to pull), whatever container runtime the machine has.
		"SLUICE_EXECUTOR_RUNTIME=host",
	}
	if os.Getenv("SLUICE_BUILD_MAX_ATTEMPTS") == "" {
		// One of three executors dies every ~9 s, and the last builds of
		// the run take every kill: a build could lose its executor three
		// times in a row and give up as documented (3 attempts), which is
		// not a loss. Chaos checks that no build is lost or run twice.
		common = append(common, "SLUICE_BUILD_MAX_ATTEMPTS=10")
	}
	mk := func(name, ready string, env []string, args ...string) *proc {
		return &proc{
			name: name, bin: bin, args: args, env: append(append([]string(nil), common...), env...),
			log: filepath.Join(logs, name+".log"), ready: ready,
		}
	}
	h.temporal = mk("temporal", "Temporal is running", []string{"SLUICE_HOST=127.0.0.1", "SLUICE_TEMPORAL_DB=" + h.pgURL},
		"temporal", "--data-dir", filepath.Join(h.dir, "temporal"), "--temporal-port", strconv.Itoa(tp), "--ui-port", "0")
	h.api = mk("api", "api_listening", []string{
		"SLUICE_DATA_DIR=" + filepath.Join(h.dir, "api"), "SLUICE_LOCAL_REPOS=/",
		"SLUICE_BUILDS_IN_EVENTS=" + strconv.FormatBool(h.o.buildsInEvents),
	}, "api", "--api-addr", "127.0.0.1:"+strconv.Itoa(ap))
	h.controller = mk("controller", "controller_started", []string{"SLUICE_DATA_DIR=" + filepath.Join(h.dir, "controller")},
		"worker", "--role", "controller")
	for i := range h.o.executors {
		name := fmt.Sprintf("exec-%d", i+1)
		data := filepath.Join(h.dir, name)
		h.executors = append(h.executors, mk(name, "executor_started", []string{
			"SLUICE_EXECUTOR_NAME=" + name, "SLUICE_EXECUTOR_QUEUES=" + queueName,
			"SLUICE_DATA_DIR=" + data, "SLUICE_WORK_DIR=" + filepath.Join(data, "work"),
			"SLUICE_EXECUTOR_RUN_AS=" + trustedRunAs(),
		}, "worker", "--role", "executor"))
	}
	h.client = api.NewClient(apiURL)

	for _, p := range []*proc{h.temporal, h.api, h.controller} {
		if err := p.start(ctx); err != nil {
			return nil, err
		}
		h.logf("%s ready", p.name)
	}
	err = retry(ctx, time.Minute, func(ctx context.Context) error {
		_, err := h.client.CreateQueue(ctx, api.QueueRequest{
			Name:        queueName,
			Description: "chaos builds: executors only", Rules: []string{"run-on=executors,max-parallel=2"},
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", queueName, err)
	}
	for _, p := range h.executors {
		if err := p.start(ctx); err != nil {
			return nil, err
		}
	}
	err = retry(ctx, time.Minute, func(ctx context.Context) error {
		es, err := h.client.ListExecutors(ctx)
		if err != nil {
			return err
		}
		live := 0
		for _, e := range es {
			if e.Live && e.Role == "executor" {
				live++
			}
		}
		if live < len(h.executors) {
			return fmt.Errorf("%d of %d executors live", live, len(h.executors))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for executors: %w", err)
	}
	h.logf("%d executors live on queue %s", len(h.executors), queueName)

	var names []string
	for i := range h.o.pipelines {
		name := "chaos-" + strconv.Itoa(i)
		sh := chain
		if i%2 == 1 {
			sh = fan
		}
		repo := filepath.Join(h.dir, "repos", name)
		if err := makeRepo(ctx, repo, pipelineSpec(sh, i, h.rec)); err != nil {
			return nil, err
		}
		err := retry(ctx, time.Minute, func(ctx context.Context) error {
			_, err := h.client.CreatePipeline(ctx, api.CreatePipelineRequest{Name: name, Repo: repo, Queue: queueName})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("create pipeline %s: %w", name, err)
		}
		names = append(names, name)
	}
	h.logf("pipelines %s created (collapseBuilds: false, blockedBySameJob: false)", strings.Join(names, ", "))
	return names, nil
}

// startEvents starts the events round-robin over the pipelines.
func (h *harness) startEvents(ctx context.Context, pipelines []string, ids chan<- string) error {
	defer close(ids)
	count := map[string]int{}
	for i := range h.o.events {
		p := pipelines[i%len(pipelines)]
		h.gate.RLock()
		id, err := startEvent(ctx, h.client, p, count[p]+1)
		h.gate.RUnlock()
		if err != nil {
			return fmt.Errorf("start event %d of pipeline %s: %w", count[p]+1, p, err)
		}
		count[p]++
		ids <- id
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(h.o.eventEvery):
		}
	}
	h.logf("all %d events started", h.o.events)
	return nil
}

// progress is the fraction of expected builds with an end record.
func (h *harness) progress(total int) float64 {
	f, err := os.Open(h.rec)
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	recs, err := steprecords.Parse(f)
	if err != nil {
		return 0
	}
	ended := map[string]bool{}
	for _, r := range recs {
		if r.Kind == "end" {
			ended[r.Build] = true
		}
	}
	return float64(len(ended)) / float64(total)
}

func (h *harness) pause(ctx context.Context, lo, hi time.Duration) {
	d := lo + time.Duration(h.rng.Int64N(int64(hi-lo)+1))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// chaos kills and restarts processes until ctx ends: a random executor
// every kill-every or so, and the controller and the Temporal server at
// fixed points of the workload's progress, so they hit it while builds run.
// Every process it kills it starts again before it returns.
func (h *harness) chaos(ctx context.Context, totalBuilds int) {
	type special struct {
		at   float64
		what string
	}
	var plan []special
	n := h.o.controllerRestarts + h.o.serverRestarts
	for i, c, s := 0, 0, 0; i < n; i++ {
		// Alternate controller and server kills, spread over 10%..80%.
		at := 0.10 + 0.70*float64(i)/float64(max(n-1, 1))
		switch {
		case (i%2 == 0 && c < h.o.controllerRestarts) || s >= h.o.serverRestarts:
			plan = append(plan, special{at, "controller"})
			c++
		default:
			plan = append(plan, special{at, "server"})
			s++
		}
	}
	nextKill := time.Now().Add(h.o.killEvery / 2)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if len(plan) > 0 && h.progress(totalBuilds) >= plan[0].at {
			sp := plan[0]
			plan = plan[1:]
			switch sp.what {
			case "controller":
				h.restart(ctx, h.controller, "controller", &h.controllerKills, 2*time.Second, 4*time.Second)
			case "server":
				h.restart(ctx, h.temporal, "Temporal server", &h.serverKills, 3*time.Second, 5*time.Second)
			}
			continue
		}
		if time.Now().After(nextKill) {
			p := h.executors[h.rng.IntN(len(h.executors))]
			how := ""
			if h.o.killAfterEnd > 0 {
				// Aim at the moment a step has just ended: the executor is
				// between the step's end and Temporal having the result.
				if name, at, ok := h.nextEnd(ctx, 15*time.Second); ok {
					p = h.executor(name)
					time.Sleep(time.Until(at.Add(h.o.killAfterEnd)))
					how = fmt.Sprintf(", %s after a step's end record", time.Since(at).Round(time.Millisecond))
				}
			}
			down := 2*time.Second + time.Duration(h.rng.Int64N(int64(3*time.Second)))
			h.executorKills.Add(1)
			h.logf("SIGKILL executor %s (progress %.0f%%%s); restart in %s", p.name, 100*h.progress(totalBuilds), how, down.Round(100*time.Millisecond))
			procs := stepProcesses(p.name)
			h.outMu.Lock()
			h.killedAt[p.name] = append(h.killedAt[p.name], time.Now())
			h.outMu.Unlock()
			p.kill()
			h.orphans.watch(p.name, procs, time.Now())
			h.noteUnsent(p.name)
			select {
			case <-ctx.Done():
			case <-time.After(down):
			}
			if err := p.start(context.WithoutCancel(ctx)); err != nil {
				h.logf("restart %s: %v", p.name, err)
			}
			half := int64(h.o.killEvery / 2)
			nextKill = time.Now().Add(time.Duration(half + h.rng.Int64N(2*half+1)))
		}
	}
}

// executor returns the executor process of that name.
func (h *harness) executor(name string) *proc {
	for _, p := range h.executors {
		if p.name == name {
			return p
		}
	}
	return h.executors[0]
}

// nextEnd waits for the next end record written from now on and returns
// its executor and time.
func (h *harness) nextEnd(ctx context.Context, limit time.Duration) (string, time.Time, bool) {
	since := time.Now()
	deadline := since.Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if data, err := os.ReadFile(h.rec); err == nil {
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			for i := len(lines) - 1; i >= 0; i-- {
				f := strings.Fields(lines[i])
				if len(f) != 5 || f[2] != "end" {
					continue
				}
				ns, err := strconv.ParseInt(f[3], 10, 64)
				if err != nil {
					continue
				}
				if at := time.Unix(0, ns); at.After(since) {
					return f[4], at, true
				}
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return "", time.Time{}, false
}

// restart SIGKILLs p and starts it again after a random downtime, holding
// the event-start gate meanwhile.
func (h *harness) restart(ctx context.Context, p *proc, what string, counter *atomic.Int64, lo, hi time.Duration) {
	h.gate.Lock()
	defer h.gate.Unlock()
	counter.Add(1)
	begin := time.Now()
	h.logf("SIGKILL %s (kill %d)", what, counter.Load())
	p.kill()
	h.pause(ctx, lo, hi)
	if err := p.start(context.WithoutCancel(ctx)); err != nil {
		h.logf("restart %s: %v", what, err)
		return
	}
	took := time.Since(begin).Round(100 * time.Millisecond)
	h.outMu.Lock()
	h.outages = append(h.outages, fmt.Sprintf("%s down %s", what, took))
	h.outMu.Unlock()
	h.logf("%s back after %s", what, took)
}

func (h *harness) stopAll() {
	all := append([]*proc{h.controller, h.api, h.temporal}, h.executors...)
	for _, p := range all {
		if p != nil {
			p.kill()
		}
	}
}

// waitEvents polls the API until every started event is final.
func (h *harness) waitEvents(ctx context.Context, ids <-chan string, startErr <-chan error) ([]string, map[string]workflows.Status, error) {
	status := map[string]workflows.Status{}
	var order []string
	more := true
	t := time.NewTicker(3 * time.Second)
	defer t.Stop()
	lastLog := time.Now()
	for {
		for more {
			select {
			case id, ok := <-ids:
				if !ok {
					more = false
					break
				}
				status[id] = ""
				order = append(order, id)
				continue
			default:
			}
			break
		}
		if !more && startErr != nil {
			// ids is closed: the starter's answer follows at once.
			if err := <-startErr; err != nil {
				return order, status, err
			}
			startErr = nil
		}
		pending := 0
		for _, id := range order {
			if !status[id].Final() {
				pending++
			}
		}
		if !more && pending == 0 {
			return order, status, nil
		}
		if pending > 0 {
			h.refresh(ctx, status)
		}
		if time.Since(lastLog) > 20*time.Second {
			lastLog = time.Now()
			done := 0
			for _, s := range status {
				if s.Final() {
					done++
				}
			}
			h.logf("%d of %d started events final", done, len(status))
		}
		select {
		case <-ctx.Done():
			var left []string
			for _, id := range order {
				if !status[id].Final() {
					left = append(left, id+"="+string(status[id]))
				}
			}
			sort.Strings(left)
			return order, status, fmt.Errorf("deadline %s exceeded with %d events not final: %s", h.o.deadline, len(left), strings.Join(left, " "))
		case <-t.C:
		}
	}
}

// refresh reads the events' statuses from the API's event lists (one call
// per pipeline); errors (the server may be down) leave them as they were.
func (h *harness) refresh(ctx context.Context, status map[string]workflows.Status) {
	pipelines := map[string]bool{}
	for id := range status {
		pipelines[id[:strings.LastIndexByte(id, '/')]] = true
	}
	for p := range pipelines {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		evs, err := h.client.ListEvents(cctx, p, 1000)
		cancel()
		if err != nil {
			continue
		}
		for _, ev := range evs {
			if _, ok := status[ev.ID]; ok {
				status[ev.ID] = ev.Status
			}
		}
	}
}

// report is what the API says about the events and builds at the end.
type report struct {
	statuses map[workflows.Status]int
	retried  []string
	builds   int
}

func (h *harness) collect(ctx context.Context, ids []string) (report, error) {
	r := report{statuses: map[workflows.Status]int{}}
	for _, id := range ids {
		var ev api.Event
		err := retry(ctx, time.Minute, func(ctx context.Context) error {
			var err error
			ev, err = h.client.GetEvent(ctx, id)
			return err
		})
		if err != nil {
			return r, fmt.Errorf("get event %s: %w", id, err)
		}
		r.statuses[ev.Status]++
		for _, b := range ev.Builds {
			var full api.Build
			err := retry(ctx, time.Minute, func(ctx context.Context) error {
				var err error
				full, err = h.client.GetBuild(ctx, b.ID)
				return err
			})
			if err != nil {
				return r, fmt.Errorf("get build %s: %w", b.ID, err)
			}
			r.builds++
			if len(full.AttemptList) > 1 {
				var parts []string
				for _, at := range full.AttemptList {
					parts = append(parts, fmt.Sprintf("#%d %s: %s", at.Number, orNone(at.Executor), orNone(at.Outcome)))
				}
				r.retried = append(r.retried, fmt.Sprintf("%s %s [%s]", full.ID, full.Status, strings.Join(parts, "; ")))
			}
		}
	}
	sort.Strings(r.retried)
	return r, nil
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (h *harness) run(ctx context.Context, bin string) error {
	pipelines, err := h.setup(ctx, bin)
	if err != nil {
		return err
	}
	superviseCtx, stopSupervise := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range append([]*proc{h.temporal, h.api, h.controller}, h.executors...) {
		wg.Go(func() { p.supervise(superviseCtx, h.logf) })
	}
	defer func() {
		stopSupervise()
		wg.Wait()
	}()

	loadBegin := time.Now()
	total := h.o.events * len(jobs)
	ids := make(chan string, h.o.events)
	startErr := make(chan error, 1)
	go func() { startErr <- h.startEvents(ctx, pipelines, ids) }()
	chaosCtx, stopChaos := context.WithCancel(ctx)
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		h.chaos(chaosCtx, total)
	}()
	go h.reactivate(chaosCtx)

	started, status, waitErr := h.waitEvents(ctx, ids, startErr)
	stopChaos()
	<-chaosDone
	loadTook := time.Since(loadBegin)
	if waitErr != nil {
		h.printProblems()
		return waitErr
	}
	h.logf("all %d events final after %s", len(status), loadTook.Round(time.Second))

	// The API's view.
	rep, err := h.collect(ctx, started)
	if err != nil {
		return err
	}
	var sts []string
	for s, n := range rep.statuses {
		sts = append(sts, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(sts)
	h.logf("event statuses (API): %s; builds %d, %d needed more than one attempt", strings.Join(sts, " "), rep.builds, len(rep.retried))
	for _, r := range rep.retried {
		h.logf("  retried: %s", r)
	}

	// The records' view.
	var expected []string
	eventsOf := map[string][]string{}
	for _, id := range started {
		pl, n, _ := strings.Cut(id, "/")
		for _, j := range jobs {
			b := pl + "/" + j + "/" + n
			expected = append(expected, b)
			eventsOf[id] = append(eventsOf[id], b)
		}
	}
	f, err := os.Open(h.rec)
	if err != nil {
		return fmt.Errorf("open records: %w", err)
	}
	recs, err := steprecords.Parse(f)
	_ = f.Close()
	if err != nil {
		return err
	}
	h.outMu.Lock()
	v := steprecords.Judge(recs, expected, steprecords.Evidence{Kills: h.killedAt, Unsent: h.unsent})
	h.outMu.Unlock()
	lostBuild := map[string]bool{}
	for _, b := range v.Lost {
		lostBuild[b] = true
	}
	completed := 0
	for _, id := range started {
		ok := true
		for _, b := range eventsOf[id] {
			ok = ok && !lostBuild[b]
		}
		if ok {
			completed++
		}
	}
	h.logf("records: %d lines; builds %d completed %d, step runs interrupted by kills %d, builds started more than once %d",
		len(recs), v.Builds, v.Completed, v.Interrupted, v.Retried)
	for _, b := range v.Lost {
		h.logf("  LOST: %s has no end record", b)
	}
	for _, d := range v.Double {
		h.logf("  COMPLETED TWICE: %s", d)
	}
	for _, d := range v.Excused {
		h.logf("  completed twice within the documented window: %s", d)
	}
	for _, l := range v.LateWrites {
		h.logf("  LATE WRITE: %s", l)
	}
	for _, u := range v.Unexpected {
		h.logf("  UNEXPECTED: %s ran but no started event should have run it", u)
	}
	for _, o := range v.Overlaps {
		h.logf("  overlapping runs: %s", o)
	}
	h.outMu.Lock()
	outages := strings.Join(h.outages, ", ")
	h.outMu.Unlock()
	h.logf("outages: %s", outages)
	h.logf("executor logs: %s", h.logCounts())
	h.printProblems()

	orphans := h.orphans.wait()
	for _, o := range orphans {
		h.logf("  ORPHAN: %s", o)
	}
	_, _ = fmt.Fprintf(h.out, "chaos events=%d completed=%d lost=%d double_completions=%d excused_doubles=%d late_writes=%d orphans=%d executor_kills=%d controller_restarts=%d server_restarts=%d\n",
		len(started), completed, len(started)-completed, len(v.Double), len(v.Excused), len(v.LateWrites), len(orphans), h.executorKills.Load(), h.controllerKills.Load(), h.serverKills.Load())
	_, _ = fmt.Fprintf(h.out, "chaos auto_drains=%d (executors the registry drained for losing builds, activated again by the harness)\n", h.autoDrains.Load())
	_, _ = fmt.Fprintf(h.out, "chaos builds=%d retried=%d interrupted_runs=%d events_success=%d duration=%s\n",
		rep.builds, len(rep.retried), v.Interrupted, rep.statuses[workflows.StatusSuccess], loadTook.Round(time.Second))

	var fails []string
	if !v.OK() {
		fails = append(fails, fmt.Sprintf("%d builds lost, %d completed twice outside the documented window, %d unexpected, %d late writes of lost attempts",
			len(v.Lost), len(v.Double), len(v.Unexpected), len(v.LateWrites)))
	}
	if len(orphans) > 0 {
		fails = append(fails, fmt.Sprintf("%d step processes of killed executors outlived them by more than %s", len(orphans), orphanGrace))
	}
	if rep.statuses[workflows.StatusSuccess] != len(started) {
		fails = append(fails, fmt.Sprintf("%d of %d events ended SUCCESS", rep.statuses[workflows.StatusSuccess], len(started)))
	}
	if len(fails) > 0 {
		return errors.New(strings.Join(fails, "; "))
	}
	return nil
}

// noteUnsent records the results the killed executor name had saved and
// not delivered: its next start delivers them, but if the build was
// dispatched again meanwhile it runs twice, within the documented window.
func (h *harness) noteUnsent(name string) {
	entries, err := activities.ReadOutbox(activities.OutboxDir(filepath.Join(h.dir, name), name))
	if err != nil {
		h.logf("read the outbox of %s: %v", name, err)
		return
	}
	h.outMu.Lock()
	defer h.outMu.Unlock()
	for _, e := range entries {
		h.unsent[steprecords.Key(e.BuildID, e.Attempt)] = e.Saved
	}
}

// logMessages are the executors' messages about reaching Temporal that the
// run counts.
var logMessages = []string{
	"build_heartbeat_failed", "build_heartbeat_given_up", "build_result_delivery_failed",
	"build_result_delivered", "build_result_redelivering", "build_result_dropped",
}

// logCounts counts logMessages in the executors' logs.
func (h *harness) logCounts() string {
	counts := map[string]int{}
	for _, p := range h.executors {
		data, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		for _, m := range logMessages {
			counts[m] += strings.Count(string(data), "msg="+m+" ")
		}
	}
	parts := make([]string, 0, len(logMessages))
	for _, m := range logMessages {
		parts = append(parts, fmt.Sprintf("%s=%d", m, counts[m]))
	}
	return strings.Join(parts, " ")
}

// printProblems reports processes that exited without being killed.
func (h *harness) printProblems() {
	for _, p := range append([]*proc{h.temporal, h.api, h.controller}, h.executors...) {
		exits := p.unexpectedExits()
		for _, u := range exits {
			h.logf("  unexpected exit: %s", u)
		}
		if len(exits) > 0 {
			h.logf("  last lines of %s:\n%s", p.log, p.tail(8))
		}
	}
}

// trustedRunAs is SLUICE_EXECUTOR_RUN_AS for the harness's own (trusted)
// builds: as root, the explicit opt-in an executor needs to run them on the
// host; otherwise nothing.
func trustedRunAs() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return ""
}

// reactivate plays the operator: the registry drains an executor that
// loses 3 builds in 10 minutes, which this harness makes every executor do
// on purpose, so it activates each one the registry drained for that
// (and only those), every few seconds, until ctx ends.
func (h *harness) reactivate(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		es, err := h.client.ListExecutors(ctx)
		if err != nil {
			continue // the controller or the server is down on purpose
		}
		for _, e := range es {
			if e.State != "draining" || !strings.HasPrefix(e.StateReason, "drained automatically") {
				continue
			}
			if _, err := h.client.ExecutorAction(ctx, e.Name, "activate"); err == nil {
				h.autoDrains.Add(1)
				h.logf("activate %s again (%s)", e.Name, e.StateReason)
			}
		}
	}
}
