package scm

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzSeeds adds every fixture of provider as a seed, with the event its file
// name implies.
func fuzzSeeds(f *testing.F, provider string, events map[string]string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", provider, "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		event := ""
		for prefix, e := range events {
			if strings.HasPrefix(filepath.Base(file), prefix) {
				event = e
			}
		}
		f.Add(event, body, "")
	}
	f.Add("push", []byte(`{"ref":"refs/heads/x","after":"`+strings.Repeat("a", 40)+`","repository":{"full_name":"a/b","clone_url":"u"}}`), "")
	f.Add("push", []byte(`null`), "sha256=00")
	f.Add("Push Hook", []byte(`[]`), "tok")
}

// checkHook asserts what every parse result must satisfy.
func checkHook(t *testing.T, hook *Hook, err error) {
	t.Helper()
	if err != nil {
		if hook != nil {
			t.Fatalf("hook %+v returned with error %v", hook, err)
		}
		if !errors.Is(err, ErrIgnored) && !errors.Is(err, ErrBadPayload) && !errors.Is(err, ErrSignature) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		return
	}
	switch hook.Kind {
	case HookCommit, HookTag, HookRelease:
	case HookPR, HookPRClosed:
		if hook.PRNumber <= 0 || hook.PRRef == "" {
			t.Fatalf("pull request hook without number: %+v", hook)
		}
	default:
		t.Fatalf("unknown kind in %+v", hook)
	}
	if hook.RepoFullName == "" || len(hook.RepoURLs) == 0 || hook.DeliveryID == "" {
		t.Fatalf("hook without repository or delivery: %+v", hook)
	}
	if hook.SHA != "" && !commitSHA.MatchString(hook.SHA) || hook.Before != "" && !commitSHA.MatchString(hook.Before) {
		t.Fatalf("hook with a malformed sha: %+v", hook)
	}
	if hook.SHA == "" && (hook.Provider != ProviderGitHub || hook.Kind != HookRelease) {
		t.Fatalf("hook without sha: %+v", hook)
	}
}

func FuzzParseGitHub(f *testing.F) {
	fuzzSeeds(f, "github", map[string]string{"push": "push", "pull_request": "pull_request", "release": "release", "ping": "ping"})
	f.Fuzz(func(t *testing.T, event string, body []byte, signature string) {
		h := http.Header{}
		h.Set("X-GitHub-Event", event)
		hook, err := ParseGitHub(h, body, "")
		checkHook(t, hook, err)

		h.Set("X-Hub-Signature-256", signature)
		hook, err = ParseGitHub(h, body, "secret")
		if err == nil {
			t.Fatalf("forged signature %q accepted", signature)
		}
		checkHook(t, hook, err)
	})
}

func FuzzParseGitLab(f *testing.F) {
	fuzzSeeds(f, "gitlab", map[string]string{
		"push": "Push Hook", "tag_push": "Tag Push Hook", "merge_request": "Merge Request Hook",
		"release": "Release Hook", "system": "System Hook",
	})
	f.Fuzz(func(t *testing.T, event string, body []byte, token string) {
		h := http.Header{}
		h.Set("X-Gitlab-Event", event)
		hook, err := ParseGitLab(h, body, "")
		checkHook(t, hook, err)

		h.Set("X-Gitlab-Token", token)
		hook, err = ParseGitLab(h, body, "secret")
		if token != "secret" && err == nil {
			t.Fatalf("token %q accepted", token)
		}
		checkHook(t, hook, err)
	})
}
