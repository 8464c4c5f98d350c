package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-ci/sluice/workflows"
)

// The lists the pages and the CLI filter and page through: builds (by
// branch, executor and time besides the older filters) and a pipeline's
// events (by branch, pull request and trigger).

// NextPageHeader carries, on a list's answer, the token of its next page
// (absent on the last page): send it back as ?page=.
const NextPageHeader = "X-Sluice-Next-Page"

// narrow adds the branch, executor and creation time bounds to a
// visibility query.
func narrow(q []string, branch, executor string, since, until time.Time) ([]string, error) {
	if branch != "" {
		q = append(q, workflows.SABranch.GetName()+" = "+quote(branch))
	}
	if executor != "" {
		q = append(q, workflows.SAExecutor.GetName()+" = "+quote(executor))
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return nil, invalid("since %s is not before until %s", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	}
	if !since.IsZero() {
		q = append(q, "StartTime >= "+quote(since.UTC().Format(time.RFC3339Nano)))
	}
	if !until.IsZero() {
		q = append(q, "StartTime < "+quote(until.UTC().Format(time.RFC3339Nano)))
	}
	return q, nil
}

// ParseListTime reads a list's time bound: RFC 3339 (2026-11-26T10:00:00Z),
// a date (2026-11-26, UTC midnight), or a duration before now (2h, 7d).
func ParseListTime(name, v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04", v); err == nil { // an <input type=datetime-local>, read as UTC
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && n > 0 && fmt.Sprint(n) == days {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, invalid("%s %q: want a time (2026-11-26T10:00:00Z), a date (2026-11-26) or how long ago (2h, 7d)", name, v)
}

// listPage lists one page of up to limit executions from the page token
// page ("": the first) and answers the next page's token ("": none).
func (s *Service) listPage(ctx context.Context, query string, limit int, page string) ([]*workflowpb.WorkflowExecutionInfo, string, error) {
	var token []byte
	if page != "" {
		var err error
		if token, err = base64.RawURLEncoding.DecodeString(page); err != nil || len(token) == 0 {
			return nil, "", invalid("page %q: not a page token from a previous answer", page)
		}
	}
	var out []*workflowpb.WorkflowExecutionInfo
	for len(out) < limit {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Namespace, Query: query, NextPageToken: token, PageSize: int32(min(limit-len(out), 1000)), //nolint:gosec // G115: at most 1000
		})
		var bad *serviceerror.InvalidArgument
		if page != "" && errors.As(err, &bad) {
			return nil, "", invalid("page %q: not a page token of this list (%s)", page, bad.Message)
		}
		if err != nil {
			return nil, "", fmt.Errorf("list workflows (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 || len(resp.GetExecutions()) == 0 {
			break // the last page, or an empty one: the caller asks for the next
		}
	}
	if len(token) == 0 {
		return out, "", nil
	}
	return out, base64.RawURLEncoding.EncodeToString(token), nil
}

// EventFilter narrows a pipeline's events.
type EventFilter struct {
	// Branch keeps the events of one branch (a pull request's: its target).
	Branch string
	// PR keeps the events of one pull request.
	PR int
	// Trigger keeps the events of one trigger kind (commit, pr, ...).
	Trigger workflows.TriggerKind
	Limit   int
	// Page is the token of the page to list ("": the first).
	Page string
}

// maxEventScan bounds the visibility pages one filtered event list reads
// when it filters by trigger (kept in each event's memo, not searchable).
const maxEventScan = 20

// ListEventsPage lists one page of a pipeline's events, newest first, and
// the next page's token ("": none). Events recorded before sluice kept
// their trigger in the memo have no trigger kind there: a trigger filter
// leaves them out, and so does a pull request filter.
func (s *Service) ListEventsPage(ctx context.Context, name string, f EventFilter) ([]Event, string, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 20
	}
	if f.PR < 0 {
		return nil, "", invalid("pr %d: must be positive", f.PR)
	}
	if f.Trigger != "" && !f.Trigger.Valid() {
		return nil, "", invalid("trigger %q: want one of commit, pr, pr-closed, release, tag, manual, periodic, remote", f.Trigger)
	}
	q := []string{"WorkflowType = 'EventWorkflow'", workflows.SAPipeline.GetName() + " = " + quote(name)}
	if f.Branch != "" {
		q = append(q, workflows.SABranch.GetName()+" = "+quote(f.Branch))
	}
	if f.PR > 0 {
		q = append(q, fmt.Sprintf("%s = %d", workflows.SAPR.GetName(), f.PR))
	}
	query := strings.Join(q, " AND ")
	var execs []*workflowpb.WorkflowExecutionInfo
	page := f.Page
	for scans := 0; ; scans++ {
		got, next, err := s.listPage(ctx, query, f.Limit, page)
		if err != nil {
			return nil, "", err
		}
		for _, ex := range got {
			if f.Trigger == "" || eventSummary(ex).Kind == f.Trigger {
				execs = append(execs, ex)
			}
		}
		page = next
		if len(execs) >= f.Limit || next == "" || scans+1 >= maxEventScan {
			break
		}
	}
	out := s.eventsFromVisibility(ctx, execs)
	return out, page, nil
}

// eventSummary reads an event workflow's memo (zero: none).
func eventSummary(ex *workflowpb.WorkflowExecutionInfo) workflows.EventSummary {
	var sum workflows.EventSummary
	if f := ex.GetMemo().GetFields()[workflows.MemoEvent]; f != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(f, &sum)
	}
	return sum
}

// eventsFromVisibility turns event executions into events, their trigger
// from the memo, correcting the status of those visibility still shows
// running from their workflows (visibility trails them).
func (s *Service) eventsFromVisibility(ctx context.Context, execs []*workflowpb.WorkflowExecutionInfo) []Event {
	out := make([]Event, 0, len(execs))
	for _, ex := range execs {
		ref, err := workflows.ParseEventRef(ex.GetExecution().GetWorkflowId())
		if err != nil {
			continue
		}
		sa := ex.GetSearchAttributes()
		sum := eventSummary(ex)
		ev := Event{
			ID: ref.String(), Pipeline: ref.Pipeline, Number: ref.Number,
			SHA: saString(sa, workflows.SASHA.GetName()), Status: workflows.Status(saString(sa, workflows.SAStatus.GetName())),
			StartTime: ex.GetStartTime().AsTime(), EndTime: closeTime(ex),
			Trigger: workflows.Trigger{
				Kind: sum.Kind, Branch: saString(sa, workflows.SABranch.GetName()), Ref: sum.Ref, PR: sum.PR, Sender: sum.Sender,
				Remote: sum.Remote, Title: sum.Title, Author: sum.Author, Message: sum.Message,
			},
		}
		if f := ex.GetMemo().GetFields()[workflows.MemoStatuses]; f != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(f, &ev.Statuses)
		}
		out = append(out, ev)
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i := range out {
		if out[i].Status.Final() {
			continue
		}
		g.Go(func() error {
			ref := workflows.EventRef{Pipeline: out[i].Pipeline, Number: out[i].Number}
			desc, err := s.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID(), "")
			if err != nil {
				s.Logger.DebugContext(ctx, "describe_event_failed", "event", out[i].ID, "error", err)
				return nil
			}
			info := desc.GetWorkflowExecutionInfo()
			if st := workflows.Status(saString(info.GetSearchAttributes(), workflows.SAStatus.GetName())); st != "" {
				out[i].Status = st
			}
			if sha := saString(info.GetSearchAttributes(), workflows.SASHA.GetName()); sha != "" {
				out[i].SHA = sha
			}
			out[i].EndTime = closeTime(info)
			return nil
		})
	}
	_ = g.Wait()
	slices.SortStableFunc(out, func(a, b Event) int { return b.Number - a.Number })
	return out
}

// listQuery reads the branch, executor, time and page parameters of a
// build list.
func listQuery(q url.Values, f *BuildFilter) error {
	now := time.Now()
	var err error
	f.Branch, f.Executor, f.Page = strings.TrimSpace(q.Get("branch")), strings.TrimSpace(q.Get("executor")), q.Get("page")
	if f.Since, err = ParseListTime("since", q.Get("since"), now); err != nil {
		return err
	}
	f.Until, err = ParseListTime("until", q.Get("until"), now)
	return err
}

// eventQuery reads an event list's parameters.
func eventQuery(q url.Values, limit int) (EventFilter, error) {
	f := EventFilter{
		Limit: limit, Branch: strings.TrimSpace(q.Get("branch")), Page: q.Get("page"),
		Trigger: workflows.TriggerKind(strings.ToLower(strings.TrimSpace(q.Get("trigger")))),
	}
	for key := range q {
		switch key {
		case "branch", "pr", "trigger", "page", "limit":
		default:
			return f, invalid("unknown query parameter %q (want branch, pr, trigger, page, limit)", key)
		}
	}
	if v := strings.TrimSpace(q.Get("pr")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return f, invalid("query parameter pr=%q: want a pull request number", v)
		}
		f.PR = n
	}
	return f, nil
}
