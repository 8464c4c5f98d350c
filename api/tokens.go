package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/workflows"
)

// Tokens authenticates API requests by bearer token against a tokens file
// (SLUICE_API_TOKENS_FILE). A token maps to a user with roles and
// privileges; the file may hold the token itself or, better, its SHA-256.
type Tokens struct {
	byHash map[[sha256.Size]byte]queue.Identity
	// people maps people who sign in with OIDC (people.go).
	people *Grants
}

// tokenFile is the on-disk format:
//
//	tokens:
//	  - user: alice
//	    sha256: 9f86d0...      # hex SHA-256 of the token (or token: <plain>)
//	    roles: [dev]
//	    privileges: [define-queues, manage-executors]
type tokenFile struct {
	Tokens []tokenEntry `yaml:"tokens"`
	// People maps people who sign in with OIDC to roles and privileges
	// (people.go).
	People peopleSection `yaml:"people"`
}

type tokenEntry struct {
	User       string   `yaml:"user"`
	Token      string   `yaml:"token"`
	SHA256     string   `yaml:"sha256"`
	Roles      []string `yaml:"roles"`
	Privileges []string `yaml:"privileges"`
}

// KnownPrivileges are the privileges a tokens file may grant.
var KnownPrivileges = []string{queue.PrivilegeDefineQueues, workflows.PrivilegeManageExecutors, PrivilegeManageSecrets, PrivilegeReadSecrets, PrivilegeManagePipelines, PrivilegeReadSCMTokens}

// LoadTokens reads a tokens file. Every problem is reported with the file
// name and the entry at fault, and nothing is half-loaded: any error means no
// Tokens.
func LoadTokens(path string) (*Tokens, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // the operator names the file
	if err != nil {
		return nil, fmt.Errorf("SLUICE_API_TOKENS_FILE: %w", err)
	}
	t, err := ParseTokens(raw)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_API_TOKENS_FILE %s: %w", path, err)
	}
	return t, nil
}

// ParseTokens parses the contents of a tokens file.
func ParseTokens(raw []byte) (*Tokens, error) {
	var f tokenFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file, want a 'tokens:' list")
		}
		return nil, fmt.Errorf("malformed YAML: %w", err)
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("no tokens: want a non-empty 'tokens:' list")
	}
	t := &Tokens{byHash: make(map[[sha256.Size]byte]queue.Identity, len(f.Tokens))}
	var errs []error
	for i, e := range f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if e.User != "" {
			where += fmt.Sprintf(" (user %q)", e.User)
		}
		hash, err := e.hash()
		if err == nil {
			err = e.check()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if prev, dup := t.byHash[hash]; dup {
			errs = append(errs, fmt.Errorf("%s: same token as user %q", where, prev.User))
			continue
		}
		t.byHash[hash] = queue.Identity{User: e.User, Roles: e.Roles, Privileges: e.Privileges}
	}
	reserved := map[string]bool{queue.SystemUser: true}
	for _, id := range t.byHash {
		reserved[id.User] = true
	}
	people, err := parseGrants(f.People, reserved)
	if err != nil {
		errs = append(errs, err)
	}
	t.people = people
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// People is how the file maps people who sign in with OIDC (its people:
// section; defaults when it has none).
func (t *Tokens) People() *Grants { return t.people }

func (e tokenEntry) hash() ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	switch {
	case e.Token != "" && e.SHA256 != "":
		return h, errors.New("set token or sha256, not both")
	case e.Token != "":
		if len(e.Token) < 16 {
			return h, fmt.Errorf("token is %d characters, want at least 16", len(e.Token))
		}
		return sha256.Sum256([]byte(e.Token)), nil
	case e.SHA256 != "":
		b, err := hex.DecodeString(strings.ToLower(e.SHA256))
		if err != nil || len(b) != sha256.Size {
			return h, fmt.Errorf("sha256 %q is not 64 hex digits", e.SHA256)
		}
		copy(h[:], b)
		return h, nil
	}
	return h, errors.New("missing token or sha256")
}

func (e tokenEntry) check() error {
	if e.User == "" {
		return errors.New("missing user")
	}
	if e.User == queue.SystemUser {
		return fmt.Errorf("user %q is reserved for sluice itself", e.User)
	}
	for _, r := range e.Roles {
		if strings.TrimSpace(r) == "" {
			return errors.New("empty role")
		}
	}
	for _, p := range e.Privileges {
		if !slices.Contains(KnownPrivileges, p) {
			return fmt.Errorf("unknown privilege %q (known: %s)", p, strings.Join(KnownPrivileges, ", "))
		}
	}
	return nil
}

// Authenticate maps a request's bearer token to its identity; use it as
// Deps.Authenticate.
func (t *Tokens) Authenticate(r *http.Request) (queue.Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return queue.Identity{}, errors.New("missing Authorization header: send 'Bearer <token>' (SLUICE_TOKEN for the CLI and executors)")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return queue.Identity{}, errors.New("malformed Authorization header: want 'Bearer <token>'")
	}
	id, found := t.byHash[sha256.Sum256([]byte(strings.TrimSpace(token)))]
	if !found {
		return queue.Identity{}, errors.New("unknown token")
	}
	return id, nil
}

// Len is the number of tokens loaded.
func (t *Tokens) Len() int { return len(t.byHash) }

// BearerTransport adds "Authorization: Bearer Token" to every request it
// carries when Token is set; executors use it to ship logs to an API that
// requires tokens.
type BearerTransport struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := b.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if b.Token == "" || r.Header.Get("Authorization") != "" {
		return base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return base.RoundTrip(r)
}
