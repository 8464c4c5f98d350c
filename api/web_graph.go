package api

import (
	"fmt"
	"html/template"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/pipeline"
	"github.com/sluice-ci/sluice/workflows"
)

// statusColors fill the event graph's job boxes (and the status badges, in
// style.css): green succeeded, red failed, blue running, grey waiting,
// amber blocked or frozen, dark grey aborted or collapsed.
var statusColors = map[workflows.Status]string{
	workflows.StatusSuccess:   "#2da44e",
	workflows.StatusFailure:   "#cf222e",
	workflows.StatusRunning:   "#0969da",
	workflows.StatusQueued:    "#8c959f",
	workflows.StatusCreated:   "#8c959f",
	workflows.StatusBlocked:   "#bf8700",
	workflows.StatusFrozen:    "#bf8700",
	workflows.StatusAborted:   "#57606a",
	workflows.StatusCollapsed: "#57606a",
	workflows.StatusSkipped:   "#d0d7de",
}

// notInEvent colours the jobs of the spec the event did not reach.
const notInEvent = "#ffffff"

const (
	nodeW, nodeH   = 150, 44
	colGap, rowGap = 60, 18
	pad            = 12
)

// jobShown is the status a page shows for a job of an event: jobStatus,
// as the API's event shows it, in the graph and the jobs table alike.
func jobShown(st workflows.Status, reason string, builds []Build) (workflows.Status, string) {
	return jobStatus(st, reason, builds)
}

// eventGraph draws the spec's jobs as an SVG, laid out in columns by their
// depth along requires edges, each box coloured by the job's status in the
// event (a job with one build shows the build's status: QUEUED, RUNNING...).
func eventGraph(spec *pipeline.Spec, ev Event) template.HTML {
	status := map[string]workflows.Status{}
	reason := map[string]string{}
	for _, j := range ev.Jobs {
		status[j.Job], reason[j.Job] = j.Status, j.Reason
	}
	builds := map[string][]Build{}
	for _, b := range ev.Builds {
		builds[b.Job] = append(builds[b.Job], b)
	}
	for job, bs := range builds {
		status[job], reason[job] = jobShown(status[job], reason[job], bs)
	}
	// Depth: the longest chain of upstream jobs.
	depth := map[string]int{}
	parents := map[string][]string{}
	for _, j := range spec.JobOrder {
		for _, n := range spec.NextJobs(j) {
			parents[n.Job] = append(parents[n.Job], j)
		}
	}
	var depthOf func(j string, seen map[string]bool) int
	depthOf = func(j string, seen map[string]bool) int {
		if d, ok := depth[j]; ok {
			return d
		}
		if seen[j] {
			return 0 // a cycle: the parser refuses them; stay safe
		}
		seen[j] = true
		d := 0
		for _, p := range parents[j] {
			d = max(d, depthOf(p, seen)+1)
		}
		depth[j] = d
		return d
	}
	// Triggers (~commit, ~pr, a remote job ~sd@p:j) sit in a column of
	// their own, before the jobs.
	trig := graphTriggers(spec)
	cols := [][]string{}
	if len(trig.order) > 0 {
		cols = append(cols, nil)
	}
	shift := len(cols)
	for _, j := range spec.JobOrder {
		d := depthOf(j, map[string]bool{}) + shift
		for len(cols) <= d {
			cols = append(cols, nil)
		}
		cols[d] = append(cols[d], j)
	}
	pos := map[string][2]int{}
	rows := len(trig.order)
	for r, name := range trig.order {
		pos[triggerKey+name] = [2]int{pad, pad + r*(nodeH+rowGap)}
	}
	for c, jobs := range cols {
		for r, j := range jobs {
			pos[j] = [2]int{pad + c*(nodeW+colGap), pad + r*(nodeH+rowGap)}
		}
		rows = max(rows, len(jobs))
	}
	width := pad*2 + len(cols)*(nodeW+colGap) - colGap
	height := pad*2 + rows*(nodeH+rowGap) - rowGap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="job graph">`, width, height, width, height)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/></marker></defs>`)
	for _, e := range trig.edges {
		from, to := pos[triggerKey+e.from], pos[e.to]
		dash := ` stroke-dasharray="5,4"`
		if e.join {
			dash = ""
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#57606a" stroke-width="1.5"%s marker-end="url(#arrow)"/>`,
			from[0]+nodeW, from[1]+nodeH/2, to[0], to[1]+nodeH/2, dash)
	}
	for _, name := range trig.order {
		writeTrigger(&b, name, pos[triggerKey+name], triggerFired(name, ev.Trigger))
	}
	for _, j := range spec.JobOrder {
		for _, n := range spec.NextJobs(j) {
			from, to := pos[j], pos[n.Job]
			dash := ` stroke-dasharray="5,4"`
			if n.Join {
				dash = ""
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#57606a" stroke-width="1.5"%s marker-end="url(#arrow)"/>`,
				from[0]+nodeW, from[1]+nodeH/2, to[0], to[1]+nodeH/2, dash)
		}
	}
	for _, j := range spec.JobOrder {
		p := pos[j]
		st := status[j]
		fill, text, label := notInEvent, "#1f2328", "not in this event"
		if st != "" {
			fill, label = statusColors[st], string(st)
			if fill == "" {
				fill = notInEvent
			}
			if st != workflows.StatusSkipped {
				text = "#ffffff"
			}
		}
		title := j + ": " + label
		if reason[j] != "" {
			title += " — " + reason[j]
		}
		href := ""
		bs := builds[j]
		switch {
		case len(bs) == 1:
			href = "/ui/builds/" + bs[0].ID
		case len(bs) > 1:
			// A matrix job: its builds' list; each permutation is a square.
			href = "/ui/builds?event=" + url.QueryEscape(ev.ID) + "&job=" + url.QueryEscape(j)
			if ev.Trigger.PR > 0 {
				href += "&pr=" + strconv.Itoa(ev.Trigger.PR)
			}
		}
		if href != "" {
			fmt.Fprintf(&b, `<a href="%s">`, template.HTMLEscapeString(href))
		}
		fmt.Fprintf(&b, `<g class="job" data-job="%s" data-status="%s"><title>%s</title>`,
			template.HTMLEscapeString(j), template.HTMLEscapeString(string(st)), template.HTMLEscapeString(title))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="#57606a"/>`, p[0], p[1], nodeW, nodeH, fill)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s" font-size="13" font-weight="600">%s</text>`, p[0]+10, p[1]+18, text, template.HTMLEscapeString(truncateRunes(j, 20)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s" font-size="11">%s</text></g>`, p[0]+10, p[1]+34, text, template.HTMLEscapeString(strings.ToLower(label)))
		if href != "" {
			b.WriteString(`</a>`)
		}
		if len(bs) > 1 {
			writePermutations(&b, p, bs)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // G203: every value written above is escaped
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// triggerKey prefixes trigger nodes' keys in the layout (jobs never
// contain a space).
const triggerKey = "trigger "

type graphEdge struct {
	from, to string
	join     bool
}

type triggerSet struct {
	// order lists the trigger nodes (requires entries without the tilde:
	// commit, pr:main, sd@other:deploy) in first-seen order.
	order []string
	edges []graphEdge
}

// graphTriggers finds the requires entries that are not jobs of the spec:
// SCM events and other pipelines' jobs.
func graphTriggers(spec *pipeline.Spec) triggerSet {
	var t triggerSet
	seen := map[string]bool{}
	for _, j := range spec.JobOrder {
		for _, raw := range spec.Jobs[j].Requires {
			name := strings.TrimPrefix(raw, "~")
			if _, isJob := spec.Jobs[name]; isJob {
				continue
			}
			req, err := pipeline.ParseRequire(raw)
			if err != nil || (req.Kind != pipeline.RequireEvent && req.Kind != pipeline.RequireRemote) {
				continue
			}
			if !seen[name] {
				seen[name] = true
				t.order = append(t.order, name)
			}
			t.edges = append(t.edges, graphEdge{from: name, to: j, join: !req.OR})
		}
	}
	return t
}

// triggerFired reports whether the trigger node name started the event
// (its kind, or the remote job that started it).
func triggerFired(name string, t workflows.Trigger) bool {
	if strings.HasPrefix(name, "sd@") {
		return t.Remote != "" && strings.TrimPrefix(t.Remote, "~") == name
	}
	kind, filter, filtered := strings.Cut(name, ":")
	if string(t.Kind) != kind {
		return false
	}
	if !filtered {
		return true
	}
	// ~commit:branch, ~pr:branch (the target), ~tag:name, ~release:name,
	// or a /regex/ of them.
	subject := t.Branch
	if t.Kind == workflows.TriggerTag || t.Kind == workflows.TriggerRelease {
		subject = t.Ref
	}
	if re, ok := strings.CutPrefix(filter, "/"); ok && strings.HasSuffix(re, "/") {
		m, err := regexp.MatchString(strings.TrimSuffix(re, "/"), subject)
		return err == nil && m
	}
	return subject == filter
}

// writeTrigger draws a trigger node: a pill, blue-edged when it started
// the event; another pipeline's job links to that pipeline.
func writeTrigger(b *strings.Builder, name string, p [2]int, fired bool) {
	fill, stroke, width := "#ffffff", "#8c959f", "1"
	title := "~" + name
	if fired {
		fill, stroke, width = "#ddf4ff", "#0969da", "2"
		title += ": started this event"
	}
	href := ""
	if rest, ok := strings.CutPrefix(name, "sd@"); ok {
		if pl, _, ok := strings.Cut(rest, ":"); ok {
			href = "/ui/pipelines/" + url.PathEscape(pl)
		}
	}
	if href != "" {
		fmt.Fprintf(b, `<a href="%s">`, template.HTMLEscapeString(href))
	}
	fmt.Fprintf(b, `<g class="trigger" data-trigger="%s" data-fired="%t"><title>%s</title>`,
		template.HTMLEscapeString(name), fired, template.HTMLEscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" rx="%d" fill="%s" stroke="%s" stroke-width="%s"/>`,
		p[0], p[1]+6, nodeW, nodeH-12, (nodeH-12)/2, fill, stroke, width)
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#1f2328" font-size="12">%s</text></g>`,
		p[0]+12, p[1]+nodeH/2+4, template.HTMLEscapeString(truncateRunes("~"+name, 21)))
	if href != "" {
		b.WriteString(`</a>`)
	}
}

// maxSquares bounds the permutation squares a matrix job's box shows.
const maxSquares = 6

// writePermutations draws a matrix job's builds as small squares in its
// box, each coloured by its status and linking to its build.
func writePermutations(b *strings.Builder, p [2]int, bs []Build) {
	const size, gap = 9, 3
	x := p[0] + nodeW - 8 - maxSquares*(size+gap)
	for i, bd := range bs {
		if i == maxSquares {
			fmt.Fprintf(b, `<text x="%d" y="%d" fill="#ffffff" font-size="10">+%d</text>`, p[0]+nodeW-30, p[1]+16, len(bs)-maxSquares)
			break
		}
		fill := statusColors[bd.Status]
		if fill == "" {
			fill = notInEvent
		}
		fmt.Fprintf(b, `<a href="%s" class="permutation" data-build="%s"><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#ffffff"/></a>`,
			template.HTMLEscapeString("/ui/builds/"+bd.ID), template.HTMLEscapeString(bd.ID), template.HTMLEscapeString(bd.ID+": "+string(bd.Status)),
			x+i*(size+gap), p[1]+nodeH-size-5, size, size, fill)
	}
}
