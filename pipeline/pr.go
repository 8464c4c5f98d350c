package pipeline

import "strings"

// AnnotationChainPR is the pipeline-level annotation that lets a pull
// request's events run the jobs downstream of its `~pr` jobs (Screwdriver's
// chainPR). Without it a pull request runs its `~pr` jobs only.
const AnnotationChainPR = "screwdriver.cd/chainPR"

// ChainPR reports whether the pipeline sets screwdriver.cd/chainPR to true
// (a boolean, or the string "true" as YAML authors often write it).
func (s *Spec) ChainPR() bool {
	switch v := s.Annotations[AnnotationChainPR].(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(strings.TrimSpace(v), "true")
	}
	return false
}
