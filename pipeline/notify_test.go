package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotifySettings(t *testing.T) {
	t.Parallel()
	spec, err := Parse([]byte(`
shared:
  image: alpine
  settings:
    email: dev@example.com
    slack: {channels: ['#ci', '#all'], minimized: true}
jobs:
  a: {requires: [~commit], steps: [{s: 'true'}]}
  b:
    requires: [~commit]
    steps: [{s: 'true'}]
    settings:
      email: {addresses: [ops@example.com, dev@example.com], statuses: [SUCCESS, FAILURE], subject: deployed}
  c: {requires: [~commit], steps: [{s: 'true'}], settings: {}}
  d: {requires: [~commit], steps: [{s: 'true'}], settings: {slack: {channels: ['#x'], statuses: []}}}
`))
	require.NoError(t, err)
	a := spec.Jobs["a"].NotifySettings()
	require.Equal(t, &EmailNotify{Addresses: []string{"dev@example.com"}, Statuses: []string{"FAILURE"}}, a.Email)
	require.Equal(t, &SlackNotify{Channels: []string{"#ci", "#all"}, Statuses: []string{"FAILURE"}, Minimized: true}, a.Slack)
	require.True(t, a.Email.Wants("FAILURE"))
	require.False(t, a.Email.Wants("SUCCESS"), "failures only by default")

	// A job's plugin replaces the shared one; the other is kept.
	b := spec.Jobs["b"].NotifySettings()
	require.Equal(t, &EmailNotify{Addresses: []string{"ops@example.com", "dev@example.com"}, Statuses: []string{"SUCCESS", "FAILURE"}, Subject: "deployed"}, b.Email)
	require.True(t, b.Email.Wants("SUCCESS"))
	require.Equal(t, a.Slack, b.Slack)

	// settings: {} turns the shared ones off; statuses: [] sends nothing.
	require.Equal(t, Notify{}, spec.Jobs["c"].NotifySettings())
	d := spec.Jobs["d"].NotifySettings()
	require.False(t, d.Slack.Wants("FAILURE"))
	var none *SlackNotify
	require.False(t, none.Wants("FAILURE"))
}

// TestPullRequestNotifiesAsItsBase: a pull request's own settings do not
// choose who is notified; its base branch's do.
func TestPullRequestNotifiesAsItsBase(t *testing.T) {
	t.Parallel()
	base, err := Parse([]byte("jobs:\n  main: {image: alpine, requires: [~pr], steps: [{s: 'true'}], settings: {email: team@example.com}}\n"))
	require.NoError(t, err)
	head, err := Parse([]byte("jobs:\n  main: {image: alpine, requires: [~pr], steps: [{s: 'true'}], settings: {email: {addresses: [spam@example.com], statuses: [SUCCESS]}}}\n"))
	require.NoError(t, err)
	got := ApplyBase(head, base)
	require.Equal(t, &EmailNotify{Addresses: []string{"team@example.com"}, Statuses: []string{"FAILURE"}}, got.Jobs["main"].NotifySettings().Email)
	require.Contains(t, WarningTexts(got.Warnings), "jobs.main.settings: the pull request's settings (notifications) are ignored; the base branch's apply")
}
