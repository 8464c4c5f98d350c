package pipeline

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/robfig/cron/v3"
)

// StringHash is the hash Screwdriver uses for H in buildPeriodically: the "string-hash"
// npm package (djb2 with XOR, over UTF-16 code units from last to first, unsigned 32 bit).
func StringHash(s string) uint32 {
	units := utf16.Encode([]rune(s))
	h := uint32(5381)
	for i := len(units) - 1; i >= 0; i-- {
		h = h*33 ^ uint32(units[i])
	}
	return h
}

var (
	reHStep  = regexp.MustCompile(`H/\d+`)
	reHRange = regexp.MustCompile(`H\((\d+)-(\d+)\)`)
	// cronParser accepts the standard 5 fields; "?" is allowed in day-of-month/week.
	cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
)

// ExpandCron expands Screwdriver's H symbol in a 5-field cron expression, exactly as
// Screwdriver's buildPeriodically does: the hash h = StringHash(seed); the minute field
// is always replaced by H (so at most one build per hour); in the other fields each
// comma-separated value "H" becomes h%(max-min+1)+min for the field's range, "H/n" gets
// that value before the "/", and "H(a-b)" becomes h%(b-a+1)+a. The result is checked
// with a standard cron parser. See PeriodicSeed for the seed sluice uses.
func ExpandCron(expr, seed string) (string, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return "", fmt.Errorf("%s does not have exactly 5 fields", expr)
	}
	h := StringHash(seed)
	bounds := [5][2]uint32{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}
	fields[0] = "H"
	for i := range fields {
		out, err := expandField(fields[i], bounds[i][0], bounds[i][1], h)
		if err != nil {
			return "", err
		}
		fields[i] = out
	}
	result := strings.Join(fields, " ")
	if _, err := cronParser.Parse(result); err != nil {
		return "", fmt.Errorf("%s (expanded from %q): %w", result, expr, err)
	}
	return result, nil
}

func expandField(field string, min, max, h uint32) (string, error) {
	values := strings.Split(field, ",")
	for i, v := range values {
		switch {
		case v == "H":
			values[i] = strconv.FormatUint(uint64(h%(max+1-min)+min), 10)
		case reHStep.MatchString(v):
			values[i] = strings.Replace(v, "H", strconv.FormatUint(uint64(h%(max+1-min)+min), 10), 1)
		case reHRange.MatchString(v):
			m := reHRange.FindStringSubmatch(v)
			lo, err1 := strconv.ParseUint(m[1], 10, 32)
			hi, err2 := strconv.ParseUint(m[2], 10, 32)
			if err1 != nil || err2 != nil || uint32(lo) < min || uint32(hi) > max || lo > hi {
				return "", fmt.Errorf("%s has an invalid range, expected range %d-%d", v, min, max)
			}
			values[i] = strconv.FormatUint(uint64(h%(uint32(hi)+1-uint32(lo))+uint32(lo)), 10)
		}
	}
	return strings.Join(values, ","), nil
}

// ScheduleCrons translates an expanded buildPeriodically expression (the
// result of ExpandCron, classic cron semantics as robfig/cron and Screwdriver
// read them) into the cron expressions of a Temporal Schedule that fire at
// exactly the same times. Temporal's scheduler differs from classic cron in
// two ways that matter here:
//   - it rejects "?" (Quartz's "no specific value"), which classic cron and
//     Screwdriver accept as "*": it becomes "*";
//   - it matches day-of-month AND day-of-week, where classic cron matches
//     either one when both are restricted ("0 3 1 * MON" fires on the 1st and
//     on every Monday): such an expression becomes two, one per day field,
//     whose union is what classic cron fires.
//
// The expression must have the 5 fields ExpandCron returns.
func ScheduleCrons(expanded string) []string {
	f := strings.Fields(expanded)
	if len(f) != 5 {
		return []string{expanded}
	}
	for _, i := range []int{2, 4} {
		if f[i] == "?" {
			f[i] = "*"
		}
	}
	// A day field is unrestricted when one of its comma-separated parts is a
	// plain "*" (or "*/1"), as in robfig/cron; "*/2" restricts it.
	restricted := func(v string) bool {
		for _, part := range strings.Split(v, ",") {
			if part == "*" || part == "*/1" {
				return false
			}
		}
		return true
	}
	if restricted(f[2]) && restricted(f[4]) {
		byDOM := []string{f[0], f[1], f[2], f[3], "*"}
		byDOW := []string{f[0], f[1], "*", f[3], f[4]}
		return []string{strings.Join(byDOM, " "), strings.Join(byDOW, " ")}
	}
	return []string{strings.Join(f, " ")}
}
