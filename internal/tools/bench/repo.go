package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// repo is a real git repository on branch main.
type repo struct {
	dir string
}

// newRepo makes a repository under dir with screwdriver.yaml = spec.
func newRepo(ctx context.Context, dir, spec string) (*repo, error) {
	r := &repo{dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("repo dir: %w", err)
	}
	if _, err := r.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	if _, err := r.commit(ctx, map[string]string{"screwdriver.yaml": spec}, "initial commit"); err != nil {
		return nil, err
	}
	return r, nil
}

// commit writes files and commits them, returning the commit's sha.
func (r *repo) commit(ctx context.Context, files map[string]string, msg string) (string, error) {
	for path, content := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
	}
	if _, err := r.git(ctx, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "commit", "-q", "--allow-empty", "-m", msg); err != nil {
		return "", err
	}
	out, err := r.git(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

func (r *repo) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(baseEnv(), "GIT_AUTHOR_NAME=sluice-bench", "GIT_AUTHOR_EMAIL=bench@sluice.invalid",
		"GIT_COMMITTER_NAME=sluice-bench", "GIT_COMMITTER_EMAIL=bench@sluice.invalid", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), r.dir, err, out)
	}
	return string(out), nil
}

// head is the commit main points at.
func (r *repo) head(ctx context.Context) (string, error) {
	out, err := r.git(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}
