package workflows

import (
	"strings"

	"go.temporal.io/sdk/temporal"
)

// MemoEvent is the memo key of an event workflow's EventSummary: what the
// event lists (the dashboard, `GET /pipelines/{name}/events`) show and
// filter by without asking each event's workflow.
const MemoEvent = "event"

// EventSummary is the part of an event's trigger kept in its memo.
type EventSummary struct {
	Kind   TriggerKind `json:"kind"`
	Branch string      `json:"branch,omitempty"`
	Ref    string      `json:"ref,omitempty"`
	PR     int         `json:"pr,omitempty"`
	Sender string      `json:"sender,omitempty"`
	Remote string      `json:"remote,omitempty"`
	// Title is a pull request's title; Author the head commit's author and
	// Message the first line of its message, as the webhook said.
	Title   string `json:"title,omitempty"`
	Author  string `json:"author,omitempty"`
	Message string `json:"message,omitempty"`
}

// Bounds of the change's texts an event records from a webhook.
const (
	maxTitle   = 256
	maxMessage = 4096
)

// SummaryOf is the memo an event started by t carries.
func SummaryOf(t Trigger, branch string) EventSummary {
	return EventSummary{
		Kind: t.Kind, Branch: branch, Ref: t.Ref, PR: t.PR, Sender: t.Sender, Remote: t.Remote,
		Title: t.Title, Author: t.Author, Message: FirstLine(t.Message),
	}
}

// FirstLine is a commit message's subject (at most 256 bytes).
func FirstLine(msg string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	return Clip(strings.TrimSpace(line), maxTitle)
}

// Clip cuts s to at most n bytes, on a rune boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !runeStart(s[n]) {
		n--
	}
	return s[:n]
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// ClipChange bounds the change's texts a webhook gives a trigger.
func ClipChange(t *Trigger) {
	t.Title = Clip(t.Title, maxTitle)
	t.Author = Clip(t.Author, maxTitle)
	t.Message = Clip(t.Message, maxMessage)
}

// eventSearchAttributes are an event workflow's search attributes: its
// pipeline, ID, status and branch, and a pull request's number.
func eventSearchAttributes(cfg PipelineConfig, ref EventRef, t Trigger) []temporal.SearchAttributeUpdate {
	sas := []temporal.SearchAttributeUpdate{
		SAPipeline.ValueSet(cfg.Name), SAEvent.ValueSet(ref.String()),
		SAStatus.ValueSet(string(StatusRunning)), SABranch.ValueSet(eventBranch(cfg, t)),
	}
	if t.PR > 0 {
		sas = append(sas, SAPR.ValueSet(int64(t.PR)))
	}
	return sas
}
