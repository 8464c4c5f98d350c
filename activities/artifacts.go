package activities

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// artifactsLog is the log (a step of its own, after the build's steps)
// where the executor says which artifacts it uploaded and which it
// skipped.
const artifactsLog = "sd-teardown-artifacts"

// uploadArtifactsTimeout bounds uploading one build's artifacts.
const uploadArtifactsTimeout = 30 * time.Minute

// artifactFile is one regular file of the artifacts directory.
type artifactFile struct {
	path string // '/'-separated, relative to the directory
	size int64
}

// listArtifacts walks dir in lexical order: its regular files, and what it
// holds that is not one (symlinks, devices: never followed nor uploaded).
func listArtifacts(dir string) (files []artifactFile, other []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			other = append(other, rel)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, artifactFile{path: rel, size: info.Size()})
		return nil
	})
	return files, other, err
}

// hasArtifacts reports whether the build left anything in its artifacts
// directory (an unreadable one counts: uploading it says why it failed).
func hasArtifacts(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err != nil || len(entries) > 0
}

// uploadArtifacts uploads the files the build left in its artifacts
// directory, in lexical order, while they fit in ArtifactMax; the log
// names every file uploaded and every file skipped, and why. An upload
// that fails is an error (the build fails); files over the cap are not.
func (a *Activities) uploadArtifacts(ctx context.Context, k *keepWork, log io.Writer) error {
	files, other, err := listArtifacts(k.ArtifactsDir)
	if err != nil {
		return fmt.Errorf("read the artifacts directory: %w", err)
	}
	if a.BuildData == nil {
		_, _ = fmt.Fprintf(log, "sluice: %d artifact(s) not kept: this executor has no API to upload them to (SLUICE_API_URL)\n", len(files))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uploadArtifactsTimeout)
	defer cancel()
	var total, sent int64
	var skipped []string
	n := 0
	for _, af := range files {
		if total+af.size > a.ArtifactMax {
			skipped = append(skipped, fmt.Sprintf("%s (%d bytes)", af.path, af.size))
			continue
		}
		if err := a.uploadArtifact(ctx, k, af); err != nil {
			_, _ = fmt.Fprintf(log, "sluice: artifact %s: upload failed: %v\n", af.path, err)
			return fmt.Errorf("artifact %s: %w", af.path, err)
		}
		total += af.size
		sent += af.size
		n++
		_, _ = fmt.Fprintf(log, "sluice: artifact %s (%d bytes) uploaded\n", af.path, af.size)
	}
	_, _ = fmt.Fprintf(log, "sluice: %d artifact(s), %d bytes uploaded (cap SLUICE_ARTIFACT_MAX=%d bytes per build)\n", n, sent, a.ArtifactMax)
	if len(skipped) > 0 {
		_, _ = fmt.Fprintf(log, "sluice: %d artifact(s) SKIPPED, over the cap of %d bytes per build (SLUICE_ARTIFACT_MAX): %s\n",
			len(skipped), a.ArtifactMax, strings.Join(skipped, ", "))
	}
	if len(other) > 0 {
		_, _ = fmt.Fprintf(log, "sluice: not regular files, not uploaded (symlinks are never followed): %s\n", strings.Join(other, ", "))
	}
	return nil
}

func (a *Activities) uploadArtifact(ctx context.Context, k *keepWork, af artifactFile) error {
	// O_NOFOLLOW: a symlink put in place after the walk is not followed.
	file, err := os.OpenFile(filepath.Join(k.ArtifactsDir, filepath.FromSlash(af.path)), os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err //nolint:wrapcheck // the caller names the artifact
	}
	defer func() { _ = file.Close() }()
	return a.BuildData.SaveArtifact(ctx, ArtifactSave{ //nolint:wrapcheck // the caller names the artifact
		Build: k.Build, Attempt: k.Attempt, Credential: k.Credential, Path: af.path, Body: io.LimitReader(file, af.size),
	})
}
