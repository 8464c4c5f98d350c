package cliout

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Statuses the CLI knows, with the server's names.
const (
	StatusCreated   = "CREATED"
	StatusQueued    = "QUEUED"
	StatusBlocked   = "BLOCKED"
	StatusFrozen    = "FROZEN"
	StatusRunning   = "RUNNING"
	StatusSuccess   = "SUCCESS"
	StatusFailure   = "FAILURE"
	StatusAborted   = "ABORTED"
	StatusCollapsed = "COLLAPSED"
	StatusSkipped   = "SKIPPED"
)

// BuildStatuses are the statuses a build can have, in lifecycle order.
var BuildStatuses = []string{
	StatusCreated, StatusQueued, StatusBlocked, StatusFrozen, StatusRunning,
	StatusSuccess, StatusFailure, StatusAborted, StatusCollapsed,
}

// Final reports whether a build, job or event status is final.
func Final(status string) bool {
	switch strings.ToUpper(status) {
	case StatusSuccess, StatusFailure, StatusAborted, StatusCollapsed, StatusSkipped:
		return true
	}
	return false
}

// failed reports whether a final status is a failure the user must hear
// about (a skipped job is a consequence, not a cause).
func failed(status string) bool {
	switch strings.ToUpper(status) {
	case StatusFailure, StatusAborted, StatusCollapsed:
		return true
	}
	return false
}

// Build is one build as the CLI shows it.
type Build struct {
	ID       string
	Job      string
	Status   string
	Reason   string
	Queue    string
	Executor string
	Start    time.Time
	End      time.Time
}

// Job is one job's part in an event: its status and builds, or why it did
// not run.
type Job struct {
	Name   string
	Status string
	Reason string
	Builds []string
}

// Event is an event with its jobs and builds.
type Event struct {
	ID        string
	Status    string
	Reason    string
	SHA       string
	Trigger   Trigger
	StartFrom string
	Parent    int
	Start     time.Time
	End       time.Time
	// Jobs come from the event itself (authoritative, in graph order).
	Jobs []Job
	// Builds come from the build index, which may lag a little behind Jobs.
	Builds   []Build
	Warnings []string
}

// Row is one line of an event: a build, or a job without a build (it did
// not run, or its build is not listed yet).
type Row struct {
	// Label names the row for people: the job, with ".k" for matrix
	// permutation k.
	Label string
	Build
}

// Rows lists an event's builds grouped by job in the event's job order,
// then jobs without a visible build, then builds of jobs the event does not
// list. A build whose listed status lags behind its (single-build) job's
// final status takes the job's status and reason.
func Rows(ev Event) []Row {
	byID := make(map[string]int, len(ev.Builds))
	for i, b := range ev.Builds {
		byID[b.ID] = i
	}
	used := make([]bool, len(ev.Builds))
	var rows []Row
	add := func(b Build) { rows = append(rows, Row{Label: label(b.Job, b.ID), Build: b}) }
	for _, j := range ev.Jobs {
		for _, id := range j.Builds {
			i, ok := byID[id]
			if !ok {
				add(Build{ID: id, Job: j.Name, Status: j.Status, Reason: j.Reason})
				continue
			}
			used[i] = true
			b := ev.Builds[i]
			if len(j.Builds) == 1 && Final(j.Status) && !Final(b.Status) {
				b.Status, b.Reason = j.Status, j.Reason
			}
			add(b)
		}
		// Builds of the job the event does not name (yet).
		for i, b := range ev.Builds {
			if !used[i] && b.Job == j.Name {
				used[i] = true
				add(b)
			}
		}
		if len(j.Builds) == 0 && !slices.ContainsFunc(rows, func(r Row) bool { return r.Job == j.Name }) {
			add(Build{Job: j.Name, Status: j.Status, Reason: j.Reason})
		}
	}
	for i, b := range ev.Builds {
		if !used[i] {
			add(b)
		}
	}
	return rows
}

// label is the job name, with the matrix permutation of the build ID
// ("app/test/3.2" → "test.2").
func label(job, id string) string {
	n := id[strings.LastIndex(id, "/")+1:]
	if _, k, ok := strings.Cut(n, "."); ok && job != "" {
		return job + "." + k
	}
	return Or(job, id)
}

// Outcome decides the exit code of `event start --wait` and `event watch`
// for a finished event: 0 only when the event succeeded (every build did),
// else 1 with a one-line summary of what failed and why, for stderr.
func Outcome(ev Event) (code int, summary string) {
	if strings.EqualFold(ev.Status, StatusSuccess) {
		return 0, ""
	}
	var parts []string
	for _, r := range Rows(ev) {
		if !failed(r.Status) {
			continue
		}
		what := Or(r.ID, r.Job)
		p := what + " " + Status(r.Status)
		if r.Reason != "" {
			p += " (" + OneLine(r.Reason) + ")"
		}
		parts = append(parts, p)
	}
	head := fmt.Sprintf("event %s %s", ev.ID, Status(ev.Status))
	switch {
	case len(parts) > 0:
		return 1, head + ": " + strings.Join(parts, "; ")
	case ev.Reason != "":
		return 1, head + ": " + OneLine(ev.Reason)
	}
	return 1, head
}
