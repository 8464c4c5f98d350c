package api

import "github.com/sluice-ci/sluice/workflows"

// jobStatus is the status an event shows for one of its jobs. The event
// workflow marks a job RUNNING as soon as it starts the job's builds, while
// those builds may still wait (QUEUED, BLOCKED, FROZEN) for their lane or a
// slot: a job that has not ended shows what its builds do: RUNNING when one
// runs, else the status (and reason) of its waiting build, QUEUED before
// BLOCKED before FROZEN before CREATED. An ended job shows its own status.
// The API (event show), the event page's graph and its jobs table all use
// it, so they agree.
func jobStatus(st workflows.Status, reason string, builds []Build) (workflows.Status, string) {
	if (st != "" && st.Final()) || len(builds) == 0 {
		return st, reason
	}
	rank := map[workflows.Status]int{
		workflows.StatusRunning: 5, workflows.StatusQueued: 4, workflows.StatusBlocked: 3,
		workflows.StatusFrozen: 2, workflows.StatusCreated: 1,
	}
	best := -1
	for i, b := range builds {
		if rank[b.Status] > 0 && (best < 0 || rank[b.Status] > rank[builds[best].Status]) {
			best = i
		}
	}
	if best < 0 {
		return st, reason // every build ended: the job ends in a moment
	}
	if builds[best].Status == workflows.StatusRunning {
		if st == workflows.StatusRunning {
			return st, reason
		}
		return workflows.StatusRunning, ""
	}
	return builds[best].Status, builds[best].Reason
}

// shownJobs applies jobStatus to an event's jobs (a copy).
func shownJobs(jobs []workflows.JobOutcome, builds []Build) []workflows.JobOutcome {
	byJob := map[string][]Build{}
	for _, b := range builds {
		byJob[b.Job] = append(byJob[b.Job], b)
	}
	out := make([]workflows.JobOutcome, len(jobs))
	for i, j := range jobs {
		out[i] = j
		out[i].Status, out[i].Reason = jobStatus(j.Status, j.Reason, byJob[j.Job])
	}
	return out
}
