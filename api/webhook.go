package api

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-ci/sluice/scm"
	"github.com/sluice-ci/sluice/workflows"
)

// pipelineIndexTTL bounds how stale the webhook's view of pipelines may be;
// creating, changing or deleting a pipeline through this API resets it.
const pipelineIndexTTL = 10 * time.Second

type pipelineIndex struct {
	mu   sync.Mutex
	at   time.Time
	list []Pipeline
}

func (s *Service) pipelines(ctx context.Context) ([]Pipeline, error) {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	if s.idx.list != nil && s.now().Sub(s.idx.at) < pipelineIndexTTL {
		return s.idx.list, nil
	}
	ps, err := s.ListPipelines(ctx)
	if err != nil {
		return nil, err
	}
	s.idx.list, s.idx.at = ps, s.now()
	return ps, nil
}

func (s *Service) forgetPipelines() {
	s.idx.mu.Lock()
	s.idx.list = nil
	s.idx.mu.Unlock()
}

// Webhook starts an event in every pipeline whose repository the delivery
// names. Redeliveries start nothing new: the delivery ID deduplicates.
func (s *Service) Webhook(ctx context.Context, hook *scm.Hook) WebhookResult {
	var res WebhookResult
	ps, err := s.pipelines(ctx)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	t := workflows.Trigger{
		Kind: workflows.TriggerKind(hook.Kind), Branch: hook.Branch, Ref: hook.Ref, SHA: hook.SHA, Before: hook.Before,
		PR: hook.PRNumber, ChangedFiles: hook.ChangedFiles, Sender: hook.Sender,
		DeliveryID: hook.Provider + ":" + hook.BodyHash, // the body, not the unsigned header: a replay is a duplicate
		Fork:       hook.Fork && (hook.Kind == scm.HookPR || hook.Kind == scm.HookPRClosed),
		SkipCI:     hook.SkipCI,
		Title:      hook.Title, Author: hook.Author, Message: hook.Message,
	}
	workflows.ClipChange(&t)
	for _, p := range ps {
		if !hook.Matches(p.Repo) {
			continue
		}
		ev, err := s.startEvent(ctx, p.Name, workflows.StartEventRequest{Trigger: t, Creator: hook.Provider + ":" + hook.Sender})
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("pipeline %s: %v", p.Name, err))
			continue
		}
		res.Events = append(res.Events, ev)
		if hook.SkipCI != "" {
			res.Skipped = append(res.Skipped, fmt.Sprintf("event %s: skipped, the head commit %s's message says %s", ev.ID, shortSHA(hook.SHA), hook.SkipCI))
		}
	}
	if len(res.Events) == 0 && len(res.Errors) == 0 {
		res.Ignored = fmt.Sprintf("no pipeline uses repository %s", hook.RepoFullName)
	}
	return res
}
