package pipeline

import "strings"

// MatchSourcePaths reports whether a change touching the changed files is relevant to a
// job with the given sourcePaths. A path ending in "/" selects every file under that
// directory, any other path selects that exact file; a path starting with "!" excludes
// instead. A changed file is relevant when it is selected by an include path (or there
// are no include paths) and by no exclude path; the job is relevant when any changed file
// is. Leading "./" and "/" are ignored on both sides. Empty sourcePaths match everything.
func MatchSourcePaths(sourcePaths, changed []string) bool {
	if len(sourcePaths) == 0 {
		return true
	}
	var includes, excludes []string
	for _, p := range sourcePaths {
		if rest, ok := strings.CutPrefix(p, "!"); ok {
			excludes = append(excludes, cleanSourcePath(rest))
		} else {
			includes = append(includes, cleanSourcePath(p))
		}
	}
	for _, f := range changed {
		f = cleanSourcePath(f)
		if len(includes) > 0 && !matchesAnyPath(includes, f) {
			continue
		}
		if matchesAnyPath(excludes, f) {
			continue
		}
		return true
	}
	return false
}

func cleanSourcePath(p string) string {
	for {
		switch {
		case strings.HasPrefix(p, "./"):
			p = p[2:]
		case strings.HasPrefix(p, "/"):
			p = p[1:]
		default:
			return p
		}
	}
}

func matchesAnyPath(patterns []string, file string) bool {
	for _, p := range patterns {
		if strings.HasSuffix(p, "/") {
			if strings.HasPrefix(file, p) {
				return true
			}
		} else if file == p {
			return true
		}
	}
	return false
}

// UsesSourcePaths reports whether any job has sourcePaths (a stage's reach
// its setup job): only then do an event's changed files matter.
func (s *Spec) UsesSourcePaths() bool {
	for _, j := range s.Jobs {
		if len(j.SourcePaths) > 0 {
			return true
		}
	}
	return false
}

// FilterBySourcePaths keeps the jobs whose sourcePaths match the changed files (see
// MatchSourcePaths); jobs without sourcePaths are always kept, unknown job names are
// dropped. A nil changed list means "unknown" and keeps every job; an empty non-nil list
// means "nothing changed" and drops every job that has sourcePaths. Order is preserved.
func (s *Spec) FilterBySourcePaths(jobs []string, changed []string) []string {
	out := make([]string, 0, len(jobs))
	for _, name := range jobs {
		j, ok := s.Jobs[name]
		if !ok {
			continue
		}
		if changed == nil || MatchSourcePaths(j.SourcePaths, changed) {
			out = append(out, name)
		}
	}
	return out
}
