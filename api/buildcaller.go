package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Requests from inside a build. A build's steps hold no API token: the
// `meta` and `artifact` commands present the build's ID (BuildHeader) and
// the steps' credential of its running attempt (in header
// logstore.AttemptCredentialHeader): a second random credential the
// executor generates next to the attempt's own, gives the steps
// (SD_BUILD_CREDENTIAL) and claims with only its hash
// (Attempt.StepCredentialHash). It never stands for the executor: no
// secret, log or metadata write takes it. The API admits
// such a request only while that attempt is the build's latest and the
// build runs, and only on the routes that say so (Route.Builds); the
// handlers then narrow what the build may read (its own event's
// artifacts; no other job's metadata for a pull request from a fork).

// BuildHeader names the build a request from inside a build acts for.
const BuildHeader = "X-Sluice-Build"

const attemptCredentialHeader = logstore.AttemptCredentialHeader

// buildCaller is the build a request from inside a build acts for.
type buildCaller struct {
	ID   string
	Ref  workflows.BuildRef
	Fork bool
}

type callerKey struct{}

// callerBuild returns the build a request acts for (ok false: a person or
// a worker with a token).
func callerBuild(ctx context.Context) (buildCaller, bool) {
	c, ok := ctx.Value(callerKey{}).(buildCaller)
	return c, ok
}

// fromBuild reports whether r presents a build's credential instead of a
// token.
func fromBuild(r *http.Request) bool {
	return r.Header.Get(BuildHeader) != "" && r.Header.Get("Authorization") == ""
}

// buildIdentity is how a build's request shows in identities: no roles,
// no privileges.
func buildIdentity(c buildCaller) queue.Identity { return queue.Identity{User: "build:" + c.ID} }

// resolveBuildCaller checks a request's build credential.
func (h *handler) resolveBuildCaller(r *http.Request) (buildCaller, error) {
	id, credential := r.Header.Get(BuildHeader), r.Header.Get(attemptCredentialHeader)
	if credential == "" {
		return buildCaller{}, fmt.Errorf("%w: header %s needs the build's credential in header %s (SD_BUILD_CREDENTIAL)", ErrUnauthorized, BuildHeader, attemptCredentialHeader)
	}
	ref, err := workflows.ParseBuildRef(id)
	if err != nil {
		return buildCaller{}, fmt.Errorf("%w: header %s: %w", ErrUnauthorized, BuildHeader, err)
	}
	b, err := h.svc.GetBuild(r.Context(), ref)
	if err != nil {
		return buildCaller{}, fmt.Errorf("%w: build %s: %w", ErrUnauthorized, ref, err)
	}
	n := len(b.AttemptList)
	hash := ""
	if n > 0 && n-1 < len(b.stepCredentials) {
		hash = b.stepCredentials[n-1]
	}
	if b.Status != workflows.StatusRunning || hash == "" || !credentialMatches(hash, credential) {
		return buildCaller{}, fmt.Errorf("%w: the credential is not that of build %s's running attempt", ErrUnauthorized, ref)
	}
	return buildCaller{ID: ref.String(), Ref: ref, Fork: b.Fork}, nil
}
