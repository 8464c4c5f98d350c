package cliout

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-ci/sluice/queue"
)

// OneOf checks that value is one of choices; the error names what (a flag
// like "--type" or an argument like "ACTION") and the choices:
// `--type "foo": want commit, pr, pr-closed, release, tag or manual`.
func OneOf(what, value string, choices ...string) error {
	if slices.Contains(choices, value) {
		return nil
	}
	return fmt.Errorf("%s %q: want %s", what, value, JoinOr(choices))
}

// Args checks a command's positional arguments against their names (e.g.
// "PIPELINE", "JOB"): one argument per name, each not empty. use is the
// command's usage line, quoted in the error.
func Args(use string, names []string, args []string) error {
	switch {
	case len(args) < len(names):
		return fmt.Errorf("missing %s (usage: %s)", strings.Join(names[len(args):], " "), use)
	case len(args) > len(names):
		return fmt.Errorf("unexpected argument %q (usage: %s)", args[len(names)], use)
	}
	for i, a := range args {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("%s is empty (usage: %s)", names[i], use)
		}
	}
	return nil
}

// ParseStatus reads a build status in any case; the error names flag and
// lists the statuses.
func ParseStatus(flag, s string) (string, error) {
	up := strings.ToUpper(strings.TrimSpace(s))
	if !slices.Contains(BuildStatuses, up) {
		return "", fmt.Errorf("%s %q: want %s", flag, s, JoinOr(BuildStatuses))
	}
	return up, nil
}

// Limit checks a --limit value: 1 to maxLimit.
func Limit(flag string, n, maxLimit int) error {
	if n < 1 || n > maxLimit {
		return fmt.Errorf("%s %d: want 1 to %d", flag, n, maxLimit)
	}
	return nil
}

var (
	rePipeline = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)
	reSHA      = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)
	reJob      = regexp.MustCompile(`^[\w@:.-]{1,200}$`)
)

// EventID checks an event ID, "<pipeline>/<number>" (an "event/" prefix is
// accepted and removed); what names the flag or argument.
func EventID(what, s string) (string, error) {
	id := strings.TrimPrefix(strings.TrimSpace(s), "event/")
	p, n, ok := strings.Cut(id, "/")
	num, err := strconv.Atoi(n)
	if !ok || err != nil || num < 1 || !rePipeline.MatchString(p) {
		return "", fmt.Errorf("%s %q: want <pipeline>/<number>, e.g. myapp/12", what, s)
	}
	return p + "/" + strconv.Itoa(num), nil
}

// TriggerTypes are the event types a person may start.
var TriggerTypes = []string{"commit", "pr", "pr-closed", "release", "tag", "manual"}

// EventStart are the flags of `sluice event start`.
type EventStart struct {
	SHA       string
	Branch    string
	Type      string
	Ref       string
	PR        int
	StartFrom string
}

// Validate reports every problem with the flags at once, each naming its
// flag.
func (e EventStart) Validate() error {
	var errs []error
	if e.Type != "" {
		if err := OneOf("--type", e.Type, TriggerTypes...); err != nil {
			errs = append(errs, err)
		}
	}
	if e.SHA != "" && !reSHA.MatchString(e.SHA) {
		errs = append(errs, fmt.Errorf("--sha %q: want 4 to 64 hex digits", e.SHA))
	}
	if e.PR < 0 {
		errs = append(errs, fmt.Errorf("--pr %d: want a pull request number (1 or more)", e.PR))
	}
	if (e.Type == "pr" || e.Type == "pr-closed") && e.PR == 0 {
		errs = append(errs, fmt.Errorf("--pr: a %s event needs the pull request number", e.Type))
	}
	if (e.Type == "tag" || e.Type == "release") && e.Ref == "" {
		errs = append(errs, fmt.Errorf("--ref: a %s event needs the tag or release name", e.Type))
	}
	if e.StartFrom != "" {
		if err := JobName("--start-from", e.StartFrom); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Rules checks --rule values with the queue package's parser and returns
// them in canonical form; every bad rule is reported, naming the flag.
func Rules(flag string, raw []string) ([]string, error) {
	var errs []error
	out := make([]string, 0, len(raw))
	for _, s := range raw {
		r, err := queue.ParseRule(s)
		if err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			errs = append(errs, fmt.Errorf("%s %q: %w", flag, s, err))
			continue
		}
		out = append(out, r.String())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// QueueName checks a queue name; what names the argument or flag.
func QueueName(what, name string) error {
	if err := queue.ValidateName(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Roles cleans --use-role values: trimmed, empty ones dropped, duplicates
// removed, order kept. `--use-role ""` alone thus clears the roles.
func Roles(raw []string) []string {
	var out []string
	for _, r := range raw {
		r = strings.TrimSpace(r)
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// QueueDef is a queue's definition as the API takes it.
type QueueDef struct {
	Name        string
	Description string
	Rules       []string
	UseRoles    []string
}

// QueueChange is what `sluice queue update` was told; nil fields were not
// given and keep their current value.
type QueueChange struct {
	Description *string
	Rules       []string
	RulesSet    bool
	UseRoles    []string
	RolesSet    bool
}

// ErrNothingToChange is returned by an update given no change.
var ErrNothingToChange = errors.New("nothing to change")

// MergeQueue applies a change to the current definition. Rules and roles
// given replace the current lists; rules are checked as Rules does.
func MergeQueue(cur QueueDef, ch QueueChange) (QueueDef, error) {
	if ch.Description == nil && !ch.RulesSet && !ch.RolesSet {
		return cur, fmt.Errorf("%w: give --description, --rule or --use-role", ErrNothingToChange)
	}
	next := QueueDef{
		Name: cur.Name, Description: cur.Description,
		Rules: slices.Clone(cur.Rules), UseRoles: slices.Clone(cur.UseRoles),
	}
	if ch.Description != nil {
		next.Description = *ch.Description
	}
	if ch.RulesSet {
		if len(ch.Rules) == 0 {
			return cur, errors.New("--rule: at least one rule is required, e.g. --rule run-on=executors,max-parallel=2")
		}
		rules, err := Rules("--rule", ch.Rules)
		if err != nil {
			return cur, err
		}
		next.Rules = rules
	}
	if ch.RolesSet {
		next.UseRoles = Roles(ch.UseRoles)
	}
	return next, nil
}

// urlSchemes are the prefixes git reads as URLs (as the scm package does).
var urlSchemes = []string{"https://", "http://", "ssh://", "git://", "file://", "git+ssh://", "ssh+git://"}

// RepoLocation turns a --repo value into what the server can open: git URLs
// (scheme://... or scp-like [user@]host:path) are kept; a local path is made
// absolute against cwd, because the server resolves paths on its own file
// system. exists reports whether a local path exists (a path like "a:b"
// that exists is a path, as for git).
func RepoLocation(repo, cwd string, exists func(string) bool) string {
	repo = strings.TrimSpace(repo)
	lower := strings.ToLower(repo)
	for _, s := range urlSchemes {
		if strings.HasPrefix(lower, s) {
			return repo
		}
	}
	if colon := strings.Index(repo, ":"); colon > 0 && !strings.Contains(repo[:colon], "/") && !exists(repo) {
		return repo
	}
	switch {
	case repo == "":
		return ""
	case filepath.IsAbs(repo):
		return filepath.Clean(repo)
	}
	return filepath.Join(cwd, repo)
}

// JobName checks a job name given to flag.
func JobName(flag, s string) error {
	if !reJob.MatchString(s) {
		return fmt.Errorf("%s %q: not a job name", flag, s)
	}
	return nil
}

// EventOfBuild is the event a build ID belongs to:
// "app/test/12.3" → "app/12". ok is false for what is not a build ID.
func EventOfBuild(build string) (string, bool) {
	build = strings.TrimPrefix(build, "build/")
	p, rest, ok := strings.Cut(build, "/")
	i := strings.LastIndex(rest, "/")
	if !ok || i <= 0 {
		return "", false
	}
	n, _, _ := strings.Cut(rest[i+1:], ".")
	id, err := EventID("", p+"/"+n)
	return id, err == nil
}
