package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/workflows"
)

// TestAdmissionAskerCoalesces: questions about pending starts to one
// pipeline that arrive while a query is in flight go together in the next
// query, each caller gets its own answer, a query's error reaches every
// caller of that query, and other pipelines are asked on their own.
func TestAdmissionAskerCoalesces(t *testing.T) {
	var a admissionAsker
	release := make(chan struct{})
	var queries atomic.Int32
	var mu sync.Mutex
	var asked [][]string
	query := func(_ context.Context, ids []string) ([]workflows.AdmissionSeen, error) {
		if queries.Add(1) == 1 {
			<-release // the first query is slow: the others queue behind it
		}
		mu.Lock()
		asked = append(asked, ids)
		mu.Unlock()
		out := make([]workflows.AdmissionSeen, 0, len(ids))
		for i, id := range ids {
			if id == "adm-refused" {
				out = append(out, workflows.AdmissionSeen{ID: id, Error: "no such branch"})
				continue
			}
			out = append(out, workflows.AdmissionSeen{ID: id, Event: 10 + i})
		}
		return out, nil
	}
	ctx := context.Background()
	type answer struct {
		seen workflows.AdmissionSeen
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		s, err := a.ask(ctx, "p", "adm-first", query)
		first <- answer{s, err}
	}()
	require.Eventually(t, func() bool { return queries.Load() == 1 }, 5*time.Second, time.Millisecond)

	const n = 20
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("adm-%02d", i)
		if i == 7 {
			id = "adm-refused"
		}
		wg.Go(func() {
			s, err := a.ask(ctx, "p", id, query)
			answers[i] = answer{s, err}
		})
	}
	require.Eventually(t, func() bool { return a.queued.waiting("p") == n }, 5*time.Second, time.Millisecond,
		"the questions queue behind the query in flight")
	close(release)
	wg.Wait()
	got := <-first
	require.NoError(t, got.err)
	require.Equal(t, "adm-first", got.seen.ID)
	require.EqualValues(t, 2, queries.Load(), "twenty questions, one query after the first")
	require.Equal(t, []string{"adm-first"}, asked[0])
	require.Len(t, asked[1], n)
	for i, s := range answers {
		require.NoError(t, s.err)
		if i == 7 {
			require.Equal(t, workflows.AdmissionSeen{ID: "adm-refused", Error: "no such branch"}, s.seen)
			continue
		}
		require.Equal(t, fmt.Sprintf("adm-%02d", i), s.seen.ID)
		require.Positive(t, s.seen.Event)
	}

	// A failed query fails each of its callers; the next question asks again.
	boom := errors.New("deadline exceeded")
	_, err := a.ask(ctx, "q", "adm-x", func(context.Context, []string) ([]workflows.AdmissionSeen, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	s, err := a.ask(ctx, "q", "adm-x", query)
	require.NoError(t, err)
	require.Equal(t, "adm-x", s.ID)

	// An ID the pipeline does not answer for comes back with its ID alone
	// (not handled yet: pending).
	s, err = a.ask(ctx, "r", "adm-y", func(context.Context, []string) ([]workflows.AdmissionSeen, error) { return nil, nil })
	require.NoError(t, err)
	require.Equal(t, workflows.AdmissionSeen{ID: "adm-y"}, s)

	// A caller that gives up gets its context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = a.ask(cctx, "s", "adm-z", func(context.Context, []string) ([]workflows.AdmissionSeen, error) {
		time.Sleep(50 * time.Millisecond)
		return nil, nil
	})
	require.ErrorIs(t, err, context.Canceled)
}
