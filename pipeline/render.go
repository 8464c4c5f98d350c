package pipeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Format names a graph rendering.
type Format string

// Graph renderings.
const (
	// FormatJSON is Screwdriver's workflowGraph JSON: {"nodes":[...],"edges":[...]}.
	FormatJSON Format = "json"
	// FormatDOT is Graphviz dot: stages are clusters, AND (join) edges are bold and
	// labelled "and", OR edges are dashed, triggers are ovals, virtual jobs dashed boxes.
	FormatDOT Format = "dot"
	// FormatMermaid is a Mermaid flowchart: stages are subgraphs, AND edges thick and
	// labelled "and", OR edges dotted, virtual jobs dashed.
	FormatMermaid Format = "mermaid"
)

// Formats lists the supported formats.
var Formats = []Format{FormatJSON, FormatDOT, FormatMermaid}

// Render writes the spec's workflow graph in the given format.
func Render(w io.Writer, spec *Spec, format Format) error {
	switch format {
	case FormatJSON:
		return RenderJSON(w, spec.Graph)
	case FormatDOT:
		return RenderDOT(w, spec)
	case FormatMermaid:
		return RenderMermaid(w, spec)
	default:
		return fmt.Errorf("%w %q (want json, dot or mermaid)", ErrUnknownFormat, format)
	}
}

// RenderJSON writes the graph as indented JSON in Screwdriver's workflowGraph shape.
func RenderJSON(w io.Writer, g Graph) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		return fmt.Errorf("render graph json: %w", err)
	}
	return nil
}

// isTrigger reports whether a node is not a job of the spec (an SCM event or remote job).
func (s *Spec) isTrigger(name string) bool {
	_, ok := s.Jobs[name]
	return !ok
}

// graphStages groups node indexes by stage, in StageOrder, plus those outside stages.
func (s *Spec) graphStages() (byStage map[string][]int, outside []int) {
	byStage = map[string][]int{}
	for i, n := range s.Graph.Nodes {
		if n.StageName != "" {
			byStage[n.StageName] = append(byStage[n.StageName], i)
		} else {
			outside = append(outside, i)
		}
	}
	return byStage, outside
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// RenderDOT writes the graph as a Graphviz digraph.
func RenderDOT(w io.Writer, spec *Spec) error {
	bw := bufio.NewWriter(w)
	// bw keeps the first write error for Flush, which reports it.
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(bw, format, args...) }
	p("digraph pipeline {\n")
	p("  rankdir=LR;\n")
	p("  graph [fontname=\"Helvetica\"];\n")
	p("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\"];\n")
	p("  edge [fontname=\"Helvetica\", fontsize=10];\n")
	p("  // solid bold edges labelled \"and\" are joins (AND); dashed edges are OR triggers\n")
	node := func(indent string, n Node) {
		var attrs []string
		switch {
		case spec.isTrigger(n.Name):
			color := "#e8f0fe"
			if strings.HasPrefix(strings.TrimPrefix(n.Name, "~"), "sd@") {
				color = "#fef7e0"
			}
			attrs = append(attrs, "shape=oval", `fillcolor="`+color+`"`)
		case n.Virtual:
			attrs = append(attrs, `style="rounded,dashed,filled"`, `fillcolor="#f1f3f4"`)
		}
		if len(attrs) > 0 {
			p("%s%s [%s];\n", indent, dotQuote(n.Name), strings.Join(attrs, ", "))
		} else {
			p("%s%s;\n", indent, dotQuote(n.Name))
		}
	}
	byStage, outside := spec.graphStages()
	for _, i := range outside {
		node("  ", spec.Graph.Nodes[i])
	}
	for si, name := range spec.StageOrder {
		p("  subgraph cluster_%d {\n", si)
		label := "stage " + name
		if st := spec.Stages[name]; st != nil && st.Description != "" {
			label += "\n" + st.Description
		}
		p("    label=%s;\n    style=\"rounded,dashed\";\n    color=\"#5f6368\";\n", dotQuote(label))
		for _, i := range byStage[name] {
			node("    ", spec.Graph.Nodes[i])
		}
		p("  }\n")
	}
	for _, e := range spec.Graph.Edges {
		if e.Join {
			p("  %s -> %s [style=bold, color=\"#d93025\", label=\"and\"];\n", dotQuote(e.Src), dotQuote(e.Dest))
		} else {
			p("  %s -> %s [style=dashed];\n", dotQuote(e.Src), dotQuote(e.Dest))
		}
	}
	p("}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("render graph dot: %w", err)
	}
	return nil
}

func mermaidLabel(s string) string {
	return `"` + strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", " ").Replace(s) + `"`
}

// RenderMermaid writes the graph as a Mermaid flowchart.
func RenderMermaid(w io.Writer, spec *Spec) error {
	bw := bufio.NewWriter(w)
	// bw keeps the first write error for Flush, which reports it.
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(bw, format, args...) }
	ids := make(map[string]string, len(spec.Graph.Nodes))
	for i, n := range spec.Graph.Nodes {
		ids[n.Name] = fmt.Sprintf("n%d", i)
	}
	p("flowchart LR\n")
	var virtual, triggers []string
	node := func(indent string, n Node) {
		id := ids[n.Name]
		if spec.isTrigger(n.Name) {
			p("%s%s([%s])\n", indent, id, mermaidLabel(n.Name))
			triggers = append(triggers, id)
			return
		}
		p("%s%s[%s]\n", indent, id, mermaidLabel(n.Name))
		if n.Virtual {
			virtual = append(virtual, id)
		}
	}
	byStage, outside := spec.graphStages()
	for _, i := range outside {
		node("  ", spec.Graph.Nodes[i])
	}
	for si, name := range spec.StageOrder {
		p("  subgraph s%d[%s]\n", si, mermaidLabel("stage "+name))
		for _, i := range byStage[name] {
			node("    ", spec.Graph.Nodes[i])
		}
		p("  end\n")
	}
	for _, e := range spec.Graph.Edges {
		src, dest := ids[e.Src], ids[e.Dest]
		if e.Join {
			p("  %s ==>|and| %s\n", src, dest)
		} else {
			p("  %s -.-> %s\n", src, dest)
		}
	}
	p("  classDef trigger fill:#e8f0fe,stroke:#1a73e8\n")
	p("  classDef virtual fill:#f1f3f4,stroke-dasharray:5 5\n")
	if len(triggers) > 0 {
		p("  class %s trigger\n", strings.Join(triggers, ","))
	}
	if len(virtual) > 0 {
		p("  class %s virtual\n", strings.Join(virtual, ","))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("render graph mermaid: %w", err)
	}
	return nil
}
