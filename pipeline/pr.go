package pipeline

import (
	"fmt"
	"slices"
	"strings"
)

// AnnotationChainPR is the pipeline-level annotation that lets a pull
// request's events run the jobs downstream of its `~pr` jobs (Screwdriver's
// chainPR). Without it a pull request runs its `~pr` jobs only.
const AnnotationChainPR = "screwdriver.cd/chainPR"

// AnnotationRestrictPR is the pipeline-level annotation that makes a pull
// request's events wait for a pipeline admin's approval before they start
// any build (Screwdriver's restrictPR): "none" (the default), "all", "fork"
// (pull requests from another repository) or "branch" (pull requests from a
// branch of the pipeline's own repository).
const AnnotationRestrictPR = "screwdriver.cd/restrictPR"

// RestrictPR values.
const (
	RestrictPRNone   = "none"
	RestrictPRAll    = "all"
	RestrictPRFork   = "fork"
	RestrictPRBranch = "branch"
)

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

// RestrictPR is the pipeline's screwdriver.cd/restrictPR setting, lower
// case: "none" when absent. A value that is not one of the four is an error
// (the caller must not guess: an unknown value restricts nothing by
// accident only if it is refused).
func (s *Spec) RestrictPR() (string, error) {
	v, ok := s.Annotations[AnnotationRestrictPR]
	if !ok || v == nil {
		return RestrictPRNone, nil
	}
	str, isStr := v.(string)
	if isStr {
		switch low := strings.ToLower(strings.TrimSpace(str)); low {
		case RestrictPRNone, RestrictPRAll, RestrictPRFork, RestrictPRBranch:
			return low, nil
		}
	}
	return "", fmt.Errorf("pipeline annotation %q must be none, all, fork or branch, got %s", AnnotationRestrictPR, describe(v))
}

// RestrictsPR reports whether restrict (a RestrictPR value) holds a pull
// request back: fork says whether it comes from another repository.
func RestrictsPR(restrict string, fork bool) bool {
	switch restrict {
	case RestrictPRAll:
		return true
	case RestrictPRFork:
		return fork
	case RestrictPRBranch:
		return !fork
	}
	return false
}

// basePipelineAnnotations are the pipeline-level annotations a pull request
// takes from its base branch's spec, never from its head.
var basePipelineAnnotations = []string{AnnotationChainPR, AnnotationRestrictPR}

// baseJobAnnotations are the job annotations a pull request's job takes from
// the same job in its base branch's spec: where the build runs and with
// what resources.
var baseJobAnnotations = []string{AnnotationExecutor, AnnotationCPU, AnnotationRAM}

// ApplyBase makes head, a pull request's spec (its steps, images and graph),
// run with the security-relevant settings of base, the spec of the branch
// the pull request targets: the pipeline's chainPR and restrictPR, and per
// job its queue (screwdriver.cd/executor), cpu and ram annotations and its
// secrets. A job that exists only in head gets the pipeline's defaults:
// the pipeline's queue, no secrets, no cpu/ram. Whatever head says about
// these settings is ignored; each change it tried is reported as a warning.
// head is changed in place and returned; base is only read.
func ApplyBase(head, base *Spec) *Spec {
	if head.Annotations == nil {
		head.Annotations = map[string]any{}
	}
	for _, key := range basePipelineAnnotations {
		hv, hok := head.Annotations[key]
		bv, bok := base.Annotations[key]
		if hok && (!bok || fmt.Sprint(hv) != fmt.Sprint(bv)) {
			head.warn("annotations."+key, "the pull request's value %s is ignored; the base branch's %s applies", describe(hv), describeOr(bv, bok))
		}
		if bok {
			head.Annotations[key] = bv
		} else {
			delete(head.Annotations, key)
		}
	}
	for _, name := range head.JobOrder {
		job := head.Jobs[name]
		if job == nil {
			continue
		}
		bjob := base.Jobs[name]
		var bann map[string]any
		var bsecrets []string
		bexec := ""
		if bjob != nil {
			bann, bsecrets, bexec = bjob.Annotations, bjob.secrets(), bjob.Settings.Executor
		}
		for _, key := range baseJobAnnotations {
			hv, hok := job.Annotations[key]
			bv, bok := bann[key]
			if hok && (!bok || fmt.Sprint(hv) != fmt.Sprint(bv)) {
				head.warn("jobs."+name+".annotations."+key, "the pull request's value %s is ignored; the base branch's %s applies", describe(hv), describeOr(bv, bok))
			}
			if bok {
				if job.Annotations == nil {
					job.Annotations = map[string]any{}
				}
				job.Annotations[key] = bv
			} else {
				delete(job.Annotations, key)
			}
		}
		job.Settings.Executor = bexec
		if extra := notIn(job.secrets(), bsecrets); len(extra) > 0 {
			head.warn("jobs."+name+".secrets", "secrets %s are not given to the pull request: the base branch's spec does not list them for this job", strings.Join(extra, ", "))
		}
		for i := range job.Permutations {
			job.Permutations[i].Secrets = slices.Clone(bsecrets)
		}
		// Who is notified (and with which pipeline's Slack credentials) is
		// the base branch's choice, never the pull request's.
		var bnotify map[string]any
		if bjob != nil {
			bnotify = bjob.Notifications
		}
		if len(job.Notifications) > 0 && fmt.Sprint(job.Notifications) != fmt.Sprint(bnotify) {
			head.warn("jobs."+name+".settings", "the pull request's settings (notifications) are ignored; the base branch's apply")
		}
		job.Notifications = bnotify
	}
	return head
}

// secrets are the secret names the job's permutations list, in order.
func (j *Job) secrets() []string {
	var out []string
	for _, p := range j.Permutations {
		for _, s := range p.Secrets {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func (s *Spec) warn(field, format string, args ...any) {
	s.Warnings = append(s.Warnings, Warning{Field: field, Message: fmt.Sprintf(format, args...)})
}

func describeOr(v any, ok bool) string {
	if !ok {
		return "default (unset)"
	}
	return describe(v)
}

// notIn lists the elements of a that b lacks.
func notIn(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
