// Package api is sluice's HTTP API and its client.
//
// NewHandler serves, over a Service (sluice's operations on a Temporal
// client):
//
//   - GET /healthz and GET /readyz (ready when Temporal answers);
//   - POST /webhooks/github and POST /webhooks/gitlab, which verify a
//     delivery and start the events of the pipelines it concerns;
//   - /api/v1/: pipelines, their events and job schedules, builds and their
//     logs, queues and executors, as JSON.
//
// Errors are answered as an ErrorBody with the matching HTTP status. Client
// calls the same routes for the CLI and returns the API's answers as *Error.
package api
