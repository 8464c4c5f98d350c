package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// conformanceDir holds Screwdriver config-parser fixtures: valid/*.yaml with the
// parser's expected output in valid/*.json, invalid/*.yaml with
// invalid/expected-errors.json.
const conformanceDir = "../../shared/conformance/screwdriver"

func conformanceFiles(t testing.TB, sub string) []string {
	t.Helper()
	dir := filepath.Join(conformanceDir, sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skip("conformance data absent: " + dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// sdPermutation is one entry of a job in Screwdriver's parser output.
type sdPermutation struct {
	Image         string            `json:"image"`
	Commands      []Command         `json:"commands"`
	Requires      []string          `json:"requires"`
	BlockedBy     []string          `json:"blockedBy"`
	FreezeWindows []string          `json:"freezeWindows"`
	Environment   map[string]string `json:"environment"`
	Annotations   map[string]any    `json:"annotations"`
	Secrets       []string          `json:"secrets"`
	SourcePaths   []string          `json:"sourcePaths"`
	Settings      map[string]any    `json:"settings"`
	Description   string            `json:"description"`
	Parameters    map[string]any    `json:"parameters"`
	Cache         *JobCache         `json:"cache"`
	Stage         *struct {
		Name string `json:"name"`
	} `json:"stage"`
}

// sdOutput is Screwdriver's parser output.
type sdOutput struct {
	Jobs          map[string][]sdPermutation `json:"jobs"`
	WorkflowGraph Graph                      `json:"workflowGraph"`
	Errors        []string                   `json:"errors"`
	WarnMessages  []string                   `json:"warnMessages"`
	Annotations   map[string]any             `json:"annotations"`
	Parameters    map[string]any             `json:"parameters"`
}

// jsonNormal round-trips v through JSON so maps of any compare by value.
func jsonNormal(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// requireErrorMentions checks that err contains every message of a Screwdriver error
// text. Screwdriver joins its own errors with "\n" (each must appear verbatim) and Joi
// joins schema errors with ". " (each quoted-path message must appear).
func requireErrorMentions(t *testing.T, err error, expected string) {
	t.Helper()
	require.Error(t, err)
	var verr *ValidationError
	require.ErrorAs(t, err, &verr, "error is a *ValidationError")

	require.ErrorIs(t, err, ErrInvalidSpec)
	got := err.Error()
	expected = strings.TrimPrefix(expected, "Error: ")
	expected = strings.TrimPrefix(expected, "ValidationError: ")
	if strings.Contains(got, expected) {
		return
	}
	for _, line := range strings.Split(expected, "\n") {
		if strings.Contains(got, line) {
			continue
		}
		for _, part := range strings.Split(line, `. "`) {
			if !strings.HasPrefix(part, `"`) {
				part = `"` + part
			}
			if strings.HasPrefix(line, part[1:]) {
				part = part[1:]
			}
			require.Contains(t, got, part)
		}
	}
}

func TestConformanceValid(t *testing.T) {
	t.Parallel()
	for _, file := range conformanceFiles(t, "valid") {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			raw, err := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".json")
			require.NoError(t, err)
			var want sdOutput
			require.NoError(t, json.Unmarshal(raw, &want))

			spec, err := Parse(data)
			if len(want.Errors) > 0 {
				// Screwdriver turns these configs into an error pipeline; sluice rejects them.
				for _, e := range want.Errors {
					requireErrorMentions(t, err, e)
				}
				return
			}
			require.NoError(t, err)

			require.ElementsMatch(t, want.WorkflowGraph.Nodes, spec.Graph.Nodes, "workflowGraph nodes")
			require.ElementsMatch(t, orEmpty(want.WorkflowGraph.Edges), spec.Graph.Edges, "workflowGraph edges")
			for _, w := range want.WarnMessages {
				require.True(t, slices.ContainsFunc(spec.Warnings, func(got Warning) bool { return strings.Contains(got.Message, w) }),
					"Screwdriver's warning %q is among sluice's: %v", w, spec.Warnings)
			}
			require.Equal(t, jsonNormal(t, orEmptyMap(want.Annotations)), jsonNormal(t, orEmptyMap(spec.Annotations)), "pipeline annotations")

			gotNames := make([]string, 0, len(spec.Jobs))
			for n := range spec.Jobs {
				gotNames = append(gotNames, n)
			}
			wantNames := make([]string, 0, len(want.Jobs))
			for n := range want.Jobs {
				wantNames = append(wantNames, n)
			}
			require.ElementsMatch(t, wantNames, gotNames, "job names")

			for jobName, perms := range want.Jobs {
				job := spec.Jobs[jobName]
				require.Len(t, job.Permutations, len(perms), "job %s permutations", jobName)
				for i, w := range perms {
					got := job.Permutations[i]
					msg := jobName + " permutation " + string(rune('0'+i))
					require.Equal(t, w.Image, got.Image, msg+" image")
					require.Equal(t, orEmpty(w.Commands), orEmpty(got.Commands), msg+" commands")
					require.Equal(t, w.Environment, got.Environment, msg+" environment")
					require.Equal(t, orEmpty(w.Secrets), orEmpty(got.Secrets), msg+" secrets")
					require.Equal(t, orEmpty(w.Requires), orEmpty(job.Requires), msg+" requires")
					require.Equal(t, orEmpty(w.BlockedBy), orEmpty(job.BlockedBy), msg+" blockedBy")
					require.Equal(t, orEmpty(w.FreezeWindows), orEmpty(job.FreezeWindows), msg+" freezeWindows")
					require.Equal(t, orEmpty(w.SourcePaths), orEmpty(job.SourcePaths), msg+" sourcePaths")
					require.Equal(t, jsonNormal(t, orEmptyMap(w.Annotations)), jsonNormal(t, orEmptyMap(job.Annotations)), msg+" annotations")
					require.Equal(t, jsonNormal(t, orEmptyMap(w.Settings)), jsonNormal(t, orEmptyMap(job.Notifications)), msg+" settings")
					require.Equal(t, jsonNormal(t, orEmptyMap(w.Parameters)), jsonNormal(t, orEmptyMap(job.Parameters)), msg+" parameters")
					require.Equal(t, w.Description, job.Description, msg+" description")
					require.Equal(t, w.Cache, job.Cache, msg+" cache")
					wantStage := ""
					if w.Stage != nil {
						wantStage = w.Stage.Name
					}
					require.Equal(t, wantStage, job.Stage, msg+" stage")
				}
			}

			// The canonical Spec survives a JSON round trip (it crosses Temporal payloads).
			b, err := json.Marshal(spec)
			require.NoError(t, err)
			var back Spec
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, spec.Graph, back.Graph)
			require.Equal(t, spec.JobOrder, back.JobOrder)
		})
	}
}

func orEmptyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func TestConformanceInvalid(t *testing.T) {
	t.Parallel()
	files := conformanceFiles(t, "invalid")
	raw, err := os.ReadFile(filepath.Join(conformanceDir, "invalid", "expected-errors.json"))
	require.NoError(t, err)
	var expected map[string][]string
	require.NoError(t, json.Unmarshal(raw, &expected))
	for _, file := range files {
		base := filepath.Base(file)
		t.Run(strings.TrimSuffix(base, ".yaml"), func(t *testing.T) {
			t.Parallel()
			want, ok := expected[base]
			require.True(t, ok, "expected-errors.json lists %s", base)
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			_, err = Parse(data)
			for _, w := range want {
				requireErrorMentions(t, err, w)
			}
		})
	}
}
