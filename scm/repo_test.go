package scm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKind(t *testing.T) {
	t.Parallel()
	h := newSource(t)
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitIn(t, filepath.Dir(bare), "init", "--quiet", "--bare", bare)
	worktree := filepath.Join(t.TempDir(), "wt")
	require.NoError(t, os.MkdirAll(worktree, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(worktree, ".git"), []byte("gitdir: /elsewhere\n"), 0o644))
	plain := newPlainDir(t, plainFiles)

	tests := []struct {
		name, location, want string
	}{
		{name: "https", location: "https://github.com/sluice-ci/sluice.git", want: KindGitRemote},
		{name: "http with token", location: "http://user:tok@gitlab.local/g/p", want: KindGitRemote},
		{name: "ssh URL", location: "ssh://git@github.com:22/o/r.git", want: KindGitRemote},
		{name: "git protocol", location: "git://example.com/r.git", want: KindGitRemote},
		{name: "scp-like", location: "git@github.com:o/r.git", want: KindGitRemote},
		{name: "scp-like host alias", location: "gh:o/r", want: KindGitRemote},
		{name: "file URL", location: "file:///srv/r.git", want: KindGitRemote},
		{name: "work tree", location: h.dir, want: KindGitLocal},
		{name: "bare repository", location: bare, want: KindGitLocal},
		{name: "linked work tree (.git file)", location: worktree, want: KindGitLocal},
		{name: "plain directory", location: plain, want: KindDir},
		{name: "subdirectory of a plain directory", location: filepath.Join(plain, "src"), want: KindDir},
		{name: "missing path", location: filepath.Join(plain, "missing"), want: KindDir},
		{name: "relative path", location: ".", want: KindDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Kind(tc.location))
		})
	}
}

func TestCanonicalURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, location, want string
	}{
		{name: "https with .git", location: "https://github.com/Sluice-CI/Sluice.git", want: "github.com/sluice-ci/sluice"},
		{name: "https trailing slash", location: "https://github.com/sluice-ci/sluice/", want: "github.com/sluice-ci/sluice"},
		{name: "credentials and port dropped", location: "https://oauth2:tok@gitlab.example.com:8443/group/sub/proj.git", want: "gitlab.example.com/group/sub/proj"},
		{name: "ssh URL", location: "ssh://git@github.com:22/sluice-ci/sluice.git", want: "github.com/sluice-ci/sluice"},
		{name: "scp-like", location: "git@github.com:sluice-ci/sluice.git", want: "github.com/sluice-ci/sluice"},
		{name: "git protocol", location: "git://github.com/sluice-ci/sluice", want: "github.com/sluice-ci/sluice"},
		{name: "file URL", location: "file:///srv/git/app.git/", want: "/srv/git/app.git"},
		{name: "absolute path", location: "/srv/git/app/", want: "/srv/git/app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, CanonicalURL(tc.location))
		})
	}
}
