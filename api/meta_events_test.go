package api_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workflows"
)

// TestStartMetaReadsAnEventOnce: an event's builds read their start
// metadata from the event's state; once one build read it, the next
// builds whose upstream jobs it lists do not ask the event again, and a
// build whose upstream job it does not list yet does (with what that job
// saved).
func TestStartMetaReadsAnEventOnce(t *testing.T) {
	t.Parallel()
	db, c, h := metaHandler(t)

	build := func(job string, upstream ...string) workflows.BuildRef {
		ref := workflows.BuildRef{Pipeline: "app", Job: job, Event: 9}
		answerQuery(t, c, ref.WorkflowID(), workflows.QueryBuild, workflows.BuildState{
			ID: ref.String(), Build: ref, Status: workflows.StatusRunning, Upstream: upstream, Branch: "main",
		}, 1)
		return ref
	}
	b, d, late := build("b", "a"), build("d", "a"), build("e", "a", "c")
	event := workflows.EventRef{Pipeline: "app", Number: 9}
	started := workflows.EventState{
		Event: event, Status: workflows.StatusRunning, Trigger: workflows.Trigger{Kind: workflows.TriggerManual, Sender: "ann"},
		Jobs: []workflows.JobOutcome{{Job: "a", Status: workflows.StatusSuccess, Builds: []string{"app/a/9"}}},
	}
	answerQuery(t, c, event.WorkflowID(), workflows.QueryEvent, started, 1)
	require.NoError(t, db.PutBuildMeta(t.Context(), store.BuildMeta{Build: "app/a/9", Pipeline: "app", Job: "a", Event: 9, Attempt: 1, Status: "SUCCESS", Meta: []byte(`{"from_a":1}`)}))
	require.NoError(t, db.PutBuildMeta(t.Context(), store.BuildMeta{Build: "app/c/9", Pipeline: "app", Job: "c", Event: 9, Attempt: 1, Status: "SUCCESS", Meta: []byte(`{"from_c":1}`)}))

	meta := func(ref workflows.BuildRef) string {
		t.Helper()
		rec := call(t, h, http.MethodGet, "/api/v1/builds/"+url.PathEscape(ref.String())+"/meta", "", nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.String()
	}
	body := meta(b) // reads the event
	require.Contains(t, body, `"creator": "ann"`)
	require.Contains(t, body, `"from_a": 1`)
	body = meta(d) // the kept state lists a
	require.Contains(t, body, `"creator": "ann"`)
	require.Contains(t, body, `"from_a": 1`)
	// c started since: the kept state does not list it, so e's read asks
	// the event again (the mocks answer one more query, no further).
	started.Jobs = append(started.Jobs, workflows.JobOutcome{Job: "c", Status: workflows.StatusSuccess, Builds: []string{"app/c/9"}})
	answerQuery(t, c, event.WorkflowID(), workflows.QueryEvent, started, 1)
	body = meta(late)
	require.Contains(t, body, `"from_a": 1`)
	require.Contains(t, body, `"from_c": 1`)
}

// metaHandler is a handler whose service keeps metadata in a fresh store
// (db) and asks c, a mocked Temporal client, for builds and events; its
// caller holds a read-secrets token.
func metaHandler(t *testing.T) (*store.DB, *mocks.Client, http.Handler) {
	t.Helper()
	db, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "sluice.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	c := newMockClient(t)
	svc := newService(t, c)
	svc.Meta = db
	return db, c, newHandler(t, api.Deps{Service: svc, Authenticate: readSecretsOnly})
}

// TestStartMetaAsksTheEventBesideTheBuild: the start metadata's read asks
// the event for its state while it asks for the build's record, not after
// (one round trip instead of two on the way to a build's first step).
func TestStartMetaAsksTheEventBesideTheBuild(t *testing.T) {
	t.Parallel()
	_, c, h := metaHandler(t)
	ref := workflows.BuildRef{Pipeline: "app", Job: "b", Event: 4}
	eventAsked := make(chan struct{})
	c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
		return r.WorkflowID == ref.WorkflowID() && r.QueryType == workflows.QueryBuild
	})).Run(func(mock.Arguments) {
		select {
		case <-eventAsked:
		case <-time.After(10 * time.Second):
			t.Error("the build's record was answered before its event was asked")
		}
	}).Return(&client.QueryWorkflowWithOptionsResponse{QueryResult: encode(t, workflows.BuildState{
		ID: ref.String(), Build: ref, Status: workflows.StatusRunning, Branch: "main",
	})}, nil).Once()
	c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
		return r.WorkflowID == ref.EventRef().WorkflowID() && r.QueryType == workflows.QueryEvent
	})).Run(func(mock.Arguments) { close(eventAsked) }).Return(&client.QueryWorkflowWithOptionsResponse{QueryResult: encode(t, workflows.EventState{
		Event: ref.EventRef(), Status: workflows.StatusRunning, Trigger: workflows.Trigger{Kind: workflows.TriggerManual, Sender: "ann"},
	})}, nil).Once()
	rec := call(t, h, http.MethodGet, "/api/v1/builds/"+url.PathEscape(ref.String())+"/meta", "", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"creator": "ann"`)
}
