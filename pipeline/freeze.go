package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// FreezeHorizon is how far NextOpen searches for a free minute before deciding that the
// windows cover all time. The calendar pattern of (day of month, month, day of week)
// repeats every 28 years between 1901 and 2099, so a set of windows that leaves no free
// minute for 28 years leaves none ever.
const FreezeHorizon = 28 // years

const starBit = 1 << 63

// FreezeWindow is a parsed freeze window: a 5-field cron expression (minute, hour,
// day of month, month, day of week; UTC) in which one of day-of-month or day-of-week is
// "?". A minute is inside the window when every field matches it. Fields accept "*",
// numbers, names (JAN-DEC, SUN-SAT), ranges "a-b", steps "*/n" "a-b/n" "a/n", and lists.
type FreezeWindow struct {
	// Expr is the expression as written.
	Expr string `json:"expr"`

	minute, hour, dom, month, dow uint64
}

// FreezeWindows is a set of freeze windows; a minute is frozen when any window contains it.
type FreezeWindows []FreezeWindow

// ParseFreezeWindow parses one freeze window expression.
func ParseFreezeWindow(expr string) (FreezeWindow, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return FreezeWindow{}, fmt.Errorf("%q does not have exactly 5 fields", expr)
	}
	if fields[2] != "?" && fields[4] != "?" {
		return FreezeWindow{}, errors.New("one of day-of-month (field 3) or day-of-week (field 5) must be \"?\"")
	}
	sched, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return FreezeWindow{}, err
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return FreezeWindow{}, fmt.Errorf("%q is not a field-based cron expression", expr)
	}
	return FreezeWindow{
		Expr:   expr,
		minute: spec.Minute &^ starBit,
		hour:   spec.Hour &^ starBit,
		dom:    spec.Dom &^ starBit,
		month:  spec.Month &^ starBit,
		dow:    spec.Dow &^ starBit,
	}, nil
}

// ParseFreezeWindows parses a list of freeze window expressions.
func ParseFreezeWindows(exprs []string) (FreezeWindows, error) {
	out := make(FreezeWindows, 0, len(exprs))
	for _, e := range exprs {
		w, err := ParseFreezeWindow(e)
		if err != nil {
			return nil, fmt.Errorf("freeze window %q: %w", e, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// coversDay reports whether the window's day fields match t's UTC date.
func (w FreezeWindow) coversDay(t time.Time) bool {
	return w.month&(1<<uint(t.Month())) != 0 &&
		w.dom&(1<<uint(t.Day())) != 0 &&
		w.dow&(1<<uint(t.Weekday())) != 0
}

// coversHour reports whether the window's hour and day fields match t (UTC).
func (w FreezeWindow) coversHour(t time.Time) bool {
	return w.hour&(1<<uint(t.Hour())) != 0 && w.coversDay(t)
}

// Contains reports whether the UTC minute containing t lies inside the window.
func (w FreezeWindow) Contains(t time.Time) bool {
	t = t.UTC()
	return w.minute&(1<<uint(t.Minute())) != 0 && w.coversHour(t)
}

// AllTime reports whether the window alone freezes every minute ("* * ? * *").
func (w FreezeWindow) AllTime() bool {
	return w.minute == 1<<60-1 && w.hour == 1<<24-1 && w.dom == (1<<32-1)&^1 &&
		w.month == (1<<13-1)&^1 && w.dow == 1<<7-1
}

// Contains reports whether any window contains the UTC minute of t.
func (ws FreezeWindows) Contains(t time.Time) bool {
	for _, w := range ws {
		if w.Contains(t) {
			return true
		}
	}
	return false
}

// NextOpen returns the first moment at or after t outside every window: t itself when
// its minute is not frozen, otherwise the start (UTC, second 0) of the first free minute.
// Overlapping and adjacent windows are handled together. It returns ErrAlwaysFrozen when
// no free minute exists within FreezeHorizon years (windows that cover all time).
func (ws FreezeWindows) NextOpen(t time.Time) (time.Time, error) {
	t = t.UTC()
	if !ws.Contains(t) {
		return t, nil
	}
	cur := t.Truncate(time.Minute)
	limit := cur.AddDate(FreezeHorizon, 0, 0)
	for cur.Before(limit) {
		if ws.frozenUntilMidnight(cur) {
			cur = time.Date(cur.Year(), cur.Month(), cur.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		var covered uint64
		for _, w := range ws {
			if w.coversHour(cur) {
				covered |= w.minute
			}
		}
		for m := cur.Minute(); m < 60; m++ {
			if covered&(1<<uint(m)) == 0 {
				return cur.Add(time.Duration(m-cur.Minute()) * time.Minute), nil
			}
		}
		cur = cur.Truncate(time.Hour).Add(time.Hour)
	}
	return time.Time{}, ErrAlwaysFrozen
}

// frozenUntilMidnight reports whether every minute from t's hour to the end of t's UTC
// day is frozen, so NextOpen can skip whole days.
func (ws FreezeWindows) frozenUntilMidnight(t time.Time) bool {
	const fullHour = 1<<60 - 1
	var hourBits [24]uint64
	covering := 0
	for _, w := range ws {
		if !w.coversDay(t) {
			continue
		}
		covering++
		for h := t.Hour(); h < 24; h++ {
			if w.hour&(1<<uint(h)) != 0 {
				hourBits[h] |= w.minute
			}
		}
	}
	if covering == 0 {
		return false
	}
	for h := t.Hour(); h < 24; h++ {
		if hourBits[h] != fullHour {
			return false
		}
	}
	return true
}

// NextUnfrozen parses exprs and returns FreezeWindows.NextOpen(t).
func NextUnfrozen(exprs []string, t time.Time) (time.Time, error) {
	ws, err := ParseFreezeWindows(exprs)
	if err != nil {
		return time.Time{}, err
	}
	return ws.NextOpen(t)
}
