package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// PrivilegeManagePipelines lets its holder act as an admin of every
// pipeline (update, delete, start events, cancel, restart, re-run,
// schedules, secrets).
const PrivilegeManagePipelines = "manage-pipelines"

// Policy is who may use a route. Every /api/v1 route declares one in the
// route table (routes), and the handler checks it in one place (authorize)
// before the route runs; handlers do not check access themselves, except
// where the service checks a queue's use rights for the identity.
type Policy struct {
	// Kind is PolicyAuthenticated, PolicyPrivilege, PolicyPipelineAdmin
	// or PolicyPerson.
	Kind string `json:"kind"`
	// Privilege is the global privilege PolicyPrivilege needs, or one that
	// also passes PolicyPipelineAdmin (manage-secrets for secret routes).
	Privilege string `json:"privilege,omitempty"`
	// pipeline finds the pipeline a PolicyPipelineAdmin route acts on.
	pipeline func(*http.Request) (string, error)
}

// Policy kinds.
const (
	// PolicyAuthenticated: any valid token (reads; creating a pipeline,
	// whose creator becomes its owner; executors shipping logs, which also
	// present their attempt's credential).
	PolicyAuthenticated = "authenticated"
	// PolicyPrivilege: a token holding Privilege.
	PolicyPrivilege = "privilege"
	// PolicyPipelineAdmin: the pipeline's owner, one of its admins (a user
	// or role:<name>), a holder of manage-pipelines (or of Privilege when
	// set), or the system identity.
	PolicyPipelineAdmin = "pipeline-admin"
)

var (
	authenticated = Policy{Kind: PolicyAuthenticated}
	// pipelineByName acts on /pipelines/{name}.
	pipelineByName = func(r *http.Request) (string, error) { return r.PathValue("name"), nil }
	// pipelineOfEvent acts on /events/{pipeline}/{n}.
	pipelineOfEvent = func(r *http.Request) (string, error) { return r.PathValue("pipeline"), nil }
	// pipelineOfBuild acts on /builds/{id}.
	pipelineOfBuild = func(r *http.Request) (string, error) {
		ref, err := workflows.ParseBuildRef(r.PathValue("id"))
		if err != nil {
			return "", err
		}
		return ref.Pipeline, nil
	}
)

func privileged(p string) Policy { return Policy{Kind: PolicyPrivilege, Privilege: p} }

func pipelineAdmin(of func(*http.Request) (string, error)) Policy {
	return Policy{Kind: PolicyPipelineAdmin, pipeline: of}
}

func pipelineAdminOr(privilege string, of func(*http.Request) (string, error)) Policy {
	return Policy{Kind: PolicyPipelineAdmin, Privilege: privilege, pipeline: of}
}

// Route is one /api/v1 route or page action and who may use it
// (docs/security.md lists them; the e2e authorization matrix tests each).
type Route struct {
	Pattern string `json:"route"`
	Policy  Policy `json:"policy"`
	// Builds admits requests from inside a running build (its credential,
	// no token; see BuildHeader), which every other route refuses.
	Builds bool `json:"builds,omitempty"`
	// Runs is, for a page action (POST /ui/...), the /api/v1 route it runs:
	// its policy is that route's, checked by the same code.
	Runs    string `json:"runs,omitempty"`
	handler http.Handler
}

// routes is the table of every /api/v1 route with its policy.
func (h *handler) routes() []Route {
	rt := func(pattern string, p Policy, f http.HandlerFunc) Route {
		return Route{Pattern: pattern, Policy: p, handler: h.audited(pattern, f)}
	}
	out := []Route{
		rt("GET /api/v1/pipelines", authenticated, h.listPipelines),
		rt("POST /api/v1/pipelines", authenticated, h.createPipeline),
		rt("GET /api/v1/pipelines/{name}", authenticated, h.getPipeline),
		rt("PATCH /api/v1/pipelines/{name}", pipelineAdmin(pipelineByName), h.updatePipeline),
		rt("DELETE /api/v1/pipelines/{name}", pipelineAdmin(pipelineByName), h.deletePipeline),
		rt("GET /api/v1/pipelines/{name}/events", authenticated, h.listEvents),
		rt("GET /api/v1/pipelines/{name}/badge.svg", publicPipeline, h.badge),
		rt("POST /api/v1/pipelines/{name}/events", pipelineAdmin(pipelineByName), h.startEvent),
		rt("GET /api/v1/pipelines/{name}/admissions/{id}", authenticated, h.getAdmission),
		rt("POST /api/v1/pipelines/{name}/jobs/{job}/schedule/{action}", pipelineAdmin(pipelineByName), h.schedule),
		rt("GET /api/v1/pipelines/{name}/jobs/{job}/schedule", authenticated, h.getSchedule),

		rt("GET /api/v1/events/{pipeline}/{n}", authenticated, h.getEvent),
		rt("POST /api/v1/events/{pipeline}/{n}/cancel", pipelineAdmin(pipelineOfEvent), h.cancelEvent),
		rt("POST /api/v1/events/{pipeline}/{n}/restart", pipelineAdmin(pipelineOfEvent), h.restartEvent),
		rt("POST /api/v1/events/{pipeline}/{n}/rerun", pipelineAdmin(pipelineOfEvent), h.rerunEvent),
		rt("POST /api/v1/events/{pipeline}/{n}/approve", pipelineAdmin(pipelineOfEvent), h.approveEvent),

		rt("GET /api/v1/builds", authenticated, h.listBuilds),
		rt("GET /api/v1/builds/{id}", authenticated, h.getBuild),
		rt("POST /api/v1/builds/{id}/cancel", pipelineAdmin(pipelineOfBuild), h.cancelBuild),

		rt("GET /api/v1/queues", authenticated, h.listQueues),
		rt("POST /api/v1/queues", privileged(queue.PrivilegeDefineQueues), h.defineQueue(true)),
		rt("PUT /api/v1/queues/{name}", privileged(queue.PrivilegeDefineQueues), h.defineQueue(false)),
		rt("DELETE /api/v1/queues/{name}", privileged(queue.PrivilegeDefineQueues), h.deleteQueue),
		rt("GET /api/v1/queues/{name}", authenticated, h.queueStatus),
		rt("GET /api/v1/queues/{name}/status", authenticated, h.queueStatus),

		rt("GET /api/v1/executors", authenticated, h.listExecutors),
		rt("POST /api/v1/executors/{name}/{action}", privileged(workflows.PrivilegeManageExecutors), h.executorAction),
	}
	out = append(out, h.auditRoutes()...)
	out = append(out, h.personalTokenRoutes()...)
	if h.d.Secrets != nil {
		out = append(out,
			rt("GET /api/v1/pipelines/{name}/secrets", pipelineAdminOr(PrivilegeManageSecrets, pipelineByName), h.listSecrets),
			rt("PUT /api/v1/pipelines/{name}/secrets/{secret}", pipelineAdminOr(PrivilegeManageSecrets, pipelineByName), h.setSecret),
			rt("DELETE /api/v1/pipelines/{name}/secrets/{secret}", pipelineAdminOr(PrivilegeManageSecrets, pipelineByName), h.deleteSecret),
			rt("POST /api/v1/secrets/resolve", privileged(PrivilegeReadSecrets), h.resolveSecrets),
			rt("POST /api/v1/secrets/scm-token", privileged(PrivilegeReadSCMTokens), h.scmToken),
		)
	}
	if h.d.Service != nil && h.d.Service.Meta != nil || h.d.Meta {
		out = append(out,
			rt("GET /api/v1/builds/{id}/meta", authenticated, h.getBuildMeta),
			// The executor running the build's latest attempt, with its
			// credential (attemptWriteAllowed).
			rt("PUT /api/v1/builds/{id}/meta", authenticated, h.putBuildMeta),
			Route{Pattern: "GET /api/v1/pipelines/{name}/jobs/{job}/meta", Policy: authenticated, Builds: true, handler: http.HandlerFunc(h.getJobMeta)},
		)
	}
	if h.d.Blobs != nil || h.d.Artifacts {
		out = append(out,
			Route{Pattern: "GET /api/v1/builds/{id}/artifacts", Policy: authenticated, Builds: true, handler: http.HandlerFunc(h.listArtifacts)},
			Route{Pattern: "GET /api/v1/builds/{id}/artifacts/{path...}", Policy: authenticated, Builds: true, handler: http.HandlerFunc(h.getArtifact)},
			Route{Pattern: "GET /api/v1/events/{pipeline}/{n}/jobs/{job}/artifacts/{path...}", Policy: authenticated, Builds: true, handler: http.HandlerFunc(h.eventArtifact)},
			// The executor running the build's latest attempt, with its
			// credential (attemptWriteAllowed).
			rt("PUT /api/v1/builds/{id}/artifacts/{path...}", authenticated, h.putArtifact),
		)
	}
	if h.d.Logs != nil {
		// Reading a log needs a valid token; writing one (executors
		// shipping an attempt's logs) also the attempt's credential
		// (logWrites).
		logs := h.logsHandler()
		out = append(out,
			Route{Pattern: "/api/v1/builds/{id}/logs", Policy: authenticated, handler: logs},
			Route{Pattern: "/api/v1/builds/{id}/logs/", Policy: authenticated, handler: h.logWrites(logs)},
		)
	}
	return out
}

// Routes lists every /api/v1 route the handler serves with d (secret and
// log routes only when d has a store), then every page action, with its
// policy.
func Routes(d Deps) []Route {
	h := &handler{d: d}
	rs := h.routes()
	rs = append(rs, h.webActionRoutes(rs)...)
	rs = append(rs, h.webLogRoutes()...)
	rs = append(rs, personPageRoutes()...)
	for i := range rs {
		rs[i].handler = nil
	}
	return rs
}

// authorize wraps a route's handler with its policy. A request from inside
// a build (fromBuild) passes only routes that admit builds.
func (h *handler) authorize(p Policy, builds bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fromBuild(r) {
			c, ok := callerBuild(r.Context())
			if !ok {
				var err error
				if c, err = h.resolveBuildCaller(r); err != nil {
					h.fail(w, r, err)
					return
				}
				r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
			}
			if !builds {
				h.fail(w, r, fmt.Errorf("%w: build %s's credential does not reach this route (only metadata and artifact reads)", queue.ErrForbidden, c.ID))
				return
			}
			if err := h.allowed(r, buildIdentity(c), p); err != nil {
				h.fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		id, err := h.identity(r)
		if err != nil {
			// A public pipeline's badge needs no token; any other answer
			// (no such pipeline, not public) is the token's error.
			if p.Kind == PolicyPublicPipeline && h.publicAllowed(r, p) {
				next.ServeHTTP(w, r)
				return
			}
			h.fail(w, r, err)
			return
		}
		if err := h.allowed(r, id, p); err != nil {
			h.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowed checks id against the policy.
func (h *handler) allowed(r *http.Request, id queue.Identity, p Policy) error {
	switch p.Kind {
	case PolicyAuthenticated, PolicyPublicPipeline:
		return nil
	case PolicyPrivilege:
		if p.Privilege == queue.PrivilegeDefineQueues {
			return queue.CanDefine(id) //nolint:wrapcheck // the queue package's own words
		}
		if id.Has(p.Privilege) {
			return nil
		}
		if id.User == "" {
			return fmt.Errorf("%w: anonymous user lacks the %s privilege: log in first", queue.ErrForbidden, p.Privilege)
		}
		return fmt.Errorf("%w: user %q lacks the %s privilege", queue.ErrForbidden, id.User, p.Privilege)
	case PolicyPerson:
		return allowedPerson(r, id)
	case PolicyPipelineAdmin:
		if id.Has(PrivilegeManagePipelines) || (p.Privilege != "" && id.Has(p.Privilege)) {
			return nil
		}
		name, err := p.pipeline(r)
		if err != nil {
			if errors.Is(err, queue.ErrForbidden) {
				return err // the route's own refusal (audit.go: the whole trail)
			}
			return invalid("%v", err)
		}
		lookup := h.svc.GetPipeline
		if h.d.PipelineOf != nil {
			lookup = h.d.PipelineOf
		}
		pl, err := lookup(r.Context(), name)
		if err != nil {
			return err
		}
		if PipelineAdmin(pl, id) {
			return nil
		}
		alt := PrivilegeManagePipelines
		if p.Privilege != "" {
			alt += " or " + p.Privilege
		}
		return fmt.Errorf("%w: user %q is not an admin of pipeline %s (its owner %s, its admins, or the %s privilege)",
			queue.ErrForbidden, id.User, name, orDash(pl.Owner), alt)
	}
	return fmt.Errorf("%w: route has no policy", queue.ErrForbidden)
}

// PipelineAdmin reports whether id administers p: its owner, one of its
// admins (a user name, or role:<name> for a role the user has), or a holder
// of manage-pipelines.
func PipelineAdmin(p Pipeline, id queue.Identity) bool {
	if id.Has(PrivilegeManagePipelines) || (id.User != "" && id.User == p.Owner) {
		return true
	}
	for _, a := range p.Admins {
		if role, ok := strings.CutPrefix(a, "role:"); ok {
			if slices.Contains(id.Roles, role) {
				return true
			}
		} else if id.User != "" && a == id.User {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// logsHandler serves the build log store.
func (h *handler) logsHandler() http.Handler { return logstore.NewHTTPHandler(h.d.Logs) }
