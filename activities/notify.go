package activities

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
)

// Notifications: a job's "settings" (Screwdriver's email and slack
// plugins) send a message when a build ends with a status they list. A
// controller sends them through SendNotification, which the event's
// NotifyWorkflow retries: a mail server or Slack outage delays a message,
// never a build.

// Pipeline secrets a Slack notification is sent with.
const (
	// SlackTokenSecret is a Slack bot token (chat:write), which posts to
	// each channel the job lists.
	SlackTokenSecret = "SLUICE_SLACK_TOKEN" //nolint:gosec // G101: a secret's name, not a credential
	// SlackWebhookSecret is a Slack incoming webhook URL, which posts to
	// the channel it was made for.
	SlackWebhookSecret = "SLUICE_SLACK_WEBHOOK_URL" //nolint:gosec // G101: a secret's name, not a credential
)

// ErrTypeNotifyRefused is the error type of a notification that cannot be
// sent however often it is tried (no mail server configured, no Slack
// credentials, a channel Slack does not know).
const ErrTypeNotifyRefused = "NotifyRefused"

// NotifySettings is how a controller sends notifications.
type NotifySettings struct {
	// SMTPURL is the mail server: smtp://[user:pass@]host[:port]?from=addr
	// (STARTTLS when the server offers it) or smtps:// (TLS from the
	// start). Empty: no email.
	SMTPURL string
	// SlackAPIURL is Slack's Web API base ("" = https://slack.com/api/).
	SlackAPIURL string
	// PublicURL is the base of the build pages messages link to.
	PublicURL string
	// HTTP is the client for Slack (nil: a client with a timeout).
	HTTP *http.Client
}

// NotifyKind is what a notification is sent through.
type NotifyKind string

// Notification kinds.
const (
	NotifyEmail NotifyKind = "email"
	NotifySlack NotifyKind = "slack"
)

// NotifyInput is one message: about one build, to one email list or one
// Slack channel.
type NotifyInput struct {
	Kind     NotifyKind `json:"kind"`
	Pipeline string     `json:"pipeline"`
	Job      string     `json:"job"`
	Build    string     `json:"build"`
	Status   string     `json:"status"`
	Reason   string     `json:"reason,omitempty"`
	Branch   string     `json:"branch,omitempty"`
	SHA      string     `json:"sha,omitempty"`
	PR       int        `json:"pr,omitempty"`
	// Page is the build's web page, relative to the public URL.
	Page string `json:"page,omitempty"`
	// Addresses are an email's recipients; Subject replaces its default.
	Addresses []string `json:"addresses,omitempty"`
	Subject   string   `json:"subject,omitempty"`
	// Channel is a Slack channel; Minimized sends a one-line message.
	Channel   string `json:"channel,omitempty"`
	Minimized bool   `json:"minimized,omitempty"`
}

// link is the build page's absolute URL ("" without a public URL).
func (s *NotifySettings) link(in NotifyInput) string {
	if s.PublicURL == "" || in.Page == "" {
		return ""
	}
	return pageURL(s.PublicURL, in.Page)
}

// summary is a message's first line.
func (in NotifyInput) summary() string {
	where := in.Branch
	if in.PR > 0 {
		where = "PR #" + strconv.Itoa(in.PR)
	}
	if where != "" {
		where = " on " + where
	}
	return fmt.Sprintf("sluice: %s %s build %s%s", in.Status, in.Pipeline+":"+in.Job, in.Build, where)
}

// text is a message's body.
func (in NotifyInput) text(link string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pipeline: %s\nJob: %s\nBuild: %s\nStatus: %s\n", in.Pipeline, in.Job, in.Build, in.Status)
	if in.Reason != "" {
		fmt.Fprintf(&b, "Reason: %s\n", in.Reason)
	}
	if in.Branch != "" {
		fmt.Fprintf(&b, "Branch: %s\n", in.Branch)
	}
	if in.PR > 0 {
		fmt.Fprintf(&b, "Pull request: #%d\n", in.PR)
	}
	if in.SHA != "" {
		fmt.Fprintf(&b, "Commit: %s\n", in.SHA)
	}
	if link != "" {
		fmt.Fprintf(&b, "Build page: %s\n", link)
	}
	return b.String()
}

// SendNotification sends one notification. What cannot succeed (nothing
// configured, refused for good) is a non-retryable error; anything else
// is retried by the caller's policy.
func (a *Activities) SendNotification(ctx context.Context, in NotifyInput) error {
	s := a.Notify
	if s == nil {
		s = &NotifySettings{}
	}
	switch in.Kind {
	case NotifyEmail:
		return s.sendEmail(ctx, in)
	case NotifySlack:
		return s.sendSlack(ctx, a.pipelineTokens(), in)
	}
	return refused("unknown notification kind %q", in.Kind)
}

func refused(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeNotifyRefused, nil)
}

// smtpConfig is SLUICE_SMTP_URL, parsed.
type smtpConfig struct {
	addr, host string
	implicit   bool // smtps: TLS from the start
	user, pass string
	from       string
}

// ParseSMTPURL reads SLUICE_SMTP_URL.
func ParseSMTPURL(raw string) (smtpConfig, error) {
	var c smtpConfig
	u, err := url.Parse(raw)
	if err != nil {
		return c, errors.New("not a URL") // the URL may hold a password: not quoted
	}
	switch u.Scheme {
	case "smtp":
	case "smtps":
		c.implicit = true
	default:
		return c, fmt.Errorf("want smtp:// or smtps://, got %q", u.Scheme+"://")
	}
	c.host = u.Hostname()
	if c.host == "" {
		return c, errors.New("no host")
	}
	port := u.Port()
	if port == "" {
		port = "587"
		if c.implicit {
			port = "465"
		}
	}
	c.addr = net.JoinHostPort(c.host, port)
	if u.User != nil {
		c.user = u.User.Username()
		c.pass, _ = u.User.Password()
	}
	from := u.Query().Get("from")
	if from == "" {
		return c, errors.New("no sender: add ?from=sluice@example.com")
	}
	addr, err := mail.ParseAddress(from)
	if err != nil {
		return c, fmt.Errorf("from %q: %w", from, err)
	}
	c.from = addr.Address
	return c, nil
}

func (s *NotifySettings) sendEmail(ctx context.Context, in NotifyInput) error {
	if s.SMTPURL == "" {
		return refused("email notification of build %s not sent: no mail server is configured (SLUICE_SMTP_URL)", in.Build)
	}
	c, err := ParseSMTPURL(s.SMTPURL)
	if err != nil {
		return refused("SLUICE_SMTP_URL: %v", err)
	}
	var to []string
	for _, a := range in.Addresses {
		addr, err := mail.ParseAddress(a)
		if err != nil {
			return refused("email notification of build %s: address %q: %v", in.Build, a, err)
		}
		to = append(to, addr.Address)
	}
	subject := in.Subject
	if subject == "" {
		subject = in.summary()
	}
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		c.from, strings.Join(to, ", "), mime.QEncoding.Encode("utf-8", subject), time.Now().UTC().Format(time.RFC1123Z))
	msg.WriteString(strings.ReplaceAll(in.text(s.link(in)), "\n", "\r\n"))
	return c.send(ctx, to, msg.Bytes())
}

// send delivers msg over SMTP: STARTTLS when the server offers it (or TLS
// from the start for smtps), then AUTH PLAIN when a user is given.
func (c smtpConfig) send(ctx context.Context, to []string, msg []byte) error {
	d := net.Dialer{Timeout: 30 * time.Second}
	var conn net.Conn
	var err error
	tlsConf := &tls.Config{ServerName: c.host, MinVersion: tls.VersionTLS12}
	if c.implicit {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: tlsConf}).DialContext(ctx, "tcp", c.addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", c.addr)
	}
	if err != nil {
		return fmt.Errorf("mail server %s: %w", c.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	cl, err := smtp.NewClient(conn, c.host)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("mail server %s: %w", c.addr, err)
	}
	defer func() { _ = cl.Close() }()
	if ok, _ := cl.Extension("STARTTLS"); ok && !c.implicit {
		if err := cl.StartTLS(tlsConf); err != nil {
			return fmt.Errorf("mail server %s: STARTTLS: %w", c.addr, err)
		}
	}
	if c.user != "" {
		if err := cl.Auth(smtp.PlainAuth("", c.user, c.pass, c.host)); err != nil {
			return smtpError(c.addr, "authenticate", err)
		}
	}
	if err := cl.Mail(c.from); err != nil {
		return smtpError(c.addr, "MAIL FROM", err)
	}
	for _, r := range to {
		if err := cl.Rcpt(r); err != nil {
			return smtpError(c.addr, "RCPT TO "+r, err)
		}
	}
	w, err := cl.Data()
	if err != nil {
		return smtpError(c.addr, "DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("mail server %s: %w", c.addr, err)
	}
	if err := w.Close(); err != nil {
		return smtpError(c.addr, "DATA", err)
	}
	return cl.Quit()
}

// smtpError keeps a permanent refusal (5xx) from being retried.
func smtpError(addr, what string, err error) error {
	msg := fmt.Sprintf("mail server %s: %s: %v", addr, what, err)
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return refused("%s", msg)
	}
	return errors.New(msg)
}

func (s *NotifySettings) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// slackText is a Slack message's text.
func (in NotifyInput) slackText(link string) string {
	first := in.summary()
	if link != "" {
		first = fmt.Sprintf("%s <%s|build page>", first, link)
	}
	if in.Minimized {
		return first
	}
	return first + "\n```" + in.text(link) + "```"
}

func (s *NotifySettings) sendSlack(ctx context.Context, tokens PipelineTokens, in NotifyInput) error {
	if tokens == nil {
		return refused("slack notification of build %s not sent: this controller cannot read pipeline secrets", in.Build)
	}
	token, found, err := tokens.PipelineToken(ctx, in.Pipeline, SlackTokenSecret)
	if err != nil {
		return fmt.Errorf("read the pipeline's %s secret: %w", SlackTokenSecret, err)
	}
	text := in.slackText(s.link(in))
	if found && token != "" {
		base := s.SlackAPIURL
		if base == "" {
			base = "https://slack.com/api/"
		}
		body, _ := json.Marshal(map[string]string{"channel": in.Channel, "text": text})
		return s.postSlack(ctx, strings.TrimRight(base, "/")+"/chat.postMessage", "Bearer "+token, body, true)
	}
	hook, found, err := tokens.PipelineToken(ctx, in.Pipeline, SlackWebhookSecret)
	if err != nil {
		return fmt.Errorf("read the pipeline's %s secret: %w", SlackWebhookSecret, err)
	}
	if !found || hook == "" {
		return refused("slack notification of build %s not sent: pipeline %s has neither secret %s nor %s", in.Build, in.Pipeline, SlackTokenSecret, SlackWebhookSecret)
	}
	// An incoming webhook posts to the channel it was made for.
	body, _ := json.Marshal(map[string]string{"text": text})
	return s.postSlack(ctx, hook, "", body, false)
}

// postSlack posts body; api: Slack's Web API, which answers {"ok": ...}.
func (s *NotifySettings) postSlack(ctx context.Context, target, authz string, body []byte, api bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return refused("slack: %v", redactURLError(err))
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return fmt.Errorf("slack: %w", redactURLError(err)) // a webhook URL is a secret
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		wait := time.Minute
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			wait = time.Duration(n) * time.Second
		}
		return temporal.NewApplicationErrorWithOptions("slack: rate limited", ErrTypeRateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: wait})
	case resp.StatusCode >= 500:
		return fmt.Errorf("slack: HTTP %d", resp.StatusCode)
	case resp.StatusCode >= 400:
		return refused("slack: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if !api {
		return nil
	}
	var out struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Errorf("slack: unreadable answer: %w", err)
	}
	if !out.OK {
		if out.Error == "ratelimited" || out.Error == "internal_error" || out.Error == "fatal_error" || out.Error == "service_unavailable" {
			return fmt.Errorf("slack: %s", out.Error)
		}
		return refused("slack refused the message: %s", out.Error)
	}
	return nil
}

// redactURLError drops the URL from an HTTP client error (a webhook URL is
// a credential).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
