package scm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hookCase is one webhook delivery and what parsing it must give.
type hookCase struct {
	name     string
	event    string            // X-GitHub-Event / X-Gitlab-Event
	fixture  string            // file under testdata/<provider>/
	body     string            // used when fixture is empty
	secret   string            // the secret sluice is configured with
	signWith string            // the secret the sender signs with ("" = no signature header)
	header   map[string]string // more headers
	want     *Hook
	// change is the Title, Author and Message the hook carries (nil: not
	// checked by this case).
	change  *[3]string
	wantErr error
	wantMsg string
}

// load returns the case's body.
func (tc hookCase) load(t *testing.T, provider string) []byte {
	t.Helper()
	if tc.fixture == "" {
		return []byte(tc.body)
	}
	b, err := os.ReadFile(filepath.Join("testdata", provider, tc.fixture))
	require.NoError(t, err)
	return b
}

// check compares a parse result with the case's expectation.
func (tc hookCase) check(t *testing.T, got *Hook, err error) {
	t.Helper()
	if tc.wantErr != nil {
		require.ErrorIs(t, err, tc.wantErr)
		require.ErrorContains(t, err, tc.wantMsg)
		require.Nil(t, got)
		return
	}
	require.NoError(t, err)
	require.Len(t, got.BodyHash, 32, "every hook carries its body's hash")
	want := *tc.want
	want.BodyHash = got.BodyHash
	want.Title, want.Author, want.Message = got.Title, got.Author, got.Message
	if tc.change != nil {
		want.Title, want.Author, want.Message = tc.change[0], tc.change[1], tc.change[2]
	}
	require.Equal(t, &want, got)
}

// githubSign returns the X-Hub-Signature-256 value for body.
func githubSign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

const (
	testSecret = "s3cret"
	testGUID   = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
)

var githubURLs = []string{
	"https://github.com/sluice-ci/sluice.git",
	"git@github.com:sluice-ci/sluice.git",
	"https://github.com/sluice-ci/sluice",
	"git://github.com/sluice-ci/sluice.git",
}

func TestParseGitHub(t *testing.T) {
	t.Parallel()
	tests := []hookCase{
		{
			name: "push to a branch", event: "push", fixture: "push.json", secret: testSecret, signWith: testSecret,
			change: &[3]string{"", "octocat", "Remove the old fetcher"},
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs: githubURLs, RepoFullName: "sluice-ci/sluice",
				Branch: "main", DefaultBranch: "main",
				SHA: "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", Before: "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
				ChangedFiles: []string{"fetch/fetch.go", "go.mod", "scm/doc.go", "scm/git.go", "screwdriver.yaml"},
				Sender:       "octocat",
			},
		},
		{
			name: "push without a secret configured", event: "push", fixture: "push.json",
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs: githubURLs, RepoFullName: "sluice-ci/sluice",
				Branch: "main", DefaultBranch: "main",
				SHA: "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", Before: "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
				ChangedFiles: []string{"fetch/fetch.go", "go.mod", "scm/doc.go", "scm/git.go", "screwdriver.yaml"},
				Sender:       "octocat",
			},
		},
		{
			name: "new branch: no before, no commit list", event: "push", fixture: "push_new_branch.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs: githubURLs, RepoFullName: "sluice-ci/sluice",
				Branch: "feature/x", DefaultBranch: "main",
				SHA: "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", Sender: "octocat",
			},
		},
		{
			name: "forced push: changed files unknown", event: "push", fixture: "push_forced.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs:     []string{"https://github.com/sluice-ci/sluice.git", "git@github.com:sluice-ci/sluice.git", "https://github.com/sluice-ci/sluice"},
				RepoFullName: "sluice-ci/sluice", Branch: "main", DefaultBranch: "main",
				SHA: "a10867b14bb761a232cd80139fbd4c0d33264240", Before: "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
				Sender: "octocat",
			},
		},
		{
			name: "annotated tag push uses the commit, not the tag object", event: "push", fixture: "push_tag.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookTag,
				RepoURLs: githubURLs, RepoFullName: "sluice-ci/sluice",
				Branch: "release-1.2", DefaultBranch: "main", Ref: "v1.2.0",
				SHA: "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", Sender: "octocat",
			},
		},
		{
			name: "pull request from a fork", event: "pull_request", fixture: "pull_request_opened.json", secret: testSecret, signWith: testSecret,
			change: &[3]string{"Cache mirrors per host", "forker", ""},
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookPR,
				RepoURLs: githubURLs, RepoFullName: "sluice-ci/sluice",
				Branch: "main", DefaultBranch: "main", Ref: "mirror-cache", PRRef: "refs/pull/42/head",
				SHA: "9f3b2c1d0e4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c", PRNumber: 42, Fork: true, Sender: "forker",
			},
		},
		{
			name: "pull request synchronize", event: "pull_request", fixture: "pull_request_synchronize.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookPR,
				RepoURLs:     []string{"https://github.com/sluice-ci/sluice.git", "git@github.com:sluice-ci/sluice.git", "https://github.com/sluice-ci/sluice"},
				RepoFullName: "sluice-ci/sluice", Branch: "main", DefaultBranch: "main",
				Ref: "gitlab-system", PRRef: "refs/pull/43/head",
				SHA: "4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c", Before: "3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b",
				PRNumber: 43, Sender: "octocat",
			},
		},
		{
			name: "pull request merged", event: "pull_request", fixture: "pull_request_closed.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookPRClosed,
				RepoURLs:     []string{"https://github.com/sluice-ci/sluice.git", "git@github.com:sluice-ci/sluice.git", "https://github.com/sluice-ci/sluice"},
				RepoFullName: "sluice-ci/sluice", Branch: "main", DefaultBranch: "main",
				Ref: "gitlab-system", PRRef: "refs/pull/43/head",
				SHA: "4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c", PRNumber: 43, Merged: true, Sender: "maintainer",
			},
		},
		{
			name: "release published", event: "release", fixture: "release_published.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitHub, DeliveryID: testGUID, Kind: HookRelease,
				RepoURLs: githubURLs, RepoFullName: "sluice-ci/sluice",
				Branch: "main", DefaultBranch: "main", Ref: "v1.2.0", Sender: "maintainer",
			},
		},
		{name: "deleted branch", event: "push", fixture: "push_deleted.json", secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: "deletes refs/heads/feature/x"},
		{name: "ping", event: "ping", fixture: "ping.json", secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: "ping"},
		{name: "pull request labeled", event: "pull_request", fixture: "pull_request_labeled.json", secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: `action "labeled"`},
		{name: "release created but not published", event: "release", body: `{"action":"created","release":{"tag_name":"v1"},"repository":{"full_name":"o/r","clone_url":"https://github.com/o/r.git"}}`, wantErr: ErrIgnored, wantMsg: `action "created"`},
		{name: "unknown event", event: "issues", body: `{"action":"opened"}`, secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: `event "issues"`},
		{name: "push to a note ref", event: "push", body: `{"ref":"refs/notes/commits","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}`, wantErr: ErrIgnored, wantMsg: "refs/notes/commits"},
		{name: "wrong secret", event: "push", fixture: "push.json", secret: testSecret, signWith: "other", wantErr: ErrSignature, wantMsg: "X-Hub-Signature-256 does not match"},
		{name: "missing signature", event: "push", fixture: "push.json", secret: testSecret, wantErr: ErrSignature, wantMsg: "missing header X-Hub-Signature-256"},
		{name: "signature not sha256", event: "push", fixture: "push.json", secret: testSecret, header: map[string]string{"X-Hub-Signature-256": "sha1=abcd"}, wantErr: ErrSignature, wantMsg: "sha256="},
		{name: "signature not hex", event: "push", fixture: "push.json", secret: testSecret, header: map[string]string{"X-Hub-Signature-256": "sha256=zz"}, wantErr: ErrSignature, wantMsg: "not hex"},
		{name: "bad signature checked before anything else", event: "", body: `{`, secret: testSecret, signWith: "other", wantErr: ErrSignature},
		{name: "missing event header", event: "", fixture: "push.json", secret: testSecret, signWith: testSecret, wantErr: ErrBadPayload, wantMsg: "missing header X-GitHub-Event"},
		{name: "malformed JSON", event: "push", body: `{"ref": "refs/heads/main",`, secret: testSecret, signWith: testSecret, wantErr: ErrBadPayload, wantMsg: "github push: malformed JSON"},
		{name: "wrong JSON type names the field", event: "pull_request", body: `{"action":"opened","number":"42"}`, wantErr: ErrBadPayload, wantMsg: `field "number"`},
		{name: "missing sha", event: "push", fixture: "push_missing_sha.json", secret: testSecret, signWith: testSecret, wantErr: ErrBadPayload, wantMsg: `missing field "after"`},
		{name: "sha not hex", event: "push", body: `{"ref":"refs/heads/main","after":"not-a-sha"}`, wantErr: ErrBadPayload, wantMsg: `"after" is "not-a-sha"`},
		{name: "missing ref", event: "push", body: `{"after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}`, wantErr: ErrBadPayload, wantMsg: `missing field "ref"`},
		{name: "missing repository", event: "push", body: `{"ref":"refs/heads/main","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}`, wantErr: ErrBadPayload, wantMsg: `missing field "repository.full_name"`},
		{name: "pull request missing head sha", event: "pull_request", body: `{"action":"opened","number":1,"pull_request":{"head":{"ref":"x"},"base":{"ref":"main"}}}`, wantErr: ErrBadPayload, wantMsg: `missing field "pull_request.head.sha"`},
		{name: "pull request missing number", event: "pull_request", body: `{"action":"opened"}`, wantErr: ErrBadPayload, wantMsg: `missing field "number"`},
		{name: "pull request missing action", event: "pull_request", body: `{}`, wantErr: ErrBadPayload, wantMsg: `missing field "action"`},
		{name: "release missing tag", event: "release", body: `{"action":"published","release":{}}`, wantErr: ErrBadPayload, wantMsg: `missing field "release.tag_name"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := tc.load(t, "github")
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			h.Set("X-GitHub-Delivery", testGUID)
			if tc.event != "" {
				h.Set("X-GitHub-Event", tc.event)
			}
			if tc.signWith != "" {
				h.Set("X-Hub-Signature-256", githubSign(tc.signWith, body))
			}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, err := ParseGitHub(h, body, tc.secret)
			tc.check(t, got, err)
		})
	}
}

func TestParseGitHubFormEncoded(t *testing.T) {
	t.Parallel()
	payload, err := os.ReadFile(filepath.Join("testdata", "github", "push.json"))
	require.NoError(t, err)
	body := []byte(url.Values{"payload": {string(payload)}}.Encode())
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-GitHub-Event", "push")
	h.Set("X-Hub-Signature-256", githubSign(testSecret, body))
	got, err := ParseGitHub(h, body, testSecret)
	require.NoError(t, err)
	require.Equal(t, HookCommit, got.Kind)
	require.Equal(t, "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", got.SHA)

	h.Set("X-Hub-Signature-256", githubSign(testSecret, []byte("other=1")))
	_, err = ParseGitHub(h, []byte("other=1"), testSecret)
	require.ErrorIs(t, err, ErrBadPayload)
	require.ErrorContains(t, err, `missing parameter "payload"`)
}

func TestDeliveryIDWithoutHeader(t *testing.T) {
	t.Parallel()
	body := []byte(`{"action":"create","tag":"v1","commit":{"id":"ee0f8a9b3c1d2e4f5a6b7c8d9e0f1a2b3c4d5e6f"},` +
		`"project":{"path_with_namespace":"g/p","git_http_url":"https://gitlab.example.com/g/p.git"}}`)
	h := http.Header{}
	h.Set("X-Gitlab-Event", "Release Hook")
	first, err := ParseGitLab(h, body, "")
	require.NoError(t, err)
	require.Regexp(t, `^body-[0-9a-f]{32}$`, first.DeliveryID)
	again, err := ParseGitLab(h, body, "")
	require.NoError(t, err)
	require.Equal(t, first.DeliveryID, again.DeliveryID, "a redelivery has the same id")
	other, err := ParseGitLab(h, append(body, ' '), "")
	require.NoError(t, err)
	require.NotEqual(t, first.DeliveryID, other.DeliveryID)
}

var gitlabURLs = []string{
	"https://gitlab.example.com/mike/diaspora.git",
	"git@gitlab.example.com:mike/diaspora.git",
	"https://gitlab.example.com/mike/diaspora",
}

var gitlabTestURLs = []string{
	"https://gitlab.example.com/gitlabhq/gitlab-test.git",
	"git@gitlab.example.com:gitlabhq/gitlab-test.git",
	"https://gitlab.example.com/gitlabhq/gitlab-test",
}

func TestParseGitLab(t *testing.T) {
	t.Parallel()
	tests := []hookCase{
		{
			name: "push to a branch", event: "Push Hook", fixture: "push.json", secret: testSecret, signWith: testSecret,
			change: &[3]string{"", "GitLab dev user", "fixed readme"},
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs: gitlabURLs, RepoFullName: "mike/diaspora", Branch: "main", DefaultBranch: "main",
				SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Before: "95790bf891e76fee5e1747ab589903a6a1f80f22",
				ChangedFiles: []string{"CHANGELOG", "README.md", "app/controller/application.rb", "old/notes.txt"},
				Sender:       "jsmith",
			},
		},
		{
			name: "truncated commit list: changed files unknown", event: "Push Hook", fixture: "push_truncated.json",
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs: gitlabURLs, RepoFullName: "mike/diaspora", Branch: "main", DefaultBranch: "main",
				SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Before: "95790bf891e76fee5e1747ab589903a6a1f80f22",
				Sender: "jsmith",
			},
		},
		{
			name: "system hook carrying a push", event: "System Hook", fixture: "system_push.json",
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookCommit,
				RepoURLs: gitlabURLs, RepoFullName: "mike/diaspora", Branch: "main", DefaultBranch: "main",
				SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Before: "95790bf891e76fee5e1747ab589903a6a1f80f22",
				Sender: "jsmith",
			},
		},
		{
			name: "annotated tag push uses checkout_sha", event: "Tag Push Hook", fixture: "tag_push.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookTag,
				RepoURLs:     []string{"https://gitlab.example.com/jsmith/example.git", "git@gitlab.example.com:jsmith/example.git", "https://gitlab.example.com/jsmith/example"},
				RepoFullName: "jsmith/example", Branch: "main", DefaultBranch: "main", Ref: "v1.0.0",
				SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Sender: "jsmith",
			},
		},
		{
			name: "merge request from a fork", event: "Merge Request Hook", fixture: "merge_request_open.json", secret: testSecret, signWith: testSecret,
			change: &[3]string{"MS-Viewport", "root", ""},
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookPR,
				RepoURLs: gitlabTestURLs, RepoFullName: "gitlabhq/gitlab-test", Branch: "master", DefaultBranch: "master",
				Ref: "ms-viewport", PRRef: "refs/merge-requests/1/head",
				SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", PRNumber: 1, Fork: true, Sender: "root",
			},
		},
		{
			name: "merge request updated with new commits", event: "Merge Request Hook", fixture: "merge_request_update.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookPR,
				RepoURLs: gitlabTestURLs, RepoFullName: "gitlabhq/gitlab-test", Branch: "master", DefaultBranch: "master",
				Ref: "fix-login", PRRef: "refs/merge-requests/7/head",
				SHA: "b6568db1bc1dcd7f8b4d5a946b0b91f9dacd7327", Before: "95790bf891e76fee5e1747ab589903a6a1f80f22",
				PRNumber: 7, Sender: "jdoe",
			},
		},
		{
			name: "merge request merged", event: "Merge Request Hook", fixture: "merge_request_merge.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookPRClosed,
				RepoURLs: gitlabTestURLs, RepoFullName: "gitlabhq/gitlab-test", Branch: "master", DefaultBranch: "master",
				Ref: "fix-login", PRRef: "refs/merge-requests/7/head",
				SHA: "b6568db1bc1dcd7f8b4d5a946b0b91f9dacd7327", PRNumber: 7, Merged: true, Sender: "root",
			},
		},
		{
			name: "release created", event: "Release Hook", fixture: "release_create.json", secret: testSecret, signWith: testSecret,
			want: &Hook{
				Provider: ProviderGitLab, DeliveryID: testGUID, Kind: HookRelease,
				RepoURLs: []string{
					"https://gitlab.example.com/gitlab-org/release-webhook-example.git",
					"ssh://git@gitlab.example.com:2222/gitlab-org/release-webhook-example.git",
					"https://gitlab.example.com/gitlab-org/release-webhook-example",
				},
				RepoFullName: "gitlab-org/release-webhook-example", Branch: "main", DefaultBranch: "main",
				Ref: "v1.1", SHA: "ee0f8a9b3c1d2e4f5a6b7c8d9e0f1a2b3c4d5e6f",
			},
		},
		{name: "deleted branch", event: "Push Hook", fixture: "push_deleted.json", secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: "deletes refs/heads/feature/old"},
		{name: "deleted tag", event: "Tag Push Hook", body: `{"ref":"refs/tags/v1","after":"0000000000000000000000000000000000000000","checkout_sha":null}`, wantErr: ErrIgnored, wantMsg: "deletes refs/tags/v1"},
		{name: "merge request title edit", event: "Merge Request Hook", fixture: "merge_request_update_title.json", secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: "without new commits"},
		{name: "merge request approved", event: "Merge Request Hook", fixture: "merge_request_approved.json", wantErr: ErrIgnored, wantMsg: `action "approved"`},
		{name: "release deleted", event: "Release Hook", body: `{"action":"delete","tag":"v1"}`, wantErr: ErrIgnored, wantMsg: `action "delete"`},
		{name: "unknown event", event: "Note Hook", body: `{"object_kind":"note"}`, secret: testSecret, signWith: testSecret, wantErr: ErrIgnored, wantMsg: `event "Note Hook"`},
		{name: "system hook of another kind", event: "System Hook", body: `{"object_kind":"repository_update"}`, wantErr: ErrIgnored, wantMsg: "repository_update"},
		{name: "wrong token", event: "Push Hook", fixture: "push.json", secret: testSecret, signWith: "other", wantErr: ErrSignature, wantMsg: "X-Gitlab-Token does not match"},
		{name: "missing token", event: "Push Hook", fixture: "push.json", secret: testSecret, wantErr: ErrSignature, wantMsg: "missing header X-Gitlab-Token"},
		{name: "missing event header", event: "", fixture: "push.json", secret: testSecret, signWith: testSecret, wantErr: ErrBadPayload, wantMsg: "missing header X-Gitlab-Event"},
		{name: "malformed JSON", event: "Push Hook", body: `{"ref": `, wantErr: ErrBadPayload, wantMsg: "gitlab Push Hook: malformed JSON"},
		{name: "wrong JSON type names the field", event: "Merge Request Hook", body: `{"object_attributes":{"iid":"7"}}`, wantErr: ErrBadPayload, wantMsg: `field "object_attributes.iid"`},
		{name: "missing sha", event: "Merge Request Hook", fixture: "merge_request_missing_sha.json", wantErr: ErrBadPayload, wantMsg: `missing field "object_attributes.last_commit.id"`},
		{name: "push missing checkout_sha and after", event: "Push Hook", body: `{"ref":"refs/heads/main"}`, wantErr: ErrBadPayload, wantMsg: `missing field "after"`},
		{name: "tag push missing checkout_sha", event: "Tag Push Hook", body: `{"ref":"refs/tags/v1","after":"82b3d5ae55f7080f1e6022629cdb57bfae7cccc7"}`, wantErr: ErrBadPayload, wantMsg: `missing field "checkout_sha"`},
		{name: "missing project", event: "Push Hook", body: `{"ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}`, wantErr: ErrBadPayload, wantMsg: `missing field "project.path_with_namespace"`},
		{name: "release missing commit", event: "Release Hook", body: `{"action":"create","tag":"v1"}`, wantErr: ErrBadPayload, wantMsg: `missing field "commit.id"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := tc.load(t, "gitlab")
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			h.Set("X-Gitlab-Event-UUID", testGUID)
			if tc.event != "" {
				h.Set("X-Gitlab-Event", tc.event)
			}
			if tc.signWith != "" {
				h.Set("X-Gitlab-Token", tc.signWith)
			}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, err := ParseGitLab(h, body, tc.secret)
			tc.check(t, got, err)
		})
	}
}

func TestHookMatches(t *testing.T) {
	t.Parallel()
	hook := &Hook{RepoURLs: githubURLs}
	tests := []struct {
		name, location string
		want           bool
	}{
		{name: "https clone URL", location: "https://github.com/sluice-ci/sluice.git", want: true},
		{name: "web URL in another case", location: "https://GitHub.com/Sluice-CI/sluice", want: true},
		{name: "ssh URL with port", location: "ssh://git@github.com:22/sluice-ci/sluice", want: true},
		{name: "token in URL", location: "https://x-access-token:abc@github.com/sluice-ci/sluice.git", want: true},
		{name: "another repository", location: "https://github.com/sluice-ci/other.git", want: false},
		{name: "same path on another host", location: "https://gitlab.com/sluice-ci/sluice.git", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, hook.Matches(tc.location))
		})
	}
}

// A delivery header that is not a short UUID-like token is refused (a 450 KB
// X-GitHub-Delivery once made a pipeline's state too large to load), and a
// replay of a signed body under a fresh delivery ID has the same body hash,
// which is what deduplicates events.
func TestDeliveryHeaderBoundedAndBodyHashDeduplicates(t *testing.T) {
	t.Parallel()
	body := []byte(`{"ref":"refs/heads/main","after":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","before":"95790bf891e76fee5e1747ab589903a6a1f80f22","repository":{"full_name":"o/r","clone_url":"https://github.com/o/r.git"},"sender":{"login":"x"}}`)
	h := func(id string) http.Header {
		return http.Header{"X-Github-Event": {"push"}, "X-Github-Delivery": {id}, "X-Hub-Signature-256": {githubSign("s", body)}}
	}
	_, err := ParseGitHub(h(strings.Repeat("a", 65)), body, "s")
	require.ErrorIs(t, err, ErrBadPayload)
	require.ErrorContains(t, err, "X-GitHub-Delivery: want a delivery ID of at most 64")
	_, err = ParseGitHub(h("abc def"), body, "s")
	require.ErrorIs(t, err, ErrBadPayload)
	first, err := ParseGitHub(h("11111111-2222-3333-4444-555555555555"), body, "s")
	require.NoError(t, err)
	replay, err := ParseGitHub(h("99999999-2222-3333-4444-555555555555"), body, "s")
	require.NoError(t, err)
	require.NotEqual(t, first.DeliveryID, replay.DeliveryID)
	require.Equal(t, first.BodyHash, replay.BodyHash)
}

func TestSkipCIMarker(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"fix: typo [skip ci]":         "[skip ci]",
		"[CI SKIP] docs":              "[CI SKIP]",
		"docs\n\nbody text [Skip Ci]": "[Skip Ci]",
		"skip ci":                     "",
		"[skip-ci]":                   "",
		"":                            "",
	} {
		if got := SkipCIMarker(msg); got != want {
			t.Errorf("SkipCIMarker(%q) = %q, want %q", msg, got, want)
		}
	}
}
