package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workflows"
)

// Build metadata (Screwdriver's `meta`). A build starts with the metadata
// its event and its upstream builds give it (StartMeta); its steps change
// it in a file ($SD_META_PATH) that the executor uploads when the build
// ends (PUT /api/v1/builds/{id}/meta, with the attempt's credential).
// Metadata lives in sluice's store, never in Temporal: an event carries
// only a reference to the metadata it was started with (Trigger.MetaRef),
// a build only the names of its upstream jobs (BuildState.Upstream).

// BuildMetaResponse is the answer of GET /api/v1/builds/{id}/meta.
type BuildMetaResponse struct {
	Build string `json:"build"`
	// Saved is true once the build's executor uploaded its metadata (the
	// build ended); until then Meta is what the build starts with.
	Saved   bool   `json:"saved"`
	Attempt int    `json:"attempt,omitempty"`
	Status  string `json:"status,omitempty"`
	// Meta is the JSON object.
	Meta json.RawMessage `json:"meta"`
}

// SaveMetaRequest is the body of PUT /api/v1/builds/{id}/meta: the
// metadata an attempt ended with, sent by its executor.
type SaveMetaRequest struct {
	Attempt int             `json:"attempt"`
	Status  string          `json:"status"`
	Meta    json.RawMessage `json:"meta"`
}

// JobMetaResponse is the answer of GET
// /api/v1/pipelines/{name}/jobs/{job}/meta: the metadata of the job's last
// successful build.
type JobMetaResponse struct {
	Pipeline string          `json:"pipeline"`
	Job      string          `json:"job"`
	Build    string          `json:"build"`
	Meta     json.RawMessage `json:"meta"`
}

// ErrNoMetaStore is returned when the API has no store for metadata.
var ErrNoMetaStore = errors.New("build metadata needs sluice's store (SLUICE_DB), which this API has not opened")

// maxUpstreamHops bounds how far StartMeta follows an event's restart
// chain to find an upstream job's build.
const maxUpstreamHops = 50

func (s *Service) metaStore() (store.Meta, error) {
	if s.Meta == nil {
		return nil, ErrNoMetaStore
	}
	return s.Meta, nil
}

// NewEventMeta checks the metadata an event is started with and keeps it
// in the store, returning its reference ("" when there is none). Each
// entry is KEY=VALUE with a dotted KEY; a VALUE that parses as JSON is
// kept as that JSON, any other as a string.
func (s *Service) NewEventMeta(ctx context.Context, pipeline string, entries map[string]string) (string, error) {
	if len(entries) == 0 {
		return "", nil
	}
	doc := buildmeta.Doc{}
	for k, v := range entries {
		var val any = v
		if j, err := buildmeta.ParseValue(v, true); err == nil {
			val = j
		}
		if err := buildmeta.Set(doc, k, val); err != nil {
			return "", invalid("meta: %v", err)
		}
	}
	b, err := buildmeta.Encode(doc)
	if err != nil {
		return "", invalid("%v", err)
	}
	st, err := s.metaStore()
	if err != nil {
		return "", err
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("event meta reference: %w", err)
	}
	ref := hex.EncodeToString(rnd[:])
	if err := st.PutEventMeta(ctx, ref, pipeline, b); err != nil {
		return "", err
	}
	return ref, nil
}

// GetBuildMeta returns a build's saved metadata or, before its executor
// saved any, what it starts with.
func (s *Service) GetBuildMeta(ctx context.Context, ref workflows.BuildRef) (BuildMetaResponse, error) {
	m, _, err := s.buildMeta(ctx, ref)
	return m, err
}

// buildMeta is GetBuildMeta, with the build's record when it read one
// (nil: the saved metadata answered).
func (s *Service) buildMeta(ctx context.Context, ref workflows.BuildRef) (BuildMetaResponse, *Build, error) {
	st, err := s.metaStore()
	if err != nil {
		return BuildMetaResponse{}, nil, err
	}
	m, ok, err := st.GetBuildMeta(ctx, ref.String())
	if err != nil {
		return BuildMetaResponse{}, nil, err
	}
	if ok {
		return BuildMetaResponse{Build: ref.String(), Saved: true, Attempt: m.Attempt, Status: m.Status, Meta: m.Meta}, nil, nil
	}
	// The event's state, which the metadata reads too, is asked beside
	// the build's record (its upstream jobs and commit: a waiting build's
	// live wait picture would cost registry reads for nothing).
	pre := s.readEventBeside(ctx, ref.EventRef())
	b, err := s.buildRecord(ctx, ref)
	if err != nil {
		return BuildMetaResponse{}, nil, err
	}
	resp, err := s.startMetaResponse(ctx, b, pre)
	return resp, &b, err
}

// metaOf is b's saved metadata, else what it starts with.
func (s *Service) metaOf(ctx context.Context, b Build) (BuildMetaResponse, error) {
	st, err := s.metaStore()
	if err != nil {
		return BuildMetaResponse{}, err
	}
	m, ok, err := st.GetBuildMeta(ctx, b.ID)
	if err != nil {
		return BuildMetaResponse{}, err
	}
	if ok {
		return BuildMetaResponse{Build: b.ID, Saved: true, Attempt: m.Attempt, Status: m.Status, Meta: m.Meta}, nil
	}
	return s.startMetaResponse(ctx, b, nil)
}

// startMetaResponse answers with the metadata b starts with; pre, when
// not nil, is its event's state being read meanwhile.
func (s *Service) startMetaResponse(ctx context.Context, b Build, pre *eventRead) (BuildMetaResponse, error) {
	ref, err := workflows.ParseBuildRef(b.ID)
	if err != nil {
		return BuildMetaResponse{}, err
	}
	doc, err := s.startMeta(ctx, b, pre)
	if err != nil {
		return BuildMetaResponse{}, err
	}
	raw, err := buildmeta.Encode(doc)
	if err != nil {
		return BuildMetaResponse{}, err
	}
	return BuildMetaResponse{Build: ref.String(), Meta: raw}, nil
}

// StartMeta is the metadata build b starts with, as Screwdriver merges it:
// its event's (`event start --meta`, plus a remote trigger's build under
// sd.<pipeline>.<job>), then its upstream builds' (for a join, every
// parent's, in the order its requires list them; a job a restart inherited
// is found along the restart chain), then the build's own keys
// (workflows.OwnStartMeta, which a build's task brings when nothing else
// makes its metadata). The event's parameters come right after its own
// metadata, as parameters.NAME.value.
func (s *Service) StartMeta(ctx context.Context, b Build) (buildmeta.Doc, error) {
	return s.startMeta(ctx, b, nil)
}

func (s *Service) startMeta(ctx context.Context, b Build, pre *eventRead) (buildmeta.Doc, error) {
	st, err := s.metaStore()
	if err != nil {
		return nil, err
	}
	ref, err := workflows.ParseBuildRef(b.ID)
	if err != nil {
		return nil, err
	}
	ev, err := s.startEventState(ctx, ref.EventRef(), b.Upstream, pre)
	if err != nil {
		return nil, err
	}
	doc := buildmeta.Doc{}
	if r := ev.Trigger.MetaRef; r != "" {
		raw, ok, err := st.GetEventMeta(ctx, r)
		if err != nil {
			return nil, err
		}
		if ok {
			em, err := buildmeta.Parse(raw)
			if err != nil {
				return nil, fmt.Errorf("event %s's metadata: %w", ref.EventRef(), err)
			}
			buildmeta.Merge(doc, em)
		}
	}
	// The event's parameters, where Screwdriver puts them:
	// parameters.NAME.value.
	for _, name := range slices.Sorted(maps.Keys(ev.Parameters)) {
		if err := buildmeta.Set(doc, "parameters."+name+".value", ev.Parameters[name]); err != nil {
			return nil, fmt.Errorf("event %s's parameter %s: %w", ref.EventRef(), name, err)
		}
	}
	if remote := ev.Trigger.Remote; remote != "" {
		// sd@<pipeline>:<job>: the triggering job's metadata, where
		// Screwdriver puts it.
		if p, j, ok := strings.Cut(strings.TrimPrefix(remote, "sd@"), ":"); ok {
			m, found, err := st.LastSuccessfulMeta(ctx, p, j)
			if err != nil {
				return nil, err
			}
			if found {
				rm, err := buildmeta.Parse(m.Meta)
				if err == nil {
					buildmeta.Merge(doc, buildmeta.Doc{"sd": map[string]any{p: map[string]any{j: rm}}})
				}
			}
		}
	}
	for _, job := range b.Upstream {
		ids, err := s.upstreamBuilds(ctx, ref.EventRef(), ev, job)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			m, ok, err := st.GetBuildMeta(ctx, id)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			pm, err := buildmeta.Parse(m.Meta)
			if err != nil {
				return nil, fmt.Errorf("build %s's metadata: %w", id, err)
			}
			buildmeta.Merge(doc, pm)
		}
	}
	buildmeta.Merge(doc, workflows.OwnStartMeta(ref, b.SHA, ev.Trigger))
	return doc, nil
}

// startEventCache keeps, per API process, the state of events whose builds
// read their start metadata, so that an event's builds do not each ask
// it: what StartMeta reads of an event (its trigger, parameters, parent,
// and the builds of its jobs that started) is settled before its first
// build starts, except that more of its jobs start later. A build whose
// upstream jobs the kept state does not list reads the event again.
type startEventCache struct {
	kept ttlMap[workflows.EventRef, workflows.EventState]
}

const (
	// startEventTTL bounds how long an event's state is kept.
	startEventTTL = time.Minute
	// startEventMax bounds the cache; expired entries go first when full.
	startEventMax = 1024
)

func (c *startEventCache) get(ref workflows.EventRef, now time.Time) (workflows.EventState, bool) {
	return c.kept.get(ref, now)
}

func (c *startEventCache) put(ref workflows.EventRef, st workflows.EventState, now time.Time) {
	c.kept.put(ref, st, now, startEventTTL, startEventMax)
}

// eventRead is an event's state read in the background (readEventBeside).
type eventRead struct {
	done chan struct{}
	st   workflows.EventState
	err  error
}

// readEventBeside starts reading event ref's state unless it is kept (nil
// then): a build's start metadata reads its record and its event's state,
// one round trip instead of two.
func (s *Service) readEventBeside(ctx context.Context, ref workflows.EventRef) *eventRead {
	if _, ok := s.startEvents.get(ref, time.Now()); ok {
		return nil
	}
	r := &eventRead{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.st, r.err = s.eventState(ctx, ref)
	}()
	return r
}

// startEventState is event ref's state for the start metadata of a build
// whose upstream jobs are upstream: kept, when the kept state lists them
// all, else pre's (read since the build's record was asked for, after the
// build, and so its upstream jobs, started), else read; kept once the
// event has started jobs.
func (s *Service) startEventState(ctx context.Context, ref workflows.EventRef, upstream []string, pre *eventRead) (workflows.EventState, error) {
	now := time.Now()
	if st, ok := s.startEvents.get(ref, now); ok && startedJobs(st, upstream) {
		return st, nil
	}
	var (
		st  workflows.EventState
		err error
		got bool
	)
	if pre != nil {
		select {
		case <-pre.done:
		case <-ctx.Done():
			return workflows.EventState{}, ctx.Err()
		}
		st, got = pre.st, pre.err == nil && startedJobs(pre.st, upstream)
	}
	if !got {
		st, err = s.eventState(ctx, ref)
	}
	if err == nil && len(st.Jobs) > 0 {
		s.startEvents.put(ref, st, now)
	}
	return st, err
}

// startedJobs reports whether st lists builds for every job of jobs.
func startedJobs(st workflows.EventState, jobs []string) bool {
	for _, job := range jobs {
		if !slices.ContainsFunc(st.Jobs, func(j workflows.JobOutcome) bool { return j.Job == job && len(j.Builds) > 0 }) {
			return false
		}
	}
	return true
}

// upstreamBuilds finds the builds of job in event ref (state ev) or, when
// the event inherited the job's success from its restart chain, in the
// nearest parent that ran it.
func (s *Service) upstreamBuilds(ctx context.Context, ref workflows.EventRef, ev workflows.EventState, job string) ([]string, error) {
	for range maxUpstreamHops {
		for _, j := range ev.Jobs {
			if j.Job == job && len(j.Builds) > 0 {
				return j.Builds, nil
			}
		}
		if ev.Parent == 0 {
			return nil, nil
		}
		ref = workflows.EventRef{Pipeline: ref.Pipeline, Number: ev.Parent}
		var err error
		if ev, err = s.eventState(ctx, ref); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// SaveBuildMeta keeps the metadata an attempt of build b ended with.
func (s *Service) SaveBuildMeta(ctx context.Context, ref workflows.BuildRef, req SaveMetaRequest) error {
	st, err := s.metaStore()
	if err != nil {
		return err
	}
	doc, err := buildmeta.Parse(req.Meta)
	if err != nil {
		return invalid("%v", err)
	}
	raw, err := buildmeta.Encode(doc)
	if err != nil {
		return invalid("%v", err)
	}
	switch workflows.Status(req.Status) {
	case workflows.StatusSuccess, workflows.StatusFailure, workflows.StatusAborted:
	default:
		return invalid("status %q: want SUCCESS, FAILURE or ABORTED", req.Status)
	}
	return st.PutBuildMeta(ctx, store.BuildMeta{
		Build: ref.String(), Pipeline: ref.Pipeline, Job: ref.Job, PR: ref.PR, Event: ref.Event,
		Attempt: req.Attempt, Status: req.Status, Meta: raw,
	})
}

// JobMeta returns the metadata of the last successful build of a
// pipeline's job (outside pull requests).
func (s *Service) JobMeta(ctx context.Context, pipeline, job string) (JobMetaResponse, error) {
	st, err := s.metaStore()
	if err != nil {
		return JobMetaResponse{}, err
	}
	if err := workflows.ValidatePipelineName(pipeline); err != nil {
		return JobMetaResponse{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !reJob.MatchString(job) {
		return JobMetaResponse{}, invalid("job %q: not a job name", job)
	}
	m, ok, err := st.LastSuccessfulMeta(ctx, pipeline, job)
	if err != nil {
		return JobMetaResponse{}, err
	}
	if !ok {
		return JobMetaResponse{}, fmt.Errorf("%w: job %s of pipeline %s has no successful build with metadata", ErrNotFound, job, pipeline)
	}
	return JobMetaResponse{Pipeline: pipeline, Job: job, Build: m.Build, Meta: m.Meta}, nil
}

// ---- handlers ----

func (h *handler) getBuildMeta(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The executor that runs an attempt asks with the attempt's number
	// and credential (Client.StartBuildMeta).
	attempt := 0
	if v := r.URL.Query().Get("attempt"); v != "" {
		if attempt, err = strconv.Atoi(v); err != nil || attempt < 1 {
			h.fail(w, r, invalid("attempt %q: want the attempt's number (?attempt=N)", v))
			return
		}
	}
	m, rec, err := h.svc.buildMeta(r.Context(), ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if credential := r.Header.Get(attemptCredentialHeader); attempt > 0 && credential != "" && rec != nil {
		h.rememberAttempt(*rec, ref, attempt, credential)
	}
	writeJSON(w, http.StatusOK, m)
}

// putBuildMeta takes an attempt's metadata from the executor that runs it:
// the attempt's credential is required, and the attempt must be the
// build's latest.
func (h *handler) putBuildMeta(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req SaveMetaRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.attemptWriteAllowed(r, ref, req.Attempt, "metadata writes", true); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.svc.SaveBuildMeta(r.Context(), ref, req); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// attemptWriteAllowed checks that the request presents the credential of
// attempt of build ref, and that it is the build's latest attempt. cached:
// a check of the same attempt and credential that passed within
// attemptCacheTTL (a log write's, the start metadata's), or one under way,
// is enough — for writes a later attempt's own write supersedes (the
// metadata store keeps the highest attempt's).
func (h *handler) attemptWriteAllowed(r *http.Request, ref workflows.BuildRef, attempt int, what string, cached bool) error {
	credential := r.Header.Get(attemptCredentialHeader)
	ck := attemptCacheKey{log: activities.LogKey(ref.String(), attempt), hash: activities.CredentialHash(credential)}
	now := time.Now()
	if cached && credential != "" && h.attempts.allowed(ck, now) {
		return nil
	}
	var b Build
	var err error
	if cached {
		b, err = h.attemptRecord(r.Context(), ref, ck)
	} else {
		b, err = h.svc.buildRecord(r.Context(), ref)
	}
	if err != nil {
		return err
	}
	last, ok := lastAttempt(b)
	if !ok || last.Number != attempt {
		return fmt.Errorf("%w: build %s is not running attempt %d: its %s are refused", ErrConflict, ref, attempt, what)
	}
	if last.CredentialHash == "" {
		return fmt.Errorf("%w: build %s attempt %d was claimed without a credential (an older executor): %s are refused",
			queue.ErrForbidden, ref, attempt, what)
	}
	if err := h.checkCredential(r.Context(), ref, last, credential, what); err != nil {
		return err
	}
	h.attempts.remember(ck, now)
	return nil
}

func (h *handler) getJobMeta(w http.ResponseWriter, r *http.Request) {
	if c, ok := callerBuild(r.Context()); ok && c.Fork {
		h.fail(w, r, fmt.Errorf("%w: build %s runs a pull request from a fork: it may not read other jobs' metadata", queue.ErrForbidden, c.ID))
		return
	}
	m, err := h.svc.JobMeta(r.Context(), r.PathValue("name"), r.PathValue("job"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}
