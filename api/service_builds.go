package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// ---- builds -------------------------------------------------------------

// BuildFilter narrows ListBuilds.
type BuildFilter struct {
	Pipeline, Job, Event, Queue string
	Status                      workflows.Status
	// Cause keeps the ended builds that ended for that cause.
	Cause workflows.Cause
	// PR keeps the builds of one pull request.
	PR    int
	Limit int
	// Branch keeps the builds of one branch (a pull request's: its target);
	// Executor those an executor ran.
	Branch, Executor string
	// Since and Until keep the builds created in [Since, Until) (zero: no
	// bound).
	Since, Until time.Time
	// Page is the token of the page to list, from a previous page's answer
	// ("": the first).
	Page string
}

// causeNames lists the causes for error messages.
func causeNames() string {
	names := make([]string, 0, len(workflows.Causes()))
	for _, c := range workflows.Causes() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "") + "'" }

// ListBuilds lists builds, newest first, from visibility alone.
func (s *Service) ListBuilds(ctx context.Context, f BuildFilter) ([]Build, error) {
	bs, _, err := s.ListBuildsPage(ctx, f)
	return bs, err
}

// ListBuildsPage lists one page of builds, newest first, from visibility
// alone, and the token of the next page ("": none).
func (s *Service) ListBuildsPage(ctx context.Context, f BuildFilter) ([]Build, string, error) {
	q := where{"WorkflowType = 'BuildWorkflow'"}
	add := q.eq
	add(workflows.SAPipeline.GetName(), f.Pipeline)
	add(workflows.SAJob.GetName(), f.Job)
	add(workflows.SAEvent.GetName(), f.Event)
	add(workflows.SAQueue.GetName(), f.Queue)
	if f.PR < 0 {
		return nil, "", invalid("pr %d: must be positive", f.PR)
	}
	if f.PR > 0 {
		q = append(q, fmt.Sprintf("%s = %d", workflows.SAPR.GetName(), f.PR))
	}
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, "", invalid("status %q: want one of CREATED, QUEUED, BLOCKED, FROZEN, RUNNING, SUCCESS, FAILURE, ABORTED, COLLAPSED", f.Status)
		}
		add(workflows.SAStatus.GetName(), string(f.Status))
	}
	if f.Cause != "" {
		if !f.Cause.Valid() {
			return nil, "", invalid("cause %q: want one of %s", f.Cause, causeNames())
		}
		add(workflows.SACause.GetName(), string(f.Cause))
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	q, err := narrow(q, f.Branch, f.Executor, f.Since, f.Until)
	if err != nil {
		return nil, "", err
	}
	if s.BuildsInEvents {
		return s.listBothPage(ctx, f, strings.Join(q, " AND "))
	}
	out, next, err := s.workflowBuildsPage(ctx, strings.Join(q, " AND "), f.Limit, f.Page)
	return out, next, err
}

// workflowBuildsPage lists one page of build workflows.
func (s *Service) workflowBuildsPage(ctx context.Context, query string, limit int, page string) ([]Build, string, error) {
	execs, next, err := s.listPage(ctx, query, limit, page)
	if err != nil {
		return nil, "", err
	}
	out := make([]Build, 0, len(execs))
	for _, ex := range execs {
		b, ok := buildFromVisibility(ex)
		if ok {
			out = append(out, b)
		}
	}
	return out, next, nil
}

// bothPagePrefix marks a page token of listBothPage: "o.<build workflows'
// token>.<events' token>.<skip>", each token "" to start and "~" once
// exhausted; skip counts the matching builds of the events' page already
// listed (a page of events may hold more builds than a page of builds).
const bothPagePrefix = "o."

// listBothPage lists one page of builds from both places a build can be:
// its own workflow (legacyQuery) and the memo of an event that runs its
// builds (SLUICE_BUILDS_IN_EVENTS). A page holds up to f.Limit builds of
// each and is ordered newest first; the next page continues both.
func (s *Service) listBothPage(ctx context.Context, f BuildFilter, legacyQuery string) ([]Build, string, error) {
	legacyTok, eventTok, skip := "", "", 0
	if f.Page != "" {
		parts := strings.Split(strings.TrimPrefix(f.Page, bothPagePrefix), ".")
		var err error
		if len(parts) == 3 {
			skip, err = strconv.Atoi(parts[2])
		}
		if !strings.HasPrefix(f.Page, bothPagePrefix) || len(parts) < 2 || len(parts) > 3 || err != nil || skip < 0 {
			return nil, "", invalid("page %q: not a page token from a previous answer", f.Page)
		}
		legacyTok, eventTok = parts[0], parts[1]
	}
	const done = "~"
	var out []Build
	if legacyTok != done {
		bs, next, err := s.workflowBuildsPage(ctx, legacyQuery, f.Limit, legacyTok)
		if err != nil {
			return nil, "", err
		}
		out, legacyTok = append(out, bs...), cmp.Or(next, done)
	}
	if eventTok != done {
		owned, resume, err := s.ownedPage(ctx, f, eventTok, skip)
		if err != nil {
			return nil, "", err
		}
		out = append(out, owned...)
		eventTok, skip = resume.tok, resume.skip
		if resume.done {
			eventTok, skip = done, 0
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return newerBuild(out[i], out[j]) })
	if legacyTok == done && eventTok == done {
		return out, "", nil
	}
	return out, bothPagePrefix + legacyTok + "." + eventTok + "." + strconv.Itoa(skip), nil
}

// newerBuild orders builds newest first (then by ID, descending).
func newerBuild(a, b Build) bool {
	if !a.CreateTime.Equal(b.CreateTime) {
		return a.CreateTime.After(b.CreateTime)
	}
	return a.ID > b.ID
}

// ownedResume is where the next page of builds run inside their events
// starts: the events' page at tok ("": the first) after its first skip
// matching builds, unless done.
type ownedResume struct {
	tok  string
	skip int
	done bool
}

// ownedPage lists up to f.Limit builds matching f from the memos of the
// events that run their builds, from the page of events at tok, skipping
// the first skip matches of that page (listed already), reading at most
// maxEventScan pages of events, and answers where the next page starts.
func (s *Service) ownedPage(ctx context.Context, f BuildFilter, tok string, skip int) ([]Build, ownedResume, error) {
	var out []Build
	for range maxEventScan {
		execs, next, err := s.listPage(ctx, ownedEventsQuery(f), f.Limit, tok)
		if err != nil {
			return nil, ownedResume{}, err
		}
		var matches []Build
		for _, ex := range execs {
			var of []Build
			for _, b := range ownedFromVisibility(ex) {
				if f.matches(b) {
					of = append(of, b)
				}
			}
			sort.SliceStable(of, func(i, j int) bool { return newerBuild(of[i], of[j]) })
			matches = append(matches, of...)
		}
		// The events may have changed since the page before: a skip past
		// their matches goes on to the next page.
		matches = matches[min(skip, len(matches)):]
		if room := f.Limit - len(out); len(matches) > room {
			return append(out, matches[:room]...), ownedResume{tok: tok, skip: skip + room}, nil
		}
		out = append(out, matches...)
		if next == "" {
			return out, ownedResume{done: true}, nil
		}
		tok, skip = next, 0
		if len(out) == f.Limit {
			break
		}
	}
	return out, ownedResume{tok: tok}, nil
}

// where is the conditions of a visibility query, joined by AND.
type where []string

// eq adds key = v, unless v is empty (no condition).
func (w *where) eq(key, v string) {
	if v != "" {
		*w = append(*w, key+" = "+quote(v))
	}
}

// ownedEventsQuery finds the events whose builds may match f: by what an
// event's own search attributes say (pipeline, event, pull request,
// branch, start time); the rest is matched on each build (matches).
func ownedEventsQuery(f BuildFilter) string {
	q := where{"WorkflowType = 'EventWorkflow'"}
	add := q.eq
	add(workflows.SAPipeline.GetName(), f.Pipeline)
	add(workflows.SAEvent.GetName(), f.Event)
	add(workflows.SABranch.GetName(), f.Branch)
	if f.PR > 0 {
		q = append(q, fmt.Sprintf("%s = %d", workflows.SAPR.GetName(), f.PR))
	}
	if f.Status != "" && !f.Status.Final() {
		// An unfinished build is in a running event.
		q = append(q, "ExecutionStatus = 'Running'")
		if f.Queue != "" {
			add(workflows.SAOpenBuilds.GetName(), workflows.OpenBuildToken(f.Status, f.Queue))
		}
	}
	if !f.Since.IsZero() {
		// The event started before its builds.
		q = append(q, "StartTime >= "+quote(f.Since.Add(-maxEventSpan).UTC().Format(time.RFC3339Nano)))
	}
	if !f.Until.IsZero() {
		q = append(q, "StartTime < "+quote(f.Until.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(q, " AND ")
}

// laneKeyOf is what a build workflow's SluiceJob says of b (its job, or
// PR-<n>:<job> for a pull request's build), which a list's job filter
// names.
func laneKeyOf(b Build) string {
	ref, err := workflows.ParseBuildRef(b.ID)
	if err != nil {
		return b.Job
	}
	return ref.LaneKey()
}

// maxEventSpan bounds how long after its event started a build is
// created, for a list's since bound on events.
const maxEventSpan = 7 * 24 * time.Hour

// matches reports whether b, read from its event's memo, passes f's
// filters.
func (f BuildFilter) matches(b Build) bool {
	switch {
	case f.Job != "" && laneKeyOf(b) != f.Job,
		f.Queue != "" && b.Queue != f.Queue,
		f.Status != "" && b.Status != f.Status,
		f.Cause != "" && b.Cause != f.Cause,
		f.Executor != "" && b.Executor != f.Executor,
		f.PR > 0 && b.PR != f.PR,
		f.Event != "" && b.Event != f.Event,
		!f.Since.IsZero() && b.CreateTime.Before(f.Since),
		!f.Until.IsZero() && !b.CreateTime.Before(f.Until):
		return false
	}
	return true
}

// ownedFromVisibility lists the builds an event runs itself from its
// visibility record: each is a memo key (workflows.OwnedBuildMemo) whose
// summary carries what a build workflow's search attributes say.
func ownedFromVisibility(ex *workflowpb.WorkflowExecutionInfo) []Build {
	sa := ex.GetSearchAttributes()
	var out []Build
	for key, f := range ex.GetMemo().GetFields() {
		id, ok := strings.CutPrefix(key, workflows.OwnedBuildMemo(""))
		if !ok {
			continue
		}
		ref, err := workflows.ParseBuildRef(id)
		if err != nil {
			continue
		}
		var sum workflows.BuildSummary
		if converter.GetDefaultDataConverter().FromPayload(f, &sum) != nil {
			continue
		}
		out = append(out, Build{
			ID: ref.String(), Pipeline: ref.Pipeline, Job: ref.Job, Event: ref.EventRef().String(), Workflow: ex.GetExecution().GetWorkflowId(), PR: ref.PR,
			Status: sum.Status, Queue: sum.Queue, Priority: sum.Priority, Cause: sum.Cause, CreateTime: sum.CreateTime,
			Executor: sum.Executor, SHA: saString(sa, workflows.SASHA.GetName()), Branch: saString(sa, workflows.SABranch.GetName()),
			Reason: sum.Reason, WaitCode: sum.WaitCode, Attempts: sum.Attempts, QueuedTime: sum.QueuedTime, StartTime: sum.StartTime,
			EndTime: sum.EndTime, WaitUntil: sum.WaitUntil, CollapsedInto: sum.CollapsedInto, Fork: sum.Fork,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// maxLineListed bounds the build workflows waiting on a queue that one
// call lists to rank them in memory; past it each build's place is a
// visibility count of its own.
const maxLineListed = 200

// queueLine is a queue's builds dispatched and waiting for a slot, read
// once per call for every waiting build of the call on that queue: the
// build workflows (up to maxLineListed) and the builds run inside their
// events (SLUICE_BUILDS_IN_EVENTS).
type queueLine struct {
	q      string
	legacy []Build
	// counted: more build workflows wait than were listed, so each
	// build's place among them is counted.
	counted bool
	owned   []Build
}

// lineOf reads queue q's line.
func (s *Service) lineOf(ctx context.Context, q string) (*queueLine, error) {
	l := &queueLine{q: q}
	execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s AND %s = '%s' AND %s IS NOT NULL",
		workflows.SAQueue.GetName(), quote(q), workflows.SAStatus.GetName(), workflows.StatusQueued, workflows.SADispatchedAt.GetName()), maxLineListed+1)
	if err != nil {
		return nil, err
	}
	// Past the bound each place is counted (ahead): the list is not read.
	if l.counted = len(execs) > maxLineListed; !l.counted {
		for _, ex := range execs {
			if b, ok := buildFromVisibility(ex); ok {
				l.legacy = append(l.legacy, b)
			}
		}
	}
	if s.BuildsInEvents {
		if l.owned, err = s.ownedWaiting(ctx, q, maxWaitingScanned); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// ahead counts the builds of the line that a slot serves before b: a
// higher priority (a lower number), or the same and dispatched earlier.
func (s *Service) ahead(ctx context.Context, l *queueLine, b *Build) (int, error) {
	n := aheadIn(l.legacy, b) + aheadIn(l.owned, b)
	if !l.counted {
		return n, nil
	}
	more, err := s.count(ctx, fmt.Sprintf(
		"WorkflowType = 'BuildWorkflow' AND ExecutionStatus = 'Running' AND %s = %s AND %s = 'QUEUED' AND (%s < %d OR (%s = %d AND %s < '%s'))",
		workflows.SAQueue.GetName(), quote(l.q), workflows.SAStatus.GetName(),
		workflows.SAPriority.GetName(), b.Priority, workflows.SAPriority.GetName(), b.Priority,
		workflows.SADispatchedAt.GetName(), b.QueuedTime.UTC().Format(time.RFC3339Nano)))
	return n + more, err
}

// aheadIn counts the builds of line waiting for a slot before b.
func aheadIn(line []Build, b *Build) int {
	n := 0
	for _, o := range line {
		if o.ID == b.ID || o.Status != workflows.StatusQueued || o.QueuedTime.IsZero() {
			continue
		}
		if o.Priority < b.Priority || o.Priority == b.Priority && o.QueuedTime.Before(b.QueuedTime) {
			n++
		}
	}
	return n
}

// ownedWaiting lists the builds waiting on queue q inside the running
// events that run their builds (SluiceOpenBuilds), at most limit events
// read.
func (s *Service) ownedWaiting(ctx context.Context, q string, limit int) ([]Build, error) {
	var tokens []string
	for _, st := range []workflows.Status{workflows.StatusCreated, workflows.StatusQueued, workflows.StatusBlocked, workflows.StatusFrozen} {
		tokens = append(tokens, quote(workflows.OpenBuildToken(st, q)))
	}
	execs, err := s.list(ctx, fmt.Sprintf("WorkflowType = 'EventWorkflow' AND ExecutionStatus = 'Running' AND %s IN (%s)",
		workflows.SAOpenBuilds.GetName(), strings.Join(tokens, ", ")), limit)
	if err != nil {
		return nil, err
	}
	var out []Build
	for _, ex := range execs {
		for _, b := range ownedFromVisibility(ex) {
			if b.Queue == q && !b.Status.Final() && b.Status != workflows.StatusRunning {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

func buildFromVisibility(ex *workflowpb.WorkflowExecutionInfo) (Build, bool) {
	ref, err := workflows.ParseBuildRef(ex.GetExecution().GetWorkflowId())
	if err != nil {
		return Build{}, false
	}
	sa := ex.GetSearchAttributes()
	b := Build{
		ID: ref.String(), Pipeline: ref.Pipeline, Job: ref.Job, Event: ref.EventRef().String(), Workflow: ex.GetExecution().GetWorkflowId(), PR: ref.PR,
		Status:     workflows.Status(saString(sa, workflows.SAStatus.GetName())),
		Queue:      saString(sa, workflows.SAQueue.GetName()),
		Executor:   saString(sa, workflows.SAExecutor.GetName()),
		SHA:        saString(sa, workflows.SASHA.GetName()),
		Branch:     saString(sa, workflows.SABranch.GetName()),
		Cause:      workflows.Cause(saString(sa, workflows.SACause.GetName())),
		CreateTime: ex.GetStartTime().AsTime(),
	}
	if p, err := strconv.Atoi(saString(sa, workflows.SAPriority.GetName())); err == nil {
		b.Priority = p
	}
	if f := ex.GetMemo().GetFields()[workflows.MemoBuild]; f != nil {
		var sum workflows.BuildSummary
		if converter.GetDefaultDataConverter().FromPayload(f, &sum) == nil {
			b.Reason, b.Attempts, b.QueuedTime, b.StartTime, b.EndTime = sum.Reason, sum.Attempts, sum.QueuedTime, sum.StartTime, sum.EndTime
			b.WaitCode = sum.WaitCode
			b.WaitUntil, b.CollapsedInto, b.Fork = sum.WaitUntil, sum.CollapsedInto, sum.Fork
			if sum.Executor != "" {
				b.Executor = sum.Executor
			}
		}
	}
	if b.EndTime.IsZero() {
		b.EndTime = closeTime(ex)
	}
	return b, true
}

// GetBuild returns a build's full record, with a live wait reason, wait
// code, place in line and start estimate when it waits.
func (s *Service) GetBuild(ctx context.Context, ref workflows.BuildRef) (Build, error) {
	b, err := s.buildRecord(ctx, ref)
	if err != nil {
		return b, err
	}
	if err := s.liveReasons(ctx, []*Build{&b}); err != nil {
		s.Logger.DebugContext(ctx, "live_reason_failed", "build", b.ID, "error", err)
	}
	return b, nil
}

// buildRecord is GetBuild without the live wait picture: what the
// executors' paths (secrets, logs) check, at no extra cost. A build is
// read from its own workflow or, when its event runs it
// (PipelineConfig.BuildsInEvents), from that event; the API asks first
// where its own setting (SLUICE_BUILDS_IN_EVENTS) says new builds are.
func (s *Service) buildRecord(ctx context.Context, ref workflows.BuildRef) (Build, error) {
	if s.BuildsInEvents {
		st, ok, err := s.ownedBuildState(ctx, ref)
		if err != nil {
			return Build{}, translate(err, "build "+ref.String())
		}
		if ok {
			return ownedBuildOf(ref, st), nil
		}
	}
	b, err := s.workflowBuildRecord(ctx, ref)
	if !s.BuildsInEvents && errors.Is(err, ErrNotFound) {
		st, ok, oerr := s.ownedBuildState(ctx, ref)
		if oerr != nil {
			return Build{}, translate(oerr, "build "+ref.String())
		}
		if ok {
			return ownedBuildOf(ref, st), nil
		}
	}
	return b, err
}

// ownedBuildState reads a build from the event that runs it: its query
// while the event runs, its result once it ended. ok is false when the
// event does not run it (no such event, an event that starts build
// workflows, or one without this build); err is a failure to ask (a
// timeout, the server or the controller unreachable), which says nothing
// about where the build is.
func (s *Service) ownedBuildState(ctx context.Context, ref workflows.BuildRef) (st workflows.BuildState, ok bool, err error) {
	id := ref.EventRef().WorkflowID()
	open, err := s.queryOpen(ctx, id, workflows.QueryBuild, &st, ref.String())
	if err != nil {
		return st, false, notOwned(err)
	}
	if open {
		return st, true, nil
	}
	var ev workflows.EventState
	if err := s.Client.GetWorkflow(ctx, id, "").Get(ctx, &ev); err != nil {
		return st, false, notOwned(err)
	}
	for _, b := range ev.Builds {
		if b.Build == ref {
			return b, true, nil
		}
	}
	return st, false, nil
}

// notOwned is nil for the answers that say an event does not run a build
// — no such workflow, or a query it does not know or refuses (an event
// that starts build workflows has no build query; one that runs its
// builds fails it for a build it does not have) — and err otherwise.
func notOwned(err error) error {
	var nf *serviceerror.NotFound
	var qf *serviceerror.QueryFailed
	if errors.As(err, &nf) || errors.As(err, &qf) {
		return nil
	}
	return err
}

// workflowBuildRecord reads a build from its own BuildWorkflow.
func (s *Service) workflowBuildRecord(ctx context.Context, ref workflows.BuildRef) (Build, error) {
	var st workflows.BuildState
	open, err := s.queryOpen(ctx, ref.WorkflowID(), workflows.QueryBuild, &st)
	if err != nil {
		return Build{}, translate(err, "build "+ref.String())
	}
	if !open {
		if err := s.Client.GetWorkflow(ctx, ref.WorkflowID(), "").Get(ctx, &st); err != nil {
			desc, derr := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
			if derr != nil {
				return Build{}, translate(derr, "build "+ref.String())
			}
			b, _ := buildFromVisibility(desc.GetWorkflowExecutionInfo())
			b.Status, b.Reason = workflows.StatusAborted, "build workflow ended without a result: "+err.Error()
			return b, nil
		}
	}
	if st.Branch == "" {
		// A build started before its state recorded the branch.
		desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
		if err != nil {
			return Build{}, translate(err, "build "+ref.String())
		}
		st.Branch = saString(desc.GetWorkflowExecutionInfo().GetSearchAttributes(), workflows.SABranch.GetName())
	}
	return buildOf(ref, st), nil
}

// ownedBuildOf is the API's record of a build its event runs.
func ownedBuildOf(ref workflows.BuildRef, st workflows.BuildState) Build {
	b := buildOf(ref, st)
	b.Workflow = ref.EventRef().WorkflowID()
	return b
}

// buildOf is the API's record of a build's state.
func buildOf(ref workflows.BuildRef, st workflows.BuildState) Build {
	b := Build{
		ID: st.ID, Pipeline: ref.Pipeline, Job: ref.Job, Event: ref.EventRef().String(), Workflow: ref.WorkflowID(), PR: ref.PR, Status: st.Status,
		Reason: st.Reason, WaitCode: st.WaitCode, Queue: st.Queue, Priority: st.Priority, Executor: st.Executor, SHA: st.SHA,
		Attempts: len(st.Attempts), CreateTime: st.CreateTime, QueuedTime: st.QueuedTime, StartTime: st.StartTime,
		EndTime: st.EndTime, WaitUntil: st.WaitUntil, CollapsedInto: st.CollapsedInto, AttemptList: slices.Clone(st.Attempts), Steps: st.Steps,
		Fork: st.Fork, Secrets: st.Secrets, SecretsListed: st.SecretsListed, Cause: st.Cause, CauseInfo: st.CauseInfo,
		Upstream: st.Upstream, Branch: st.Branch,
	}
	// The attempts' credential hashes stay in the API (attempt credentials).
	for i := range b.AttemptList {
		if h := b.AttemptList[i].StepCredentialHash; h != "" {
			if b.stepCredentials == nil {
				b.stepCredentials = make([]string, len(b.AttemptList))
			}
			b.stepCredentials[i] = h
			b.AttemptList[i].StepCredentialHash = ""
		}
		if h := b.AttemptList[i].CredentialHash; h != "" {
			if b.credentials == nil {
				b.credentials = make([]string, len(b.AttemptList))
			}
			b.credentials[i] = h
			b.AttemptList[i].CredentialHash = ""
		}
	}
	if n := len(st.Attempts); n > 0 {
		b.LogKey = activities.LogKey(st.ID, st.Attempts[n-1].Number)
	}
	return b
}

// CancelBuild cancels a build: a waiting one ends at once, a running one's
// processes are killed.
func (s *Service) CancelBuild(ctx context.Context, id queue.Identity, ref workflows.BuildRef) error {
	// Who cancels goes first, so the build's end cause can name them; a
	// build that already ended ignores it (its cancel then fails below
	// with the build's own answer). With authentication off nobody is
	// named.
	by := ""
	if id.User != "" && id.User != queue.SystemUser {
		by = id.User
	}
	if s.BuildsInEvents {
		if owned, err := s.cancelOwned(ctx, ref, by); owned {
			return err
		}
	}
	if by != "" {
		err := s.Client.SignalWorkflow(ctx, ref.WorkflowID(), "", workflows.SignalCancelledBy, workflows.CancelledBy{User: by})
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			s.Logger.WarnContext(ctx, "cancel_by_signal_failed", "build", ref.String(), "error", err)
		}
	}
	err := s.Client.CancelWorkflow(ctx, ref.WorkflowID(), "")
	var nf *serviceerror.NotFound
	if !s.BuildsInEvents && errors.As(err, &nf) {
		if owned, err := s.cancelOwned(ctx, ref, by); owned {
			return err
		}
	}
	return translate(err, "build "+ref.String())
}

// cancelOwned cancels a build its event runs, by one update naming who
// cancels it; owned is false when the event does not run the build.
func (s *Service) cancelOwned(ctx context.Context, ref workflows.BuildRef, by string) (bool, error) {
	st, ok, err := s.ownedBuildState(ctx, ref)
	if err != nil {
		return true, translate(err, "build "+ref.String())
	}
	if !ok {
		return false, nil
	}
	if st.Status.Final() {
		// As for a build workflow that ended: there is nothing to cancel.
		return true, fmt.Errorf("%w: build %s already ended %s", ErrNotFound, ref, st.Status)
	}
	err = s.update(ctx, ref.EventRef().WorkflowID(), workflows.UpdateCancelBuild, workflows.CancelBuildRequest{Build: ref.String(), By: by}, nil)
	return true, updateError(err, "build "+ref.String())
}

// liveReasons rewrites the reason of builds waiting for a slot with the
// queue's current picture (slots busy, builds ahead, or no live member),
// and gives every waiting build its wait code, its place in line and an
// estimate of its start.
func (s *Service) liveReasons(ctx context.Context, builds []*Build) error {
	var waiting []*Build
	for _, b := range builds {
		if b.Status.Final() || b.Status == workflows.StatusRunning {
			b.WaitCode = ""
			continue
		}
		if b.WaitCode == "" {
			// A build recorded before wait codes.
			b.WaitCode = workflows.WaitCodeOf(b.Status, b.Reason)
		}
		if b.WaitCode != "" {
			waiting = append(waiting, b)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	queues, members, err := s.registry(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	typical := map[string]time.Duration{}
	lanes := map[string]map[string]int{}
	lines := map[string]*queueLine{}
	for _, b := range waiting {
		pic := waitPicture{code: b.WaitCode, now: now, waitUntil: b.WaitUntil}
		q, ok := findQueue(queues, b.Queue)
		switch {
		case b.Status == workflows.StatusQueued && !b.QueuedTime.IsZero() && !ok:
			b.Reason = fmt.Sprintf("waiting on queue %s, which no longer exists: recreate it or cancel the build", b.Queue)
			b.WaitCode, b.EstimateNote = workflows.WaitNoMember, "its queue no longer exists"
			continue
		case b.Status == workflows.StatusQueued && !b.QueuedTime.IsZero():
			plan := queue.Evaluate(q, members, now, s.Liveness)
			if b.Fork {
				// A pull request from a fork waits for a container executor
				// (its queue's untrusted task queue).
				plan = queue.EvaluateUntrusted(q, members, now, s.Liveness)
			}
			l, seen := lines[b.Queue]
			if !seen {
				if l, err = s.lineOf(ctx, b.Queue); err != nil {
					return err
				}
				lines[b.Queue] = l
			}
			ahead, err := s.ahead(ctx, l, b)
			if err != nil {
				return err
			}
			b.Reason = queue.WaitReason(q, plan, plan.Busy, ahead)
			b.WaitCode = queueWaitCode(q, plan, members, b.Fork, ahead)
			if b.WaitCode == workflows.WaitNeverServed {
				b.Reason = "never served: no executor that serves this queue has ever registered; " + b.Reason
			}
			pic.code, pic.position, pic.busy, pic.slots, pic.minGap = b.WaitCode, ahead+1, plan.Busy, plan.Slots, plan.Rule.MinGap
		case b.WaitCode == workflows.WaitBlockedBy || b.WaitCode == workflows.WaitLaneOrder:
			pos, seen := lanes[b.Pipeline]
			if !seen {
				pos, err = s.lanePositions(ctx, b.Pipeline)
				if err != nil {
					s.Logger.DebugContext(ctx, "lane_positions_failed", "pipeline", b.Pipeline, "error", err)
				}
				lanes[b.Pipeline] = pos
			}
			pic.position = pos[b.ID]
		}
		if _, seen := typical[b.Queue]; !seen && ok {
			d, err := s.typicalDuration(ctx, b.Queue)
			if err != nil {
				return err
			}
			typical[b.Queue] = d
		}
		pic.typical = typical[b.Queue]
		b.Position = pic.position
		b.EstimatedStart, b.EstimateNote = estimateStart(pic)
	}
	return nil
}

func findQueue(qs []queue.Queue, name string) (queue.Queue, bool) {
	for _, q := range qs {
		if q.Name == name {
			return q, true
		}
	}
	return queue.Queue{}, false
}
