package pipeline

import "slices"

// DefaultNotifyStatuses are the build statuses notified when a plugin's
// settings list none: failures only, as Screwdriver's email and slack
// notification plugins do.
var DefaultNotifyStatuses = []string{"FAILURE"}

// EmailNotify is a job's email notification ("settings.email"): a string
// or list of addresses, or an object with addresses, statuses and subject.
type EmailNotify struct {
	Addresses []string `json:"addresses"`
	Statuses  []string `json:"statuses"`
	Subject   string   `json:"subject,omitempty"`
}

// SlackNotify is a job's Slack notification ("settings.slack"): a string
// or list of channels, or an object with channels, statuses and minimized.
type SlackNotify struct {
	Channels  []string `json:"channels"`
	Statuses  []string `json:"statuses"`
	Minimized bool     `json:"minimized,omitempty"`
}

// Notify are a job's notification settings, typed.
type Notify struct {
	Email *EmailNotify `json:"email,omitempty"`
	Slack *SlackNotify `json:"slack,omitempty"`
}

// Wants reports whether a build that ended with status is notified.
func (n *EmailNotify) Wants(status string) bool {
	return n != nil && len(n.Addresses) > 0 && slices.Contains(n.Statuses, status)
}

// Wants reports whether a build that ended with status is notified.
func (n *SlackNotify) Wants(status string) bool {
	return n != nil && len(n.Channels) > 0 && slices.Contains(n.Statuses, status)
}

// NotifySettings types the job's "settings" block (validated at parse
// time: what does not fit is left out). Statuses default to
// DefaultNotifyStatuses.
func (j *Job) NotifySettings() Notify {
	var n Notify
	if j == nil {
		return n
	}
	if raw, ok := j.Notifications["email"]; ok {
		list, statuses, obj := notifyParts(raw, "addresses")
		e := &EmailNotify{Addresses: list, Statuses: statuses}
		if s, ok := obj["subject"].(string); ok {
			e.Subject = s
		}
		n.Email = e
	}
	if raw, ok := j.Notifications["slack"]; ok {
		list, statuses, obj := notifyParts(raw, "channels")
		s := &SlackNotify{Channels: list, Statuses: statuses}
		if m, ok := obj["minimized"].(bool); ok {
			s.Minimized = m
		}
		n.Slack = s
	}
	return n
}

// notifyParts reads a plugin's settings: its recipients (listKey, a
// string or a list), its statuses (default DefaultNotifyStatuses) and the
// object itself (nil for the string shorthand).
func notifyParts(raw any, listKey string) (list, statuses []string, obj map[string]any) {
	statuses = DefaultNotifyStatuses
	switch v := raw.(type) {
	case string:
		return stringsOf(v), statuses, nil
	case []any:
		return stringsOf(v), statuses, nil
	case map[string]any:
		list = stringsOf(v[listKey])
		if s, ok := v["statuses"].([]any); ok {
			statuses = stringsOf(s)
		}
		return list, statuses, v
	}
	return nil, statuses, nil
}

func stringsOf(v any) []string {
	switch t := v.(type) {
	case string:
		if t == "" {
			return nil
		}
		return []string{t}
	case []any:
		out := []string{}
		for _, e := range t {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
