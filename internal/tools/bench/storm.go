package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/workflows"
)

// runStorm: pushes to one pipeline through POST /webhooks/github, one per
// commit, all within a few seconds. The job collapses (the default), so
// while one build runs the waiting ones collapse into the newest: few
// builds run. Reports how many ran steps and the webhook's p99.
func runStorm(ctx context.Context, b *bench) (string, error) {
	s, err := b.newStackWithExecutors(ctx, "storm")
	if err != nil {
		return "", err
	}
	defer s.close(ctx)
	rec := filepath.Join(s.dir, "records")
	r, err := newRepo(ctx, filepath.Join(s.dir, "repo"), specYAML([]job{{name: "main", requires: []string{"~commit"}, cmd: recordCmd(rec, "sleep 1")}}))
	if err != nil {
		return "", err
	}
	n := b.plan.stormPushes
	b.progress("collapse_storm: making %d commits", n+1)
	shas := make([]string, n+1)
	for i := range shas {
		if shas[i], err = r.commit(ctx, map[string]string{"change.txt": strconv.Itoa(i)}, fmt.Sprintf("change %d", i)); err != nil {
			return "", err
		}
	}
	if err := s.createPipeline(ctx, "storm", r.dir); err != nil {
		return "", err
	}
	hc := newHTTPClient()
	url := s.apiURL + "/webhooks/github"
	// Warm-up push: fills the webhook's pipeline index and the mirrors.
	warm, _, err := push(ctx, hc, url, r.dir, "warm-up", "", shas[0])
	if err == nil {
		warm, err = s.numbered(ctx, warm)
	}
	if err != nil {
		return "", err
	}
	if _, err := waitEvents(ctx, s.Client, []string{warm.ID}); err != nil {
		return "", err
	}
	if err := waitFor(ctx, "the warm-up build's record", 10*time.Second, func() (bool, error) {
		spans, err := readRecords(rec)
		return len(spans) == 1 && !spans[workflows.BuildRef{Pipeline: "storm", Job: "main", Event: 1}.String()].end.IsZero(), err
	}); err != nil {
		return "", err
	}
	if err := truncate(rec); err != nil {
		return "", err
	}

	window := time.Duration(b.plan.stormWindow * float64(time.Second))
	every := window / time.Duration(n)
	b.progress("collapse_storm: %d pushes, one every %s", n, every)
	started := make([]api.EventStarted, n)
	lats := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			started[i], lats[i], errs[i] = push(ctx, hc, url, r.dir, fmt.Sprintf("storm-%d", i), shas[i], shas[i+1])
		})
	}
	sent := time.Since(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}
	b.progress("collapse_storm: %d pushes sent in %s, answered by %s; waiting for the events", n, sent.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	// The answers a webhook got pending (admitted past the API's admit
	// wait) have their numbers once the pipeline handled them.
	ids := make([]string, n)
	pending := 0
	err = parallel(n, n, func(i int) error {
		ev, err := s.numbered(ctx, started[i])
		ids[i] = ev.ID
		return err
	})
	if err != nil {
		return "", err
	}
	for _, ev := range started {
		if ev.Pending {
			pending++
		}
	}
	res, err := waitEvents(ctx, s.Client, ids)
	if err != nil {
		b.progress("collapse_storm: %v; the pipeline's lanes: %s", err, lanesOf(ctx, s, "storm"))
		return "", err
	}
	counts := map[workflows.Status]int{}
	for _, st := range res {
		for _, j := range st.Jobs {
			counts[j.Status]++
		}
	}
	spans, err := readRecords(rec)
	if err != nil {
		return "", err
	}
	if counts[workflows.StatusSuccess] != len(spans) {
		return "", fmt.Errorf("%d builds succeeded but %d recorded their step", counts[workflows.StatusSuccess], len(spans))
	}
	return fmt.Sprintf("collapse_storm pushes=%d builds_run=%d webhook_p99_ms=%.1f webhook_p50_ms=%.1f collapsed=%d sent_s=%.2f drained_s=%.1f answered_pending=%d",
		n, len(spans), ms(percentile(lats, 99)), ms(percentile(lats, 50)), counts[workflows.StatusCollapsed],
		sent.Seconds(), time.Since(start).Seconds(), pending), nil
}

// push posts one GitHub push delivery of sha to the webhook and returns the
// event it started and how long the call took.
func push(ctx context.Context, hc *http.Client, url, repoDir, delivery, before, sha string) (api.EventStarted, time.Duration, error) {
	body, err := json.Marshal(pushPayload(repoDir, before, sha))
	if err != nil {
		return api.EventStarted{}, 0, fmt.Errorf("encode push: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return api.EventStarted{}, 0, fmt.Errorf("push %s: %w", delivery, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return api.EventStarted{}, 0, fmt.Errorf("push %s: %w", delivery, err)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(t0)
	if err != nil {
		return api.EventStarted{}, 0, fmt.Errorf("push %s: read answer: %w", delivery, err)
	}
	var res api.WebhookResult
	if err := json.Unmarshal(data, &res); err != nil || resp.StatusCode != http.StatusAccepted || len(res.Events) != 1 {
		return api.EventStarted{}, 0, fmt.Errorf("push %s: %s: %s", delivery, resp.Status, bytes.TrimSpace(data))
	}
	return res.Events[0], took, nil
}

// pushPayload is a GitHub push to main of the local repository at dir (its
// clone URL is a file:// URL, which matches the pipeline's repository).
func pushPayload(dir, before, sha string) map[string]any {
	commit := map[string]any{
		"id": sha, "distinct": true, "message": "change", "timestamp": time.Now().UTC().Format(time.RFC3339),
		"author":   map[string]any{"name": "Bench", "email": "bench@sluice.invalid", "username": "bench"},
		"added":    []string{},
		"removed":  []string{},
		"modified": []string{"change.txt"},
	}
	if before == "" {
		before = "0000000000000000000000000000000000000000"
	}
	return map[string]any{
		"ref": "refs/heads/main", "before": before, "after": sha,
		"repository": map[string]any{
			"name": "bench", "full_name": "sluice-bench/bench", "default_branch": "main",
			"clone_url": "file://" + dir, "html_url": "https://example.invalid/sluice-bench/bench",
		},
		"pusher":      map[string]any{"name": "bench"},
		"sender":      map[string]any{"login": "bench"},
		"created":     false,
		"deleted":     false,
		"forced":      false,
		"commits":     []any{commit},
		"head_commit": commit,
	}
}

// lanesOf is pipeline's lanes as JSON, for a figure that timed out (ctx
// may have ended: the read gets 10 s of its own).
func lanesOf(ctx context.Context, s *stack, pipeline string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	v, err := s.Client.QueryWorkflow(ctx, workflows.PipelineWorkflowID(pipeline), "", workflows.QueryPipeline)
	if err != nil {
		return err.Error()
	}
	var info workflows.PipelineInfo
	if err := v.Get(&info); err != nil {
		return err.Error()
	}
	out, err := json.Marshal(info.Lanes)
	if err != nil {
		return err.Error()
	}
	return string(out)
}
