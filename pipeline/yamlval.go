package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kind is the type of a YAML value after alias and merge-key resolution.
type kind int

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kString
	kSeq
	kMap
)

// typeName returns the Joi-style type name used in messages.
func (k kind) typeName() string {
	switch k {
	case kNull:
		return "null"
	case kBool:
		return "boolean"
	case kInt, kFloat:
		return "number"
	case kString:
		return "string"
	case kSeq:
		return "array"
	default:
		return "object"
	}
}

// value is a YAML value with aliases and merge keys resolved and mapping order kept.
type value struct {
	kind  kind
	str   string // kString: the string; other scalars: the source text
	b     bool
	i     int64
	f     float64
	items []*value
	keys  []string
	vals  []*value
	// line and col are where the value is written (1-based; 0 when unknown).
	line, col int
}

// get returns the value of key in a mapping.
func (v *value) get(key string) (*value, bool) {
	if v == nil || v.kind != kMap {
		return nil, false
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i], true
		}
	}
	return nil, false
}

// truthy mirrors JavaScript truthiness, which Screwdriver's merge rules rely on.
func (v *value) truthy() bool {
	if v == nil {
		return false
	}
	switch v.kind {
	case kNull:
		return false
	case kBool:
		return v.b
	case kInt:
		return v.i != 0
	case kFloat:
		return v.f != 0 && !math.IsNaN(v.f)
	case kString:
		return v.str != ""
	default:
		return true
	}
}

// Limits that keep hostile documents (alias bombs, deep nesting) cheap to reject.
const (
	maxValueNodes = 200_000
	maxValueDepth = 100
	// MaxSpecBytes bounds a pipeline spec file, and what its aliases
	// expand it to.
	MaxSpecBytes = 1 << 20
	// minExpansion is what even a small spec may expand to through its
	// anchors (shared step lists reused by many jobs).
	minExpansion = 64 << 10
)

var (
	errTooComplex = errors.New("document is too large or too deeply nested (aliases expand past the limit)")
	errTooLarge   = errors.New("aliases expand the document past its limit (10 times its size, at least 64 KiB and at most 1 MiB of text)")
)

// expansionBudget is how many bytes of scalars a document of n bytes may
// expand to, aliases counted each time they are used.
func expansionBudget(n int) int { return min(MaxSpecBytes, max(10*n, minExpansion)) }

// converter turns yaml.Nodes into values within a node budget and a byte
// budget (every scalar's text, each time an alias repeats it).
type converter struct {
	budget int
	bytes  int
}

func (c *converter) convert(n *yaml.Node, depth int) (*value, error) {
	v, err := c.convertNode(n, depth)
	if v != nil && n.Kind != yaml.DocumentNode {
		// An alias is placed where it is used, not where its anchor is.
		v.line, v.col = n.Line, n.Column
	}
	return v, err
}

func (c *converter) convertNode(n *yaml.Node, depth int) (*value, error) {
	c.budget--
	if c.budget < 0 || depth > maxValueDepth {
		return nil, errTooComplex
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &value{kind: kNull}, nil
		}
		return c.convert(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return &value{kind: kNull}, nil
		}
		return c.convert(n.Alias, depth+1)
	case yaml.ScalarNode:
		c.bytes -= len(n.Value) + 1
		if c.bytes < 0 {
			return nil, errTooLarge
		}
		return scalarValue(n), nil
	case yaml.SequenceNode:
		v := &value{kind: kSeq, items: make([]*value, 0, len(n.Content))}
		for _, item := range n.Content {
			iv, err := c.convert(item, depth+1)
			if err != nil {
				return nil, err
			}
			v.items = append(v.items, iv)
		}
		return v, nil
	case yaml.MappingNode:
		return c.convertMapping(n, depth)
	default:
		return &value{kind: kNull}, nil
	}
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "!!merge" || k.ShortTag() == "!!merge")
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxValueDepth; i++ {
		n = n.Alias
	}
	return n
}

// convertMapping converts a mapping, applying YAML merge keys ("<<"): explicit keys win
// over merged ones, and among merged mappings the earlier one wins.
func (c *converter) convertMapping(n *yaml.Node, depth int) (*value, error) {
	v := &value{kind: kMap}
	explicit := map[string]int{} // key → its line
	for i := 0; i+1 < len(n.Content); i += 2 {
		if isMergeKey(n.Content[i]) {
			continue
		}
		k := keyString(n.Content[i])
		if line, dup := explicit[k]; dup {
			// As Screwdriver's YAML parser: a second "shared:" must not
			// silently replace the first.
			return nil, fmt.Errorf("line %d: mapping key %q already defined at line %d", n.Content[i].Line, k, line)
		}
		explicit[k] = n.Content[i].Line
	}
	index := map[string]int{}
	set := func(k string, val *value, override bool) {
		if at, ok := index[k]; ok {
			if override {
				v.vals[at] = val
			}
			return
		}
		index[k] = len(v.keys)
		v.keys = append(v.keys, k)
		v.vals = append(v.vals, val)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if isMergeKey(kn) {
			src := resolveAlias(vn)
			var sources []*yaml.Node
			switch {
			case src == nil:
			case src.Kind == yaml.MappingNode:
				sources = []*yaml.Node{src}
			case src.Kind == yaml.SequenceNode:
				for _, s := range src.Content {
					sources = append(sources, resolveAlias(s))
				}
			}
			for _, s := range sources {
				if s == nil || s.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("line %d: map merge requires map or sequence of maps as the value", vn.Line)
				}
				mv, err := c.convert(s, depth+1)
				if err != nil {
					return nil, err
				}
				for j, k := range mv.keys {
					if _, ok := explicit[k]; !ok {
						set(k, mv.vals[j], false)
					}
				}
			}
			continue
		}
		val, err := c.convert(vn, depth+1)
		if err != nil {
			return nil, err
		}
		set(keyString(kn), val, true)
	}
	return v, nil
}

// keyString renders a mapping key; complex keys are rendered as their flow text.
func keyString(k *yaml.Node) string {
	k = resolveAlias(k)
	if k == nil {
		return ""
	}
	if k.Kind == yaml.ScalarNode {
		return k.Value
	}
	return fmt.Sprintf("<%s key at line %d>", kindWord(k.Kind), k.Line)
}

func kindWord(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	default:
		return "complex"
	}
}

func scalarValue(n *yaml.Node) *value {
	switch n.ShortTag() {
	case "!!null":
		return &value{kind: kNull, str: n.Value}
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return &value{kind: kBool, b: b, str: n.Value}
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return &value{kind: kInt, i: i, str: n.Value}
		}
		var f float64
		if err := n.Decode(&f); err == nil {
			return &value{kind: kFloat, f: f, str: n.Value}
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			return &value{kind: kFloat, f: f, str: n.Value}
		}
	}
	return &value{kind: kString, str: n.Value}
}

// loadDocuments reads every YAML document in data.
func loadDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &n)
		if len(docs) > 1000 {
			return nil, errors.New("too many YAML documents")
		}
	}
}

// toAny converts a value to plain Go data (map[string]any, []any, string, bool, int64,
// float64, nil) that encoding/json can marshal.
func (v *value) toAny() any {
	if v == nil {
		return nil
	}
	switch v.kind {
	case kNull:
		return nil
	case kBool:
		return v.b
	case kInt:
		return v.i
	case kFloat:
		if math.IsInf(v.f, 0) || math.IsNaN(v.f) {
			return v.str
		}
		return v.f
	case kString:
		return v.str
	case kSeq:
		out := make([]any, len(v.items))
		for i, it := range v.items {
			out[i] = it.toAny()
		}
		return out
	default:
		out := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			out[k] = v.vals[i].toAny()
		}
		return out
	}
}

// jsString renders a value as an environment string the way Screwdriver does: strings
// as-is, everything else as JavaScript's JSON.stringify would (mapping order kept).
func (v *value) jsString() string {
	if v.kind == kString {
		return v.str
	}
	var sb strings.Builder
	v.writeJSON(&sb)
	return sb.String()
}

func (v *value) writeJSON(sb *strings.Builder) {
	switch v.kind {
	case kNull:
		sb.WriteString("null")
	case kBool:
		sb.WriteString(strconv.FormatBool(v.b))
	case kInt:
		sb.WriteString(strconv.FormatInt(v.i, 10))
	case kFloat:
		sb.WriteString(jsNumber(v.f))
	case kString:
		writeJSONString(sb, v.str)
	case kSeq:
		sb.WriteByte('[')
		for i, it := range v.items {
			if i > 0 {
				sb.WriteByte(',')
			}
			it.writeJSON(sb)
		}
		sb.WriteByte(']')
	default:
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, k)
			sb.WriteByte(':')
			v.vals[i].writeJSON(sb)
		}
		sb.WriteByte('}')
	}
}

func writeJSONString(sb *strings.Builder, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	sb.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}

// jsNumber formats a float like JavaScript's Number.prototype.toString.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f), math.IsInf(f, 0):
		return "null" // what JSON.stringify prints
	case f == 0:
		return "0"
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1e+21, 1.5e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	digits := strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + digits
}
