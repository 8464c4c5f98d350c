package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Attempt credentials (activities.NewAttemptCredential): the executor that
// claims a build attempt holds a random credential whose SHA-256 the build
// records on the attempt. The API gives the build's secrets, and takes
// writes to the attempt's logs, only from whoever presents it (header
// logstore.AttemptCredentialHeader): a worker token alone, shared by every
// executor, is not enough.
//
// An attempt claimed without a hash (by an executor older than attempt
// credentials, e.g. during a rolling upgrade) keeps the old rule until the
// build ends: the token's privilege is enough. The API logs
// attempt_without_credential each time it applies that rule.

// attemptCacheTTL is how long a successful log write check is reused, so
// that a step's log chunks do not each query the build's workflow. A
// superseded attempt may go on writing its own log for at most this long.
const attemptCacheTTL = 5 * time.Second

// attemptCacheMax bounds the cache; expired entries go first when full.
const attemptCacheMax = 4096

// attemptCache remembers log write checks that passed, by log key and
// credential hash.
type attemptCache struct {
	ok ttlMap[attemptCacheKey, struct{}]
}

type attemptCacheKey struct {
	log  string // the log key: <build>/<attempt>
	hash string // the presented credential's hash ("": none, legacy attempt)
}

func (c *attemptCache) allowed(k attemptCacheKey, now time.Time) bool {
	_, ok := c.ok.get(k, now)
	return ok
}

func (c *attemptCache) remember(k attemptCacheKey, now time.Time) {
	c.ok.put(k, struct{}{}, now, attemptCacheTTL, attemptCacheMax)
}

// attemptRecord reads build ref's record for a check of the attempt and
// credential of k that the cache does not vouch for. Checks of the same
// attempt and credential that arrive while one reads share its read: at
// a build's end its executor's last log writes and its metadata save
// arrive together, and each read is a query of the workflow that runs
// the build. Only requests that present the same credential join, and its
// executor sends them once its claim was accepted, so a shared read never
// began before the attempt was recorded.
func (h *handler) attemptRecord(ctx context.Context, ref workflows.BuildRef, k attemptCacheKey) (Build, error) {
	b, _, err := h.attemptReads.Do(ctx, k, func(ctx context.Context) (Build, error) { return h.svc.buildRecord(ctx, ref) })
	return b, err
}

// credentialMatches compares the presented credential's hash with the
// recorded one in constant time.
func credentialMatches(recorded, credential string) bool {
	got := activities.CredentialHash(credential)
	return subtle.ConstantTimeCompare([]byte(got), []byte(recorded)) == 1
}

// lastAttempt is the build's latest attempt record (ok false: none yet).
func lastAttempt(b Build) (workflows.Attempt, bool) {
	if n := len(b.AttemptList); n > 0 {
		at := b.AttemptList[n-1]
		at.CredentialHash = b.credentialOf(n - 1)
		return at, true
	}
	return workflows.Attempt{}, false
}

// credentialOf is the credential hash of AttemptList[i] ("": none).
func (b Build) credentialOf(i int) string {
	if i < len(b.credentials) {
		return b.credentials[i]
	}
	return ""
}

// checkCredential checks that credential is the one recorded for attempt
// at of build ref (what is refused: "secrets" or "log writes").
func (h *handler) checkCredential(ctx context.Context, ref workflows.BuildRef, at workflows.Attempt, credential, what string) error {
	switch {
	case at.CredentialHash == "":
		h.log.WarnContext(ctx, "attempt_without_credential", "build", ref.String(), "attempt", at.Number, "executor", at.Executor,
			"why", "the executor that claimed it predates attempt credentials: its token's privilege is enough (upgrade every executor)")
		return nil
	case credential == "":
		return fmt.Errorf("%w: build %s attempt %d: %s need the attempt's credential (header %s), which only the executor running the attempt holds",
			queue.ErrForbidden, ref, at.Number, what, logstore.AttemptCredentialHeader)
	case !credentialMatches(at.CredentialHash, credential):
		return fmt.Errorf("%w: build %s attempt %d: the attempt credential presented is not the one of the executor that claimed it (%s); %s refused",
			queue.ErrForbidden, ref, at.Number, orDash(at.Executor), what)
	}
	return nil
}

// parseLogKey splits a log key (activities.LogKey) into its build and
// attempt.
func parseLogKey(key string) (workflows.BuildRef, int, error) {
	i := strings.LastIndex(key, "/")
	bad := invalid("log %q: not a build attempt's log (a build ID, a slash and the attempt number, e.g. myapp/test/12/1)", key)
	if i <= 0 {
		return workflows.BuildRef{}, 0, bad
	}
	n, err := strconv.Atoi(key[i+1:])
	if err != nil || n < 1 {
		return workflows.BuildRef{}, 0, bad
	}
	ref, err := workflows.ParseBuildRef(key[:i])
	if err != nil || ref.String() != key[:i] {
		return workflows.BuildRef{}, 0, bad
	}
	return ref, n, nil
}

// logWrites guards the writes (appends and finishes) of the log routes:
// only the holder of the attempt's credential may write an attempt's logs,
// while the attempt is the build's latest, running or (the executor
// delivers its logs' last bytes after the result) ended with the build
// until each log is closed. A closed log takes nothing (409, the store's
// answer); a superseded attempt's logs take no writes (409). Reads pass.
func (h *handler) logWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		key := r.PathValue("id")
		ref, attempt, err := parseLogKey(key)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		credential := r.Header.Get(logstore.AttemptCredentialHeader)
		ck := attemptCacheKey{log: key}
		if credential != "" {
			ck.hash = activities.CredentialHash(credential)
		}
		now := time.Now()
		if h.attempts.allowed(ck, now) {
			next.ServeHTTP(w, r)
			return
		}
		b, err := h.attemptRecord(r.Context(), ref, ck)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if err := h.logWriteAllowed(r.Context(), b, ref, attempt, credential); err != nil {
			h.fail(w, r, err)
			return
		}
		h.attempts.remember(ck, now)
		next.ServeHTTP(w, r)
	})
}

// rememberAttempt takes the executor that presents attempt's credential
// while reading build b's record (its start metadata) as a log write
// check that passed: when attempt is b's latest and the credential its
// recorded one, the attempt's log and metadata writes within
// attemptCacheTTL pass without reading the record again. Anything else
// is not remembered (nor refused: the read needs no credential).
func (h *handler) rememberAttempt(b Build, ref workflows.BuildRef, attempt int, credential string) {
	last, ok := lastAttempt(b)
	if !ok || last.Number != attempt || last.CredentialHash == "" || !credentialMatches(last.CredentialHash, credential) {
		return
	}
	h.attempts.remember(attemptCacheKey{log: activities.LogKey(ref.String(), attempt), hash: activities.CredentialHash(credential)}, time.Now())
}

// logWriteAllowed applies logWrites' rule to the build's record.
func (h *handler) logWriteAllowed(ctx context.Context, b Build, ref workflows.BuildRef, attempt int, credential string) error {
	idx := -1
	for i := len(b.AttemptList) - 1; i >= 0; i-- {
		if b.AttemptList[i].Number == attempt {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("%w: build %s has no attempt %d (%s): no log to write", ErrNotFound, ref, attempt, b.Status)
	}
	at := b.AttemptList[idx]
	at.CredentialHash = b.credentialOf(idx)
	if err := h.checkCredential(ctx, ref, at, credential, "log writes"); err != nil {
		return err
	}
	if last, _ := lastAttempt(b); last.Number != attempt {
		return fmt.Errorf("%w: build %s is on attempt %d: the logs of attempt %d take no more writes", ErrConflict, ref, last.Number, attempt)
	}
	return nil
}
