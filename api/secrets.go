package api

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluice-ci/sluice/activities"
	"github.com/sluice-ci/sluice/logstore"
	"github.com/sluice-ci/sluice/queue"
	"github.com/sluice-ci/sluice/store"
	"github.com/sluice-ci/sluice/workflows"
)

// Privileges for secrets: managing them (set, list names, delete);
// reading a running build's values, which executors do once they claimed
// it (with the attempt's credential too); and reading the pipelines' own
// SCM tokens, which controllers do to post commit statuses.
const (
	PrivilegeManageSecrets = "manage-secrets"
	PrivilegeReadSecrets   = "read-secrets"
	PrivilegeReadSCMTokens = "read-scm-tokens" //nolint:gosec // G101: a privilege's name, not a credential
)

// reSecretName is Screwdriver's secret name rule (uppercase, digits,
// underscore, not starting with a digit).
var reSecretName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// maxSecretSize bounds one value.
const maxSecretSize = 64 << 10

// Secret is a secret's public part: never its value.
type Secret struct {
	Pipeline      string    `json:"pipeline"`
	Name          string    `json:"name"`
	AllowInPR     bool      `json:"allow_in_pr"`
	AllowInForkPR bool      `json:"allow_in_fork_pr"`
	UpdatedAt     time.Time `json:"updated_at"`
	UpdatedBy     string    `json:"updated_by,omitempty"`
}

// SetSecretRequest sets a secret's value.
type SetSecretRequest struct {
	Value     string `json:"value"`
	AllowInPR bool   `json:"allow_in_pr,omitempty"`
	// AllowInForkPR gives the secret to pull requests from forks too, whose
	// code anyone can write: only for values that are harmless to leak.
	AllowInForkPR bool `json:"allow_in_fork_pr,omitempty"`
}

// ResolveSecretsRequest asks for the values a build's job lists.
type ResolveSecretsRequest struct {
	Build string   `json:"build"`
	Names []string `json:"names"`
	// Fork says the build is a fork's pull request (the API also checks
	// the build's own record and takes the stricter).
	Fork bool `json:"fork,omitempty"`
	// Attempt is the attempt asking; secrets go to the build's current
	// attempt only (0: not checked, older executors).
	Attempt int `json:"attempt,omitempty"`
	// Credential is the attempt's credential, which the client sends in
	// the logstore.AttemptCredentialHeader header (never in the body).
	Credential string `json:"-"`
	// Checkout asks for the pipeline's repository credentials (Names must
	// be among activities.RepoAuthSecrets) for the executor's checkout:
	// the job need not list them, and one the pipeline does not have is
	// left out rather than an error.
	Checkout bool `json:"checkout,omitempty"`
}

// SCMTokenRequest asks for a pipeline's own SCM token (POST
// /api/v1/secrets/scm-token): the pipeline secret SLUICE_GITHUB_TOKEN or
// SLUICE_GITLAB_TOKEN, with which controllers post its commit statuses.
type SCMTokenRequest struct {
	Pipeline string `json:"pipeline"`
	Name     string `json:"name"`
}

// SCMTokenResponse is the token, or Found false.
type SCMTokenResponse struct {
	Value string `json:"value,omitempty"`
	Found bool   `json:"found"`
}

// scmTokenNames are the only secrets /secrets/scm-token gives out (to
// controllers): SCM tokens and the deploy key, which read the repository
// and post statuses, and the Slack credentials of notifications.
var scmTokenNames = []string{"SLUICE_GITHUB_TOKEN", "SLUICE_GITLAB_TOKEN", activities.DeployKeySecret, activities.SlackTokenSecret, activities.SlackWebhookSecret}

// ResolveSecretsResponse maps each name to its value; Withheld names the
// secrets a pull request's build does not get.
type ResolveSecretsResponse struct {
	Values   map[string]string `json:"values"`
	Withheld []string          `json:"withheld,omitempty"`
}

// SecretStore keeps secret values encrypted at rest (AES-256-GCM) as rows
// of sluice's store (store.Secrets: SQLite in the data directory, or
// PostgreSQL shared by API replicas). Values leave it only through Resolve.
type SecretStore struct {
	db     store.Secrets
	closer io.Closer // the database OpenSecretStore opened itself
	aead   cipher.AEAD
}

// secretFile is the format of the JSON file secrets lived in before the
// store (pipeline → name → record), imported once by ImportFile.
type secretFile struct {
	Pipelines map[string]map[string]secretRecord `json:"pipelines"`
}

type secretRecord struct {
	// Sealed is base64(nonce || AES-GCM(value)), the pipeline and name as
	// additional data (a value cannot be moved to another secret).
	Sealed    string `json:"sealed"`
	AllowInPR bool   `json:"allow_in_pr,omitempty"`
	// AllowInForkPR also gives the secret to pull requests from forks.
	AllowInForkPR bool      `json:"allow_in_fork_pr,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
	UpdatedBy     string    `json:"updated_by,omitempty"`
}

// SecretFile is the JSON file of dir that secrets lived in before sluice's
// store; ImportFile imports it once and renames it to SecretFile+".imported".
const SecretFile = "secrets.json"

// storeContext bounds one call to the store. SecretStore's methods keep
// the signatures they had when secrets lived in a file, without a context
// (hence their nolint:contextcheck).
func storeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// OpenSecretStore opens (or creates) a store of its own in dir: its rows in
// the SQLite file dir/sluice.db, its key as NewSecretStore takes it, and
// dir/secrets.json imported once. The API opens sluice's store instead
// (NewSecretStore).
func OpenSecretStore(dir, key string) (secrets *SecretStore, generated bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "sluice.db"))
	if err != nil {
		return nil, false, fmt.Errorf("secrets: %w", err)
	}
	secrets, generated, err = NewSecretStore(db, dir, key)
	if err == nil {
		_, err = secrets.ImportFile(filepath.Join(dir, SecretFile))
	}
	if err != nil {
		_ = db.Close()
		return nil, false, err
	}
	secrets.closer = db
	return secrets, generated, nil
}

// NewSecretStore keeps secrets in db, sealed with key material: any string,
// stretched with SHA-256 (use a long random one). An empty key is read
// from dir/secret.key, or generated there once; generated reports that.
func NewSecretStore(db store.Secrets, dir, key string) (secrets *SecretStore, generated bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("secrets: %w", err)
	}
	if key == "" {
		keyFile := filepath.Join(dir, "secret.key")
		raw, err := os.ReadFile(keyFile) //nolint:gosec // our own data directory
		switch {
		case err == nil:
			key = string(raw)
		case errors.Is(err, os.ErrNotExist):
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return nil, false, fmt.Errorf("secrets: generate key: %w", err)
			}
			key = base64.StdEncoding.EncodeToString(b)
			if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
				return nil, false, fmt.Errorf("secrets: save generated key: %w", err)
			}
			generated = true
		default:
			return nil, false, fmt.Errorf("secrets: read key: %w", err)
		}
	}
	sum := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(sum[:])
	if err != nil {
		return nil, false, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, false, fmt.Errorf("secrets: %w", err)
	}
	return &SecretStore{db: db, aead: aead}, generated, nil
}

// EventNumbers is the store's record of deleted pipelines' event numbers,
// when the secrets' database keeps one (nil otherwise).
func (s *SecretStore) EventNumbers() store.EventNumbers {
	n, _ := s.db.(store.EventNumbers)
	return n
}

// MetaStore is the store's build and event metadata, if it keeps any.
func (s *SecretStore) MetaStore() store.Meta {
	m, _ := s.db.(store.Meta)
	return m
}

// Close releases the database OpenSecretStore opened (NewSecretStore's
// belongs to its caller).
func (s *SecretStore) Close() error {
	if s.closer == nil {
		return nil
	}
	return s.closer.Close()
}

// ImportFile imports the secrets of a JSON file of the store before
// sluice's (secrets.json) and renames it to path+".imported", so it is
// imported once. Each secret is written unless the store holds it updated
// at the same time or later, so an import racing another replica's, or
// one repeated after a crash before the rename, changes nothing. A file
// that does not parse, or whose values this key cannot open, is an error
// and nothing is imported. No file: 0 and no error.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) ImportFile(path string) (int, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // our own data directory
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("secrets: import %s: %w", path, err)
	}
	var f secretFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("secrets: import %s: the file is corrupt (%w): repair it, or move it away to start without its secrets", path, err)
	}
	var rows []store.Secret
	for pipeline, secrets := range f.Pipelines {
		for name, rec := range secrets {
			if _, err := s.open(pipeline, name, rec.Sealed); err != nil {
				return 0, fmt.Errorf("secrets: import %s: %w", path, err)
			}
			rows = append(rows, store.Secret{
				Pipeline: pipeline, Name: name, Sealed: rec.Sealed,
				AllowInPR: rec.AllowInPR || rec.AllowInForkPR, AllowInForkPR: rec.AllowInForkPR,
				UpdatedAt: rec.UpdatedAt, UpdatedBy: rec.UpdatedBy,
			})
		}
	}
	ctx, cancel := storeContext()
	defer cancel()
	n, err := s.db.ImportSecrets(ctx, rows)
	if err != nil {
		return 0, fmt.Errorf("secrets: import %s: %w", path, err)
	}
	// Another replica sharing the directory may have renamed it first.
	if err := os.Rename(path, path+".imported"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return n, fmt.Errorf("secrets: imported %s, but cannot rename it: %w", path, err)
	}
	return n, nil
}

func additional(pipeline, name string) []byte { return []byte(pipeline + "\x00" + name) }

func (s *SecretStore) seal(pipeline, name, value string) (string, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(value), additional(pipeline, name))
	return base64.StdEncoding.EncodeToString(out), nil
}

func (s *SecretStore) open(pipeline, name, sealed string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", fmt.Errorf("secret %s of %s is corrupt", name, pipeline)
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], additional(pipeline, name))
	if err != nil {
		return "", fmt.Errorf("secret %s of %s cannot be decrypted: was SLUICE_SECRET_KEY changed?", name, pipeline)
	}
	return string(plain), nil
}

// CheckSecretName reports a name Screwdriver would refuse.
func CheckSecretName(name string) error {
	if !reSecretName.MatchString(name) {
		return invalid("secret name %q: use uppercase letters, digits and underscores, not starting with a digit (as Screwdriver's secrets)", name)
	}
	return nil
}

// Set stores a secret's value.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) Set(id queue.Identity, pipeline, name string, req SetSecretRequest, now time.Time) (Secret, error) {
	if err := CheckSecretName(name); err != nil {
		return Secret{}, err
	}
	if req.Value == "" {
		return Secret{}, invalid("secret %s: empty value", name)
	}
	if len(req.Value) > maxSecretSize {
		return Secret{}, invalid("secret %s: %d bytes, at most %d", name, len(req.Value), maxSecretSize)
	}
	sealed, err := s.seal(pipeline, name, req.Value)
	if err != nil {
		return Secret{}, err
	}
	rec := store.Secret{
		Pipeline: pipeline, Name: name, Sealed: sealed,
		AllowInPR: req.AllowInPR || req.AllowInForkPR, AllowInForkPR: req.AllowInForkPR,
		UpdatedAt: now.UTC(), UpdatedBy: id.User,
	}
	ctx, cancel := storeContext()
	defer cancel()
	if err := s.db.PutSecret(ctx, rec); err != nil {
		return Secret{}, fmt.Errorf("secrets: %w", err)
	}
	return publicSecret(rec), nil
}

func publicSecret(r store.Secret) Secret {
	return Secret{Pipeline: r.Pipeline, Name: r.Name, AllowInPR: r.AllowInPR, AllowInForkPR: r.AllowInForkPR, UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy}
}

// List returns a pipeline's secrets, names only, sorted.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) List(pipeline string) ([]Secret, error) {
	ctx, cancel := storeContext()
	defer cancel()
	rows, err := s.db.ListSecrets(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	out := make([]Secret, 0, len(rows))
	for _, r := range rows {
		out = append(out, publicSecret(r))
	}
	return out, nil
}

// Delete removes a secret.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) Delete(pipeline, name string) error {
	ctx, cancel := storeContext()
	defer cancel()
	found, err := s.db.DeleteSecret(ctx, pipeline, name)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if !found {
		return fmt.Errorf("%w: secret %s of pipeline %s", ErrNotFound, name, pipeline)
	}
	return nil
}

// DeletePipeline removes every secret of a pipeline.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) DeletePipeline(pipeline string) error {
	ctx, cancel := storeContext()
	defer cancel()
	if _, err := s.db.DeletePipelineSecrets(ctx, pipeline); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}

// Audience is who a build's code comes from, which decides the secrets it
// gets.
type Audience int

// Audiences, from most to least trusted.
const (
	// AudienceBranch: a branch's builds (and anything a person started).
	AudienceBranch Audience = iota
	// AudiencePR: a pull request from a branch of the same repository,
	// whose author can push there anyway.
	AudiencePR
	// AudienceForkPR: a pull request from a fork: a stranger's code.
	AudienceForkPR
)

// audienceOf is the audience of the build ref (fork: from a fork).
func audienceOf(ref workflows.BuildRef, fork bool) Audience {
	switch {
	case ref.PR == 0:
		return AudienceBranch
	case fork:
		return AudienceForkPR
	}
	return AudiencePR
}

// Resolve returns the values of names for a build of pipeline. A pull
// request's build gets only the secrets set with AllowInPR, as in
// Screwdriver, and a fork's pull request only those set with
// AllowInForkPR: the others are withheld (named in withheld), not an error.
// A name that is not set is an error naming it.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) Resolve(pipeline string, names []string, aud Audience) (values map[string]string, withheld []string, err error) {
	ctx, cancel := storeContext()
	defer cancel()
	recs, err := s.db.GetSecrets(ctx, pipeline, names)
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: %w", err)
	}
	values = make(map[string]string, len(names))
	var missing []string
	for _, name := range names {
		rec, ok := recs[name]
		switch {
		case !ok:
			missing = append(missing, name)
			continue
		case aud == AudiencePR && !rec.AllowInPR, aud == AudienceForkPR && !rec.AllowInForkPR:
			withheld = append(withheld, name)
			continue
		}
		v, err := s.open(pipeline, name, rec.Sealed)
		if err != nil {
			return nil, nil, err
		}
		values[name] = v
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, nil, fmt.Errorf("%w: secret %s of pipeline %s is not set (sluice secret set %s NAME)",
			ErrNotFound, strings.Join(missing, ", "), pipeline, pipeline)
	}
	slices.Sort(withheld)
	return values, withheld, nil
}

// ResolveCheckout returns the values of the repository credential secrets
// among names that pipeline has (a missing one is left out). A pull
// request from a fork gets a value only when its secret allows fork pull
// requests; a pull request from the same repository gets it for its
// checkout (its author can push there anyway; the steps never see it).
func (s *SecretStore) ResolveCheckout(pipeline string, names []string, fork bool) (map[string]string, error) {
	for _, n := range names {
		if !slices.Contains(activities.RepoAuthSecrets, n) {
			return nil, fmt.Errorf("%w: %s is not a repository credential (%s)", queue.ErrForbidden, n, strings.Join(activities.RepoAuthSecrets, ", "))
		}
	}
	aud := AudienceBranch
	if fork {
		aud = AudienceForkPR
	}
	values := map[string]string{}
	for _, n := range names {
		v, _, err := s.Resolve(pipeline, []string{n}, aud)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		for k, val := range v {
			values[k] = val
		}
	}
	return values, nil
}

// SCMToken returns a pipeline's own SCM token secret, if it has one.
func (s *SecretStore) SCMToken(pipeline, name string) (string, bool, error) {
	values, _, err := s.Resolve(pipeline, []string{name}, AudienceBranch)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return values[name], true, nil
}

// PipelineTokens is the store as the pipelines' SCM tokens of a controller
// in the API's own process (sluice dev).
func (s *SecretStore) PipelineTokens() activities.PipelineTokens {
	return activities.PipelineTokenFunc(func(_ context.Context, pipeline, name string) (string, bool, error) {
		return s.SCMToken(pipeline, name)
	})
}

// LocalSource is the store as the secret source of an executor in the API's
// own process (sluice dev): a pull request's build is known from its ID.
func (s *SecretStore) LocalSource() activities.SecretSource {
	return activities.SecretSourceFunc(func(_ context.Context, req activities.SecretRequest) (map[string]string, []string, error) {
		ref, err := workflows.ParseBuildRef(req.Build)
		if err != nil {
			return nil, nil, err
		}
		if req.Checkout {
			v, err := s.ResolveCheckout(ref.Pipeline, req.Names, req.Fork && ref.PR > 0)
			return v, nil, err
		}
		return s.Resolve(ref.Pipeline, req.Names, audienceOf(ref, req.Fork))
	})
}

// ---- HTTP ----

// scmToken gives a controller a pipeline's own SCM token for its commit
// statuses (never through Temporal).
func (h *handler) scmToken(w http.ResponseWriter, r *http.Request) {
	id, err := h.identity(r) // the route policy required read-scm-tokens
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req SCMTokenRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := workflows.ValidatePipelineName(req.Pipeline); err != nil {
		h.fail(w, r, invalid("pipeline: %v", err))
		return
	}
	if !slices.Contains(scmTokenNames, req.Name) {
		h.fail(w, r, invalid("name %q: only %s are SCM tokens", req.Name, strings.Join(scmTokenNames, " and ")))
		return
	}
	value, found, err := h.d.Secrets.SCMToken(req.Pipeline, req.Name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "scm_token_read", "pipeline", req.Pipeline, "name", req.Name, "found", found, "user", id.User)
	writeJSON(w, http.StatusOK, SCMTokenResponse{Value: value, Found: found})
}

func (h *handler) listSecrets(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := h.identity(r); err != nil { // the route policy admitted the caller
		h.fail(w, r, err)
		return
	}
	if _, err := h.svc.GetPipeline(r.Context(), name); err != nil {
		h.fail(w, r, err)
		return
	}
	out, err := h.d.Secrets.List(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) setSecret(w http.ResponseWriter, r *http.Request) {
	name, secret := r.PathValue("name"), r.PathValue("secret")
	id, err := h.identity(r) // the route policy admitted the caller
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req SetSecretRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := CheckSecretName(secret); err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.svc.GetPipeline(r.Context(), name); err != nil {
		h.fail(w, r, err)
		return
	}
	out, err := h.d.Secrets.Set(id, name, secret, req, h.svc.now())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "secret_set", "pipeline", name, "secret", secret, "user", id.User, "allow_in_pr", req.AllowInPR)
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) deleteSecret(w http.ResponseWriter, r *http.Request) {
	name, secret := r.PathValue("name"), r.PathValue("secret")
	id, err := h.identity(r) // the route policy admitted the caller
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.d.Secrets.Delete(name, secret); err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "secret_deleted", "pipeline", name, "secret", secret, "user", id.User)
	writeJSON(w, http.StatusOK, map[string]string{"deleted": secret})
}

// resolveSecrets gives an executor the values its build's job lists, while
// that build runs, and only to the executor that claimed its current attempt
// (the attempt's credential): the values travel only from here to the
// executor, never through Temporal.
func (h *handler) resolveSecrets(w http.ResponseWriter, r *http.Request) {
	id, err := h.identity(r) // the route policy required read-secrets
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req ResolveSecretsRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	ref, err := workflows.ParseBuildRef(req.Build)
	if err != nil {
		h.fail(w, r, invalid("build %q: %v", req.Build, err))
		return
	}
	for _, n := range req.Names {
		if err := CheckSecretName(n); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	b, err := h.svc.buildRecord(r.Context(), ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if b.Status != workflows.StatusRunning {
		h.fail(w, r, fmt.Errorf("%w: build %s is %s: secrets are given to running builds only", ErrConflict, ref, b.Status))
		return
	}
	// Only the names the build's job lists (or, for its checkout, the
	// repository credentials), and only for its current attempt.
	for _, n := range req.Names {
		if req.Checkout {
			break // ResolveCheckout takes repository credentials only
		}
		// A build started before the names were recorded keeps the old
		// rule (any name of its pipeline) until it ends.
		if b.SecretsListed && !slices.Contains(b.Secrets, n) {
			h.fail(w, r, fmt.Errorf("%w: build %s's job does not list secret %s", queue.ErrForbidden, ref, n))
			return
		}
	}
	current := 0
	if n := len(b.AttemptList); n > 0 {
		current = b.AttemptList[n-1].Number
	}
	if req.Attempt != 0 && req.Attempt != current {
		h.fail(w, r, fmt.Errorf("%w: build %s is not on attempt %d: secrets go to the current attempt only", ErrConflict, ref, req.Attempt))
		return
	}
	// Only to the executor holding the current attempt's credential.
	at, ok := lastAttempt(b)
	if !ok {
		h.fail(w, r, fmt.Errorf("%w: build %s records no attempt: no executor claimed it", ErrConflict, ref))
		return
	}
	if err := h.checkCredential(r.Context(), ref, at, r.Header.Get(logstore.AttemptCredentialHeader), "secrets"); err != nil {
		h.fail(w, r, err)
		return
	}
	if req.Checkout {
		fork := audienceOf(ref, req.Fork || b.Fork) == AudienceForkPR
		values, err := h.d.Secrets.ResolveCheckout(ref.Pipeline, req.Names, fork)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		values, app, err := h.svc.withAppToken(r.Context(), ref.Pipeline, fork, values)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.log.InfoContext(r.Context(), "checkout_credentials_resolved", "build", ref.String(), "names", len(values), "github_app_token", app, "user", id.User)
		writeJSON(w, http.StatusOK, ResolveSecretsResponse{Values: values})
		return
	}
	// The stricter of what the executor says and what the build records.
	values, withheld, err := h.d.Secrets.Resolve(ref.Pipeline, req.Names, audienceOf(ref, req.Fork || b.Fork))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "secrets_resolved", "build", ref.String(), "names", len(values), "withheld", len(withheld), "user", id.User)
	writeJSON(w, http.StatusOK, ResolveSecretsResponse{Values: values, Withheld: withheld})
}

// HasAny reports whether pipeline has any secret.
//
//nolint:contextcheck // no context in the signature (storeContext)
func (s *SecretStore) HasAny(pipeline string) (bool, error) {
	ctx, cancel := storeContext()
	defer cancel()
	has, err := s.db.HasSecrets(ctx, pipeline)
	if err != nil {
		return false, fmt.Errorf("secrets: %w", err)
	}
	return has, nil
}
