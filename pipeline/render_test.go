package pipeline

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRender(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specStages)
	tests := []struct {
		name   string
		format Format
		wants  []string
	}{
		{name: "json", format: FormatJSON, wants: []string{`"src": "build"`, `"dest": "stage@prod:setup"`, `"join": true`, `"stageName": "prod"`, `"virtual": true`}},
		{name: "dot", format: FormatDOT, wants: []string{
			"digraph pipeline {", "subgraph cluster_0 {", `label="stage prod\nProduction";`,
			`"build" -> "stage@prod:setup" [style=bold, color="#d93025", label="and"];`,
			`"stage@prod:setup" -> "deploy-a" [style=dashed];`,
			`"~commit" [shape=oval`, `"stage@prod:setup" [style="rounded,dashed,filled"`,
		}},
		{name: "mermaid", format: FormatMermaid, wants: []string{
			"flowchart LR", `subgraph s0["stage prod"]`, `n2["build"]`, "n2 ==>|and| n4", "n4 -.-> n3", "class n4,n8 virtual", `n1(["~commit"])`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			require.NoError(t, Render(&buf, spec, tt.format))
			for _, w := range tt.wants {
				require.Contains(t, buf.String(), w)
			}
		})
	}
}

func TestRenderJSONIsWorkflowGraph(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, specOrAnd)
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, spec, FormatJSON))
	var g struct {
		Nodes []map[string]any `json:"nodes"`
		Edges []map[string]any `json:"edges"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &g))
	require.Len(t, g.Nodes, len(spec.Graph.Nodes))
	require.Equal(t, map[string]any{"src": "~commit", "dest": "build"}, g.Edges[0], "join is omitted when false")
	require.Equal(t, map[string]any{"src": "build", "dest": "unit", "join": true}, g.Edges[3])
}

func TestRenderEscapes(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, sharedHeader+`
jobs:
	main: {requires: ["~tag:/^v\"<x>/"]}
`)
	var dot, mermaid bytes.Buffer
	require.NoError(t, Render(&dot, spec, FormatDOT))
	require.NoError(t, Render(&mermaid, spec, FormatMermaid))
	require.Contains(t, dot.String(), `"~tag:/^v\"<x>/" -> "main"`)
	require.Contains(t, mermaid.String(), `(["~tag:/^v#quot;#lt;x#gt;/"])`)
	require.NotContains(t, mermaid.String(), `v"<`)
}

func TestRenderUnknownFormat(t *testing.T) {
	t.Parallel()
	err := Render(&bytes.Buffer{}, mustParse(t, specOrAnd), "svg")
	require.ErrorIs(t, err, ErrUnknownFormat)
}
