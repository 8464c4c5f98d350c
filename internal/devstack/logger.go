package devstack

import (
	"context"
	"fmt"
	"log/slog"

	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger adapts slog to the Temporal server's logger interface.
type serverLogger struct {
	l     *slog.Logger
	level slog.Level
	// with are the tags of With, turned into attributes only when a
	// message is logged: the server derives a tagged logger for nearly
	// every request and task, and logs few of them (slog.Logger.With
	// formats its attributes at once, ~1 % of a busy server's CPU).
	with []tag.Tag
}

var (
	_ serverlog.Logger     = serverLogger{}
	_ serverlog.WithLogger = serverLogger{}
)

func newServerLogger(l *slog.Logger, level slog.Level) serverLogger {
	return serverLogger{l: l, level: level}
}

func (s serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	if level < s.level || !s.l.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(s.with)+len(tags))
	for _, t := range s.with {
		attrs = append(attrs, slog.Any(t.Key(), tagValue(t.Value())))
	}
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), tagValue(t.Value())))
	}
	s.l.LogAttrs(context.Background(), level, msg, attrs...) //nolint:sloglint // adapter: the messages are the Temporal server's own
}

func tagValue(v any) any {
	switch x := v.(type) {
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	default:
		return v
	}
}

func (s serverLogger) Debug(msg string, tags ...tag.Tag)  { s.log(slog.LevelDebug, msg, tags) }
func (s serverLogger) Info(msg string, tags ...tag.Tag)   { s.log(slog.LevelInfo, msg, tags) }
func (s serverLogger) Warn(msg string, tags ...tag.Tag)   { s.log(slog.LevelWarn, msg, tags) }
func (s serverLogger) Error(msg string, tags ...tag.Tag)  { s.log(slog.LevelError, msg, tags) }
func (s serverLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// Panic and Fatal are logged as errors: an embedded server must not take the
// host process down on its own; the stack's owner decides.
func (s serverLogger) Panic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }
func (s serverLogger) Fatal(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// With returns a logger with the tags prepended.
func (s serverLogger) With(tags ...tag.Tag) serverlog.Logger {
	if len(tags) == 0 {
		return s
	}
	return serverLogger{l: s.l, level: s.level, with: append(s.with[:len(s.with):len(s.with)], tags...)}
}
