package activities

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSMTPURL(t *testing.T) {
	t.Parallel()
	c, err := ParseSMTPURL("smtp://bot:pw@mail.example?from=CI%20%3Cci@example.com%3E")
	require.NoError(t, err)
	require.Equal(t, smtpConfig{addr: "mail.example:587", host: "mail.example", user: "bot", pass: "pw", from: "ci@example.com"}, c)
	c, err = ParseSMTPURL("smtps://mail.example?from=ci@example.com")
	require.NoError(t, err)
	require.Equal(t, "mail.example:465", c.addr)
	require.True(t, c.implicit)
	for _, bad := range []string{"http://mail.example?from=a@b.c", "smtp://mail.example", "smtp://?from=a@b.c", "smtp://mail.example?from=nobody"} {
		_, err := ParseSMTPURL(bad)
		require.Error(t, err, bad)
	}
}

func isRefused(err error) bool { return hasType(err, ErrTypeNotifyRefused) }

// TestSendSlack: the bot token posts to each channel; without it the
// webhook gets the message; with neither, and for what Slack refuses,
// the error is not retried; a server error is.
func TestSendSlack(t *testing.T) {
	t.Parallel()
	var got []map[string]string
	answer := `{"ok":true}`
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		body["path"], body["auth"] = r.URL.Path, r.Header.Get("Authorization")
		got = append(got, body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	secrets := map[string]string{}
	tokens := PipelineTokenFunc(func(_ context.Context, _, name string) (string, bool, error) {
		v, ok := secrets[name]
		return v, ok, nil
	})
	s := &NotifySettings{SlackAPIURL: srv.URL + "/api", PublicURL: "https://ci.example/"}
	in := NotifyInput{Kind: NotifySlack, Pipeline: "app", Job: "deploy", Build: "app/deploy/4", Status: "FAILURE", Page: "/ui/builds/app/deploy/4", Channel: "#ops"}
	ctx := context.Background()

	err := s.sendSlack(ctx, tokens, in)
	require.True(t, isRefused(err), "%v", err)
	require.ErrorContains(t, err, "neither secret SLUICE_SLACK_TOKEN nor SLUICE_SLACK_WEBHOOK_URL")

	secrets[SlackWebhookSecret] = srv.URL + "/hook/T0/B0/XXXX"
	answer = "ok"
	require.NoError(t, s.sendSlack(ctx, tokens, in))
	require.Equal(t, "/hook/T0/B0/XXXX", got[0]["path"])
	require.Contains(t, got[0]["text"], "<https://ci.example/ui/builds/app/deploy/4|build page>")

	secrets[SlackTokenSecret] = "xoxb-1"
	answer = `{"ok":true}`
	require.NoError(t, s.sendSlack(ctx, tokens, in))
	require.Equal(t, "/api/chat.postMessage", got[1]["path"])
	require.Equal(t, "Bearer xoxb-1", got[1]["auth"])
	require.Equal(t, "#ops", got[1]["channel"])

	answer = `{"ok":false,"error":"channel_not_found"}`
	err = s.sendSlack(ctx, tokens, in)
	require.True(t, isRefused(err), "%v", err)
	require.ErrorContains(t, err, "channel_not_found")

	status, answer = http.StatusBadGateway, "down"
	err = s.sendSlack(ctx, tokens, in)
	require.Error(t, err)
	require.False(t, isRefused(err), "a server error is retried: %v", err)
}

func TestSendEmailUnconfigured(t *testing.T) {
	t.Parallel()
	err := (&NotifySettings{}).sendEmail(context.Background(), NotifyInput{Kind: NotifyEmail, Build: "app/a/1", Addresses: []string{"a@example.com"}})
	require.True(t, isRefused(err), "%v", err)
	require.ErrorContains(t, err, "SLUICE_SMTP_URL")
}
