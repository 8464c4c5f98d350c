package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// checkStages applies Screwdriver's stage rules: a job belongs to at most one stage,
// stages list existing jobs, member jobs are triggered only from their own stage, and
// member jobs cannot have sourcePaths (the stage's setup job carries them).
func (p *parser) checkStages(spec *Spec, stages []*stageDef) {
	if len(stages) == 0 {
		return
	}
	var all, dups, missing []string
	for _, s := range stages {
		for _, j := range s.jobs {
			if slices.Contains(all, j) && !slices.Contains(dups, j) {
				dups = append(dups, j)
			}
			all = append(all, j)
			if _, ok := spec.Jobs[j]; (!ok || strings.HasPrefix(j, "stage@")) && !slices.Contains(missing, j) {
				missing = append(missing, j)
			}
		}
	}
	if len(dups) > 0 {
		p.add("", "stages", "Cannot have duplicate job in multiple stages: %s", strings.Join(dups, ","))
	}
	if len(missing) > 0 {
		p.add("", "stages", "Cannot have nonexistent job in stages: %s", strings.Join(missing, ","))
	}
	for _, s := range stages {
		allowed := append(slices.Clone(s.jobs), StageJobName(s.name, "setup"))
		for _, name := range s.jobs {
			job, ok := spec.Jobs[name]
			if !ok || job.Stage != s.name {
				continue
			}
			var bad []string
			for _, r := range job.Requires {
				target := strings.TrimPrefix(r, "~")
				if slices.Contains(allowed, target) {
					continue
				}
				if req, err := ParseRequire(r); err == nil && req.Kind == RequireJob {
					if _, exists := spec.Jobs[req.Job]; !exists {
						continue // reported by checkRequires
					}
				}
				bad = append(bad, r)
			}
			if len(bad) > 0 {
				p.add(name, "requires", "%s job has invalid requires: %s. Triggers must be jobs from %s stage.", name, strings.Join(bad, ","), s.name)
			}
			if len(job.SourcePaths) > 0 {
				p.add(name, "sourcePaths", "Job %s in stage cannot have sourcePaths defined.", name)
			}
		}
	}
}

// checkRequires rejects requires that can never fire: a job or stage that
// does not exist (with the closest existing name as a suggestion).
func (p *parser) checkRequires(spec *Spec, stages []*stageDef) {
	jobNames := slices.Collect(maps.Keys(spec.Jobs))
	stageNames := slices.Collect(maps.Keys(spec.Stages))
	check := func(owner, kind string, i int, r string) {
		req, err := ParseRequire(r)
		if err != nil {
			return // reported when the requires was parsed
		}
		field := fmt.Sprintf("requires[%d]", i)
		switch req.Kind {
		case RequireJob:
			if _, ok := spec.Jobs[req.Job]; !ok {
				p.add(owner, field, "%s %s has invalid requires: %s. Cannot find job %s in jobs.%s", owner, kind, r, req.Job, didYouMean(req.Job, jobNames))
			}
		case RequireStage:
			if _, ok := spec.Stages[req.Stage]; !ok {
				p.add(owner, field, "%s %s has invalid requires: %s. Cannot find stage %s in stages.%s", owner, kind, r, req.Stage, didYouMean(req.Stage, stageNames))
			}
		}
	}
	for _, name := range spec.JobOrder {
		job := spec.Jobs[name]
		if job.Stage != "" && name == StageJobName(job.Stage, "setup") {
			continue // a setup job's requires are its stage's, checked below
		}
		for i, r := range job.Requires {
			check(name, "job", i, r)
		}
	}
	for _, s := range stages {
		for i, r := range s.requires {
			check(s.name, "stage", i, r)
		}
	}
}

// didYouMean suggests the name closest to want (" Did you mean build?"),
// or "" when none is close: at most a third of want's letters differ.
func didYouMean(want string, names []string) string {
	best, bestD := "", 0
	for _, n := range names {
		d := editDistance(want, n)
		if d == 0 {
			continue
		}
		if best == "" || d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	if best == "" || bestD > max(1, len([]rune(want))/3) {
		return ""
	}
	return " Did you mean " + best + "?"
}

// sentence ends the text before a suggestion with a period.
func sentence(suggestion string) string {
	if suggestion == "" {
		return ""
	}
	return "." + suggestion
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// checkBlockedBy warns about blockedBy entries naming jobs that do not exist
// and about ~sd@ entries (other pipelines' jobs never block).
func (p *parser) checkBlockedBy(spec *Spec) {
	for _, name := range spec.JobOrder {
		for _, b := range spec.Jobs[name].BlockedBy {
			req, err := ParseRequire(b)
			if err != nil {
				continue
			}
			if req.Kind == RequireRemote {
				p.warn("jobs."+name+".blockedBy", "%s is ignored: blocking by another pipeline's job is not supported; only jobs of this pipeline block", b)
				continue
			}
			if req.Kind != RequireJob {
				continue
			}
			if _, ok := spec.Jobs[req.Job]; !ok {
				p.warn("jobs."+name+".blockedBy", "names job %q, which does not exist; it can never block%s", req.Job, sentence(didYouMean(req.Job, slices.Collect(maps.Keys(spec.Jobs)))))
			}
		}
	}
}

// BuildStatuses are the statuses a notification may be sent for.
var BuildStatuses = []string{"ABORTED", "CREATED", "FAILURE", "QUEUED", "RUNNING", "SUCCESS", "BLOCKED", "UNSTABLE", "COLLAPSED", "FROZEN"}

// checkNotifications validates the slack and email notification settings like
// Screwdriver's notification plugins: the first problem of each plugin is reported.
func (p *parser) checkNotifications(job *Job) {
	if job == nil {
		return
	}
	statusList := "[" + strings.Join(BuildStatuses, ", ") + "]"
	plugins := []struct {
		name string
		keys []string
		list string // the key holding the list of recipients
	}{
		{name: "slack", keys: []string{"channels", "statuses", "minimized"}, list: "channels"},
		{name: "email", keys: []string{"addresses", "statuses", "subject"}, list: "addresses"},
	}
	for _, pl := range plugins {
		raw, ok := job.Notifications[pl.name]
		if !ok {
			continue
		}
		if msg := notificationProblem(pl.name, raw, pl.keys, pl.list, statusList); msg != "" {
			p.add(job.Name, "settings."+pl.name, "%s %s", job.Name, msg)
		}
	}
}

func notificationProblem(plugin string, raw any, keys []string, listKey, statusList string) string {
	switch cfg := raw.(type) {
	case string:
		return ""
	case map[string]any:
		for _, k := range keys {
			v, ok := cfg[k]
			if !ok {
				continue
			}
			switch k {
			case "statuses":
				list, isList := v.([]any)
				if !isList {
					return fmt.Sprintf("%q must be an array", plugin+"."+k)
				}
				for i, s := range list {
					str, _ := s.(string)
					if !slices.Contains(BuildStatuses, str) {
						return fmt.Sprintf("\"%s.%s[%d]\" must be one of %s", plugin, k, i, statusList)
					}
				}
			case listKey:
				list, isList := v.([]any)
				if _, isStr := v.(string); isStr {
					continue
				}
				if !isList {
					return fmt.Sprintf("%q must be an array", plugin+"."+k)
				}
				for i, s := range list {
					if _, isStr := s.(string); !isStr {
						return fmt.Sprintf("\"%s.%s[%d]\" must be a string", plugin, k, i)
					}
				}
			case "minimized":
				if _, isBool := v.(bool); !isBool {
					return fmt.Sprintf("%q must be a boolean", plugin+"."+k)
				}
			case "subject":
				if _, isStr := v.(string); !isStr {
					return fmt.Sprintf("%q must be a string", plugin+"."+k)
				}
			}
		}
		var unknown []string
		for k := range cfg {
			if !slices.Contains(keys, k) {
				unknown = append(unknown, k)
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 {
			return fmt.Sprintf("%q is not allowed", plugin+"."+unknown[0])
		}
		return ""
	default:
		return fmt.Sprintf("%q must be a string or an object", plugin)
	}
}
