package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatchSourcePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		paths   []string
		changed []string
		want    bool
	}{
		{"no sourcePaths", nil, []string{"x"}, true},
		{"exact file", []string{"README.md"}, []string{"README.md"}, true},
		{"file is not a prefix", []string{"README.md"}, []string{"README.md.bak"}, false},
		{"directory", []string{"src/app/"}, []string{"src/app/main.go"}, true},
		{"directory needs the slash", []string{"src/app/"}, []string{"src/application.go"}, false},
		{"path without slash is a file", []string{"src/app"}, []string{"src/app/main.go"}, false},
		{"one of many", []string{"docs/", "src/"}, []string{"go.mod", "src/x.go"}, true},
		{"excluded", []string{"src/", "!src/tests/"}, []string{"src/tests/a_test.go"}, false},
		{"excluded and included", []string{"src/", "!src/tests/"}, []string{"src/tests/a_test.go", "src/a.go"}, true},
		{"only excludes", []string{"!docs/"}, []string{"docs/a.md"}, false},
		{"only excludes other file", []string{"!docs/"}, []string{"main.go"}, true},
		{"leading ./ and /", []string{"./src/"}, []string{"/src/a.go"}, true},
		{"nothing changed", []string{"src/"}, []string{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, MatchSourcePaths(tt.paths, tt.changed))
		})
	}
}

func TestFilterBySourcePaths(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, sharedHeader+`
jobs:
	api: {requires: [~commit], sourcePaths: [api/]}
	web: {requires: [~commit], sourcePaths: [web/, "!web/docs/"]}
	all: {requires: [~commit]}
`)
	start := spec.StartJobs(EventCommit, "main", "main")
	require.Equal(t, []string{"api", "web", "all"}, start)
	require.Equal(t, []string{"api", "all"}, spec.FilterBySourcePaths(start, []string{"api/x.go", "web/docs/a.md"}))
	require.Equal(t, []string{"all"}, spec.FilterBySourcePaths(start, []string{}))
	require.Equal(t, start, spec.FilterBySourcePaths(start, nil), "unknown changes keep every job")
	require.Equal(t, []string{"all"}, spec.FilterBySourcePaths([]string{"nope", "all"}, nil))
}

func TestUsesSourcePaths(t *testing.T) {
	t.Parallel()
	with := mustParse(t, sharedHeader+`
jobs:
	api: {requires: [~commit], sourcePaths: [api/]}
	all: {requires: [~commit]}
`)
	require.True(t, with.UsesSourcePaths())
	staged := mustParse(t, sharedHeader+`
jobs:
	ci: {}
stages:
	canary: {jobs: [ci], requires: ~commit, sourcePaths: [deploy/]}
`)
	require.True(t, staged.UsesSourcePaths(), "a stage's sourcePaths reach its setup job")
	without := mustParse(t, sharedHeader+`
jobs:
	all: {requires: [~commit]}
`)
	require.False(t, without.UsesSourcePaths())
}
