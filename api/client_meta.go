package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/blobstore"
	"github.com/sluice-ci/sluice/internal/buildmeta"
	"github.com/sluice-ci/sluice/workflows"
)

// GetBuildMeta returns a build's metadata (saved, or what it starts with).
func (c *Client) GetBuildMeta(ctx context.Context, id string) (BuildMetaResponse, error) {
	var out BuildMetaResponse
	return out, c.do(ctx, http.MethodGet, "/api/v1/builds/"+seg(strings.TrimPrefix(id, "build/"))+"/meta", nil, &out)
}

// StartBuildMeta is GetBuildMeta for the executor running attempt of
// build id: it presents the attempt's credential, so that the API takes the
// attempt's log and metadata writes that follow within seconds without
// reading the build's record again.
func (c *Client) StartBuildMeta(ctx context.Context, id string, attempt int, credential string) (BuildMetaResponse, error) {
	var out BuildMetaResponse
	hdr := http.Header{attemptCredentialHeader: {credential}}
	path := "/api/v1/builds/" + seg(id) + "/meta?attempt=" + strconv.Itoa(attempt)
	return out, c.doWith(ctx, http.MethodGet, path, hdr, nil, &out)
}

// SaveBuildMeta uploads the metadata an attempt ended with, presenting the
// attempt's credential (executors).
func (c *Client) SaveBuildMeta(ctx context.Context, id, credential string, req SaveMetaRequest) error {
	hdr := http.Header{attemptCredentialHeader: {credential}}
	return c.doWith(ctx, http.MethodPut, "/api/v1/builds/"+seg(id)+"/meta", hdr, req, nil)
}

// JobMeta returns the metadata of a job's last successful build.
func (c *Client) JobMeta(ctx context.Context, pipeline, job string) (JobMetaResponse, error) {
	var out JobMetaResponse
	return out, c.do(ctx, http.MethodGet, "/api/v1/pipelines/"+seg(pipeline)+"/jobs/"+seg(job)+"/meta", nil, &out)
}

// BuildData is the client as an executor's way to builds' metadata.
func (c *Client) BuildData() activities.BuildData { return clientBuildData{c} }

type clientBuildData struct{ c *Client }

func (d clientBuildData) StartMeta(ctx context.Context, req activities.MetaStart) ([]byte, error) {
	m, err := d.c.StartBuildMeta(ctx, req.Build, req.Attempt, req.Credential)
	if err != nil {
		return nil, err
	}
	return m.Meta, nil
}

func (d clientBuildData) SaveMeta(ctx context.Context, req activities.MetaSave) error {
	return d.c.SaveBuildMeta(ctx, req.Build, req.Credential, SaveMetaRequest{Attempt: req.Attempt, Status: req.Status, Meta: req.Meta})
}

// LocalBuildData is the service as the way to builds' metadata of an
// executor in the API's own process (sluice dev): no credential to
// present.
func (s *Service) LocalBuildData(blobs *blobstore.Store) activities.BuildData {
	return localBuildData{s: s, blobs: blobs}
}

type localBuildData struct {
	s     *Service
	blobs *blobstore.Store
}

func (d localBuildData) StartMeta(ctx context.Context, req activities.MetaStart) ([]byte, error) {
	ref, err := workflows.ParseBuildRef(req.Build)
	if err != nil {
		return nil, err
	}
	m, err := d.s.GetBuildMeta(ctx, ref)
	if err != nil {
		return nil, err
	}
	return m.Meta, nil
}

func (d localBuildData) SaveMeta(ctx context.Context, req activities.MetaSave) error {
	ref, err := workflows.ParseBuildRef(req.Build)
	if err != nil {
		return err
	}
	if _, err := buildmeta.Parse(req.Meta); err != nil {
		return err
	}
	return d.s.SaveBuildMeta(ctx, ref, SaveMetaRequest{Attempt: req.Attempt, Status: req.Status, Meta: req.Meta})
}
