package api

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/sluice-ci/sluice/workflows"
)

// PolicyPublicPipeline lets anyone in, without a token, when the pipeline is
// marked public (Pipeline.Public); otherwise any valid token, like the
// pipeline's other reads. Only status badges use it.
const PolicyPublicPipeline = "public-pipeline"

var publicPipeline = Policy{Kind: PolicyPublicPipeline, pipeline: pipelineByName}

// isBadgePath reports whether r asks for a pipeline's badge
// (GET /api/v1/pipelines/{name}/badge.svg): its route's policy
// (PolicyPublicPipeline, checked by authorize like every route's) decides
// whether it needs a token, so the blanket token check lets it through.
func isBadgePath(r *http.Request) bool {
	p := r.URL.Path
	return r.Method == http.MethodGet && strings.HasPrefix(p, "/api/v1/pipelines/") && strings.HasSuffix(p, "/badge.svg") &&
		strings.Count(p, "/") == 5
}

// publicAllowed reports whether a request without a valid token may use
// a PolicyPublicPipeline route: its pipeline exists and is public.
func (h *handler) publicAllowed(r *http.Request, p Policy) bool {
	name, err := p.pipeline(r)
	if err != nil {
		return false
	}
	pl, err := h.svc.GetPipeline(r.Context(), name)
	return err == nil && pl.Public
}

// badgeColors maps a status to the badge's colour (shields.io's palette).
var badgeColors = map[workflows.Status]string{
	workflows.StatusSuccess:   "#4c1",
	workflows.StatusFailure:   "#e05d44",
	workflows.StatusAborted:   "#9f9f9f",
	workflows.StatusCollapsed: "#9f9f9f",
	workflows.StatusSkipped:   "#9f9f9f",
	workflows.StatusRunning:   "#dfb317",
	workflows.StatusQueued:    "#007ec6",
	workflows.StatusBlocked:   "#007ec6",
	workflows.StatusFrozen:    "#007ec6",
	workflows.StatusCreated:   "#007ec6",
}

// badgeStatus is the status of the pipeline's latest event on its
// branch (pull requests left out), or with job that of the job's latest
// build there; "unknown" when there is none.
func (s *Service) badgeStatus(ctx context.Context, pipeline, job string) (string, error) {
	if job != "" {
		if !reJob.MatchString(job) {
			return "", invalid("job %q: not a job name", job)
		}
		bs, err := s.ListBuilds(ctx, BuildFilter{Pipeline: pipeline, Job: job, Limit: 20})
		if err != nil {
			return "", err
		}
		for _, b := range bs {
			if b.PR == 0 {
				return string(b.Status), nil
			}
		}
		return "unknown", nil
	}
	evs, err := s.ListEvents(ctx, pipeline, 20)
	if err != nil {
		return "", err
	}
	for _, ev := range evs {
		if ev.Trigger.PR == 0 {
			return string(ev.Status), nil
		}
	}
	return "unknown", nil
}

// badge serves GET /api/v1/pipelines/{name}/badge.svg[?job=J]: an SVG
// status badge of the pipeline's latest event, or of a job's latest build.
func (h *handler) badge(w http.ResponseWriter, r *http.Request) {
	name, job := r.PathValue("name"), r.URL.Query().Get("job")
	if err := workflows.ValidatePipelineName(name); err != nil {
		h.fail(w, r, fmt.Errorf("%w: %w", ErrInvalid, err))
		return
	}
	status, err := h.svc.badgeStatus(r.Context(), name, job)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	label := name
	if job != "" {
		label += ":" + job
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-cache, max-age=0")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(badgeSVG(label, status)))
}

// badgeSVG draws a flat two-part badge: label on grey, status on its
// colour. Text is escaped; widths follow the text's length.
func badgeSVG(label, status string) string {
	color, ok := badgeColors[workflows.Status(status)]
	if !ok {
		color = "#9f9f9f"
	}
	lw, sw := 10+7*utf8.RuneCountInString(label), 10+7*utf8.RuneCountInString(status)
	l, st := html.EscapeString(label), html.EscapeString(status)
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%[1]d" height="20" role="img" aria-label="%[3]s: %[4]s">`+
		`<title>%[3]s: %[4]s</title>`+
		`<rect width="%[2]d" height="20" fill="#555"/><rect x="%[2]d" width="%[5]d" height="20" fill="%[6]s"/>`+
		`<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">`+
		`<text x="%[7]d" y="14">%[3]s</text><text x="%[8]d" y="14">%[4]s</text></g></svg>`,
		lw+sw, lw, l, st, sw, color, lw/2, lw+sw/2)
}
