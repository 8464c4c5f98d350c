package api

import (
	"context"
	"slices"

	"go.temporal.io/sdk/client"

	"github.com/sluice-ci/sluice/workflows"
)

// admissionAsker coalesces questions about pending starts per pipeline: in
// a burst, many callers (`sluice event start`, answered pending, asks until
// its event is numbered) wait on one busy pipeline, and each question is a
// query the pipeline's workflow answers. Questions that arrive while one to
// the same pipeline is in flight go together in the next QueryAdmissions,
// so a pipeline answers one query at a time however many callers wait.
type admissionAsker struct {
	queued callQueues[*askCall]
}

// askCall is one caller's question.
type askCall struct {
	ctx  context.Context
	id   string
	seen workflows.AdmissionSeen
	err  error
	done chan struct{}
}

// ask answers what pipeline made of admission id, by a query shared with
// the other questions to the pipeline queued with it. query runs the
// QueryAdmissions (with its own bound).
func (a *admissionAsker) ask(ctx context.Context, pipeline, id string, query func(context.Context, []string) ([]workflows.AdmissionSeen, error)) (workflows.AdmissionSeen, error) {
	call := &askCall{ctx: ctx, id: id, done: make(chan struct{})}
	if a.queued.join(pipeline, call) {
		go a.drain(context.WithoutCancel(ctx), pipeline, query)
	}
	select {
	case <-call.done:
		return call.seen, call.err
	case <-ctx.Done():
		return workflows.AdmissionSeen{}, ctx.Err()
	}
}

// drain sends the lane's queued questions, at most maxAskedTogether per
// query, until none is left. Callers that gave up meanwhile are left out.
func (a *admissionAsker) drain(ctx context.Context, pipeline string, query func(context.Context, []string) ([]workflows.AdmissionSeen, error)) {
	for {
		calls := a.queued.take(pipeline, maxAskedTogether, func(c *askCall) bool { return c.ctx.Err() == nil })
		if calls == nil {
			return
		}
		ids := make([]string, 0, len(calls))
		for _, c := range calls {
			if !slices.Contains(ids, c.id) {
				ids = append(ids, c.id)
			}
		}
		seen, err := query(ctx, ids)
		for _, c := range calls {
			c.err = err
			if err == nil {
				c.seen = workflows.AdmissionSeen{ID: c.id}
				if i := slices.IndexFunc(seen, func(s workflows.AdmissionSeen) bool { return s.ID == c.id }); i >= 0 {
					c.seen = seen[i]
				}
			}
			close(c.done)
		}
	}
}

// maxAskedTogether bounds the admission IDs of one QueryAdmissions.
const maxAskedTogether = 500

// queryAdmissions is the query admissionAsker sends for the service.
func queryAdmissions(c client.Client, pipeline string) func(context.Context, []string) ([]workflows.AdmissionSeen, error) {
	return func(ctx context.Context, ids []string) ([]workflows.AdmissionSeen, error) {
		qctx, cancel := context.WithTimeout(ctx, admissionQueryFor)
		defer cancel()
		v, err := c.QueryWorkflow(qctx, workflows.PipelineWorkflowID(pipeline), "", workflows.QueryAdmissions, ids)
		if err != nil {
			return nil, err
		}
		var seen []workflows.AdmissionSeen
		return seen, v.Get(&seen)
	}
}
