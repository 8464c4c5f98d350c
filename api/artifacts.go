package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Build artifacts (Screwdriver's SD_ARTIFACTS_DIR). The executor uploads
// the files a build left in its artifacts directory when the build ends
// (PUT /api/v1/builds/{id}/artifacts/{path}, with the attempt's
// credential); they live in the blob store under
// artifacts/<build ID>/<path>, and go when SLUICE_LOG_RETENTION passes, as
// logs do. Readers of the pipeline list and download them; a running
// build reads the artifacts of its own event's builds (its restart chain
// included) with its steps' credential.

// Artifact is one file a build uploaded.
type Artifact struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time,omitzero"`
}

// ArtifactList is the answer of GET /api/v1/builds/{id}/artifacts.
type ArtifactList struct {
	Build     string     `json:"build"`
	Artifacts []Artifact `json:"artifacts"`
	Total     int64      `json:"total"`
}

// ErrNoBlobStore is returned when the API has no blob store.
var ErrNoBlobStore = errors.New("artifacts need the blob store (SLUICE_BLOB_URL), which this API has not opened")

// maxArtifactPath bounds an artifact's path.
const maxArtifactPath = 1024

// artifactPrefix is the blob key prefix of a build's artifacts.
func artifactPrefix(build string) string { return "artifacts/" + build + "/" }

// CheckArtifactPath checks an artifact's path: a clean relative
// '/'-separated path.
func CheckArtifactPath(p string) error {
	if len(p) > maxArtifactPath {
		return invalid("artifact path: longer than %d bytes", maxArtifactPath)
	}
	if err := blobstore.CheckKey(p); err != nil || path.Clean(p) != p {
		return invalid("artifact path %q: want a relative path inside the artifacts directory (no '..', no leading '/')", p)
	}
	return nil
}

// ListArtifacts lists a build's artifacts.
func ListArtifacts(ctx context.Context, blobs *blobstore.Store, build string) (ArtifactList, error) {
	if blobs == nil {
		return ArtifactList{}, ErrNoBlobStore
	}
	prefix := artifactPrefix(build)
	infos, err := blobs.List(ctx, prefix)
	if err != nil {
		return ArtifactList{}, fmt.Errorf("list the artifacts of build %s: %w", build, err)
	}
	out := ArtifactList{Build: build, Artifacts: []Artifact{}}
	for _, in := range infos {
		out.Artifacts = append(out.Artifacts, Artifact{Path: strings.TrimPrefix(in.Key, prefix), Size: in.Size, ModTime: in.ModTime})
		out.Total += in.Size
	}
	return out, nil
}

// PruneArtifacts deletes the artifacts stored before cutoff and returns
// how many files went.
func PruneArtifacts(ctx context.Context, blobs *blobstore.Store, cutoff time.Time) (int, error) {
	var old []string
	err := blobs.Walk(ctx, "artifacts/", func(in blobstore.Info) error {
		if in.ModTime.Before(cutoff) {
			old = append(old, in.Key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune artifacts: %w", err)
	}
	n := 0
	for _, k := range old {
		if err := blobs.Delete(ctx, k); err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			return n, fmt.Errorf("prune artifacts: %w", err)
		}
		n++
	}
	return n, nil
}

// eventChain reports whether event n of the pipeline is ev or one of the
// events along ev's restart chain.
func (s *Service) eventChain(ctx context.Context, ev workflows.EventRef, n int) (bool, error) {
	for range maxUpstreamHops {
		if ev.Number == n {
			return true, nil
		}
		st, err := s.eventState(ctx, ev)
		if err != nil {
			return false, err
		}
		if st.Parent == 0 {
			return false, nil
		}
		ev.Number = st.Parent
	}
	return false, nil
}

// artifactReadAllowed narrows a build caller to the artifacts of its own
// event's builds (and those of its restart chain).
func (h *handler) artifactReadAllowed(r *http.Request, target workflows.BuildRef) error {
	c, ok := callerBuild(r.Context())
	if !ok {
		return nil
	}
	in := target.Pipeline == c.Ref.Pipeline
	if in {
		var err error
		if in, err = h.svc.eventChain(r.Context(), c.Ref.EventRef(), target.Event); err != nil {
			return err
		}
	}
	if !in {
		return fmt.Errorf("%w: build %s may read only the artifacts of its own event's builds, not of %s", queue.ErrForbidden, c.ID, target)
	}
	return nil
}

func (h *handler) listArtifacts(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.artifactReadAllowed(r, ref); err != nil {
		h.fail(w, r, err)
		return
	}
	list, err := ListArtifacts(r.Context(), h.d.Blobs, ref.String())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handler) getArtifact(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.artifactReadAllowed(r, ref); err != nil {
		h.fail(w, r, err)
		return
	}
	h.serveArtifact(w, r, ref.String(), r.PathValue("path"))
}

// serveArtifact streams one artifact as a download.
func (h *handler) serveArtifact(w http.ResponseWriter, r *http.Request, build, p string) {
	if h.d.Blobs == nil {
		h.fail(w, r, ErrNoBlobStore)
		return
	}
	if err := CheckArtifactPath(p); err != nil {
		h.fail(w, r, err)
		return
	}
	rc, info, err := h.d.Blobs.Get(r.Context(), artifactPrefix(build)+p)
	if errors.Is(err, blobstore.ErrNotFound) {
		h.fail(w, r, fmt.Errorf("%w: build %s has no artifact %s", ErrNotFound, build, p))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer func() { _ = rc.Close() }()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, err := io.Copy(w, rc); err != nil {
		h.log.WarnContext(r.Context(), "artifact_download_failed", "build", build, "path", p, "error", err)
	}
}

// eventArtifact serves GET /api/v1/events/{pipeline}/{n}/jobs/{job}/artifacts/{path...}:
// an artifact of the event's build of job (found along its restart chain
// when the event inherited the job; a matrix job's first build).
func (h *handler) eventArtifact(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		h.fail(w, r, invalid("event number %q: want a positive number", r.PathValue("n")))
		return
	}
	ev := workflows.EventRef{Pipeline: r.PathValue("pipeline"), Number: n}
	if c, ok := callerBuild(r.Context()); ok && c.Ref.EventRef() != ev {
		h.fail(w, r, fmt.Errorf("%w: build %s may read only the artifacts of its own event (%s), not of %s", queue.ErrForbidden, c.ID, c.Ref.EventRef(), ev))
		return
	}
	job := r.PathValue("job")
	st, err := h.svc.eventState(r.Context(), ev)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ids, err := h.svc.upstreamBuilds(r.Context(), ev, st, job)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(ids) == 0 {
		h.fail(w, r, fmt.Errorf("%w: event %s has no build of job %s (nor has its restart chain)", ErrNotFound, ev, job))
		return
	}
	h.serveArtifact(w, r, ids[0], r.PathValue("path"))
}

// putArtifact takes one artifact from the executor running the build's
// latest attempt (?attempt=N, its credential in the header).
func (h *handler) putArtifact(w http.ResponseWriter, r *http.Request) {
	ref, err := buildRef(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.d.Blobs == nil {
		h.fail(w, r, ErrNoBlobStore)
		return
	}
	p := r.PathValue("path")
	if err := CheckArtifactPath(p); err != nil {
		h.fail(w, r, err)
		return
	}
	attempt, err := strconv.Atoi(r.URL.Query().Get("attempt"))
	if err != nil || attempt < 1 {
		h.fail(w, r, invalid("attempt %q: want the attempt's number (?attempt=N)", r.URL.Query().Get("attempt")))
		return
	}
	if err := h.attemptWriteAllowed(r, ref, attempt, "artifact uploads", false); err != nil {
		h.fail(w, r, err)
		return
	}
	n, err := h.d.Blobs.Put(r.Context(), artifactPrefix(ref.String())+p, r.Body)
	if err != nil {
		h.fail(w, r, fmt.Errorf("store artifact %s of build %s: %w", p, ref, err))
		return
	}
	writeJSON(w, http.StatusOK, Artifact{Path: p, Size: n})
}
