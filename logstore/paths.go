package logstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// maxNameBytes is the longest escaped path element most filesystems accept.
const maxNameBytes = 255

// dataDir is the directory holding one build's logs inside the build's
// directory. Escaping never produces "@", so it cannot clash with a segment
// of a longer build ID nested below.
const dataDir = "@"

// stepPaths are the files of one step's log.
type stepPaths struct {
	key   string // build + "\x00" + step, for in-process notification
	esc   string // the escaped step name, as written to the index
	dir   string // the build's data directory
	index string // the build's step index
	log   string // the log bytes
	done  string // exists once the log is complete
	times string // the log's marks (marks.go)
}

// buildDir maps a build ID such as "myapp/test/42" to the build's data
// directory root/myapp/test/42/@. Each '/'-separated segment is
// percent-escaped, so only [A-Za-z0-9._-] and '%' reach the filesystem.
func (s *Store) buildDir(build string) (string, error) {
	if build == "" {
		return "", fmt.Errorf("%w: build id is empty", ErrInvalidID)
	}
	if strings.HasPrefix(build, "/") {
		return "", fmt.Errorf("%w: build id %q is absolute", ErrInvalidID, build)
	}
	segs := strings.Split(build, "/")
	parts := make([]string, 0, len(segs)+2)
	parts = append(parts, s.dir)
	for _, seg := range segs {
		if err := checkName(seg); err != nil {
			return "", fmt.Errorf("%w: build id %q: %s", ErrInvalidID, build, err.Error())
		}
		esc := escape(seg)
		if len(esc) > maxNameBytes {
			return "", fmt.Errorf("%w: build id %q: segment too long", ErrInvalidID, build)
		}
		parts = append(parts, esc)
	}
	parts = append(parts, dataDir)
	return filepath.Join(parts...), nil
}

// paths maps a build and step to the step's files.
func (s *Store) paths(build, step string) (stepPaths, error) {
	dir, err := s.buildDir(build)
	if err != nil {
		return stepPaths{}, err
	}
	if err := checkStep(step); err != nil {
		return stepPaths{}, err
	}
	esc := escape(step)
	if len(esc)+len(".times") > maxNameBytes {
		return stepPaths{}, fmt.Errorf("%w: step name %q is too long", ErrInvalidID, step)
	}
	return stepPaths{
		key:   build + "\x00" + step,
		esc:   esc,
		dir:   dir,
		index: filepath.Join(dir, "index"),
		log:   filepath.Join(dir, esc+".log"),
		done:  filepath.Join(dir, esc+".done"),
		times: filepath.Join(dir, esc+".times"),
	}, nil
}

// checkStep validates a step name: one path element.
func checkStep(step string) error {
	if err := checkName(step); err != nil {
		return fmt.Errorf("%w: step name %q: %s", ErrInvalidID, step, err.Error())
	}
	if strings.Contains(step, "/") {
		return fmt.Errorf("%w: step name %q contains '/'", ErrInvalidID, step)
	}
	return nil
}

// checkName rejects the path elements that could escape or alias a
// directory once joined.
func checkName(seg string) error {
	switch {
	case seg == "":
		return errors.New("empty segment")
	case seg == "." || seg == "..":
		return fmt.Errorf("segment %q not allowed", seg)
	case strings.ContainsRune(seg, 0):
		return errors.New("NUL byte not allowed")
	}
	return nil
}

// escape percent-encodes every byte outside [A-Za-z0-9._-].
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

// unescape reverses escape.
func unescape(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
