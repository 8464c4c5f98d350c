// Package fakes3 runs an S3-compatible server in the test process
// (github.com/johannesboyne/gofakes3 with its in-memory backend), so tests
// exercise sluice's s3:// blob store path against real HTTP.
package fakes3

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is one in-memory S3 server.
type Server struct {
	srv     *httptest.Server
	backend *s3mem.Backend
	down    atomic.Bool
}

// Start serves a fresh in-memory S3 until the test ends, with the given
// buckets created.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	s := &Server{backend: s3mem.New()}
	faker := gofakes3.New(s.backend, gofakes3.WithoutVersioning())
	h := faker.Server()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "<Error><Code>ServiceUnavailable</Code><Message>down for the test</Message></Error>", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	for _, b := range buckets {
		if err := s.backend.CreateBucket(b); err != nil {
			t.Fatalf("fakes3: create bucket %s: %v", b, err)
		}
	}
	return s
}

// Endpoint is the server's base URL (http://127.0.0.1:port).
func (s *Server) Endpoint() string { return s.srv.URL }

// BucketURL is the SLUICE_BLOB_URL of bucket on this server: path-style
// requests to the endpoint, over plain HTTP, with static test credentials
// given through the environment (see Env) or anonymous ones.
func (s *Server) BucketURL(bucket string) string {
	q := url.Values{}
	q.Set("endpoint", s.srv.URL)
	q.Set("region", "us-east-1")
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	return (&url.URL{Scheme: "s3", Host: bucket, RawQuery: q.Encode()}).String()
}

// Env is the environment an S3 client needs for this server: static
// credentials (the server does not check them) and no shared config files,
// so a developer's ~/.aws never leaks into a test.
func Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=sluice-test",
		"AWS_SECRET_ACCESS_KEY=sluice-test-key",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env in the test process for the rest of the test.
func SetEnv(t testing.TB) {
	t.Helper()
	for _, kv := range Env() {
		for i := range kv {
			if kv[i] == '=' {
				t.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
}

// SetDown makes every request fail with 503 Service Unavailable (true) or
// serves again (false): a store outage.
func (s *Server) SetDown(down bool) { s.down.Store(down) }
