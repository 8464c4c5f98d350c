package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/workflows"
)

// ListArtifacts lists a build's artifacts.
func (c *Client) ListArtifacts(ctx context.Context, build string) (ArtifactList, error) {
	var out ArtifactList
	return out, c.do(ctx, http.MethodGet, "/api/v1/builds/"+seg(strings.TrimPrefix(build, "build/"))+"/artifacts", nil, &out)
}

// DownloadArtifact writes one of a build's artifacts to w.
func (c *Client) DownloadArtifact(ctx context.Context, build, path string, w io.Writer) (int64, error) {
	return c.raw(ctx, http.MethodGet, "/api/v1/builds/"+seg(strings.TrimPrefix(build, "build/"))+"/artifacts/"+artifactPathURL(path), nil, nil, w)
}

// EventArtifact writes an artifact of an event's build of job to w.
func (c *Client) EventArtifact(ctx context.Context, event, job, path string, w io.Writer) (int64, error) {
	ref, err := workflows.ParseEventRef(event)
	if err != nil {
		return 0, err
	}
	p := "/api/v1/events/" + seg(ref.Pipeline) + "/" + strconv.Itoa(ref.Number) + "/jobs/" + seg(job) + "/artifacts/" + artifactPathURL(path)
	return c.raw(ctx, http.MethodGet, p, nil, nil, w)
}

// PutArtifact uploads one artifact of an attempt (executors), presenting
// the attempt's credential.
func (c *Client) PutArtifact(ctx context.Context, build string, attempt int, credential, path string, body io.Reader) error {
	hdr := http.Header{attemptCredentialHeader: {credential}, "Content-Type": {"application/octet-stream"}}
	p := "/api/v1/builds/" + seg(build) + "/artifacts/" + artifactPathURL(path) + "?attempt=" + strconv.Itoa(attempt)
	_, err := c.raw(ctx, http.MethodPut, p, hdr, body, io.Discard)
	return err
}

func artifactPathURL(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = seg(s)
	}
	return strings.Join(parts, "/")
}

// raw sends body as is and copies a successful answer's body to w.
func (c *Client) raw(ctx context.Context, method, path string, hdr http.Header, body io.Reader, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	} else if c.Build != "" {
		req.Header.Set(BuildHeader, c.Build)
		req.Header.Set(attemptCredentialHeader, c.BuildCredential)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	hc := *c.HTTP
	hc.Timeout = 0 // artifacts may be large: ctx bounds the request
	resp, err := hc.Do(req)
	if err != nil {
		return 0, &UnreachableError{URL: c.BaseURL, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			return 0, &Error{Status: resp.StatusCode, Message: eb.Error}
		}
		return 0, &Error{Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("read %s: %w", path, err)
	}
	return n, nil
}

func (d clientBuildData) SaveArtifact(ctx context.Context, req activities.ArtifactSave) error {
	return d.c.PutArtifact(ctx, req.Build, req.Attempt, req.Credential, req.Path, req.Body)
}

func (d localBuildData) SaveArtifact(ctx context.Context, req activities.ArtifactSave) error {
	if d.blobs == nil {
		return ErrNoBlobStore
	}
	if err := CheckArtifactPath(req.Path); err != nil {
		return err
	}
	_, err := d.blobs.Put(ctx, artifactPrefix(req.Build)+req.Path, req.Body)
	return err
}
