package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workflows"
)

// Two attempts' credentials: attempt 1 was lost, attempt 2 runs.
const (
	credential1 = "credential-of-attempt-1-0123456789abcdef"
	credential2 = "credential-of-attempt-2-0123456789abcdef"
)

var attemptRef = workflows.BuildRef{Pipeline: "app", Job: "deploy", Event: 7}

// attemptState is build app/deploy/7 in status, its job listing LISTED,
// on attempt 2 after attempt 1 was lost (hash: whether the claims carried
// credential hashes).
func attemptState(status workflows.Status, hash bool) workflows.BuildState {
	st := workflows.BuildState{
		ID: attemptRef.String(), Build: attemptRef, Status: status, Queue: "default",
		Secrets: []string{"LISTED"}, SecretsListed: true, Branch: "main",
		Attempts: []workflows.Attempt{
			{Number: 1, Executor: "exec-old", Outcome: "lost: exec-old stopped heartbeating"},
			{Number: 2, Executor: "exec-a"},
		},
	}
	if hash {
		st.Attempts[0].CredentialHash = activities.CredentialHash(credential1)
		st.Attempts[1].CredentialHash = activities.CredentialHash(credential2)
	}
	return st
}

// serveBuild makes c answer GetBuild for attemptRef with st, times times.
func serveBuild(t *testing.T, c *mocks.Client, st workflows.BuildState, times int) {
	t.Helper()
	wid := attemptRef.WorkflowID()
	if !st.Status.Final() {
		answerQuery(t, c, wid, workflows.QueryBuild, st, times)
		return
	}
	refuseQuery(c, wid, workflows.QueryBuild, times)
	run := mocks.NewWorkflowRun(t)
	run.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		p, err := converter.GetDefaultDataConverter().ToPayload(st)
		require.NoError(t, err)
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, args.Get(1)))
	}).Return(nil).Times(times)
	c.On("GetWorkflow", mock.Anything, wid, "").Return(run).Times(times)
}

// readSecretsOnly is a token with read-secrets and nothing else.
func readSecretsOnly(*http.Request) (queue.Identity, error) {
	return queue.Identity{User: "exec-pool", Privileges: []string{api.PrivilegeReadSecrets}}, nil
}

func withCredential(c string) http.Header {
	if c == "" {
		return nil
	}
	return http.Header{logstore.AttemptCredentialHeader: {c}}
}

// TestResolveNeedsTheAttemptCredential: a read-secrets token is not enough
// to resolve a running build's secrets: the caller must present the
// credential whose hash the build recorded for its current attempt
// (review finding 5: any read-secrets token resolved any running build's
// secrets).
func TestResolveNeedsTheAttemptCredential(t *testing.T) {
	t.Parallel()
	secrets, _, err := api.OpenSecretStore(t.TempDir(), "k")
	require.NoError(t, err)
	_, err = secrets.Set(queue.Identity{User: "ann"}, "app", "LISTED", api.SetSecretRequest{Value: "listed-value"}, testNow)
	require.NoError(t, err)
	body := `{"build":"app/deploy/7","names":["LISTED"]}`

	cases := []struct {
		name, credential, body string
		status                 int
		want                   string
	}{
		{"no credential", "", body, http.StatusForbidden, "build app/deploy/7 attempt 2: secrets need the attempt's credential (header X-Sluice-Attempt-Credential)"},
		{"a wrong credential", "guessed-credential", body, http.StatusForbidden, "build app/deploy/7 attempt 2: the attempt credential presented is not the one of the executor that claimed it (exec-a); secrets refused"},
		{"the previous attempt's credential", credential1, body, http.StatusForbidden, "is not the one of the executor that claimed it"},
		{"the previous attempt asking as itself", credential1, `{"build":"app/deploy/7","names":["LISTED"],"attempt":1}`, http.StatusConflict, "is not on attempt 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newMockClient(t)
			serveBuild(t, c, attemptState(workflows.StatusRunning, true), 1)
			h := newHandler(t, api.Deps{Service: newService(t, c), Secrets: secrets, Authenticate: readSecretsOnly})
			rec := call(t, h, http.MethodPost, "/api/v1/secrets/resolve", tc.body, withCredential(tc.credential))
			require.Contains(t, errorOf(t, rec, tc.status), tc.want)
			require.NotContains(t, rec.Body.String(), "listed-value")
		})
	}

	t.Run("the current attempt's credential", func(t *testing.T) {
		t.Parallel()
		c := newMockClient(t)
		serveBuild(t, c, attemptState(workflows.StatusRunning, true), 1)
		h := newHandler(t, api.Deps{Service: newService(t, c), Secrets: secrets, Authenticate: readSecretsOnly})
		got := decodeBody[api.ResolveSecretsResponse](t, call(t, h, http.MethodPost, "/api/v1/secrets/resolve",
			`{"build":"app/deploy/7","names":["LISTED"],"attempt":2}`, withCredential(credential2)), http.StatusOK)
		require.Equal(t, map[string]string{"LISTED": "listed-value"}, got.Values)
	})
	t.Run("an attempt claimed by an older executor keeps the old rule", func(t *testing.T) {
		t.Parallel()
		c := newMockClient(t)
		serveBuild(t, c, attemptState(workflows.StatusRunning, false), 1)
		h := newHandler(t, api.Deps{Service: newService(t, c), Secrets: secrets, Authenticate: readSecretsOnly})
		got := decodeBody[api.ResolveSecretsResponse](t, call(t, h, http.MethodPost, "/api/v1/secrets/resolve", body, nil), http.StatusOK)
		require.Equal(t, map[string]string{"LISTED": "listed-value"}, got.Values)
	})
	t.Run("the API never shows the hashes", func(t *testing.T) {
		t.Parallel()
		c := newMockClient(t)
		serveBuild(t, c, attemptState(workflows.StatusRunning, true), 1)
		h := newHandler(t, api.Deps{Service: newService(t, c)})
		rec := call(t, h, http.MethodGet, "/api/v1/builds/app%2Fdeploy%2F7", "", nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.NotContains(t, rec.Body.String(), activities.CredentialHash(credential2))
		require.NotContains(t, rec.Body.String(), "credential_hash")
	})
}

// TestLogWritesNeedTheAttemptCredential: only the executor holding an
// attempt's credential may append to or finish that attempt's logs, while
// the attempt is the build's latest; after the build ended it may finish
// its own logs, nobody else may write, and a closed log stays closed
// (review finding 7: any token could inject into or truncate any log).
func TestLogWritesNeedTheAttemptCredential(t *testing.T) {
	t.Parallel()
	store, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	c := newMockClient(t)
	h := newHandler(t, api.Deps{Service: newService(t, c), Logs: store, Authenticate: readSecretsOnly})
	const current = "/api/v1/builds/app%2Fdeploy%2F7%2F2/logs/"
	post := func(path, credential string) (int, string) {
		t.Helper()
		rec := call(t, h, http.MethodPost, path, "x\n", http.Header{
			"Content-Type": {"application/octet-stream"}, logstore.AttemptCredentialHeader: {credential},
		})
		return rec.Code, rec.Body.String()
	}

	// Running on attempt 2: every refusal queries the build again.
	serveBuild(t, c, attemptState(workflows.StatusRunning, true), 7)
	for _, tc := range []struct{ what, path, credential, want string }{
		{"append without credential", current + "unit?offset=0", "", "log writes need the attempt's credential"},
		{"finish without credential", current + "unit/finish", "", "log writes need the attempt's credential"},
		{"inject a step", current + "audit?offset=0", "guessed", "is not the one of the executor that claimed it (exec-a); log writes refused"},
		{"the previous attempt's credential", current + "unit/finish", credential1, "is not the one of the executor"},
	} {
		status, body := post(tc.path, tc.credential)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", tc.what, body)
		require.Contains(t, body, tc.want, tc.what)
	}
	_, err = store.Steps("app/deploy/7/2")
	require.ErrorIs(t, err, logstore.ErrNotFound, "nothing was written")
	// The lost attempt's executor cannot write its old log any more.
	status, body := post("/api/v1/builds/app%2Fdeploy%2F7%2F1/logs/unit?offset=0", credential1)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "build app/deploy/7 is on attempt 2: the logs of attempt 1 take no more writes")
	// The holder writes; its next writes are checked from the cache.
	status, body = post(current+"unit?offset=0", credential2)
	require.Equal(t, http.StatusOK, status, body)
	status, body = post(current+"unit?offset=2", credential2)
	require.Equal(t, http.StatusOK, status, body)
	status, body = post(current+"unit/finish", credential2)
	require.Equal(t, http.StatusOK, status, body)
	// A log of an attempt that does not exist.
	status, body = post("/api/v1/builds/app%2Fdeploy%2F7%2F3/logs/unit?offset=0", credential2)
	require.Equal(t, http.StatusNotFound, status, body)
	require.Contains(t, body, "build app/deploy/7 has no attempt 3")
	// Reads need no credential.
	rec := call(t, h, http.MethodGet, current+"unit", "", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"data":"eAp4Cg=="`) // base64 of "x\nx\n"

	// A build that does not exist has no logs to write.
	c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
		return r.WorkflowID == "build/nope/a/1" || r.WorkflowID == "event/nope/1" // nor an event that runs it
	})).Return(nil, serviceerror.NewNotFound("workflow not found")).Twice()
	status, body = post("/api/v1/builds/nope%2Fa%2F1%2F1/logs/x?offset=0", credential2)
	require.Equal(t, http.StatusNotFound, status, body)
	status, body = post("/api/v1/builds/nope%2Fa%2F1/logs/x?offset=0", credential2)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "not a build attempt's log")
}

// TestEndedBuildLogs: after the build ended, the holder of its last attempt
// may still finish writing its own logs (they ship after the result), but
// not reopen a closed one; nobody else may write.
func TestEndedBuildLogs(t *testing.T) {
	t.Parallel()
	store, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, store.Append("app/deploy/7/2", "done", []byte("all of it\n")))
	require.NoError(t, store.Finish("app/deploy/7/2", "done"))
	c := newMockClient(t)
	serveBuild(t, c, attemptState(workflows.StatusSuccess, true), 3)
	h := newHandler(t, api.Deps{Service: newService(t, c), Logs: store, Authenticate: readSecretsOnly})
	post := func(path, credential string) (int, string) {
		t.Helper()
		rec := call(t, h, http.MethodPost, "/api/v1/builds/app%2Fdeploy%2F7%2F2/logs/"+path, "late\n", http.Header{
			"Content-Type": {"application/octet-stream"}, logstore.AttemptCredentialHeader: {credential},
		})
		return rec.Code, rec.Body.String()
	}
	status, body := post("done/finish", "")
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = post("done?offset=0", "guessed")
	require.Equal(t, http.StatusForbidden, status, body)
	// The holder: a closed log stays closed, an open one takes its tail.
	status, body = post("done?offset=10", credential2)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, `"complete":true`)
	status, body = post("teardown?offset=0", credential2)
	require.Equal(t, http.StatusOK, status, body)
	chunk, err := store.Read("app/deploy/7/2", "done", 0, 0)
	require.NoError(t, err)
	require.Equal(t, "all of it\n", string(chunk.Data))
	require.True(t, chunk.Complete)
}

// M9: a build that is not running gets no secret, even asked with its
// last attempt's own credential (its executor was lost and it waits to be
// dispatched again, or it ended).
func TestResolveOnlyWhileTheBuildRuns(t *testing.T) {
	t.Parallel()
	secrets, _, err := api.OpenSecretStore(t.TempDir(), "k")
	require.NoError(t, err)
	_, err = secrets.Set(queue.Identity{User: "ann"}, "app", "LISTED", api.SetSecretRequest{Value: "listed-value"}, testNow)
	require.NoError(t, err)
	for _, status := range []workflows.Status{workflows.StatusQueued, workflows.StatusSuccess, workflows.StatusAborted} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			c := newMockClient(t)
			serveBuild(t, c, attemptState(status, true), 1)
			h := newHandler(t, api.Deps{Service: newService(t, c), Secrets: secrets, Authenticate: readSecretsOnly})
			rec := call(t, h, http.MethodPost, "/api/v1/secrets/resolve", `{"build":"app/deploy/7","names":["LISTED"],"attempt":2}`, withCredential(credential2))
			require.Contains(t, errorOf(t, rec, http.StatusConflict), "secrets are given to running builds only")
			require.NotContains(t, rec.Body.String(), "listed-value")
		})
	}
}

// TestResolveCheckoutCredentials: an executor's checkout gets the
// pipeline's repository credentials, which the job need not list, with
// the attempt's credential only; no other secret is given that way, and a
// fork's pull request gets a credential only when it allows fork pull
// requests.
func TestResolveCheckoutCredentials(t *testing.T) {
	t.Parallel()
	secrets, _, err := api.OpenSecretStore(t.TempDir(), "k")
	require.NoError(t, err)
	_, err = secrets.Set(queue.Identity{User: "ann"}, "app", "LISTED", api.SetSecretRequest{Value: "listed-value"}, testNow)
	require.NoError(t, err)
	_, err = secrets.Set(queue.Identity{User: "ann"}, "app", "SLUICE_GITHUB_TOKEN", api.SetSecretRequest{Value: "repo-token"}, testNow)
	require.NoError(t, err)
	handler := func(t *testing.T) http.Handler {
		c := newMockClient(t)
		serveBuild(t, c, attemptState(workflows.StatusRunning, true), 1)
		return newHandler(t, api.Deps{Service: newService(t, c), Secrets: secrets, Authenticate: readSecretsOnly})
	}
	const names = `"names":["SLUICE_GITHUB_TOKEN","SLUICE_GITLAB_TOKEN","SLUICE_DEPLOY_KEY"]`
	got := decodeBody[api.ResolveSecretsResponse](t, call(t, handler(t), http.MethodPost, "/api/v1/secrets/resolve",
		`{"build":"app/deploy/7",`+names+`,"attempt":2,"checkout":true}`, withCredential(credential2)), http.StatusOK)
	require.Equal(t, map[string]string{"SLUICE_GITHUB_TOKEN": "repo-token"}, got.Values)

	rec := call(t, handler(t), http.MethodPost, "/api/v1/secrets/resolve", `{"build":"app/deploy/7",`+names+`,"attempt":2,"checkout":true}`, nil)
	require.Contains(t, errorOf(t, rec, http.StatusForbidden), "secrets need the attempt's credential")
	require.NotContains(t, rec.Body.String(), "repo-token")

	rec = call(t, handler(t), http.MethodPost, "/api/v1/secrets/resolve", `{"build":"app/deploy/7","names":["LISTED"],"attempt":2,"checkout":true}`, withCredential(credential2))
	require.Contains(t, errorOf(t, rec, http.StatusForbidden), "LISTED is not a repository credential")
	require.NotContains(t, rec.Body.String(), "listed-value")

	values, err := secrets.ResolveCheckout("app", []string{"SLUICE_GITHUB_TOKEN"}, true)
	require.NoError(t, err)
	require.Empty(t, values, "a fork's pull request")
	_, err = secrets.Set(queue.Identity{User: "ann"}, "app", "SLUICE_GITHUB_TOKEN", api.SetSecretRequest{Value: "repo-token", AllowInPR: true, AllowInForkPR: true}, testNow)
	require.NoError(t, err)
	values, err = secrets.ResolveCheckout("app", []string{"SLUICE_GITHUB_TOKEN"}, true)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"SLUICE_GITHUB_TOKEN": "repo-token"}, values)
}

// TestStartMetaSparesTheWriteChecks: the executor reads the metadata its
// attempt starts with presenting the attempt's number and credential; the
// API, which read the build's record to answer, then takes that attempt's
// metadata write without reading the record again. A credential that is
// not the latest attempt's is remembered for nothing: its writes are
// checked, and refused, as before.
func TestStartMetaSparesTheWriteChecks(t *testing.T) {
	t.Parallel()
	db, c, h := metaHandler(t)
	const path = "/api/v1/builds/app%2Fdeploy%2F7/meta"
	start := func(attempt, credential string) (int, string) {
		t.Helper()
		rec := call(t, h, http.MethodGet, path+"?attempt="+attempt, "", withCredential(credential))
		return rec.Code, rec.Body.String()
	}
	save := func(attempt int, credential string) (int, string) {
		t.Helper()
		body := fmt.Sprintf(`{"attempt":%d,"status":"SUCCESS","meta":{"by":%q}}`, attempt, credential)
		rec := call(t, h, http.MethodPut, path, body, withCredential(credential))
		return rec.Code, rec.Body.String()
	}
	// Each read of the start metadata asks the build and its event once;
	// each write the cache does not vouch for asks the build once more.
	serveBuild(t, c, attemptState(workflows.StatusRunning, true), 5)
	answerQuery(t, c, "event/app/7", workflows.QueryEvent, workflows.EventState{Event: attemptRef.EventRef(), Status: workflows.StatusRunning}, 3)

	// A guessed credential, and the lost attempt's: read, not remembered.
	status, body := start("2", "guessed")
	require.Equal(t, http.StatusOK, status, body)
	status, body = save(2, "guessed")
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "is not the one of the executor that claimed it (exec-a); metadata writes refused")
	status, body = start("1", credential1)
	require.Equal(t, http.StatusOK, status, body)
	status, body = save(1, credential1)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "build app/deploy/7 is not running attempt 1")
	// The holder of attempt 2: its write passes on what its read checked
	// (the mocks answer no further query).
	status, body = start("2", credential2)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"buildId": "app/deploy/7"`)
	status, body = save(2, credential2)
	require.Equal(t, http.StatusNoContent, status, body)
	m, ok, err := db.GetBuildMeta(t.Context(), attemptRef.String())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, m.Attempt)
	require.JSONEq(t, `{"by":"`+credential2+`"}`, string(m.Meta))

	// Not an attempt number: refused, naming it, before anything is read.
	for _, bad := range []string{"0", "two", "-1"} {
		status, body = start(bad, credential2)
		require.Equal(t, http.StatusBadRequest, status, body)
		var answer struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(body), &answer))
		require.Equal(t, fmt.Sprintf("invalid request: attempt %q: want the attempt's number (?attempt=N)", bad), answer.Error)
	}
}

// TestAttemptChecksUnderWayShareTheirRead: at a build's end its executor's
// last log write and its metadata save arrive together; the second check
// waits for the first one's read of the build instead of querying the
// build's workflow again, and both pass.
func TestAttemptChecksUnderWayShareTheirRead(t *testing.T) {
	t.Parallel()
	db, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "sluice.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	logs, err := logstore.Open(t.TempDir())
	require.NoError(t, err)
	c := newMockClient(t)
	svc := newService(t, c)
	svc.Meta = db
	h := newHandler(t, api.Deps{Service: svc, Logs: logs, Authenticate: readSecretsOnly})

	asked, release := make(chan struct{}, 4), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let)
	c.On("QueryWorkflowWithOptions", mock.Anything, mock.MatchedBy(func(r *client.QueryWorkflowWithOptionsRequest) bool {
		return r.WorkflowID == attemptRef.WorkflowID() && r.QueryType == workflows.QueryBuild
	})).Run(func(mock.Arguments) {
		asked <- struct{}{}
		<-release
	}).Return(&client.QueryWorkflowWithOptionsResponse{QueryResult: encode(t, attemptState(workflows.StatusRunning, true))}, nil).Once()

	codes := make(chan string, 2)
	go func() {
		rec := call(t, h, http.MethodPost, "/api/v1/builds/app%2Fdeploy%2F7%2F2/logs/unit?offset=0", "x\n", http.Header{
			"Content-Type": {"application/octet-stream"}, logstore.AttemptCredentialHeader: {credential2},
		})
		codes <- fmt.Sprintf("log write %d %s", rec.Code, rec.Body.String())
	}()
	<-asked // the log write's check reads the build
	go func() {
		rec := call(t, h, http.MethodPut, "/api/v1/builds/app%2Fdeploy%2F7/meta",
			`{"attempt":2,"status":"SUCCESS","meta":{"done":true}}`, withCredential(credential2))
		codes <- fmt.Sprintf("metadata save %d %s", rec.Code, rec.Body.String())
	}()
	select {
	case <-asked:
		t.Error("the metadata save's check read the build again while the log write's read was under way")
	case <-time.After(200 * time.Millisecond):
	}
	let()
	var got []string
	for range 2 {
		select {
		case c := <-codes:
			got = append(got, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to both requests; got %q", got)
		}
	}
	slices.Sort(got)
	require.True(t, strings.HasPrefix(got[0], "log write 200"), got[0])
	require.True(t, strings.HasPrefix(got[1], "metadata save 204"), got[1])
	m, ok, err := db.GetBuildMeta(t.Context(), attemptRef.String())
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `{"done":true}`, string(m.Meta))
}
