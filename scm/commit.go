package scm

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Commit is what a commit says about itself: its author and message.
type Commit struct {
	Author  string    `json:"author,omitempty"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

// MaxCommitMessage bounds the message CommitOf answers (longer ones are cut).
const MaxCommitMessage = 4096

// CommitReader is implemented by repositories with history (git): what a
// commit says about itself.
type CommitReader interface {
	CommitOf(ctx context.Context, sha string) (Commit, error)
}

// CommitOf implements CommitReader.
func (r *gitRepo) CommitOf(ctx context.Context, sha string) (Commit, error) {
	full, err := r.ensureCommit(ctx, sha)
	if err != nil {
		return Commit{}, fmt.Errorf("read commit %s in %s: %w", sha, r.display, err)
	}
	out, err := runGit(ctx, r.mirror, nil, "show", "-s", "--no-show-signature", "--format=%an%x00%aI%x00%B", full)
	if err != nil {
		return Commit{}, fmt.Errorf("read commit %s in %s: %w", full, r.display, err)
	}
	return parseCommit(string(out)), nil
}

// parseCommit reads `git show -s --format=%an%x00%aI%x00%B`.
func parseCommit(out string) Commit {
	parts := strings.SplitN(out, "\x00", 3)
	var c Commit
	if len(parts) > 0 {
		c.Author = strings.TrimSpace(parts[0])
	}
	if len(parts) > 1 {
		c.Time, _ = time.Parse(time.RFC3339, strings.TrimSpace(parts[1]))
	}
	if len(parts) > 2 {
		c.Message = cutMessage(strings.TrimSpace(parts[2]))
	}
	return c
}

// cutMessage cuts a message to MaxCommitMessage bytes, on a rune boundary.
func cutMessage(m string) string {
	if len(m) <= MaxCommitMessage {
		return m
	}
	n := MaxCommitMessage
	for n > 0 && m[n]&0xC0 == 0x80 {
		n--
	}
	return m[:n]
}
