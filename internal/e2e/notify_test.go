package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/internal/testenv"
	"github.com/sluice-ci/sluice/workflows"
)

// mailbox is an in-process SMTP server's received messages.
type mailbox struct {
	mu   sync.Mutex
	msgs []mail
}

type mail struct {
	from string
	to   []string
	data string
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &mailSession{box: b}, nil }

func (b *mailbox) to(addr string) []mail {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []mail
	for _, m := range b.msgs {
		for _, r := range m.to {
			if r == addr {
				out = append(out, m)
			}
		}
	}
	return out
}

type mailSession struct {
	box *mailbox
	cur mail
}

func (s *mailSession) Reset()        { s.cur = mail{} }
func (s *mailSession) Logout() error { return nil }
func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	s.cur.from = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = string(b)
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, s.cur)
	s.box.mu.Unlock()
	return nil
}

// slackPost is one chat.postMessage call.
type slackPost struct {
	auth, channel, text string
}

// slackAPI is an httptest Slack Web API that records chat.postMessage
// calls; postsTo lists those to one channel.
func slackAPI(t *testing.T) (srv *httptest.Server, postsTo func(channel string) []slackPost) {
	t.Helper()
	var mu sync.Mutex
	var posts []slackPost
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Channel, Text string }
		if r.URL.Path != "/api/chat.postMessage" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		posts = append(posts, slackPost{auth: r.Header.Get("Authorization"), channel: body.Channel, text: body.Text})
		mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func(channel string) []slackPost {
		mu.Lock()
		defer mu.Unlock()
		var out []slackPost
		for _, p := range posts {
			if p.channel == channel {
				out = append(out, p)
			}
		}
		return out
	}
}

// TestNotifications: a job's settings send an email (over SMTP) and a
// Slack message (chat.postMessage with the pipeline's SLUICE_SLACK_TOKEN)
// with a link to the build's page: for a failure by default, for a success
// when its statuses list SUCCESS, and for nothing else. The mail server is
// down when the builds end: the event ends at once all the same, the email
// is retried, and it arrives once the server is up.
func TestNotifications(t *testing.T) {
	t.Parallel()
	// The mail server's address, reserved and closed: an outage.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	smtpAddr := l.Addr().String()
	require.NoError(t, l.Close())

	slack, postsTo := slackAPI(t)

	e := server.NewEnv(t, testenv.Options{LocalExecutor: true, Env: map[string]string{
		"SLUICE_SMTP_URL":      "smtp://" + smtpAddr + "?from=ci@example.com",
		"SLUICE_SLACK_API_URL": slack.URL + "/api/",
	}})
	ctx := e.Context()
	src := testenv.NewRepo(t, map[string]string{"screwdriver.yaml": `
shared:
  image: alpine
  settings:
    email: dev@example.com
    slack: {channels: ['#ci']}
jobs:
  broken: {requires: [~commit], steps: [{fail: 'exit 3'}]}
  fine: {requires: [~commit], steps: [{pass: 'true'}]}
  deploy:
    requires: [~commit]
    steps: [{pass: 'true'}]
    settings:
      email: {addresses: [ops@example.com], statuses: [SUCCESS]}
      slack: {channels: ['#deploys'], statuses: [SUCCESS], minimized: true}
`})
	_, err = e.API.CreatePipeline(ctx, api.CreatePipelineRequest{Name: "notified", Repo: src.Dir})
	require.NoError(t, err)
	_, err = e.API.SetSecret(ctx, "notified", "SLUICE_SLACK_TOKEN", api.SetSecretRequest{Value: "xoxb-test-token"})
	require.NoError(t, err)

	started, err := e.StartEvent(ctx, "notified", api.StartEventRequest{})
	require.NoError(t, err)
	// The event ends while the mail server is down: no build waits for it.
	ev := e.WaitEvent(started.ID, 2*time.Minute)
	require.Equal(t, workflows.StatusFailure, ev.Status, ev.Reason)
	brokenID, deployID := buildOf(t, ev, "broken").ID, buildOf(t, ev, "deploy").ID

	// Slack: the failure in #ci, the deploy's success in #deploys.
	e.WaitFor("the slack messages", time.Minute, func() bool { return len(postsTo("#ci")) > 0 && len(postsTo("#deploys")) > 0 })
	ci, deploys := postsTo("#ci"), postsTo("#deploys")
	require.Len(t, ci, 1)
	require.Equal(t, "Bearer xoxb-test-token", ci[0].auth)
	require.Contains(t, ci[0].text, "FAILURE")
	require.Contains(t, ci[0].text, e.APIURL+"/ui/builds/"+brokenID)
	require.Contains(t, ci[0].text, "Branch: main")
	require.Len(t, deploys, 1)
	require.Contains(t, deploys[0].text, "SUCCESS")
	require.Contains(t, deploys[0].text, e.APIURL+"/ui/builds/"+deployID)
	require.NotContains(t, deploys[0].text, "\n", "minimized: one line")

	// The email is retried while the server is down.
	e.WaitFor("the email to be retried", time.Minute, func() bool {
		d, err := e.Client.DescribeWorkflowExecution(ctx, workflows.NotifyWorkflowID(brokenID), "")
		if err != nil {
			return false
		}
		for _, pa := range d.PendingActivities {
			if pa.Attempt >= 2 && pa.LastFailure != nil && strings.Contains(pa.LastFailure.Message, smtpAddr) {
				return true
			}
		}
		return false
	})
	// The server comes up: the emails arrive.
	box := &mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	l, err = net.Listen("tcp", smtpAddr)
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	e.WaitFor("the emails", 2*time.Minute, func() bool { return len(box.to("dev@example.com")) > 0 && len(box.to("ops@example.com")) > 0 })
	dev, ops := box.to("dev@example.com"), box.to("ops@example.com")
	require.Len(t, dev, 1)
	require.Equal(t, "ci@example.com", dev[0].from)
	require.Contains(t, dev[0].data, "Subject: sluice: FAILURE notified:broken build "+brokenID)
	require.Contains(t, dev[0].data, "Build page: "+e.APIURL+"/ui/builds/"+brokenID)
	require.Contains(t, dev[0].data, "Commit: "+ev.SHA)
	require.Len(t, ops, 1)
	require.Contains(t, ops[0].data, "Status: SUCCESS")
	require.Contains(t, ops[0].data, "Build page: "+e.APIURL+"/ui/builds/"+deployID)

	// A success the settings do not list sends nothing: no notification
	// workflow exists for it (the event waits for theirs to start).
	_, err = e.Client.DescribeWorkflowExecution(ctx, workflows.NotifyWorkflowID(buildOf(t, ev, "fine").ID), "")
	require.Error(t, err)
	require.Len(t, box.to("dev@example.com"), 1)
	require.Len(t, postsTo("#ci"), 1)
}
