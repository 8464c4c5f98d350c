// Package buildmeta is a build's metadata document (Screwdriver's `meta`):
// a JSON object read and written by dotted keys ("deploy.version"), the
// file a build keeps it in ($SD_META_PATH), and how the metadata of several
// builds merges into the one a build starts with.
package buildmeta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// MaxSize bounds a build's metadata document (its JSON encoding).
const MaxSize = 1 << 20

// ErrBadKey is a key that is not dotted segments of letters, digits, '_'
// and '-'.
var ErrBadKey = errors.New("meta: a key is dot-separated names of letters, digits, '_' and '-' (e.g. deploy.version)")

var reSegment = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Doc is a metadata document: a JSON object.
type Doc = map[string]any

// splitKey checks key and returns its segments.
func splitKey(key string) ([]string, error) {
	segs := strings.Split(key, ".")
	if key == "" || len(segs) > 32 {
		return nil, fmt.Errorf("%w, got %q", ErrBadKey, key)
	}
	for _, s := range segs {
		if !reSegment.MatchString(s) {
			return nil, fmt.Errorf("%w, got %q", ErrBadKey, key)
		}
	}
	return segs, nil
}

// Set sets key (dotted: each segment but the last names an object,
// created when missing or replacing a value that is not one) to v.
func Set(doc Doc, key string, v any) error {
	segs, err := splitKey(key)
	if err != nil {
		return err
	}
	cur := doc
	for _, s := range segs[:len(segs)-1] {
		next, ok := cur[s].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[s] = next
		}
		cur = next
	}
	cur[segs[len(segs)-1]] = v
	return nil
}

// Get returns the value at key (ok false: there is none).
func Get(doc Doc, key string) (any, bool, error) {
	segs, err := splitKey(key)
	if err != nil {
		return nil, false, err
	}
	var cur any = doc
	for _, s := range segs {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[s]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// Merge merges src into dst: objects merge key by key, recursively; any
// other value of src replaces dst's.
func Merge(dst, src Doc) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				Merge(dm, sm)
				continue
			}
			cp := map[string]any{}
			Merge(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// Parse reads a document; empty input is the empty document.
func Parse(b []byte) (Doc, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Doc{}, nil
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("meta: %d bytes, more than the %d a build's metadata may hold", len(b), MaxSize)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("meta: not JSON: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("meta: not a JSON object")
	}
	return doc, nil
}

// Encode writes doc as JSON, refusing one larger than MaxSize.
func Encode(doc Doc) ([]byte, error) {
	if doc == nil {
		doc = Doc{}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("meta: %d bytes, more than the %d a build's metadata may hold", len(b), MaxSize)
	}
	return b, nil
}

// Format is how `meta get` prints a value: a string as it is, anything
// else (and a string too when asJSON) as JSON; a missing value is null.
func Format(v any, ok, asJSON bool) (string, error) {
	if !ok {
		return "null", nil
	}
	if s, isString := v.(string); isString && !asJSON {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("meta: %w", err)
	}
	return string(b), nil
}

// ParseValue is a value given to `meta set`: JSON when asJSON, else the
// string itself.
func ParseValue(s string, asJSON bool) (any, error) {
	if !asJSON {
		return s, nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("meta: the value is not JSON (drop --json-value to store it as a string): %w", err)
	}
	if dec.More() {
		return nil, errors.New("meta: the value is more than one JSON value")
	}
	return v, nil
}

// ReadFile reads the document in path (a missing file is the empty
// document).
func ReadFile(path string) (Doc, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the build's own metadata file
	if errors.Is(err, os.ErrNotExist) {
		return Doc{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	doc, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// CreateFile writes the document into path, a new file: for a file
// nobody reads before it is written (WriteFile replaces one in place).
func CreateFile(path string, doc Doc) error {
	b, err := Encode(doc)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("meta: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return nil
}

// WriteFile replaces the document in path (through a temporary file and a
// rename, so a reader never sees half of it).
func WriteFile(path string, doc Doc) error {
	b, err := Encode(doc)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".meta-*.json")
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("meta: %w", err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("meta: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("meta: %w", err)
	}
	return nil
}
