package pipeline

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Annotations the orchestrator reads (Screwdriver's plus sluice's own).
const (
	AnnotationCollapseBuilds           = "screwdriver.cd/collapseBuilds"
	AnnotationBuildPeriodically        = "screwdriver.cd/buildPeriodically"
	AnnotationTimeout                  = "screwdriver.cd/timeout"
	AnnotationBlockedBySameJob         = "screwdriver.cd/blockedBySameJob"
	AnnotationBlockedBySameJobWaitTime = "screwdriver.cd/blockedBySameJobWaitTime"
	AnnotationManualStartEnabled       = "screwdriver.cd/manualStartEnabled"
	AnnotationVirtualJob               = "screwdriver.cd/virtualJob"
	AnnotationExecutor                 = "screwdriver.cd/executor"
	AnnotationCPU                      = "screwdriver.cd/cpu"
	AnnotationRAM                      = "screwdriver.cd/ram"
	AnnotationDelay                    = "sluice.dev/delay"
	AnnotationPriority                 = "sluice.dev/priority"
	AnnotationRetryOnLoss              = "sluice.dev/retryOnLoss"
)

// Defaults applied when an annotation is absent.
const (
	DefaultTimeout  = 90 * time.Minute
	DefaultPriority = 3
	MinPriority     = 1
	MaxPriority     = 5
	// maxMinutes bounds minute-valued annotations (about two years) so durations never overflow.
	maxMinutes = 1_000_000
)

// reQueueName is the queue name rule of design §4: letters, digits, single spaces and
// "_ - .", not starting or ending with a space.
var reQueueName = regexp.MustCompile(`^[A-Za-z0-9_.-]+( [A-Za-z0-9_.-]+)*$`)

// DefaultSettings returns the settings of a job without annotations.
func DefaultSettings() Settings {
	return Settings{
		CollapseBuilds:     true,
		Timeout:            DefaultTimeout,
		BlockedBySameJob:   true,
		ManualStartEnabled: true,
		Priority:           DefaultPriority,
		RetryOnLoss:        true,
	}
}

// PeriodicSeed is the string whose hash places a job's buildPeriodically H values:
// "<pipeline>/<job>", or just "<job>" when the pipeline is unnamed. Screwdriver seeds
// with the job's numeric database id; sluice has no such id at parse time, so it uses
// this stable, globally unique identity instead (the hash function is the same).
func PeriodicSeed(pipeline, job string) string {
	if pipeline == "" {
		return job
	}
	return pipeline + "/" + job
}

// jobSettings derives typed settings from a job's annotations, reporting bad values.
func (p *parser) jobSettings(job *Job) Settings {
	s := DefaultSettings()
	a := job.Annotations
	label := fmt.Sprintf("Job %q", job.Name)
	bad := func(key, format string, args ...any) {
		p.add(job.Name, "annotations."+key, "%s: annotation %q %s", label, key, fmt.Sprintf(format, args...))
	}
	boolean := func(key string, dst *bool) {
		v, ok := a[key]
		if !ok {
			return
		}
		b, err := annotationBool(v)
		if err != nil {
			bad(key, "must be a boolean (true or false), got %s", describe(v))
			return
		}
		*dst = b
	}
	minutes := func(key string, min int64, dst *time.Duration) {
		v, ok := a[key]
		if !ok {
			return
		}
		n, err := annotationInt(v)
		if err != nil || n < min || n > maxMinutes {
			bad(key, "must be a whole number of minutes between %d and %d, got %s", min, maxMinutes, describe(v))
			return
		}
		*dst = time.Duration(n) * time.Minute
	}
	boolean(AnnotationCollapseBuilds, &s.CollapseBuilds)
	boolean(AnnotationBlockedBySameJob, &s.BlockedBySameJob)
	boolean(AnnotationManualStartEnabled, &s.ManualStartEnabled)
	boolean(AnnotationVirtualJob, &s.VirtualJob)
	boolean(AnnotationRetryOnLoss, &s.RetryOnLoss)
	minutes(AnnotationTimeout, 1, &s.Timeout)
	minutes(AnnotationBlockedBySameJobWaitTime, 0, &s.BlockedBySameJobWaitTime)

	if v, ok := a[AnnotationExecutor]; ok {
		str, isStr := v.(string)
		switch {
		case !isStr:
			bad(AnnotationExecutor, "must be a queue name (a string), got %s", describe(v))
		case !reQueueName.MatchString(str):
			bad(AnnotationExecutor, "must be a queue name (letters, digits, single spaces, _ - .; no leading or trailing space), got %q", str)
		default:
			s.Executor = str
		}
	}
	if v, ok := a[AnnotationBuildPeriodically]; ok {
		str, isStr := v.(string)
		if !isStr {
			bad(AnnotationBuildPeriodically, "must be a cron expression (a string), got %s", describe(v))
		} else if expanded, err := ExpandCron(str, PeriodicSeed(p.opts.Pipeline, job.Name)); err != nil {
			bad(AnnotationBuildPeriodically, "is not a valid cron expression: %v", err)
		} else {
			s.BuildPeriodically, s.PeriodicCron = str, expanded
		}
	}
	if v, ok := a[AnnotationDelay]; ok {
		str, isStr := v.(string)
		d, err := time.ParseDuration(strings.TrimSpace(str))
		if !isStr || err != nil || d < 0 {
			bad(AnnotationDelay, "must be a non-negative Go duration such as \"30s\" or \"5m\", got %s", describe(v))
		} else {
			s.Delay = d
		}
	}
	if v, ok := a[AnnotationPriority]; ok {
		n, err := annotationInt(v)
		if err != nil || n < MinPriority || n > MaxPriority {
			bad(AnnotationPriority, "must be a whole number from %d to %d, got %s", MinPriority, MaxPriority, describe(v))
		} else {
			s.Priority = int(n)
		}
	}
	return s
}

// annotationBool accepts YAML booleans and the strings "true"/"false" (any case).
func annotationBool(v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(b)) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, fmt.Errorf("not a boolean: %v", v)
}

// annotationInt accepts YAML integers, whole floats and numeric strings.
func annotationInt(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1e15 {
			return int64(n), nil
		}
	case string:
		return strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	}
	return 0, fmt.Errorf("not a whole number: %v", v)
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return fmt.Sprint(x)
	}
}
