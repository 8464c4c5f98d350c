package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workflows"
)

// Errors the handler maps to HTTP statuses. Each is wrapped with a message
// that names what is wrong.
var (
	ErrInvalid   = errors.New("invalid request")
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrForbidden = queue.ErrForbidden
)

// Service is sluice's operations over a Temporal client. The HTTP handler
// is a thin layer on it.
type Service struct {
	Client    client.Client
	Namespace string
	// Liveness is the executor liveness timeout (for "live" in views).
	Liveness time.Duration
	// Dispatch is stamped on pipelines created through this API.
	Dispatch workflows.Dispatch
	// BuildsInEvents is stamped on pipelines created or updated through
	// this API (SLUICE_BUILDS_IN_EVENTS): their events run their builds
	// themselves (workflows.PipelineConfig.BuildsInEvents).
	BuildsInEvents bool
	// Repos opens repositories to validate new pipelines.
	Repos  activities.RepoOpener
	Logger *slog.Logger
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// HasSecrets reports whether a pipeline has secrets (nil: no secret
	// store): repointing such a pipeline needs manage-secrets.
	HasSecrets func(pipeline string) (bool, error)
	// PipelineTokens reads a pipeline's repository credentials (its
	// secrets SLUICE_GITHUB_TOKEN, SLUICE_GITLAB_TOKEN, SLUICE_DEPLOY_KEY)
	// for the API's own reads of its repository (nil: none).
	PipelineTokens activities.PipelineTokens
	// AppTokens mints the GitHub App's installation tokens that read a
	// pipeline's repository when it has no credentials of its own: for
	// the API's reads and the executors' checkouts (nil: no App).
	AppTokens activities.AppTokens
	// LocalRepos are the path prefixes under which a pipeline may use a
	// repository on this machine (SLUICE_LOCAL_REPOS); none allows none.
	LocalRepos []string
	// Numbers keeps a deleted pipeline's next event number in sluice's
	// store, so a pipeline created again under its name never repeats an
	// ID, even after Temporal's retention purged the old histories (nil:
	// the old pipeline's memo and visibility only).
	Numbers store.EventNumbers
	// AdmitWait bounds how long an event start (API or webhook) waits for
	// the pipeline to number the event it admitted (0: DefaultAdmitWait);
	// past it the answer is pending, with the admission ID.
	AdmitWait time.Duration
	// Meta keeps build and event metadata (nil: the metadata routes are
	// off, and builds start with no metadata from sluice).
	Meta store.Meta
	// Audit keeps the audit trail (nil: none is kept; audit.go).
	Audit store.AuditTrail

	idx pipelineIndex
	// batches coalesces concurrent event starts per pipeline (batch.go).
	batches eventBatcher
	// asks coalesces questions about pending starts per pipeline
	// (admissions.go).
	asks admissionAsker
	// regRead caches the registry for event starts' warnings (waits.go).
	regRead registryRead
	// startEvents keeps events' states for their builds' start metadata
	// (meta.go).
	startEvents startEventCache
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

var (
	reJob    = regexp.MustCompile(`^[\w@:.-]{1,200}$`)
	reSHA    = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)
	reBranch = regexp.MustCompile(`^[\w./@+-]{1,250}$`)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// translate maps Temporal errors to the API's error kinds.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	case errors.As(err, &started):
		return fmt.Errorf("%w: %s already exists", ErrConflict, what)
	case errors.Is(err, queue.ErrForbidden):
		return err
	}
	var rejected *serviceerror.InvalidArgument
	if errors.As(err, &rejected) {
		return fmt.Errorf("%w: %s", ErrInvalid, rejected.Message)
	}
	// Update validators reject with an application error carrying the reason.
	msg := err.Error()
	if strings.Contains(msg, "forbidden") {
		return fmt.Errorf("%w: %s", ErrForbidden, msg)
	}
	return err
}

// updateError turns an update's rejection into an invalid-request error
// while keeping transport failures as they are.
func updateError(err error, what string) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	var app interface{ Message() string }
	if errors.As(err, &app) {
		m := app.Message()
		switch {
		case strings.Contains(m, "forbidden"):
			return fmt.Errorf("%w: %s", ErrForbidden, m)
		case strings.Contains(m, "already exists"):
			return fmt.Errorf("%w: %s", ErrConflict, m)
		case strings.Contains(m, "no such"):
			return fmt.Errorf("%w: %s", ErrNotFound, m)
		}
		return fmt.Errorf("%w: %s", ErrInvalid, m)
	}
	return err
}

func (s *Service) update(ctx context.Context, workflowID, name string, arg, out any) error {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// ---- visibility helpers -------------------------------------------------

func (s *Service) list(ctx context.Context, query string, limit int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for len(out) < limit {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Namespace, Query: query, NextPageToken: token, PageSize: int32(min(limit-len(out), 1000)), //nolint:gosec // G115: at most 1000
		})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *Service) count(ctx context.Context, query string) (int, error) {
	resp, err := s.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: s.Namespace, Query: query})
	if err != nil {
		return 0, fmt.Errorf("count workflows (%s): %w", query, err)
	}
	return int(resp.GetCount()), nil
}

// queryOpen asks workflow id's query and decodes its answer into v. It
// reports false, leaving v alone, when the workflow has closed: the server
// refuses the query then rather than have a worker replay the history, and
// the caller reads the result instead. One round trip for a running
// workflow, where a describe and then a query took two.
func (s *Service) queryOpen(ctx context.Context, id, query string, v any, args ...any) (bool, error) {
	res, err := s.Client.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, QueryType: query, Args: args, QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	if err != nil {
		return false, err
	}
	if res.QueryRejected != nil {
		return false, nil
	}
	if err := res.QueryResult.Get(v); err != nil {
		return false, fmt.Errorf("decode %s of %s: %w", query, id, err)
	}
	return true, nil
}

func saString(sa *commonpb.SearchAttributes, key string) string {
	p := sa.GetIndexedFields()[key]
	if p == nil {
		return ""
	}
	var v any
	if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case []any:
		if len(x) > 0 {
			if s, ok := x[0].(string); ok {
				return s
			}
		}
	}
	return fmt.Sprint(v)
}

func closeTime(ex *workflowpb.WorkflowExecutionInfo) time.Time {
	if ex.GetCloseTime() == nil {
		return time.Time{}
	}
	return ex.GetCloseTime().AsTime()
}

// reAdmin is a user name or role:<name>.
var reAdmin = regexp.MustCompile(`^(role:)?[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$`)

// validAdmins checks a pipeline's admin list.
func validAdmins(admins []string) error {
	if len(admins) > 100 {
		return invalid("admins: at most 100 entries, got %d", len(admins))
	}
	for i, a := range admins {
		if !reAdmin.MatchString(a) {
			return invalid("admins[%d] %q: want a user name or role:<name>", i, a)
		}
	}
	return nil
}

// checkLocalRepo refuses a repository on the API's own machine (a local git
// repository, a plain directory or a file:// URL) outside the allowed
// prefixes: otherwise any token could snapshot any readable directory of
// the host (/etc) into a pipeline.
func (s *Service) checkLocalRepo(repo string) error {
	path := ""
	switch {
	case strings.HasPrefix(repo, "file://"):
		path = strings.TrimPrefix(repo, "file://")
	case scm.Kind(repo) != scm.KindGitRemote:
		path = repo
	default:
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return invalid("repo %s: %v", repo, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for _, p := range s.LocalRepos {
		if p == "/" || abs == p || strings.HasPrefix(abs, strings.TrimSuffix(p, "/")+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: repo %s is a path on the API's machine, and SLUICE_LOCAL_REPOS does not allow it (allowed: %s); use a git URL, or have the operator allow a prefix",
		queue.ErrForbidden, repo, orNone(s.LocalRepos))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
