package api

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// A build's record costs one query while it runs (no describe first), its
// result once it ended, and a describe only for a build started before its
// state carried the branch. The mock fails on any other call.
func TestBuildRecordCalls(t *testing.T) {
	t.Parallel()
	ref := workflows.BuildRef{Pipeline: "app", Job: "test", Event: 3}
	wid := ref.WorkflowID()
	query := func(c *mocks.Client, res *client.QueryWorkflowWithOptionsResponse) {
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == wid && r.QueryType == workflows.QueryBuild && r.QueryRejectCondition == enumspb.QUERY_REJECT_CONDITION_NOT_OPEN
		})).Return(res, nil).Once()
	}
	running := workflows.BuildState{ID: ref.String(), Build: ref, Status: workflows.StatusRunning, Executor: "exec-a", Branch: "main"}

	t.Run("running", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		query(c, &client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{running}})
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusRunning, b.Status)
		require.Equal(t, "exec-a", b.Executor)
		require.Equal(t, "main", b.Branch)
	})
	t.Run("ended", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		query(c, &client.QueryWorkflowWithOptionsResponse{QueryRejected: &querypb.QueryRejected{Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}})
		ended := running
		ended.Status, ended.Branch = workflows.StatusSuccess, "release"
		run := mocks.NewWorkflowRun(t)
		run.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
			*ptr.(*workflows.BuildState) = ended
			return nil
		}).Once()
		c.On("GetWorkflow", mock.Anything, wid, "").Return(run).Once()
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusSuccess, b.Status)
		require.Equal(t, "release", b.Branch)
	})
	t.Run("started before the branch was recorded", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		old := running
		old.Branch = ""
		query(c, &client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{old}})
		p, err := converter.GetDefaultDataConverter().ToPayload("legacy")
		require.NoError(t, err)
		c.On("DescribeWorkflowExecution", mock.Anything, wid, "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
				Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.SABranch.GetName(): p}},
			},
		}, nil).Once()
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, "legacy", b.Branch, "the branch comes from the search attribute")
		require.Equal(t, workflows.StatusRunning, b.Status)
	})
}

// A build its event runs is read from the event: its query (with the
// build's ID) while the event runs, its result's records once it ended.
// With SLUICE_BUILDS_IN_EVENTS the event is asked first; without it, only
// when the build has no workflow of its own. The mock fails on any other
// call.
func TestOwnedBuildRecordCalls(t *testing.T) {
	t.Parallel()
	ref := workflows.BuildRef{Pipeline: "app", Job: "test", Event: 3}
	evID := ref.EventRef().WorkflowID()
	running := workflows.BuildState{
		ID: ref.String(), Build: ref, Status: workflows.StatusRunning, Executor: "exec-a", Branch: "main",
		Attempts: []workflows.Attempt{{Number: 1, Executor: "exec-a", CredentialHash: "h1"}},
	}
	eventQuery := func(c *mocks.Client, res *client.QueryWorkflowWithOptionsResponse, err error) {
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == evID && r.QueryType == workflows.QueryBuild && len(r.Args) == 1 && r.Args[0] == ref.String() &&
				r.QueryRejectCondition == enumspb.QUERY_REJECT_CONDITION_NOT_OPEN
		})).Return(res, err).Once()
	}
	t.Run("running, asked first", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		eventQuery(c, &client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{running}}, nil)
		b, err := (&Service{Client: c, BuildsInEvents: true}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusRunning, b.Status)
		require.Equal(t, "app/3", b.Event)
		require.Equal(t, evID, b.Workflow, "the workflow a page links to is the event's")
		require.Equal(t, []string{"h1"}, b.credentials, "the credential hash stays in the API")
		require.Empty(t, b.AttemptList[0].CredentialHash)
	})
	t.Run("ended", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		eventQuery(c, &client.QueryWorkflowWithOptionsResponse{QueryRejected: &querypb.QueryRejected{Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}}, nil)
		ended := running
		ended.Status = workflows.StatusSuccess
		run := mocks.NewWorkflowRun(t)
		run.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, ptr any) error {
			*ptr.(*workflows.EventState) = workflows.EventState{Builds: []workflows.BuildState{ended}}
			return nil
		}).Once()
		c.On("GetWorkflow", mock.Anything, evID, "").Return(run).Once()
		b, err := (&Service{Client: c, BuildsInEvents: true}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusSuccess, b.Status)
	})
	t.Run("no build workflow: its event", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == ref.WorkflowID()
		})).Return(nil, serviceerror.NewNotFound("workflow not found")).Once()
		eventQuery(c, &client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{running}}, nil)
		b, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusRunning, b.Status)
	})
	t.Run("the event cannot be asked: an error, not a missing build", func(t *testing.T) {
		// A busy or restarting controller must not make a running build
		// look gone: its executor would fail it.
		t.Parallel()
		c := mocks.NewClient(t)
		eventQuery(c, nil, serviceerror.NewUnavailable("no poller seen for task queue recently"))
		_, err := (&Service{Client: c, BuildsInEvents: true}).buildRecord(context.Background(), ref)
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrNotFound)
	})
	t.Run("no build workflow, and the event cannot be asked", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == ref.WorkflowID()
		})).Return(nil, serviceerror.NewNotFound("workflow not found")).Once()
		eventQuery(c, nil, serviceerror.NewDeadlineExceeded("query timed out"))
		_, err := (&Service{Client: c}).buildRecord(context.Background(), ref)
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrNotFound)
	})
	t.Run("an event that runs no such build: its build workflow", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		eventQuery(c, nil, serviceerror.NewQueryFailed("unknown queryType build"))
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == ref.WorkflowID()
		})).Return(nil, serviceerror.NewNotFound("workflow not found")).Once()
		_, err := (&Service{Client: c, BuildsInEvents: true}).buildRecord(context.Background(), ref)
		require.ErrorIs(t, err, ErrNotFound)
	})
}

// Cancelling a build its event runs is one update to the event naming who
// cancels it; a build that ended answers as an ended build workflow does
// (not found).
func TestCancelOwnedBuild(t *testing.T) {
	t.Parallel()
	ref := workflows.BuildRef{Pipeline: "app", Job: "test", Event: 3}
	evID := ref.EventRef().WorkflowID()
	answer := func(c *mocks.Client, st workflows.BuildState) {
		c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
			return r.WorkflowID == evID && r.QueryType == workflows.QueryBuild
		})).Return(&client.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{st}}, nil).Once()
	}
	t.Run("waiting", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		answer(c, workflows.BuildState{ID: ref.String(), Build: ref, Status: workflows.StatusQueued})
		h := mocks.NewWorkflowUpdateHandle(t)
		h.On("Get", mock.Anything, mock.Anything).Return(nil).Once()
		c.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
			return o.WorkflowID == evID && o.UpdateName == workflows.UpdateCancelBuild &&
				len(o.Args) == 1 && o.Args[0] == workflows.CancelBuildRequest{Build: ref.String(), By: "dana"}
		})).Return(h, nil).Once()
		s := &Service{Client: c, BuildsInEvents: true}
		require.NoError(t, s.CancelBuild(context.Background(), queue.Identity{User: "dana"}, ref))
	})
	t.Run("ended", func(t *testing.T) {
		t.Parallel()
		c := mocks.NewClient(t)
		answer(c, workflows.BuildState{ID: ref.String(), Build: ref, Status: workflows.StatusSuccess})
		err := (&Service{Client: c, BuildsInEvents: true}).CancelBuild(context.Background(), queue.Identity{User: "dana"}, ref)
		require.ErrorIs(t, err, ErrNotFound)
		require.ErrorContains(t, err, "already ended SUCCESS")
	})
}

// An event that runs its builds lists them in its memo, one key per build:
// the API reads each back with what a build workflow's search attributes
// would have said, and skips other keys.
func TestOwnedFromVisibility(t *testing.T) {
	t.Parallel()
	dc := converter.GetDefaultDataConverter()
	queuedAt := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	payload := func(v any) *commonpb.Payload {
		p, err := dc.ToPayload(v)
		require.NoError(t, err)
		return p
	}
	queued := workflows.BuildSummary{
		Status: workflows.StatusQueued, Queue: "linux", Priority: 2, Reason: "waiting for a slot on queue linux",
		WaitCode: workflows.WaitSlotBusy, QueuedTime: queuedAt,
	}
	ended := workflows.BuildSummary{Status: workflows.StatusSuccess, Queue: "linux", Cause: workflows.CauseSucceeded, Executor: "exec-a", Attempts: 1}
	ex := &workflowpb.WorkflowExecutionInfo{
		Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{
			workflows.OwnedBuildMemo("app/test/3"):  payload(queued),
			workflows.OwnedBuildMemo("app/lint/3"):  payload(ended),
			workflows.MemoStatuses:                  payload("off: local"),
			workflows.OwnedBuildMemo("not a build"): payload(ended),
		}},
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.SASHA.GetName(): payload("abc123"), workflows.SABranch.GetName(): payload("main"),
		}},
	}
	got := ownedFromVisibility(ex)
	require.Len(t, got, 2)
	lint, test := got[0], got[1]
	require.Equal(t, "app/lint/3", lint.ID)
	require.Equal(t, workflows.StatusSuccess, lint.Status)
	require.Equal(t, "exec-a", lint.Executor)
	require.Equal(t, "app/test/3", test.ID)
	require.Equal(t, "app/3", test.Event)
	require.Equal(t, workflows.StatusQueued, test.Status)
	require.Equal(t, "linux", test.Queue)
	require.Equal(t, 2, test.Priority)
	require.Equal(t, workflows.WaitSlotBusy, test.WaitCode)
	require.Equal(t, "abc123", test.SHA)
	require.Equal(t, "main", test.Branch)
	require.True(t, test.QueuedTime.Equal(queuedAt))
}

// With SLUICE_BUILDS_IN_EVENTS a page of builds comes from both places a
// build can be — build workflows and the memos of events that run their
// builds — newest first, filtered alike, and its token continues both.
func TestListBuildsFromBothPlaces(t *testing.T) {
	t.Parallel()
	dc := converter.GetDefaultDataConverter()
	payload := func(v any) *commonpb.Payload {
		p, err := dc.ToPayload(v)
		require.NoError(t, err)
		return p
	}
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	legacy := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "build/app/test/1"},
		StartTime: timestamppb.New(t0),
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.SAStatus.GetName(): payload("SUCCESS"), workflows.SAQueue.GetName(): payload("default"),
		}},
	}
	event := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "event/app/2"},
		Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{
			workflows.OwnedBuildMemo("app/test/2"): payload(workflows.BuildSummary{Status: workflows.StatusSuccess, Queue: "default", CreateTime: t0.Add(time.Minute)}),
			workflows.OwnedBuildMemo("app/lint/2"): payload(workflows.BuildSummary{Status: workflows.StatusFailure, Queue: "default", CreateTime: t0.Add(time.Minute)}),
		}},
	}
	list := func(c *mocks.Client, kind, token string, res *workflowservice.ListWorkflowExecutionsResponse) {
		c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
			return strings.Contains(r.GetQuery(), "WorkflowType = '"+kind+"'") && string(r.GetNextPageToken()) == token
		})).Return(res, nil).Once()
	}
	c := mocks.NewClient(t)
	list(c, "BuildWorkflow", "", &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{legacy}, NextPageToken: []byte("L")})
	list(c, "BuildWorkflow", "L", &workflowservice.ListWorkflowExecutionsResponse{NextPageToken: []byte("M")})
	list(c, "EventWorkflow", "", &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{event}})
	s := &Service{Client: c, BuildsInEvents: true}
	got, next, err := s.ListBuildsPage(context.Background(), BuildFilter{Pipeline: "app", Job: "test", Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 2, "lint/2 is not job test")
	require.Equal(t, "app/test/2", got[0].ID, "newest first")
	require.Equal(t, "app/test/1", got[1].ID)
	require.Equal(t, "o.TQ.~.0", next, "the build workflows go on; the events are done")

	// The next page asks the build workflows only.
	list(c, "BuildWorkflow", "M", &workflowservice.ListWorkflowExecutionsResponse{})
	got, next, err = s.ListBuildsPage(context.Background(), BuildFilter{Pipeline: "app", Job: "test", Limit: 10, Page: next})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Empty(t, next)

	_, _, err = s.ListBuildsPage(context.Background(), BuildFilter{Page: "not-ours"})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, ownedEventsQuery(BuildFilter{Status: workflows.StatusQueued, Queue: "linux"}), "SluiceOpenBuilds = 'QUEUED@linux'")
}

// A page of builds holds at most its limit even when one event runs more
// builds than that: the next page lists the same events again past the
// builds already listed.
func TestListBuildsPagesWithinAnEvent(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	fields := map[string]*commonpb.Payload{}
	for i := 1; i <= 3; i++ {
		p, err := converter.GetDefaultDataConverter().ToPayload(workflows.BuildSummary{
			Status: workflows.StatusQueued, Queue: "default", CreateTime: t0.Add(time.Duration(i) * time.Second),
		})
		require.NoError(t, err)
		fields[workflows.OwnedBuildMemo(fmt.Sprintf("app/test/5/%d", i))] = p
	}
	event := &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: "event/app/5"}, Memo: &commonpb.Memo{Fields: fields}}
	c := mocks.NewClient(t)
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return strings.Contains(r.GetQuery(), "WorkflowType = 'BuildWorkflow'")
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{}, nil).Once()
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return strings.Contains(r.GetQuery(), "WorkflowType = 'EventWorkflow'") && len(r.GetNextPageToken()) == 0
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{event}}, nil).Twice()
	s := &Service{Client: c, BuildsInEvents: true}

	got, next, err := s.ListBuildsPage(context.Background(), BuildFilter{Pipeline: "app", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"app/test/5/3", "app/test/5/2"}, buildIDs(got), "the limit, newest first")
	require.Equal(t, "o.~..2", next, "the same events' first page, past two builds")

	got, next, err = s.ListBuildsPage(context.Background(), BuildFilter{Pipeline: "app", Limit: 2, Page: next})
	require.NoError(t, err)
	require.Equal(t, []string{"app/test/5/1"}, buildIDs(got))
	require.Empty(t, next)

	for _, bad := range []string{"o.a.b.-1", "o.a.b.x", "o.a.b.1.2", "o.a"} {
		_, _, err := s.ListBuildsPage(context.Background(), BuildFilter{Page: bad})
		require.ErrorIs(t, err, ErrInvalid, bad)
	}
}

func buildIDs(bs []Build) []string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	return ids
}

// A deleted queue's unclaimed builds fail: build workflows by a lane
// message, and, with SLUICE_BUILDS_IN_EVENTS, the events that run builds
// able to reach it by their queue-deleted signal.
func TestFailBuildsOfADeletedQueueInEvents(t *testing.T) {
	t.Parallel()
	c := mocks.NewClient(t)
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return strings.Contains(r.GetQuery(), "WorkflowType = 'BuildWorkflow'")
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{}, nil).Once()
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return strings.Contains(r.GetQuery(), "WorkflowType = 'EventWorkflow'") && strings.Contains(r.GetQuery(), "SluiceQueues = 'gpu'")
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		{Execution: &commonpb.WorkflowExecution{WorkflowId: "event/app/4"}},
	}}, nil).Once()
	c.On("SignalWorkflow", mock.Anything, "event/app/4", "", workflows.SignalQueueDeleted,
		workflows.QueueDeleted{Queue: "gpu", Reason: "queue gpu was deleted while the build waited for it"}).Return(nil).Once()
	s := &Service{Client: c, BuildsInEvents: true, Logger: slog.New(slog.DiscardHandler)}
	s.failBuildsOf(context.Background(), "gpu")
}

// A waiting build's place in line is ranked in memory from one list of
// its queue's line; past maxLineListed build workflows, each place among
// them is a visibility count.
func TestPlaceInLine(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	queued := func(id string, prio int, at time.Time) *workflowpb.WorkflowExecutionInfo {
		memo, err := converter.GetDefaultDataConverter().ToPayload(workflows.BuildSummary{QueuedTime: at})
		require.NoError(t, err)
		enc := func(v any) *commonpb.Payload {
			p, err := converter.GetDefaultDataConverter().ToPayload(v)
			require.NoError(t, err)
			return p
		}
		return &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: "build/" + id},
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				workflows.SAStatus.GetName(): enc("QUEUED"), workflows.SAQueue.GetName(): enc("linux"), workflows.SAPriority.GetName(): enc(fmt.Sprint(prio)),
			}},
			Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.MemoBuild: memo}},
		}
	}
	me := Build{ID: "app/test/3", Queue: "linux", Status: workflows.StatusQueued, Priority: 5, QueuedTime: t0.Add(time.Minute)}

	c := mocks.NewClient(t)
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		queued("app/test/1", 5, t0),                    // same priority, earlier: ahead
		queued("app/test/2", 1, t0.Add(2*time.Minute)), // higher priority: ahead
		queued("app/test/3", 5, t0.Add(time.Minute)),   // itself
		queued("app/test/4", 5, t0.Add(2*time.Minute)), // later: behind
		queued("app/test/5", 9, t0),                    // lower priority: behind
	}}, nil).Once()
	s := &Service{Client: c}
	l, err := s.lineOf(context.Background(), "linux")
	require.NoError(t, err)
	n, err := s.ahead(context.Background(), l, &me)
	require.NoError(t, err)
	require.Equal(t, 2, n, "no count: the whole line was listed")

	var many []*workflowpb.WorkflowExecutionInfo
	for i := range maxLineListed + 1 {
		many = append(many, queued(fmt.Sprintf("app/test/%d", 10+i), 5, t0))
	}
	c = mocks.NewClient(t)
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: many}, nil).Once()
	c.On("CountWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.CountWorkflowExecutionsRequest) bool {
		return strings.Contains(r.GetQuery(), "SluicePriority < 5")
	})).Return(&workflowservice.CountWorkflowExecutionsResponse{Count: 300}, nil).Once()
	s = &Service{Client: c}
	l, err = s.lineOf(context.Background(), "linux")
	require.NoError(t, err)
	n, err = s.ahead(context.Background(), l, &me)
	require.NoError(t, err)
	require.Equal(t, 300, n, "counted: more waited than were listed")
}
